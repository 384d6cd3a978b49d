"""Every exception spamnb raises, and every warning it gives, in one hierarchy (as the standard library's
``email.errors``): one base, :class:`SpamnbError`, which carries the exit code
of the ``spamnb`` command that fails with it.

The codes are the documented ones (``spamnb.cli.exitcodes``; this module sits
below every layer, so it states them as numbers, and tests/test_errors.py
checks each against the documented constant).  The command line maps an
error to one line and its exit code in one place
(``spamnb.cli.common.one_line`` and ``exit_code``, called by
``spamnb.cli.main``): a :class:`SpamnbError` is its message and its
``exit_code``; an ``OSError`` its file name and reason, exit 3.

The modules that raise these errors import them from here (and keep their
names, e.g. ``spamnb.persistence.store.ModelError``).  An error that is also a
``ValueError``, ``OSError`` or ``ConnectionError`` stays one, so code that
catches those still does.  This module imports nothing.

Only the base is made when this module is imported; every other class is
made, a group at a time, when one of its names is first asked of this
module (``from spamnb.errors import ServerError``, ``errors.ModelError``;
PEP 562's ``__getattr__``): a class statement costs a cold ``spamnb
classify`` 70-95 thousand instructions (the interpreter fills its slots from
its bases), for classes a command that succeeds never raises.  So the
modules of a cold command's path name them where raised or caught
(``raise errors.ModelError(...)``, ``except errors.Refused:``: an
``except`` clause names its class only when an exception is matched), and
those that give one as their own name (``spamnb.persistence.store.ModelError``)
answer it with :func:`reexported`.  Each is the same class whenever and wherever
it is named.
"""

__all__ = [
    "SpamnbError", "UsageError", "CommandError", "SkippedError", "OneClassCorpus",
    "SettingsError", "ModelError", "LockTimeout", "Refused", "TooLarge", "CorpusChanged", "DumpError",
    "DuplicateToken", "MustCompact", "MustReadWhole", "CorpusError", "SkippedInput", "BrokenPool", "ClusterError", "ProtocolError",
    "ModelUnavailable", "ServerError", "CannotListen", "PidfileError", "PidfileHeld", "PrivilegeError",
    "TLSError", "ConfigError", "ImapError", "LoginRefused", "Unreachable", "SharedError", "SpamnbWarning",
    "JournalWarning",
]


class SpamnbError(Exception):
    """The base of every spamnb exception; ``exit_code`` is the ``spamnb``
    command's exit status when the error ends it (``EXIT_ERROR``: 3)."""

    exit_code = 3


def _command_line():
    """The command line's classes: a command that succeeds never raises one."""

    class UsageError(SpamnbError):
        """A command line that cannot be run (``EXIT_USAGE``: 64); its message is
        printed as it is (it names the command)."""

        exit_code = 64

    class CommandError(SpamnbError):
        """An error a command reports in one line (``EXIT_ERROR``: 3)."""

    class SkippedError(CommandError):
        """A path refused unread (:class:`SkippedInput`): a learn goes on without it."""

    class SettingsError(SpamnbError):
        """A setting that cannot be used: a settings file (``spamnb.settings``)
        or an option or ``--config`` line of ``spamnb serve``.  ``serve`` exits
        with ``EXIT_USAGE`` (64); the other commands report a bad settings file
        as a :class:`CommandError` (exit 3, ``spamnb.cli.common.settings_of``)."""

        exit_code = 64

    return _named(UsageError, CommandError, SkippedError, SettingsError)


def _model():
    """The classes of a model file that cannot be used."""

    class ModelError(SpamnbError):
        """A model file is missing, unreadable, damaged, of another format or version,
        or was trained with other tokenizer settings."""

    class LockTimeout(ModelError):
        """Another process held the model's lock longer than the wait allowed."""

    return _named(ModelError, LockTimeout)


