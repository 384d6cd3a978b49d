"""Build the compiled parts of spamnb.

All Cython compiler directives live here, in ``COMPILER_DIRECTIVES``: a
misspelt name is an error at build time (a misspelt ``# cython:`` header in a
.pyx file would be ignored silently).  No extension cimports numpy, so
importing them never imports numpy (the ``spamnb classify`` cold path relies
on that).

For development, ``SPAMNB_EXTENSIONS=_kernels python setup.py build_ext
--inplace`` builds only the named extensions.

The manual page ``man/spamnb.1`` is installed as a data file
(``share/man/man1/spamnb.1`` under the install prefix).  It is generated from
the command line's parser (``spamnb --man > man/spamnb.1``) and committed; a
test (tests/test_install.py) fails when it differs from ``spamnb --man``, so it
cannot drift from ``--help``.  The build never runs the package it builds:
that would import it from the source folder (which shadows the built tree on
``sys.path``), needs every runtime dependency inside the isolated build
environment, and cannot work when cross-compiling.
"""
import os

from Cython.Build import cythonize
from setuptools import Extension, setup

MAN_PAGE = os.path.join("man", "spamnb.1")   # relative to this folder, as data_files wants it
# The ``spamnb`` command is a POSIX shell launcher, installed as a script (not a
# console-script entry point, which would be Python): it refuses a directory on
# stdin, which stops CPython before any Python code runs, and starts the Python
# beside it without the imports of pip's console script (bin/spamnb says how).
LAUNCHER = os.path.join("bin", "spamnb")

COMPILER_DIRECTIVES = {
    "language_level": 3,
    "boundscheck": False,
    "wraparound": False,
    "cdivision": True,
    "initializedcheck": False,
    "nonecheck": False,
    "embedsignature": True,
}

EXTENSIONS = {   # short name (for SPAMNB_EXTENSIONS) -> the extension's module
    "_kernels": "spamnb.bayes._kernels",
    "_count": "spamnb.bayes._count",
    "_score": "spamnb.bayes._score",
    "_holes": "spamnb.bayes._holes",
    "_merge": "spamnb.bayes._merge",
    "_mixture": "spamnb.bayes._mixture",
    "_mail": "spamnb.mail._mail",
    "_frames": "spamnb.console._frames",
}

wanted = os.environ.get("SPAMNB_EXTENSIONS")
names = wanted.split(",") if wanted else list(EXTENSIONS)

extensions = [
    Extension(
        EXTENSIONS[name],
        [EXTENSIONS[name].replace(".", "/") + ".pyx"],
        extra_compile_args=["-O3"],
    )
    for name in names
]

setup(ext_modules=cythonize(extensions, compiler_directives=COMPILER_DIRECTIVES),
      scripts=[LAUNCHER],
      data_files=[("share/man/man1", [MAN_PAGE])])
