"""The installed ``spamnb`` command: bin/spamnb, a POSIX shell launcher
(setup.py's ``scripts``), not pip's Python console script.

CPython refuses to start when its stdin is a directory (init_sys_streams,
exit 1, before any Python code runs): ``spamnb classify < DIR`` exited 1,
which a mail program reads as ham.  The launcher refuses it first: exit 3
(error) and one line.  It starts the Python beside its own real path (a
venv's ``bin/python3``), through a symbolic link too, with the arguments
as given.
"""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import REPO

LAUNCHER = REPO / "bin" / "spamnb"
SPAM = sorted((REPO / "corpora" / "spam").glob("00017.*"))[0]


@pytest.fixture(scope="module")
def venv_bin(tmp_path_factory):
    """A folder laid out as a venv's bin: the launcher, and ``python3`` beside
    it (a script that notes it ran, then runs this interpreter on this tree)."""
    folder = tmp_path_factory.mktemp("venv") / "bin"
    folder.mkdir()
    shutil.copy2(LAUNCHER, folder / "spamnb")
    python = folder / "python3"
    python.write_text(f"#!/bin/sh\necho ran >> {folder}/python3.ran\n"
                      f"PYTHONPATH={REPO} exec {sys.executable} \"$@\"\n")
    python.chmod(0o755)
    return folder


@pytest.fixture(scope="module")
def model(tmp_path_factory, sample_model):
    path = tmp_path_factory.mktemp("model") / "model.spamnb"
    shutil.copyfile(sample_model, path)     # the model file of `spamnb train` of the sample, at any -j
    return path


def _env(**extra):
    env = dict(os.environ, PYTHONPATH=str(REPO), **extra)
    env.pop("SPAMNB_DEBUG", None)
    return env


def _run(program, args, stdin, env=None, cwd=None):
    with open(stdin, "rb") as f:
        return subprocess.run([str(program), *map(str, args)], stdin=f, capture_output=True, timeout=120,
                              env=env or _env(), cwd=cwd)


@pytest.mark.parametrize("args", [["classify"], ["classify", "-p"], ["learn", "--spam"], ["info"]], ids=" ".join)
def test_a_directory_on_stdin_exits_3_with_one_line(args, venv_bin, tmp_path):
    """Exit 3 (error), never 1 (ham); one line on stderr, nothing on stdout;
    Python is not started (it would die in its start-up with exit 1)."""
    (venv_bin / "python3.ran").unlink(missing_ok=True)
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        proc = subprocess.run([str(venv_bin / "spamnb"), *args, "-m", str(tmp_path / "m.spamnb")], stdin=fd,
                              capture_output=True, timeout=60, env=_env())
    finally:
        os.close(fd)
    assert proc.returncode == 3, proc
    assert proc.stdout == b""
    lines = proc.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("spamnb: ") and "directory" in lines[0], lines
    assert not (venv_bin / "python3.ran").exists()


def test_the_python_console_script_died_with_a_directory_on_stdin(tmp_path):
    """Why the launcher is a shell script: with a directory on stdin the
    interpreter itself stops before any Python code (exit 1, ham to a mail
    program).  Fails when CPython starts reading such a stdin: then a Python
    check could do what the launcher does."""
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        proc = subprocess.run([sys.executable, "-c", "import sys; sys.exit(3)"], stdin=fd, capture_output=True,
                              timeout=60)
    finally:
        os.close(fd)
    assert proc.returncode == 1 and b"init_sys_streams" in proc.stderr, proc


def test_the_launcher_classifies_with_the_python_beside_it(venv_bin, model, tmp_path):
    """The verdict and its exit code through the launcher, started with a
    PATH that has no python3 and no readlink (the Python is found beside
    the launcher, without a fork), from another folder, arguments as given."""
    (venv_bin / "python3.ran").unlink(missing_ok=True)
    odd = tmp_path / "a model with  spaces.spamnb"
    shutil.copyfile(model, odd)
    proc = _run(venv_bin / "spamnb", ["classify", "-m", odd], SPAM, env=_env(PATH=str(tmp_path)), cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.startswith(b"spam "), proc
    assert (venv_bin / "python3.ran").read_text() == "ran\n"


def test_a_symbolic_link_to_the_launcher_uses_the_python_beside_its_target(venv_bin, model, tmp_path):
    """``ln -s /opt/spamnb/bin/spamnb /usr/local/bin/spamnb``: the link's
    folder has no python3 (or another one); the target's is used."""
    (venv_bin / "python3.ran").unlink(missing_ok=True)
    links = tmp_path / "local" / "bin"
    links.mkdir(parents=True)
    (links / "spamnb").symlink_to(venv_bin / "spamnb")
    (links / "python3").write_text("#!/bin/sh\necho wrong python >&2\nexit 99\n")
    (links / "python3").chmod(0o755)
    (tmp_path / "link2").symlink_to(links / "spamnb")   # a link to the link
    for program in (links / "spamnb", tmp_path / "link2"):
        proc = _run(program, ["classify", "-p", "-m", model], SPAM)
        assert proc.returncode == 0 and b"X-Spamnb-Status: Yes" in proc.stdout, proc
    assert (venv_bin / "python3.ran").read_text() == "ran\nran\n"


def test_without_a_python_beside_it_the_launcher_runs_python3_on_path(model, tmp_path):
    """Installed where the prefix has no python3 of its own (``pip install
    --user``: ~/.local/bin): the python3 on PATH."""
    folder = tmp_path / "bin"
    folder.mkdir()
    shutil.copy2(LAUNCHER, folder / "spamnb")
    path = tmp_path / "path"
    path.mkdir()
    (path / "python3").symlink_to(sys.executable)
    proc = _run(folder / "spamnb", ["--version"], os.devnull, env=_env(PATH=f"{path}:/usr/bin:/bin"))
    assert proc.returncode == 0 and proc.stdout.startswith(b"spamnb "), proc


def test_the_current_folder_is_not_on_sys_path(venv_bin, model, tmp_path):
    """A ``spamnb`` package (or any module spamnb imports) in the folder the
    command runs in is never imported: the launcher starts Python with -P."""
    planted = tmp_path / "spamnb"
    planted.mkdir()
    (planted / "__init__.py").write_text("raise SystemExit(42)\n")
    (tmp_path / "atexit.py").write_text("raise SystemExit(43)\n")
    proc = _run(venv_bin / "spamnb", ["classify", "-m", model], SPAM, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.startswith(b"spam "), proc


@pytest.mark.slow
def test_the_installed_spamnb_refuses_a_directory_on_stdin(tmp_path):
    """The program `pip install .` installs (tests/installed_spamnb.py: a venv of
    the system's Python) is the launcher: a directory on stdin exits 3 with one line."""
    import installed_spamnb

    if installed_spamnb.missing() is not None:
        pytest.skip(installed_spamnb.missing())
    program = installed_spamnb.program()
    assert program.read_bytes().startswith(b"#!/bin/sh\n")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        proc = subprocess.run([str(program), "classify"], stdin=fd, capture_output=True, timeout=60,
                              env={"PATH": "/usr/bin:/bin", "SPAMNB_HOME": str(tmp_path)})
    finally:
        os.close(fd)
    assert proc.returncode == 3 and len(proc.stderr.splitlines()) == 1 and proc.stdout == b"", proc
    version = subprocess.run([str(program), "--version"], capture_output=True, timeout=60,
                             env={"PATH": "/usr/bin:/bin"})
    assert version.returncode == 0 and version.stdout.startswith(b"spamnb "), version