def _reading():
    """The classes of mail and corpora that cannot be read."""

    class Refused(SpamnbError, ValueError):
        """A file refused before it was read; ``str()`` is the reason (``not a
        regular file (a FIFO)``, ``larger than 64 MiB``), the same for every
        file refused for it (a corpus report counts files by reason)."""

    class TooLarge(Refused):
        """A message over the size limit on stdin (``spamnb.mail.checked.read_stdin``):
        ``head`` is what was read of it (at most the limit and one byte; ``b""``
        for a regular file, refused by its size before any of it is read)."""

        def __init__(self, reason, head=b""):
            super().__init__(reason)
            self.head = head

    class CorpusError(SpamnbError):
        """A corpus path that cannot be used (missing, unreadable, or a skipped file under ``strict``)."""

    class SkippedInput(CorpusError):
        """A path refused before it was read (a device, a socket, a FIFO where
        none is read, a file over the size limit, not mail): a batch, a learn,
        goes on without it and says so."""

    return _named(Refused, TooLarge, CorpusError, SkippedInput)


def _learning():
    """The classes a learning session raises and catches to change its way
    (``spamnb.persistence.journal``, ``spamnb.model.learning``): a learn of a
    new message that appends to its journal meets neither."""

    class MustCompact(SpamnbError):
        """A learning session's change cannot be a journal record: the model is
        written whole instead (``spamnb.persistence.journal``, ``spamnb.model.learning``)."""

    class MustReadWhole(SpamnbError):
        """A learn that appends without reading the model (a light session) met a
        change that needs it whole (a relabel's forget): the session reads the
        model and replays its journal, then goes on (``spamnb.model.learning``)."""

    return _named(MustCompact, MustReadWhole)


def _warnings():
    """The warnings (a journal's, ``spamnb.persistence.journal``): a classify of
    a model without a journal meets none."""

    class SpamnbWarning(SpamnbError, UserWarning):
        """The base of every warning spamnb gives (``warnings.warn``): something
        went on without what could not be used; never raised by spamnb itself."""

    class JournalWarning(SpamnbWarning):
        """A journal (or its tail) could not be applied; what came before it was (``spamnb.persistence.journal``)."""

    return _named(SpamnbWarning, JournalWarning)


def _training():
    """The classes of what ``spamnb train`` and the calibration raise."""
    CommandError = _class("CommandError")   # the command line's group, made first if it was not

    class OneClassCorpus(CommandError):
        """A corpus with no spam or no ham, trained without ``--force`` (``EXIT_ONE_CLASS``: 65)."""

        exit_code = 65

    class CorpusChanged(SpamnbError, ValueError):
        """The corpus read again (for the calibration, or by ``spamnb train``'s
        second pass) is not the one counted."""

    class BrokenPool(SpamnbError, RuntimeError):
        """A worker process of ``spamnb train`` ended while it had jobs (killed, out
        of memory)."""

    class ClusterError(SpamnbError, ConnectionError):
        """The cluster cannot run this spamnb (not importable there, or another version)."""

    return _named(OneClassCorpus, CorpusChanged, BrokenPool, ClusterError)


def _dumps():
    """The classes of a dump's and a merge's token lists."""

    class DumpError(SpamnbError, ValueError):
        """A dump that cannot be read (damaged, truncated, of another format); the
        message names the line."""

    class DuplicateToken(SpamnbError, ValueError):
        """A token list in which a hash repeats (a dump's, a merge's): ``position``
        is the later token's."""

        def __init__(self, position):
            super().__init__(f"token {position} repeats an earlier token")
            self.position = position

    return _named(DumpError, DuplicateToken)


