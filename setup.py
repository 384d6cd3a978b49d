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

One module of the package is generated (not committed): ``spamnb/mail/_sre_codes.py``,
the compiled code of every regular expression of the package, for the building
interpreter (``spamnb.mail.sre_table.write_codes``, for ``spamnb.mail.lazy_re.built_for()``:
the two source files loaded here, by their paths; they import nothing of the package,
and nothing imports ``sre_table`` at run time).  A cold classify of
real mail then compiles its patterns with ``_sre`` alone, without importing
``re`` (and the ~23 modules it brings); a tree or an interpreter without it
falls back to ``re.compile``.  Written into the built tree by build_py, and
into the source folder by an editable install and ``build_ext --inplace``.
A second, ``spamnb/_launcher.py``, is the ``spamnb`` command's Python, written
from bin/spamnb's ``-c`` text (``spamnb.cli.launcher``, loaded by its path) into
the built tree only (not by an editable install): pip byte-compiles it, and the
launcher runs that file (bin/spamnb says when).
"""
import importlib.util
import os

from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

MAN_PAGE = os.path.join("man", "spamnb.1")   # relative to this folder, as data_files wants it
# The ``spamnb`` command is a POSIX shell launcher, installed as a script (not a
# console-script entry point, which would be Python): it refuses a directory on
# stdin, which stops CPython before any Python code runs, and starts the Python
# beside it without the imports of pip's console script (bin/spamnb says how).
# Its Python is also the built package's spamnb/_launcher.py (the docstring says how).
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



def load_source(name, folder="mail"):
    """The module of spamnb/``folder``/``name``.py, loaded by its path (the package is not imported)."""
    spec = importlib.util.spec_from_file_location("_spamnb_" + name, os.path.join("spamnb", folder, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_sre_codes(mail_folder):
    """spamnb/mail/_sre_codes.py in ``mail_folder`` (the built tree's or the source's)."""
    os.makedirs(mail_folder, exist_ok=True)
    try:
        load_source("sre_table").write_codes("spamnb", os.path.join(mail_folder, "_sre_codes.py"),
                                             load_source("lazy_re").built_for())
    except Exception as exc:   # an interpreter whose re compiles otherwise: no table, re.compile at run time
        print(f"setup.py: spamnb/mail/_sre_codes.py not written ({exc!r}): patterns fall back to re.compile")


class BuildPy(build_py):
    def run(self):
        super().run()
        editable = getattr(self, "editable_mode", False)
        write_sre_codes(os.path.join("spamnb", "mail") if editable else os.path.join(self.build_lib, "spamnb", "mail"))
        if not editable:   # an editable install's launcher runs its -c text (no such module beside it)
            launcher = load_source("launcher", "cli")
            launcher.write_module(LAUNCHER, os.path.join(self.build_lib, "spamnb", launcher.MODULE + ".py"))


class BuildExt(build_ext):
    def run(self):
        super().run()
        if self.inplace or getattr(self, "editable_mode", False):
            write_sre_codes(os.path.join("spamnb", "mail"))


setup(ext_modules=cythonize(extensions, compiler_directives=COMPILER_DIRECTIVES),
      cmdclass={"build_py": BuildPy, "build_ext": BuildExt},
      scripts=[LAUNCHER],
      data_files=[("share/man/man1", [MAN_PAGE])])
