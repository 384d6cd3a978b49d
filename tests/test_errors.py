"""One error hierarchy (issue 36, item 3): every exception class spamnb
defines is a :class:`spamnb.errors.SpamnbError`, defined in (or named from)
``spamnb/errors.py``, and each carries the documented exit code
(``spamnb.cli.exitcodes``), which the command line applies in one place."""

import ast
import importlib
import inspect

import pytest

from conftest import REPO, run_spamnb
from spamnb import errors
from spamnb.cli import exitcodes
from spamnb.cli.common import exit_code, one_line

SPAMNB = REPO / "spamnb"

# The documented exit code of each error (spamnb.cli.exitcodes; README and `spamnb --help`).
DOCUMENTED = {
    errors.SpamnbError: exitcodes.EXIT_ERROR,
    errors.UsageError: exitcodes.EXIT_USAGE,
    errors.CommandError: exitcodes.EXIT_ERROR,
    errors.SkippedError: exitcodes.EXIT_ERROR,
    errors.OneClassCorpus: exitcodes.EXIT_ONE_CLASS,
    errors.SettingsError: exitcodes.EXIT_USAGE,     # serve's settings; a command's settings file: CommandError
    errors.ModelError: exitcodes.EXIT_ERROR,
    errors.LockTimeout: exitcodes.EXIT_ERROR,
    errors.Refused: exitcodes.EXIT_ERROR,
    errors.TooLarge: exitcodes.EXIT_ERROR,
    errors.CorpusChanged: exitcodes.EXIT_ERROR,
    errors.DumpError: exitcodes.EXIT_ERROR,
    errors.DuplicateToken: exitcodes.EXIT_ERROR,
    errors.MustCompact: exitcodes.EXIT_ERROR,
    errors.MustReadWhole: exitcodes.EXIT_ERROR,
    errors.CorpusError: exitcodes.EXIT_ERROR,
    errors.SkippedInput: exitcodes.EXIT_ERROR,
    errors.BrokenPool: exitcodes.EXIT_ERROR,
    errors.ClusterError: exitcodes.EXIT_ERROR,
    errors.ProtocolError: exitcodes.EXIT_ERROR,
    errors.ModelUnavailable: exitcodes.EXIT_ERROR,
    errors.ServerError: exitcodes.EXIT_ERROR,
    errors.CannotListen: exitcodes.EXIT_CANNOT_LISTEN,
    errors.PidfileError: exitcodes.EXIT_PIDFILE_BAD,
    errors.PidfileHeld: exitcodes.EXIT_PIDFILE_HELD,
    errors.PrivilegeError: exitcodes.EXIT_NO_PRIVILEGES,
    errors.TLSError: exitcodes.EXIT_NO_TLS,
    errors.ConfigError: exitcodes.EXIT_CONFIG,
    errors.ImapError: exitcodes.EXIT_IMAP_UNREACHABLE,
    errors.LoginRefused: exitcodes.EXIT_IMAP_LOGIN,
    errors.Unreachable: exitcodes.EXIT_IMAP_UNREACHABLE,
    errors.SharedError: exitcodes.EXIT_ERROR,
    errors.SpamnbWarning: exitcodes.EXIT_ERROR,     # a warning: never raised, so never an exit code of its own
    errors.JournalWarning: exitcodes.EXIT_ERROR,
}


def _module_names():
    for path in sorted(SPAMNB.rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        yield ".".join(parts), path


def _defined_exception_classes():
    """(module, class name) of every class statement in spamnb/ whose bases
    name an exception or a warning (a name ending in Error, Exception,
    Interrupt, Warning, or one of the hierarchy's)."""
    known = set(errors.__all__)
    for name, path in _module_names():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b).rpartition(".")[2] for b in node.bases]
                if any(b.endswith(("Error", "Exception", "Interrupt", "Warning")) or b in known for b in bases):
                    yield name, node.name


