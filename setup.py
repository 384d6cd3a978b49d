"""Build the compiled parts of spamnb.

All Cython compiler directives live here, in ``COMPILER_DIRECTIVES``: a
misspelt name is an error at build time (a misspelt ``# cython:`` header in a
.pyx file would be ignored silently).  No extension cimports numpy, so
importing them never imports numpy (the ``spamnb classify`` cold path relies
on that).

For development, ``SPAMNB_EXTENSIONS=_kernels python setup.py build_ext
--inplace`` builds only the named extensions.
"""
import os

from Cython.Build import cythonize
from setuptools import Extension, setup

COMPILER_DIRECTIVES = {
    "language_level": 3,
    "boundscheck": False,
    "wraparound": False,
    "cdivision": True,
    "initializedcheck": False,
    "nonecheck": False,
    "embedsignature": True,
}

EXTENSIONS = {
    "_kernels": "spamnb/_kernels.pyx",
    "_mail": "spamnb/_mail.pyx",
    "_tokenize": "spamnb/_tokenize.pyx",
    "_vocab": "spamnb/_vocab.pyx",
    "_checks": "spamnb/_checks.pyx",
}

wanted = os.environ.get("SPAMNB_EXTENSIONS")
names = wanted.split(",") if wanted else list(EXTENSIONS)

extensions = [
    Extension(
        f"spamnb.{name}",
        [EXTENSIONS[name]],
        extra_compile_args=["-O3"],
    )
    for name in names
]

setup(ext_modules=cythonize(extensions, compiler_directives=COMPILER_DIRECTIVES))
