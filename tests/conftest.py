"""Shared test helpers and fixtures.

Long tests are marked ``slow`` and left out of a plain ``pytest`` run; ``pytest
-m slow`` (CI runs it after the default run) or ``SPAMNB_SLOW=1`` selects them.

The full corpora live beside the repository in ``../shared/corpora`` (or where
``SPAMNB_CORPORA`` points); :func:`corpus_root` finds them and, for the
SpamAssassin corpus, falls back to the sample shipped in ``corpora/``.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SAMPLE_CORPUS = REPO / "corpora"

# Test modules import these helpers (``from conftest import corpus_root``) and
# the reference implementations (``reference_mail``) by name: with
# --import-mode=importlib the tests folder is not on sys.path, so put it there,
# and register this module under the plain name so it is imported once.
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.modules.setdefault("conftest", sys.modules[__name__])

# Bytecode.  Where PYTHONDONTWRITEBYTECODE is set (many containers and shared
# machines set it) no process writes the package's .pyc files, so every
# `python -m spamnb` the tests start (some 500 a default run) compiled the
# package's modules again from source.  The session compiles the package
# under test once into its own __pycache__ folders (git-ignored; what `pip
# install` does for an installed package, and what any run without the
# setting leaves): the processes read them and still write nothing.  The
# tests' own modules, the standard library and site-packages are as before.
if sys.dont_write_bytecode:
    import compileall
    import importlib.util

    _package = importlib.util.find_spec("spamnb")       # the one the tests import (PYTHONPATH), not imported yet
    if _package is not None and _package.submodule_search_locations and \
            Path(_package.submodule_search_locations[0]).resolve() == REPO / "spamnb":   # this checkout's only
        compileall.compile_dir(_package.submodule_search_locations[0], quiet=2)


def shared_corpora():
    """The folder that holds the full corpora (it may not exist)."""
    return Path(os.environ.get("SPAMNB_CORPORA") or REPO.parent / "shared" / "corpora")


def corpus_root(name="spamassassin", fallback=True):
    """The root of a full corpus, or the shipped sample when it is absent.

    Returns ``(path, is_full)``.  For a corpus with no sample (``enron-spam``),
    or with ``fallback=False``, a missing corpus skips the calling test with a
    reason that names the path looked at.
    """
    path = shared_corpora() / name
    if path.is_dir():
        return path, True
    if fallback and name == "spamassassin":
        return SAMPLE_CORPUS, False
    pytest.skip(f"the full {name} corpus is absent (looked in {path}; set SPAMNB_CORPORA)")


def require_sre_codes():
    """The build's compiled patterns (spamnb/mail/_sre_codes.py: setup.py build_ext
    --inplace, an editable install): skipped without them, a failure where
    ``SPAMNB_REQUIRE_COMPILED=1`` (CI)."""
    try:
        from spamnb.mail import _sre_codes
    except ImportError:
        if os.environ.get("SPAMNB_REQUIRE_COMPILED") == "1":
            pytest.fail("no spamnb/mail/_sre_codes.py: the build did not write it")
        pytest.skip("no spamnb/mail/_sre_codes.py: the tree was not built (setup.py build_ext --inplace)")
    return _sre_codes


def run_spamnb(args, home=None, stdin=None, cwd=None, timeout=300, text=False):
    """Run ``python -m spamnb ARGS`` in a subprocess; returns the CompletedProcess.

    The child imports the package the tests import (its folder is PYTHONPATH),
    with ``SPAMNB_HOME=home`` when ``home`` is given and without SPAMNB_DEBUG;
    stdout and stderr are captured (bytes, or str with ``text``).
    """
    import spamnb

    env = dict(os.environ, PYTHONPATH=str(Path(spamnb.__file__).resolve().parents[1]))
    env.pop("SPAMNB_DEBUG", None)
    if home is not None:
        env["SPAMNB_HOME"] = str(home)
    return subprocess.run([sys.executable, "-m", "spamnb", *map(str, args)], input=stdin, capture_output=True,
                          env=env, cwd=cwd, timeout=timeout, text=text)


def journal_without_records(model):
    """Whether the journal beside ``model`` is one without records naming that
    very file (its header alone: what a whole save leaves,
    ``spamnb.persistence.journal.start``)."""
    from spamnb.persistence import journal

    real = os.path.realpath(model)
    if not os.path.isfile(journal.journal_path(real)) or os.path.getsize(journal.journal_path(real)) != 48:
        return False
    read = journal.read(real, journal.model_identity(real))
    return read.status == "ok" and not read.payloads


def wait_for_port(port, gone=lambda: False, timeout=30.0, host="127.0.0.1"):
    """Wait until something listens on ``host:port``: True, or False when
    ``gone()`` says the server died or ``timeout`` seconds pass first."""
    import socket
    import time

    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection((host, port), timeout=1).close()
            return True
        except OSError:
            pass
        if gone() or time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def child_pids(pid):
    """The pids of a process's children (a server's workers), from /proc:
    an empty set once it is gone."""
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return set()
    return {int(p) for p in text.split()}


def wait_until(condition, timeout=60.0, what="", interval=0.05):
    """Poll ``condition()`` until it returns something true and return that;
    fail the test (saying ``what``, or calling it for the text) once
    ``timeout`` seconds pass first.  The bound is generous: on a loaded
    machine a server's log line or a worker's start can be seconds late, and a
    fixed sleep before an assertion is a race."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout:g} s: {what() if callable(what) else what}")
        time.sleep(interval)