def test_every_exception_class_is_a_spamnb_error_from_errors_py():
    found = list(_defined_exception_classes())
    assert len(found) >= len(DOCUMENTED)
    outside = [(m, c) for m, c in found if m != "spamnb.errors"]
    assert outside == [], f"exception classes defined outside spamnb/errors.py: {outside}"
    for _, name in found:
        cls = getattr(errors, name)
        assert issubclass(cls, errors.SpamnbError), name
    assert set(errors.__all__) == {c for _, c in found}


def test_the_old_names_are_the_same_classes():
    """A module that raised an error still names it (``spamnb.persistence.store.ModelError``): the same class."""
    for module, names in [("spamnb.persistence.store", ["ModelError", "LockTimeout"]),
                          ("spamnb.mail.reader", ["Refused", "TooLarge", "CorpusError", "SkippedInput"]),
                          ("spamnb.estimator.fitting", ["CorpusChanged"]), ("spamnb.model.dumpfile", ["DumpError"]),
                          ("spamnb.training.errors", ["CorpusError", "SkippedInput"]),
                          ("spamnb.server.protocol", ["ProtocolError"]), ("spamnb.server.models", ["ModelUnavailable"]),
                          ("spamnb.server.listeners", ["ServerError", "CannotListen"]),
                          ("spamnb.server.pidfile", ["PidfileError", "PidfileHeld"]),
                          ("spamnb.server.privileges", ["PrivilegeError"]), ("spamnb.server.launch", ["TLSError"]),
                          ("spamnb.imap.client", ["ImapError", "LoginRefused", "Unreachable"]),
                          ("spamnb.cli.common", ["UsageError", "CommandError", "SkippedError"]),
                          ("spamnb.mail.checked", ["Refused", "TooLarge"]), ("spamnb.settings", ["SettingsError"]),
                          ("spamnb.persistence.journal", ["JournalWarning"])]:
        mod = importlib.import_module(module)
        for name in names:
            assert getattr(mod, name) is getattr(errors, name), (module, name)


def test_the_exit_code_of_each_error_is_the_documented_one():
    classes = {cls for cls in vars(errors).values() if inspect.isclass(cls) and issubclass(cls, BaseException)}
    assert classes == set(DOCUMENTED)
    documented_codes = {code for code, _ in exitcodes.TABLE}
    for cls, code in DOCUMENTED.items():
        assert cls.exit_code == code, cls.__name__
        assert code in documented_codes, cls.__name__
        args = (64, "x") if issubclass(cls, errors.ProtocolError) and cls is errors.ProtocolError else (
            (1,) if cls is errors.DuplicateToken else ("x",))
        assert exit_code(cls(*args)) == code, cls.__name__


def test_every_warning_is_a_spamnb_error_and_a_warning():
    """A warning category spamnb gives derives from the one base (issue 52: the
    journal's was a bare UserWarning) and is still a UserWarning (filters on it work)."""
    import warnings

    found = [cls for cls in vars(errors).values() if inspect.isclass(cls) and issubclass(cls, Warning)]
    assert errors.JournalWarning in found
    for cls in found:
        assert issubclass(cls, errors.SpamnbWarning) and issubclass(cls, errors.SpamnbError), cls
        assert issubclass(cls, UserWarning), cls
    with pytest.warns(errors.SpamnbWarning):
        warnings.warn("x", errors.JournalWarning)


def test_errors_keep_their_standard_bases():
    """Code that catches ValueError, OSError or ConnectionError still catches them."""
    for cls in (errors.Refused, errors.TooLarge, errors.CorpusChanged, errors.DumpError, errors.DuplicateToken):
        assert issubclass(cls, ValueError)
    assert issubclass(errors.CannotListen, OSError)
    assert issubclass(errors.ClusterError, ConnectionError)


@pytest.mark.parametrize("exc, line, code", [
    (errors.ModelError("no model at /x"), "no model at /x", 3),
    (errors.CorpusError("a  b\nc"), "a b c", 3),
    (errors.PidfileHeld("held by 12"), "held by 12", 75),
    (FileNotFoundError(2, "No such file or directory", "/m"), "/m: No such file or directory", 3),
    (MemoryError(), "out of memory", 3),
    (RuntimeError("odd"), "RuntimeError: odd", 3),
])
def test_one_line_and_exit_code(exc, line, code):
    assert (one_line(exc), exit_code(exc)) == (line, code)


