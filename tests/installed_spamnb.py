"""spamnb installed as docs/serve.md's recipe installs it for every user: a
venv made by the system's Python (/usr/bin/python3, not one under a private
home such as pyenv's), in a folder every user may read (mode 755), with this
tree installed into it non-editable (``pip install .``: the extensions
compiled, the package copied).  Other users (Dovecot's mail user, ``nobody``)
run its ``bin/spamnb``.

Made once for a tree (2-5 minutes: the compile; kept for the next session
while the tree's files are the same).
Used by tests/test_dovecot.py and tests/test_check_config.py (slow tests).
"""

import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from conftest import REPO

SYSTEM_PYTHON = Path("/usr/bin/python3")


def missing():
    """Why the recipe cannot be followed here, or None."""
    if not SYSTEM_PYTHON.exists():
        return "no /usr/bin/python3 (Debian package python3)"
    probe = subprocess.run([str(SYSTEM_PYTHON), "-c", "import ensurepip, venv"], capture_output=True, timeout=60)
    if probe.returncode != 0:
        return "/usr/bin/python3 cannot make a venv (Debian package python3-venv)"
    if shutil.which("git") is None or not (REPO / ".git").exists():
        return "needs git and a git checkout of spamnb (the files to install)"
    return None


BUILT_FROM = ("setup.py", "pyproject.toml", "MANIFEST.in", "README.md", "LICENSE", "man/", "bin/", "spamnb/")


def _tree():
    """The files the package is built from that git would commit (tracked or
    new, not ignored: not the tree's in-place build), and a digest of their
    names and contents (a change to the tests or the docs installs nothing anew)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=REPO, capture_output=True, check=True).stdout
    names = sorted(name for name in listed.decode().split("\0")
                   if name.startswith(BUILT_FROM) and (REPO / name).is_file())
    digest = hashlib.sha256()
    for name in names:
        digest.update(name.encode() + b"\0" + (REPO / name).read_bytes() + b"\0")
    return names, digest.hexdigest()[:16]


@functools.lru_cache(maxsize=None)
def program():
    """The installed ``bin/spamnb`` (a Path).  Kept between sessions under
    /var/tmp/spamnb-tests (``$SPAMNB_TEST_CACHE``; root's and a user's pytest
    folders are private) for the tree it was made from: a tree that changed
    is installed again, and the installs of other trees are removed."""
    names, digest = _tree()
    parent = Path(os.environ.get("SPAMNB_TEST_CACHE") or "/var/tmp/spamnb-tests")
    parent.mkdir(parents=True, exist_ok=True)
    if os.getuid() == 0:
        os.chmod(parent, 0o755)
    folder = parent / f"installed-{os.getuid()}-{digest}"
    program = folder / "spamnb" / "bin" / "spamnb"
    with open(parent / f"installed-{os.getuid()}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)            # one session installs at a time
        if (folder / "complete").exists():
            return program
        for old in parent.glob(f"installed-{os.getuid()}-*"):
            shutil.rmtree(old, ignore_errors=True)
        folder.mkdir()
        os.chmod(folder, 0o755)
        venv = folder / "spamnb"
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
        env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
        subprocess.run([str(SYSTEM_PYTHON), "-m", "venv", str(venv)], check=True, env=env, capture_output=True,
                       timeout=300)
        source = folder / "source"
        for name in names:
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
        install = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(source)], cwd=folder,
                                 env=env, capture_output=True, timeout=1800)
        assert install.returncode == 0, install.stderr.decode(errors="replace")[-3000:]
        shutil.rmtree(source, ignore_errors=True)
        os.chmod(venv, 0o755)
        (folder / "complete").touch()
    return program


def run_as(user, args, **kwargs):
    """``runuser -u USER -- ARGS`` (as root), else ARGS as this user."""
    if os.getuid() == 0:
        args = ["runuser", "-u", user, "--", *map(str, args)]
    return subprocess.run([*map(str, args)], capture_output=True, timeout=kwargs.pop("timeout", 300), **kwargs)