def _server():
    """The classes of the server (``spamnb serve``)."""

    class ProtocolError(SpamnbError):
        """A request the server answers with ``code`` (a sysexits value, in the
        SPAMD response: not an exit status) and ``text``."""

        def __init__(self, code, text):
            super().__init__(text)
            self.code = code
            self.text = text

    class ModelUnavailable(ProtocolError):
        """No model can be loaded from a path (missing, damaged, unreadable): EX_UNAVAILABLE (69) to the client."""

        def __init__(self, text):
            super().__init__(69, text)

    class ServerError(SpamnbError):
        """The server cannot start (no usable site model, an address it cannot
        listen on); the message is one line for the log (``EXIT_ERROR``: 3)."""

    class CannotListen(ServerError, OSError):
        """An address could not be bound (in use, a privileged port without the
        right to it, ...): ``EXIT_CANNOT_LISTEN`` (71)."""

        exit_code = 71

    class PidfileError(SpamnbError):
        """The pid file cannot be opened or written (a symbolic link, a folder
        that does not exist, no permission, ...): ``EXIT_PIDFILE_BAD`` (73)."""

        exit_code = 73

    class PidfileHeld(PidfileError):
        """Another live server holds the pid file: ``EXIT_PIDFILE_HELD`` (75)."""

        exit_code = 75

    class PrivilegeError(SpamnbError):
        """The user or group is unknown, or the switch to them failed: ``EXIT_NO_PRIVILEGES`` (77)."""

        exit_code = 77

    class TLSError(SpamnbError):
        """The certificate or key cannot be read or do not match: ``EXIT_NO_TLS`` (66)."""

        exit_code = 66

    class ConfigError(SpamnbError):
        """``spamnb serve --check-config`` found the set-up would not serve (a file,
        listener, model, user or permission it needs): ``EXIT_CONFIG`` (78).  The
        message is the last problem found; the ones before it are printed first,
        one line each."""

        exit_code = 78

    return _named(ProtocolError, ModelUnavailable, ServerError, CannotListen, PidfileError, PidfileHeld, PrivilegeError,
                  TLSError, ConfigError)


def _imap():
    """The classes of IMAP."""

    class ImapError(SpamnbError):
        """An IMAP server that refused a command or went away; one line
        (``EXIT_IMAP_UNREACHABLE``: 69)."""

        exit_code = 69

    class LoginRefused(ImapError):
        """The server refused the user name or password (``EXIT_IMAP_LOGIN``: 77)."""

        exit_code = 77

    class Unreachable(ImapError):
        """No connection: host unknown, refused, timed out, or TLS failed
        (certificate; ``EXIT_IMAP_UNREACHABLE``: 69)."""

    return _named(ImapError, LoginRefused, Unreachable)


def _shared():
    """The classes of learning shared between hosts (``spamnb.shared``)."""

    class SharedError(SpamnbError):
        """A ``--shared`` setting or the Redis client is unusable (one line; exit 3)."""

    return _named(SharedError)


def reexported(module, name, names):
    """What the ``__getattr__`` (PEP 562) of ``module`` answers for ``name``
    when the module gives ``names`` of these classes as its own
    (``spamnb.persistence.store.ModelError``): the same class, made when
    first named there, not when ``module`` is imported; AttributeError for
    a name not among them."""
    if name not in names:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    return _class(name)


def _class(name):
    """The class named ``name``, made now if it was not."""
    made = globals().get(name)
    return made if made is not None else __getattr__(name)


def _named(*classes):
    """``{name: class}`` of a group's classes, each named as if defined at the module's top."""
    for cls in classes:
        cls.__qualname__ = cls.__name__
    return {cls.__name__: cls for cls in classes}


_GROUPS = {name: make for make, names in (
    (_command_line, ("UsageError", "CommandError", "SkippedError", "SettingsError")),
    (_model, ("ModelError", "LockTimeout")),
    (_reading, ("Refused", "TooLarge", "CorpusError", "SkippedInput")),
    (_learning, ("MustCompact", "MustReadWhole")),
    (_warnings, ("SpamnbWarning", "JournalWarning")),
    (_training, ("OneClassCorpus", "CorpusChanged", "BrokenPool", "ClusterError")),
    (_dumps, ("DumpError", "DuplicateToken")),
    (_server, ("ProtocolError", "ModelUnavailable", "ServerError", "CannotListen", "PidfileError", "PidfileHeld",
               "PrivilegeError", "TLSError", "ConfigError")),
    (_imap, ("ImapError", "LoginRefused", "Unreachable")),
    (_shared, ("SharedError",))) for name in names}
_MADE = {}   # group -> its classes by name, once made


def __getattr__(name):
    """The classes made on first use (the module's docstring).  Two threads that
    name a group first may both make it: ``dict.setdefault`` keeps the first's
    classes (one step under the interpreter's lock), the other's are dropped
    unseen, so a name is one class wherever it is used."""
    make = _GROUPS.get(name)
    if make is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    made = _MADE.get(make)
    if made is None:
        made = _MADE.setdefault(make, make())
    globals().update(made)
    return made[name]


def __dir__():
    return sorted(set(globals()) | set(__all__))
