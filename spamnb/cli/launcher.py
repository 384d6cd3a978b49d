"""The build's writer of ``spamnb/_launcher.py`` (setup.py loads this file by
its path; nothing imports it at run time): the Python of the ``spamnb``
command, the text bin/spamnb (the shell launcher) gives ``python -c``, as a
module of the installed package.  The text lives once, in bin/spamnb: the
module is written from it by every non-editable build (build_py, into the
built tree; never committed), and the install (pip) byte-compiles it into
``spamnb/__pycache__/_launcher.<cache tag>.pyc`` with the interpreter it
installs for.  The launcher runs that file as Python's script
(``python -S -P FILE.pyc ARGS``: no compile of the ``-c`` text, 1.6 million
instructions of every run) when its name and the Python beside the launcher
certainly agree, else the same text by ``-c`` (bin/spamnb says when).
Imports nothing of the package."""

import os
import re

__all__ = ["MODULE", "python_text", "write_module"]

MODULE = "_launcher"   # spamnb/_launcher.py; bin/spamnb looks for its byte-compiled file by this name

# The launcher's last line: its Python, single-quoted for the shell (it holds no single quote).
_CODE = re.compile(r"""^exec "\$python" \$site -P -c '([^']*)' "\$@"$""", re.M)

_HEAD = ("# The spamnb command's Python: bin/spamnb's -c text, written here by the build (setup.py,\n"
         "# spamnb/cli/launcher.py); bin/spamnb runs this file's byte-compiled form.  Not edited here.\n")


def python_text(launcher):
    """The Python text of the launcher script whose text is ``launcher``."""
    found = _CODE.findall(launcher)
    if len(found) != 1:
        raise ValueError(f"the launcher has {len(found)} lines exec \"$python\" $site -P -c '...' \"$@\", not one")
    return found[0]


def write_module(launcher_path, module_path):
    """Write the module of the launcher at ``launcher_path`` (bin/spamnb) to ``module_path``."""
    with open(launcher_path, encoding="utf-8") as f:
        text = _HEAD + python_text(f.read()) + "\n"
    os.makedirs(os.path.dirname(module_path) or ".", exist_ok=True)
    with open(module_path, "w", encoding="utf-8") as f:
        f.write(text)
