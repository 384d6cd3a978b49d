"""The launcher's Python byte-compiled (issue 51): bin/spamnb runs
``PREFIX/lib/python3.V/site-packages/spamnb/__pycache__/_launcher.cpython-3V.pyc``
(the build writes spamnb/_launcher.py from bin/spamnb's ``-c`` text:
spamnb/cli/launcher.py; pip byte-compiles it) as Python's script when that
file is certainly the Python's, else the ``-c`` text; both answer alike.

The venvs here are laid out as venv and pip lay them out (pyvenv.cfg's
``home`` first, ``bin/python3`` a link to this interpreter, the module
byte-compiled as pip does), spamnb itself from this tree (PYTHONPATH).
Which form the launcher runs is read from ``sh -x``'s trace of its exec.
"""
import os
import py_compile
import shutil
import signal
import subprocess
import sys
import time
from importlib.util import cache_from_source
from pathlib import Path

import pytest

from conftest import REPO, SAMPLE_CORPUS
from spamnb.cli import launcher

LAUNCHER = REPO / "bin" / "spamnb"
SPAM = sorted((REPO / "corpora" / "spam").glob("00017.*"))[0]
VERSION = "%d.%d" % sys.version_info[:2]
TAG = "cpython-%d%d" % sys.version_info[:2]
PYTHON = Path(sys.executable).resolve()

pytestmark = pytest.mark.skipif(
    sys.implementation.cache_tag != TAG or not (PYTHON.parent / f"python{VERSION}").exists()
    or not os.path.samefile(PYTHON, PYTHON.parent / f"python{VERSION}"),
    reason=f"this interpreter ({PYTHON}) is not its home's python{VERSION} (the launcher's check)")


def _venv(root, version=VERSION, tag=TAG, compiled=True, cfg=None):
    """A venv at ``root`` with spamnb's launcher and its module byte-compiled
    under lib/python``version``/site-packages, named with ``tag``: the path of its bin/spamnb."""
    (root / "bin").mkdir(parents=True)
    (root / "pyvenv.cfg").write_text(cfg if cfg is not None else
                                     f"home = {PYTHON.parent}\ninclude-system-site-packages = false\n"
                                     f"version = {'.'.join(map(str, sys.version_info[:3]))}\n")
    shutil.copy2(LAUNCHER, root / "bin" / "spamnb")
    for name in ("python3", f"python{VERSION}"):
        (root / "bin" / name).symlink_to(PYTHON)
    _module(root, version, tag, compiled)
    import numpy   # the venv's own (a link to this interpreter's): train's workers import it

    packages = root / "lib" / f"python{version}" / "site-packages"
    base = Path(numpy.__file__).resolve().parent.parent
    for name in ("numpy", "numpy.libs", "scipy", "scipy.libs"):
        if (base / name).exists():
            (packages / name).symlink_to(base / name)
    return root / "bin" / "spamnb"


def _module(root, version=VERSION, tag=TAG, compiled=True, name=None):
    """spamnb/_launcher.py under ``root``'s site-packages for ``version``, byte-compiled as pip does (named by ``tag``)."""
    package = root / "lib" / f"python{version}" / "site-packages" / "spamnb"
    source = package / (launcher.MODULE + ".py")
    launcher.write_module(LAUNCHER, source)
    pyc = package / "__pycache__" / (name or f"{launcher.MODULE}.{tag}.pyc")
    if compiled:
        py_compile.compile(str(source), cfile=str(pyc), doraise=True)
    return pyc


def _env(**extra):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("SPAMNB_DEBUG", None)
    env.update(extra)
    return env