def slow_beyond(values, keep):
    """The ``values`` of a parametrised test with those not in ``keep`` marked slow.

    A matrix whose cases are of a few kinds keeps one or a few of each kind in
    the default run; the whole matrix runs in CI's ``pytest -m slow`` step (and
    with ``SPAMNB_SLOW=1``), so every case still runs in CI.  The test ids are
    unchanged.
    """
    missing = set(keep) - set(values)
    assert not missing, f"slow_beyond: {sorted(missing)} are not among the values"
    return [value if value in keep else pytest.param(value, marks=pytest.mark.slow) for value in values]


def pytest_collection_modifyitems(config, items):
    if os.environ.get("SPAMNB_SLOW") or config.getoption("markexpr"):
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]


@pytest.fixture(scope="session")
def shared_corpus():
    """``shared_corpus(name)``: the folder of a full shared corpus; the test is
    skipped, with the reason, when it is absent (see :func:`corpus_root`)."""
    return lambda name: corpus_root(name, fallback=False)[0]


@pytest.fixture(scope="session")
def sample_corpus():
    """The sample of the SpamAssassin corpus shipped in corpora/ (300 messages)."""
    return SAMPLE_CORPUS


@pytest.fixture(scope="session")
def sample_model(tmp_path_factory):
    """The model file ``spamnb train -q corpora/`` writes (the shipped sample,
    default settings, a fresh SPAMNB_HOME), trained once a session: copy it into
    a test's home (``shutil.copyfile``), never change it in place."""
    home = tmp_path_factory.mktemp("sample-model")
    proc = run_spamnb(["train", "-q", SAMPLE_CORPUS], home=home, cwd=home)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return home / "model.spamnb"


@pytest.fixture(scope="session")
def tls_certificate(tmp_path_factory):
    """``(cert, key)``: a self-signed certificate for localhost and its RSA key
    (``openssl req``), made once a session; None without openssl.  Copy them
    before changing their modes or contents."""
    import shutil

    openssl = shutil.which("openssl")
    if openssl is None:
        return None
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "2", "-subj", "/CN=localhost"], check=True, capture_output=True, timeout=120)
    return cert, key


class OneShotSpamd:
    """A SPAMD server on loopback (a thread) that answers every request with
    ``answer`` (bytes, once the request head is read), or closes the
    connection without a word when ``answer`` is None: a server's faults as
    spamc and the recipes meet them.  ``close()`` stops it."""

    def __init__(self, answer):
        import socket
        import threading

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.answer = answer
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                data = b""
                try:
                    while b"\r\n\r\n" not in data:
                        chunk = conn.recv(65536)
                        if not chunk:
                            break
                        data += chunk
                    if self.answer is not None:
                        conn.sendall(self.answer)
                except OSError:
                    pass

    def close(self):
        self.sock.close()
