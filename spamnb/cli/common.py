"""What every command of the command line shares: the one mapping of an
error to a line and an exit code (:func:`one_line`, :func:`exit_code`; the
errors themselves are :mod:`spamnb.errors`), the settings in effect, the
model path, the messages of a path.  The parser and its options are
:mod:`spamnb.cli.parsing`'s (made from the option table, :mod:`spamnb.options`)."""

import sys

from spamnb import errors   # its classes named where raised or caught, made then (a command that succeeds makes none)

__all__ = ["UsageError", "CommandError", "settings_of", "model_path", "load_filter", "read_file", "messages_of",
           "one_line", "exit_code", "human_size"]


def settings_of(args):
    """The settings in effect: the settings file, then this run's options."""
    from spamnb.settings import load_settings

    overrides = {key: getattr(args, key, None)
                 for key in ("model", "spam_cutoff", "ham_cutoff", "header_name", "subject_tag", "shared")}
    try:
        return load_settings(getattr(args, "settings", None), overrides)
    except errors.SettingsError as exc:   # a command's settings file: exit 3 (serve's settings: 64)
        raise errors.CommandError(str(exc)) from None


def model_path(args, settings=None):
    """The model file of this run: the settings' (``-m``), else ``$SPAMNB_HOME/model.spamnb``."""
    from spamnb.model import default_model_path

    return (settings or settings_of(args)).model or default_model_path()


def apply_cutoffs(spam_filter, settings):
    """The settings' cutoffs on a filter (they win over the model's own)."""
    from spamnb.model import Cutoffs

    spam = spam_filter.spam_cutoff if settings.spam_cutoff is None else settings.spam_cutoff
    ham = spam_filter.ham_cutoff if settings.ham_cutoff is None else settings.ham_cutoff
    if ham > spam:
        raise errors.CommandError(f"ham cutoff {ham!r} is above spam cutoff {spam!r}")
    spam_filter.cutoffs = Cutoffs(spam, ham)
    return spam_filter


def load_filter(args, settings=None, mapped=False):
    """The model of this run, with the cutoffs in effect (``mapped``: see
    :meth:`spamnb.model.spam_filter.SpamFilter.load`)."""
    from spamnb.model import SpamFilter

    settings = settings or settings_of(args)
    return apply_cutoffs(SpamFilter.load(model_path(args, settings), mapped=mapped), settings)


def read_file(path):
    """The bytes of a message file (``spamnb.mail.reader.read_message_file``);
    CommandError naming it when it cannot be read."""
    reader = _reader()
    try:
        return reader.read_message_file(path)
    except reader.CorpusError as exc:
        raise errors.CommandError(str(exc)) from None


def messages_of(path, **options):
    """``(name, bytes)`` of each message in ``path`` (``spamnb.mail.reader.messages_of``,
    with its ``options``), its errors as CommandError (SkippedError for a path refused unread).
    The one message on stdin (``-`` without ``stdin_mbox``) is read as the reader reads it
    (``spamnb.mail.checked.stdin_message``) without loading the reader: a cold ``spamnb learn``'s path."""
    try:
        if path == "-" and not options.get("stdin_mbox"):
            from spamnb.mail.checked import stdin_message

            yield "-", stdin_message(sys.stdin.buffer)
        else:
            yield from _reader().messages_of(path, **options)
    except errors.SkippedInput as exc:
        raise errors.SkippedError(_printable(str(exc))) from None
    except errors.CorpusError as exc:
        raise errors.CommandError(_printable(str(exc))) from None


def _reader():
    """``spamnb.mail.reader`` (the one reader of mail), imported once, when
    first needed (an import statement in :func:`messages_of` cost 1.1 us per
    message of a batch)."""
    global _READER
    if _READER is None:
        from spamnb.mail import reader

        _READER = reader
    return _READER


_READER = None


def _printable(text):
    from spamnb.mail.checked import display_name

    return display_name(text)


def human_size(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024.0


def one_line(exc):
    """The one line an error is reported in: a :class:`~spamnb.errors.SpamnbError`'s
    message; an ``OSError``'s file name and reason; else the type and message."""
    if isinstance(exc, errors.SpamnbError):
        text = str(exc)
    elif isinstance(exc, OSError):
        text = f"{exc.filename + ': ' if exc.filename else ''}{exc.strerror or exc}"
    elif isinstance(exc, MemoryError):
        text = "out of memory"
    else:
        text = f"{type(exc).__name__}: {exc}"
    return " ".join(text.split()) or type(exc).__name__


def exit_code(exc):
    """The exit code of a command ended by ``exc``: a :class:`~spamnb.errors.SpamnbError`'s
    own (``exit_code``), else ``EXIT_ERROR``.  With :func:`one_line`, the one
    place the command line maps an error (``spamnb.cli.main``)."""
    from spamnb.cli.exitcodes import EXIT_ERROR

    return exc.exit_code if isinstance(exc, errors.SpamnbError) else EXIT_ERROR


def _show_warning(message, category, filename, lineno, file=None, line=None):
    """An engine warning (e.g. a model journal's damaged tail) as one line on stderr."""
    text = " ".join(str(message).split()) or category.__name__
    try:
        print(f"spamnb: warning: {text}", file=sys.stderr if file is None else file)
    except OSError:   # stderr gone: the warning is lost, the command goes on
        pass


class one_line_warnings:   # noqa: N801 -- used as a function: with one_line_warnings()
    """Warnings raised while a command runs are printed as ``spamnb: warning: ...``, one line each.
    (A class, not ``contextlib.contextmanager``: ``contextlib`` and the modules it imports cost a
    cold ``spamnb classify`` a tenth of its instructions.)  The :mod:`warnings` module is not
    imported for it: a command that warns imports it, and the format is put in then (this
    object is a finder on ``sys.meta_path`` until then, for that one name; a cold classify
    warns of nothing and loads no ``warnings``)."""

    def __enter__(self):
        self.before = self.patched = None
        warnings = sys.modules.get("warnings")
        if warnings is not None:
            self._patch(warnings)
        else:
            sys.meta_path.insert(0, self)
        return self

    def __exit__(self, *exc):
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        if self.patched is not None and self.patched.showwarning is _show_warning:
            self.patched.showwarning = self.before

    def _patch(self, warnings):
        self.before, self.patched = warnings.showwarning, warnings
        warnings.showwarning = _show_warning

    def find_spec(self, name, path=None, target=None):
        """The spec of ``warnings`` by the finders after this one, its module given the format once
        loaded; None for every other name (the next finders find it)."""
        if name != "warnings":
            return None
        sys.meta_path.remove(self)
        spec = None
        for finder in sys.meta_path:
            spec = finder.find_spec(name, path, target) if hasattr(finder, "find_spec") else None
            if spec is not None:
                break
        if spec is None or isinstance(spec.loader, type) or not hasattr(spec.loader, "exec_module"):
            return None   # left to the import system as it is (a frozen or built-in module's loader is a class)
        execute = spec.loader.exec_module

        def exec_module(module):
            execute(module)
            self._patch(module)

        spec.loader.exec_module = exec_module   # this spec's own loader (a finder makes one per spec)
        return spec


def __getattr__(name):
    """``UsageError``, ``CommandError`` and ``SkippedError``: :mod:`spamnb.errors`' (made when first named)."""
    return errors.reexported(__name__, name, ("UsageError", "CommandError", "SkippedError"))