def test_errors_imports_nothing():
    tree = ast.parse((SPAMNB / "errors.py").read_text())
    assert not [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]


@pytest.mark.parametrize("args, code, text", [
    (["serve", "--max-size", "0"], exitcodes.EXIT_USAGE, "spamnb serve: --max-size"),
    (["serve", "--status"], exitcodes.EXIT_USAGE, "spamnb serve: --status reads the server's --metrics address"),
    (["serve", "-r", "/nonexistent-folder/spamnb.pid"], exitcodes.EXIT_PIDFILE_BAD, "spamnb serve: "),
    (["info", "-m", "/nonexistent-folder/model.spamnb"], exitcodes.EXIT_ERROR, "spamnb: "),
    (["classify", "--spam-cutoff", "2"], exitcodes.EXIT_USAGE, "spamnb classify: argument --spam-cutoff"),
])
def test_the_command_line_maps_errors_once(tmp_path, args, code, text):
    """Through ``spamnb.cli.main``: one line on stderr, named as the command names its errors, and the code."""
    proc = run_spamnb(args, tmp_path, text=True, timeout=60)
    assert proc.returncode == code, proc.stderr
    assert proc.stderr.startswith(text) and proc.stderr.count("\n") == 1, proc.stderr


def _fresh_python(code):
    """The stdout of ``code`` run by a new interpreter (spamnb not imported yet), which must exit 0."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_the_classes_a_mail_filter_never_raises_are_made_when_first_named():
    """No class but the base is made at import, nor by importing the modules of a
    cold classify or learn, which name them where raised or caught (a class
    statement costs a cold classify 70-95 k instructions), and each is made
    once, the same class however it is named, with its module and name."""
    code = ("import pickle, sys, spamnb.errors as e\n"
            "import spamnb.cli.main, spamnb.cli.classify, spamnb.cli.learn, spamnb.persistence.codec, spamnb.settings\n"
            "made = sorted(n for n in e.__all__ if n in vars(e) and n != 'SpamnbError')\n"
            "from spamnb.mail.checked import TooLarge\n"
            "assert TooLarge is e.TooLarge and e.Refused in TooLarge.__mro__ and e.TooLarge('x', b'h').head == b'h'\n"
            "import spamnb.settings as s\n"
            "assert s.SettingsError is e.SettingsError and s.ServerSettings is not None\n"
            "assert issubclass(e.OneClassCorpus, e.CommandError) and e.OneClassCorpus.exit_code == 65\n"
            "from spamnb.errors import CannotListen\n"
            "assert e.CannotListen is CannotListen and e.ServerError in CannotListen.__mro__\n"
            "assert CannotListen.__module__ == 'spamnb.errors' and CannotListen.__qualname__ == 'CannotListen'\n"
            "assert type(pickle.loads(pickle.dumps(e.BrokenPool('x')))) is e.BrokenPool\n"
            "assert 'SharedError' in dir(e) and 'ImapError' not in vars(e)\n"
            "try:\n    e.NoSuchError\nexcept AttributeError:\n    pass\nelse:\n    raise SystemExit('no error')\n"
            "print(made)\n")
    assert _fresh_python(code) == "[]"


def test_a_group_named_first_by_two_threads_is_one_class():
    """Threads that name a group of classes made on first use at once all get one class for each name."""
    code = ("import threading, spamnb.errors as e\n"
            "barrier, seen = threading.Barrier(8), []\n"
            "def name():\n    barrier.wait()\n    seen.append((e.CannotListen, e.ServerError))\n"
            "threads = [threading.Thread(target=name) for _ in range(8)]\n"
            "[t.start() for t in threads]\n[t.join() for t in threads]\n"
            "assert len(set(seen)) == 1, seen\n"
            "assert e.CannotListen.__mro__[1] is e.ServerError is seen[0][1]\n")
    _fresh_python(code)
