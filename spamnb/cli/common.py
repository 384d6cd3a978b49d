"""What every command of the command line shares: the one mapping of an
error to a line and an exit code (:func:`one_line`, :func:`exit_code`; the
errors themselves are :mod:`spamnb.errors`), the parser class,
the settings in effect, the model path, the messages of a path, and the
options several commands take."""

from __future__ import annotations

import contextlib
import functools
import os
import sys

from spamnb.errors import CommandError, CorpusError, SettingsError, SkippedError, SkippedInput, SpamnbError, UsageError

__all__ = ["UsageError", "CommandError", "Parser", "settings_of", "model_path", "load_filter", "read_file",
           "messages_of", "one_line", "exit_code", "add_options", "model_option", "wait_option", "human_size"]


def __getattr__(name):
    """``Parser``, made on first use: argparse is imported only by a command
    line that needs the parser (the common forms of ``classify``, ``learn``
    and ``forget`` are read by ``spamnb.cli.main``'s fast path without it)."""
    if name == "Parser":
        parser_class = _parser_class()
        globals()["Parser"] = parser_class
        return parser_class
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _formatter(prog):
    """argparse's help formatter, told the terminal width: left to find it
    itself it imports shutil (with bz2 and lzma), 2.1 ms of every ``spamnb
    classify``, since ``add_argument`` builds a formatter to check metavars.
    The width is what ``shutil.get_terminal_size`` would give: $COLUMNS, else
    the terminal's, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    import argparse

    return argparse.RawDescriptionHelpFormatter(prog, width=(columns or 80) - 2)


def _parser_class():
    import argparse

    class Parser(argparse.ArgumentParser):
        def __init__(self, *args, **kwargs):
            kwargs.setdefault("formatter_class", _formatter)
            super().__init__(*args, **kwargs)

        def error(self, message):
            raise UsageError(f"{self.prog}: {message}")

    Parser.__module__ = __name__
    return Parser


def settings_of(args):
    """The settings in effect: the settings file, then this run's options."""
    from spamnb.settings import load_settings

    overrides = {key: getattr(args, key, None)
                 for key in ("model", "spam_cutoff", "ham_cutoff", "header_name", "subject_tag", "shared")}
    try:
        return load_settings(getattr(args, "settings", None), overrides)
    except SettingsError as exc:   # a command's settings file: exit 3 (serve's settings: 64)
        raise CommandError(str(exc)) from None


def model_path(args, settings=None):
    """The model file of this run: the settings' (``-m``), else ``$SPAMNB_HOME/model.spamnb``."""
    from spamnb.model.store import default_model_path

    return (settings or settings_of(args)).model or default_model_path()


def apply_cutoffs(spam_filter, settings):
    """The settings' cutoffs on a filter (they win over the model's own)."""
    from spamnb.model.verdict import Cutoffs

    spam = spam_filter.spam_cutoff if settings.spam_cutoff is None else settings.spam_cutoff
    ham = spam_filter.ham_cutoff if settings.ham_cutoff is None else settings.ham_cutoff
    if ham > spam:
        raise CommandError(f"ham cutoff {ham!r} is above spam cutoff {spam!r}")
    spam_filter.cutoffs = Cutoffs(spam, ham)
    return spam_filter


def load_filter(args, settings=None, mapped=False):
    """The model of this run, with the cutoffs in effect (``mapped``: see
    :meth:`spamnb.model.spam_filter.SpamFilter.load`)."""
    from spamnb.model.spam_filter import SpamFilter

    settings = settings or settings_of(args)
    return apply_cutoffs(SpamFilter.load(model_path(args, settings), mapped=mapped), settings)


def read_file(path):
    """The bytes of a message file (``spamnb.mail.reader.read_message_file``);
    CommandError naming it when it cannot be read."""
    reader = _reader()
    try:
        return reader.read_message_file(path)
    except reader.CorpusError as exc:
        raise CommandError(str(exc)) from None