def _chosen(program, cwd=None):
    """What the launcher gives Python after its flags: the byte-compiled file's path, or ``-c``."""
    proc = subprocess.run(["sh", "-x", str(program), "--version"], capture_output=True, text=True, timeout=120,
                          env=_env(), cwd=cwd, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0 and proc.stdout.startswith("spamnb "), proc
    execs = [line for line in proc.stderr.splitlines() if line.startswith("+ exec ")]
    assert len(execs) == 1, execs
    words = execs[0].split(" ")
    return words[words.index("-P") + 1]


def _run(program, args, stdin=SPAM, cwd=None, **env):
    with open(stdin, "rb") as f:
        return subprocess.run([str(program), *map(str, args)], stdin=f, capture_output=True, timeout=300,
                              env=_env(**env), cwd=cwd)


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    return _venv(tmp_path_factory.mktemp("pyc") / "venv")


def test_the_byte_compiled_file_is_chosen(venv):
    pyc = venv.parent.parent / "lib" / f"python{VERSION}" / "site-packages" / "spamnb" / "__pycache__" / (
        f"{launcher.MODULE}.{TAG}.pyc")
    assert _chosen(venv) == str(pyc)


# What the user sees is what the -c text gives: argparse's prog (usage lines, errors, --help), the man page,
# the version, a verdict and its exit code, the message passed through, a learn's line, a missing model's error.
ANSWERS = [["classify"], ["classify", "-p"], ["learn", "--spam"], ["info"], ["--help"], ["classify", "--help"],
           ["classify", "--bogus"], ["--version"], ["--man"], ["frobnicate"], ["classify", "-m", "missing.spamnb"]]


def test_the_byte_compiled_file_answers_as_the_c_text(venv, sample_model, tmp_path):
    pyc = Path(_chosen(venv))
    answers = {}
    home = tmp_path / "home"   # the same folder for both: a learn names its model
    home.mkdir()
    for form in ("pyc", "-c"):
        shutil.copyfile(sample_model, home / "model.spamnb")
        for left in home.glob("model.spamnb.*"):
            left.unlink()
        if form == "-c":
            pyc.rename(pyc.with_suffix(".off"))
        try:
            assert (_chosen(venv) == "-c") == (form == "-c")
            answers[form] = [_run(venv, args, cwd=home, SPAMNB_HOME=str(home), COLUMNS="100") for args in ANSWERS]
        finally:
            if form == "-c":
                pyc.with_suffix(".off").rename(pyc)
    for args, ours, theirs in zip(ANSWERS, answers["pyc"], answers["-c"]):
        assert (ours.returncode, ours.stdout, ours.stderr) == (theirs.returncode, theirs.stdout, theirs.stderr), args
    by = dict(zip(map(" ".join, ANSWERS), answers["pyc"]))
    assert by["classify"].returncode == 0 and by["classify"].stdout.startswith(b"spam ")
    assert b"X-Spamnb-Status: Yes" in by["classify -p"].stdout
    assert by["classify --bogus"].returncode == 64 and by["classify --bogus"].stderr.startswith(b"spamnb: ")
    assert by["--help"].stdout.startswith(b"usage: spamnb ") and b".pyc" not in by["--help"].stdout


def _layouts():
    """Venvs where the byte-compiled file is not certainly the one: (name, how to make it from ``_venv``'s)."""
    other = "3.99"
    return [
        ("pip --no-compile", lambda root: _venv(root, compiled=False)),
        ("editable: no spamnb in site-packages", lambda root: _without_package(_venv(root))),
        ("two versions' files", lambda root: _also(_venv(root), lambda: _module(root, other, "cpython-399"))),
        ("an optimized file only", lambda root: _renamed(_venv(root), f"{launcher.MODULE}.{TAG}.opt-1.pyc")),
        ("the folder's version is not the tag's", lambda root: _renamed(_venv(root), f"{launcher.MODULE}.cpython-399.pyc")),
        ("another version's file (the venv's Python moved)",
         lambda root: _venv(root, version=other, tag="cpython-399")),
        ("pyvenv.cfg's first line is not home",
         lambda root: _venv(root, cfg=f"include-system-site-packages = false\nhome = {PYTHON.parent}\n")),
        ("home's python3.V is another file", lambda root: _other_home(_venv(root), root)),
    ]


def _without_package(program):
    shutil.rmtree(program.parent.parent / "lib" / f"python{VERSION}" / "site-packages" / "spamnb")
    return program


def _also(program, make):
    make()
    return program


def _renamed(program, name):
    cache = program.parent.parent / "lib" / f"python{VERSION}" / "site-packages" / "spamnb" / "__pycache__"
    (cache / f"{launcher.MODULE}.{TAG}.pyc").rename(cache / name)
    return program


def _other_home(program, root):
    home = root / "home"
    home.mkdir()
    shutil.copy2(PYTHON, home / f"python{VERSION}")   # a copy: not the file bin/python3 leads to
    (root / "pyvenv.cfg").write_text(f"home = {home}\ninclude-system-site-packages = false\n")
    return program


@pytest.mark.parametrize("name, make", _layouts(), ids=[name for name, _ in _layouts()])
def test_otherwise_the_c_text_runs(name, make, tmp_path, sample_model):
    program = make(tmp_path / "venv")
    assert _chosen(program) == "-c"
    shutil.copyfile(sample_model, tmp_path / "model.spamnb")
    proc = _run(program, ["classify", "-m", tmp_path / "model.spamnb"], cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.startswith(b"spam "), proc


def test_outside_a_venv_and_through_links_and_relative_paths(tmp_path, sample_model):
    """A prefix that is no venv (bin/python3 and bin/python3.V the same file),
    the launcher reached through a symbolic link, or by a relative path: the
    byte-compiled file, by its absolute path."""
    prefix = tmp_path / "prefix"
    program = _venv(prefix)
    (prefix / "pyvenv.cfg").unlink()
    pyc = str(prefix / "lib" / f"python{VERSION}" / "site-packages" / "spamnb" / "__pycache__" / (
        f"{launcher.MODULE}.{TAG}.pyc"))
    (tmp_path / "link").symlink_to(program)
    assert _chosen(program) == _chosen(tmp_path / "link") == pyc
    assert _chosen("bin/spamnb", cwd=prefix) == os.path.normpath(_chosen("./bin/spamnb", cwd=prefix)) == pyc
    shutil.copyfile(sample_model, tmp_path / "model.spamnb")
    proc = _run("bin/spamnb", ["classify", "-m", tmp_path / "model.spamnb"], cwd=prefix)
    assert proc.returncode == 0 and proc.stdout.startswith(b"spam "), proc


@pytest.fixture(scope="module")
def venv_c(tmp_path_factory):
    """The same venv as ``pip install --no-compile`` leaves it: the -c text."""
    return _venv(tmp_path_factory.mktemp("no-pyc") / "venv", compiled=False)


def test_a_directory_on_stdin_and_a_ctrl_c_as_before(venv, venv_c, sample_model, tmp_path):
    """A directory on stdin: exit 3, one line (the shell's, before either form).
    A Ctrl-C as the command starts (here the import of spamnb.cli.main raises
    it: a package planted first on PYTHONPATH) and while a classify waits for
    its message: exit 130, one line, by either form."""
    fake = tmp_path / "fake" / "spamnb" / "cli"
    fake.mkdir(parents=True)
    for init in (fake.parent / "__init__.py", fake / "__init__.py"):
        init.write_text("")
    (fake / "main.py").write_text("raise KeyboardInterrupt\n")
    assert _chosen(venv).endswith(".pyc") and _chosen(venv_c) == "-c"
    shutil.copyfile(sample_model, tmp_path / "model.spamnb")
    for program in (venv, venv_c):
        fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            proc = subprocess.run([str(program), "classify"], stdin=fd, capture_output=True, timeout=60, env=_env())
        finally:
            os.close(fd)
        assert proc.returncode == 3 and len(proc.stderr.splitlines()) == 1 and proc.stdout == b"", proc
        proc = _run(program, ["classify"], PYTHONPATH=f"{tmp_path / 'fake'}{os.pathsep}{REPO}")
        assert (proc.returncode, proc.stdout, proc.stderr) == (130, b"", b"spamnb: interrupted\n"), proc
        waiting = subprocess.Popen([str(program), "classify", "-m", tmp_path / "model.spamnb"], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
        try:
            _until_reading(waiting.pid)
            waiting.send_signal(signal.SIGINT)
            out, err = waiting.communicate(timeout=60)
        finally:
            waiting.kill()
        assert (waiting.returncode, out, err) == (130, b"", b"spamnb: interrupted\n"), (waiting.returncode, err)


def test_the_byte_compiled_file_imports_what_the_c_text_imports(venv, venv_c, sample_model, tmp_path):
    """The cold path's modules, in order (tests/test_cold_start.py checks them by the -c text): the same by
    the byte-compiled file, which Python runs without runpy or importlib's loaders."""
    shutil.copyfile(sample_model, tmp_path / "model.spamnb")
    imported = []
    for program in (venv, venv_c):
        proc = _run(program, ["classify", "-m", tmp_path / "model.spamnb"], cwd=tmp_path, PYTHONPROFILEIMPORTTIME="1")
        lines = proc.stderr.decode().splitlines()
        assert proc.returncode == 0 and proc.stdout.startswith(b"spam "), lines[-5:]
        imported.append([line.split("|")[-1].strip() for line in lines if line.startswith("import time:")][1:])
    assert imported[0] == imported[1] and "spamnb.cli.classify" in imported[0], imported
    assert not {"runpy", "site", "importlib.machinery"} & set(imported[0])


def _until_reading(pid, timeout=30):
    """Wait until process ``pid`` blocks reading its stdin, a pipe (its wchan
    names a pipe's read; a kernel that does not tell: the timeout)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if "pipe" in Path(f"/proc/{pid}/wchan").read_text():
                return
        except OSError:
            return
        time.sleep(0.05)


def _train(program, folder, *options, **env):
    """``train -q`` of the sample corpus in partitions of 50 messages (six: with -j 2 the workers count them)."""
    model = folder / "model.spamnb"
    proc = _run(program, ["train", "-q", "--partition-size", "50", *options, "-m", model, SAMPLE_CORPUS],
                stdin=os.devnull, cwd=folder, SPAMNB_HOME=str(folder), **env)
    assert proc.returncode == 0 and proc.stdout == b"" and proc.stderr == b"", proc
    return model.read_bytes()


@pytest.fixture(scope="module")
def trained(venv_c, tmp_path_factory):
    """The model of ``train -j 1`` by the -c text (in this process: no worker)."""
    return _train(venv_c, tmp_path_factory.mktemp("j1"), "-j", "1")


@pytest.mark.parametrize("method", ["", "forkserver", "spawn"], ids=["default", "forkserver", "spawn"])
def test_train_with_workers_through_the_byte_compiled_file(method, venv, trained, tmp_path):
    """``train -j 2`` whose workers start from a forkserver or by spawn: each
    runs the main script's file again, as __mp_main__ (the byte-compiled file;
    the -c text had no file): the text does nothing there (without its
    ``__name__`` test each worker ran the command again, and the training
    failed), and the model is the one of -j 1."""
    assert _chosen(venv).endswith(".pyc")
    assert _train(venv, tmp_path, "-j", "2", **({"SPAMNB_START_METHOD": method} if method else {})) == trained


def test_run_as_mp_main_the_text_does_nothing(venv):
    """What a worker of multiprocessing does with the main script's file
    (runpy.run_path, run_name ``__mp_main__``): no exit, the collector left on."""
    pyc = _chosen(venv)
    code = ("import gc, runpy, sys; names = runpy.run_path(sys.argv[1], run_name='__mp_main__'); "
            "print(gc.isenabled(), sorted(k for k in names if not k.startswith('__')))")
    proc = subprocess.run([sys.executable, "-S", "-c", code, pyc], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout == "True []\n", proc


def test_the_module_is_the_c_text():
    """spamnb/_launcher.py is bin/spamnb's -c text (after its two lines of comment), and the
    writer refuses a launcher without exactly one such line."""
    text = LAUNCHER.read_text()
    code = launcher.python_text(text)
    assert code.startswith('if __name__ == "__main__":') and code.rstrip().endswith("sys.exit(entry(cold=True))")
    assert code in text and f"-c '{code}' \"$@\"" in text
    with pytest.raises(ValueError):
        launcher.python_text(text.replace(" -c '", " -c  '"))
    with pytest.raises(ValueError):
        launcher.python_text(text + text[text.index("exec \"$python\" $site -P -c"):])


@pytest.mark.slow
def test_the_installed_launcher_runs_its_byte_compiled_file(tmp_path):
    """`pip install .` (tests/installed_spamnb.py: a venv of the system's
    Python) writes and byte-compiles the module; the launcher runs it, and
    ``train -j 2`` with a forkserver through it."""
    import installed_spamnb

    if installed_spamnb.missing() is not None:
        pytest.skip(installed_spamnb.missing())
    program = installed_spamnb.program()
    prefix = program.parent.parent
    pycs = list((prefix / "lib").glob(f"python3.*/site-packages/spamnb/__pycache__/{launcher.MODULE}.cpython-*.pyc"))
    assert len(pycs) == 1, pycs
    env = {"PATH": "/usr/bin:/bin", "SPAMNB_HOME": str(tmp_path), "SPAMNB_START_METHOD": "forkserver"}
    traced = subprocess.run(["sh", "-x", str(program), "--version"], capture_output=True, text=True, env=env,
                            timeout=120)
    assert f" -S -P {pycs[0]} --version" in traced.stderr, traced.stderr[-2000:]
    model = tmp_path / "model.spamnb"
    proc = subprocess.run([str(program), "train", "-j", "2", "-q", "--partition-size", "50", "-m", str(model),
                           str(SAMPLE_CORPUS)],
                          capture_output=True, env=env, timeout=600, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0 and proc.stderr == b"", proc
    with open(SPAM, "rb") as f:
        proc = subprocess.run([str(program), "classify", "-m", str(model)], stdin=f, capture_output=True, env=env,
                              timeout=120)
    assert proc.returncode == 0 and proc.stdout.startswith(b"spam "), proc


# The launcher's text, its last line a report of what it imported: spamnb, spamnb.cli and spamnb.cli.main (spec,
# attributes, globals' names), every module in the order loaded, sys.path, and whether importlib's search made a
# finder of site-packages
_REPORTED = """
    rows = []
    for name in ("spamnb", "spamnb.cli", "spamnb.cli.main"):
        module = sys.modules[name]
        spec = module.__spec__
        rows.append((name, spec.name, spec.origin, spec.cached, spec.parent, spec.submodule_search_locations,
                     spec.has_location, spec._initializing, type(spec.loader).__name__, module.__loader__ is spec.loader,
                     module.__package__, getattr(module, "__path__", None), module.__file__, module.__cached__,
                     list(vars(module)), getattr(sys.modules[spec.parent], name.rpartition(".")[2], None) is module))
    searched = any(key.endswith("site-packages") for key in sys.path_importer_cache)
    sys.stdout.write(repr((rows, list(sys.modules), sys.path, searched)))
"""


def test_the_launcher_loads_spamnb_from_its_site_packages_as_importlib_does(tmp_path):
    """In its own venv with nothing before site-packages but the standard library (no PYTHONPATH), the
    launcher loads spamnb, spamnb.cli and spamnb.cli.main from site-packages without importlib's search
    along sys.path (a finder and a listing of each folder: 1.1 million instructions of every run): the
    same modules, specs and attributes as importlib's search gives (the run with its imports timed,
    PYTHONPROFILEIMPORTTIME, searches).  spamnb copied into site-packages, byte-compiled as pip does."""
    import compileall

    program = _venv(tmp_path / "venv")
    site_packages = program.parent.parent / "lib" / f"python{VERSION}" / "site-packages"
    shutil.copytree(REPO / "spamnb", site_packages / "spamnb", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__", "*.c", "*.pyx"))
    assert compileall.compile_dir(str(site_packages / "spamnb"), quiet=1)
    code = launcher.python_text(LAUNCHER.read_text())
    code = code.replace("    sys.exit(entry(cold=True))", _REPORTED)
    assert code.rstrip().endswith("sys.stdout.write(repr((rows, list(sys.modules), sys.path, searched)))")
    reports = []
    for timed in (False, True):
        env = {"PATH": "/usr/bin:/bin", "SPAMNB_HOME": str(tmp_path), **({"PYTHONPROFILEIMPORTTIME": "1"} if timed else {})}
        proc = subprocess.run([str(program.parent / "python3"), "-S", "-P", "-c", code], capture_output=True,
                              text=True, env=env, timeout=120, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, proc.stderr[-2000:]
        reports.append(eval(proc.stdout))   # noqa: S307 -- the repr this test's own code wrote
    (rows, modules, path, searched), (timed_rows, timed_modules, timed_path, timed_searched) = reports
    assert rows[0][2] == str(site_packages / "spamnb" / "__init__.py") and rows[2][-1] is True
    assert (rows, modules, path) == (timed_rows, timed_modules, timed_path)
    assert (searched, timed_searched) == (False, True)
