"""The argument parser of the ``spamnb`` command, made from the option table
(:mod:`spamnb.options`): the parser class (a usage error is a
:class:`~spamnb.errors.UsageError`), :func:`add_options` (a table's rows to
argparse, their help's values filled in) and the argparse types the rows
name.  Imported only when a parser is built: the common forms of
``classify``, ``learn`` and ``forget`` are read without it
(``spamnb.cli.main.fast_args``), and argparse costs their cold start."""

from __future__ import annotations

import argparse
import functools
import os
import sys

from spamnb.errors import UsageError

__all__ = ["Parser", "add_options", "probability", "jobs", "pairs_window", "pairs_choice", "rate", "bounded",
           "token_limit"]


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
    return argparse.RawDescriptionHelpFormatter(prog, width=(columns or 80) - 2)


class Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _formatter)
        super().__init__(*args, **kwargs)

    def error(self, message):
        raise UsageError(f"{self.prog}: {message}")


def add_options(p, options, top=False):
    """Add ``options`` (rows of the option table, :mod:`spamnb.options`) to the
    parser ``p``: argparse, ``--help`` and the man page are made from the table.
    ``top``: ``p`` is the ``spamnb`` parser itself; under a command, ``-m`` and
    ``--settings`` default to SUPPRESS (a value given before the command is kept)."""
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
    from spamnb.model import DEFAULT_HAM_CUTOFF, DEFAULT_HAM_LOG_ODDS, DEFAULT_MAX_UNSURE, DEFAULT_SPAM_CUTOFF
    from spamnb.training.workers import DEFAULT_JOBS

    return {"spam_cutoff": DEFAULT_SPAM_CUTOFF, "ham_cutoff": DEFAULT_HAM_CUTOFF, "ham_log_odds": DEFAULT_HAM_LOG_ODDS,
            "max_unsure_percent": DEFAULT_MAX_UNSURE * 100, "default_jobs": DEFAULT_JOBS}


def probability(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"a probability in [0, 1], not {text}")
    return value


def jobs(text):
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of jobs: {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError("the number of jobs must be >= 0 (0: every available core)")
    return n


def pairs_window(text):
    """``--word-pairs W``: 0 or a window from 2 to 8 (an ``argparse`` type)."""
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
    if text == "auto":
        return text
    try:
        return pairs_window(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"auto, 0 or a window from 2 to 8 is needed, not {text!r}") from None


def rate(text):
    """``--target-fpr``: a rate from 0 to below 1 (an ``argparse`` type)."""
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
    from spamnb.model import check_max_tokens

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
