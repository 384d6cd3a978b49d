"""spamnb as a user installs it: the committed manual page, and a
non-editable install of a clean copy of the tree in a fresh venv.

The editable install the other tests use builds the extensions in place, so
the source folder imports; it once hid a `pip install .` that failed on every
fresh clone (the build ran the uncompiled source tree to write the manual
page).  The slow test here installs the tree as the README tells a user to.
"""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import REPO, run_spamnb

MAN_PAGE = REPO / "man" / "spamnb.1"


def test_the_committed_manual_page_is_spamnb_man():
    """The build installs man/spamnb.1 as it is (it never runs the package it
    builds), so the committed page must be what the parser prints."""
    page = MAN_PAGE.read_bytes()
    assert page.startswith(b".TH SPAMNB 1")
    assert page == run_spamnb(["--man"]).stdout, \
        "man/spamnb.1 differs from `spamnb --man`: regenerate it with `spamnb --man > man/spamnb.1`"


def test_every_package_is_installed():
    """pyproject.toml lists the packages setuptools installs: each folder of
    spamnb/ with an __init__.py is one (a package left out imports from the
    source tree and fails once installed, as spamnb.options once did)."""
    import tomllib

    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "spamnb").rglob("__init__.py")}
    assert found == listed, (found - listed, listed - found)


def _tree_files():
    """The files of the working tree that git would commit (tracked or new, not ignored)."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         cwd=REPO, capture_output=True, check=True).stdout
    return [name for name in out.decode().split("\0") if name and (REPO / name).is_file()]


@pytest.mark.slow
def test_a_clean_copy_of_the_tree_installs_non_editable_and_classifies(tmp_path):
    """`pip install git+file://COPY` in a venv without system site-packages:
    the extensions compile, the installed package (not the copy's sources) runs
    the README's commands, and the manual page is installed.  Fails on the
    build that ran the source tree for the manual page."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("needs git and a git checkout of spamnb")
    copy = tmp_path / "copy"
    for name in _tree_files():
        target = copy / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, target)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q"], cwd=copy, check=True)
    subprocess.run([*git, "add", "-A"], cwd=copy, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "copy"], cwd=copy, check=True)

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(SPAMNB_HOME=str(tmp_path / "home"), PIP_DISABLE_PIP_VERSION_CHECK="1")
    install = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", f"git+file://{copy}"],
                             cwd=tmp_path, env=env, capture_output=True, timeout=1200)
    assert install.returncode == 0, install.stderr.decode()[-3000:]

    spamnb = str(venv / "bin" / "spamnb")
    train = subprocess.run([spamnb, "train", "-q", "corpora/"], cwd=copy, env=env, capture_output=True,
                           timeout=600)
    assert train.returncode == 0, train.stderr.decode()
    spam = sorted((copy / "corpora" / "spam").glob("00017.*"))
    verdict = subprocess.run([spamnb, "classify", *map(str, spam)], cwd=copy, env=env, capture_output=True,
                             timeout=120)
    assert verdict.returncode == 0 and verdict.stdout.startswith(b"spam "), (verdict.stdout, verdict.stderr)

    # the installed package runs, not the copy's uncompiled sources
    where = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import spamnb, spamnb.bayes.kernels as k; print(spamnb.__file__, k.IMPLEMENTATION)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, check=True).stdout.split()
    assert where[0].startswith(str(venv)) and where[1] == "cython", where
    man = venv / "share" / "man" / "man1" / "spamnb.1"
    assert man.read_bytes() == MAN_PAGE.read_bytes()