def messages_of(path, **options):
    """``(name, bytes)`` of each message in ``path`` (``spamnb.mail.reader.messages_of``,
    with its ``options``), its errors as CommandError (SkippedError for a path refused unread)."""
    reader = _reader()
    try:
        yield from reader.messages_of(path, **options)
    except reader.SkippedInput as exc:
        raise SkippedError(_printable(str(exc))) from None
    except reader.CorpusError as exc:
        raise CommandError(_printable(str(exc))) from None


@functools.cache
def _reader():
    """``spamnb.mail.reader`` (the one reader of mail), imported once, when
    first needed (an import statement in :func:`messages_of` cost 1.1 us per
    message of a batch)."""
    from spamnb.mail import reader

    return reader


def _printable(text):
    from spamnb.mail.reader import display_name

    return display_name(text)


def human_size(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024.0


def add_options(p, options, top=False):
    """Add ``options`` (rows of the option table, :mod:`spamnb.options`) to the
    parser ``p``: argparse, ``--help`` and the man page are made from the table.
    ``top``: ``p`` is the ``spamnb`` parser itself; under a command, ``-m`` and
    ``--settings`` default to SUPPRESS (a value given before the command is kept)."""
    import argparse

    from spamnb.options import Ref, default_of
    from spamnb.options import options as table

    shared = () if top else table("model")
    groups = {}
    for option in options:
        kw = dict(option.kw)
        if "type" in kw:
            kw["type"] = _type(kw["type"])
        if isinstance(kw.get("choices"), Ref):
            kw["choices"] = kw["choices"].value()
        if option.flags[0].startswith("-"):
            kw["dest"] = option.dest
        if option in shared:
            kw["default"] = argparse.SUPPRESS
        elif option.setting != "serve" and option.default is not None:   # serve's: None, so --config may set it
            kw["default"] = default_of(option)
        if kw.get("action") == "version":
            from spamnb import __version__

            kw["version"] = f"spamnb {__version__}"
        if "{" in kw.get("help", ""):
            kw["help"] = kw["help"].format_map(_HelpValues(option))
        target = p
        if option.group is not None:
            name, required = option.group
            target = groups.get(name) or groups.setdefault(name, p.add_mutually_exclusive_group(required=required))
        target.add_argument(*option.flags, **kw)


class _HelpValues(dict):
    """The values a help text of the option table names: ``{default}`` (the
    option's, and ``{default_mib}``, ``{default_gib}``), the engine's defaults
    (the cutoffs, ``-j``'s), serve's ``--listen``; any other ``{name}`` is text
    (``{client_addr}``: a milter macro)."""

    def __init__(self, option):
        from spamnb.options import default_of

        default = default_of(option)
        super().__init__(default=default)
        if isinstance(default, int):
            self.update(default_mib=default / 2 ** 20, default_gib=default / 2 ** 30)
        if isinstance(default, list):
            self.update(listen_text=", ".join(default))

    def __missing__(self, key):
        values = _engine_defaults()
        return values[key] if key in values else "{" + key + "}"


@functools.cache
def _engine_defaults():
    from spamnb.model.calibrate import DEFAULT_MAX_UNSURE
    from spamnb.model.defaults import DEFAULT_HAM_CUTOFF, DEFAULT_HAM_LOG_ODDS, DEFAULT_SPAM_CUTOFF
    from spamnb.training.workers import DEFAULT_JOBS

    return {"spam_cutoff": DEFAULT_SPAM_CUTOFF, "ham_cutoff": DEFAULT_HAM_CUTOFF, "ham_log_odds": DEFAULT_HAM_LOG_ODDS,
            "max_unsure_percent": DEFAULT_MAX_UNSURE * 100, "default_jobs": DEFAULT_JOBS}


def model_option(p):
    """``-m/--model`` and ``--settings`` after the command too (SUPPRESS keeps a value given before it)."""
    from spamnb.options import options

    add_options(p, options("model"))


def wait_option(p):
    from spamnb.options import options

    add_options(p, options("wait"))


def probability(text):
    import argparse

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"a probability in [0, 1], not {text}")
    return value


def cutoff_options(p):
    """``--spam-cutoff``/``--ham-cutoff``; the defaults stated are the code's
    (``spamnb.model.defaults``), printed exactly."""
    from spamnb.options import options

    add_options(p, options("cutoffs"))


def jobs(text):
    import argparse

    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of jobs: {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError("the number of jobs must be >= 0 (0: every available core)")
    return n


def pairs_window(text):
    """``--word-pairs W``: 0 or a window from 2 to 8 (an ``argparse`` type)."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        value = -1
    if value not in (0, *range(2, 9)):
        raise argparse.ArgumentTypeError(f"0 or a window from 2 to 8 is needed, not {text!r}")
    return value


def pairs_choice(text):
    """``--word-pairs auto|0|W`` of train and evaluate: "auto" (decided by a
    trial) or :func:`pairs_window`'s value (an ``argparse`` type)."""
    import argparse

    if text == "auto":
        return text
    try:
        return pairs_window(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"auto, 0 or a window from 2 to 8 is needed, not {text!r}") from None


def rate(text):
    """``--target-fpr``: a rate from 0 to below 1 (an ``argparse`` type)."""
    import argparse

    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"a rate from 0 to below 1 is needed, not {text!r}")
    return value


def bounded(kind, low, high=None, above=False):
    """An ``argparse`` type: a number of ``kind`` at least ``low`` (above it
    when ``above``), at most ``high`` when given."""
    def parse(text):
        import argparse

        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not (value > low if above else value >= low) or (high is not None and not value <= high):
            raise argparse.ArgumentTypeError(f"{text!r} is not a number {'above' if above else 'at least'} {low:g}"
                                             + (f" and at most {high:g}".replace("e+0", "e") if high is not None
                                                else ""))
        return value

    return parse


def token_limit(text):
    """``prune --expire-at``: 0 (off) or a limit lifecycle.check_max_tokens takes."""
    import argparse

    from spamnb.model.lifecycle import check_max_tokens

    try:
        value = int(text)
        return value if value == 0 else check_max_tokens(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc) if "limit" in str(exc) else f"not a number: {text!r}") from None


def _type(name):
    """The option table's type ``name`` (spamnb.options): its argparse callable, made when a parser is."""
    return {"int": int, "float": float, "probability": probability, "jobs": jobs, "rate": rate, "pairs": pairs_choice,
            "token_limit": token_limit}.get(name) or {
        "non_negative_float": lambda: bounded(float, 0), "non_negative_int": lambda: bounded(int, 0),
        "positive_float": lambda: bounded(float, 0, 1e9, above=True),
        "positive_int": lambda: bounded(int, 0, 1e9, above=True)}[name]()


def one_line(exc):
    """The one line an error is reported in: a :class:`~spamnb.errors.SpamnbError`'s
    message; an ``OSError``'s file name and reason; else the type and message."""
    if isinstance(exc, SpamnbError):
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

    return exc.exit_code if isinstance(exc, SpamnbError) else EXIT_ERROR


def _show_warning(message, category, filename, lineno, file=None, line=None):
    """An engine warning (e.g. a model journal's damaged tail) as one line on stderr."""
    text = " ".join(str(message).split()) or category.__name__
    try:
        print(f"spamnb: warning: {text}", file=sys.stderr if file is None else file)
    except OSError:   # stderr gone: the warning is lost, the command goes on
        pass


@contextlib.contextmanager
def one_line_warnings():
    """Warnings raised while a command runs are printed as ``spamnb: warning: ...``, one line each."""
    import warnings

    before, warnings.showwarning = warnings.showwarning, _show_warning
    try:
        yield
    finally:
        warnings.showwarning = before

