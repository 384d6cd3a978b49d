"""The settings file: ``$SPAMNB_HOME/settings.toml`` (``~/.spamnb/settings.toml``), or ``--settings PATH``.

TOML.  A file of plain ``key = value`` lines (the usual case) is read by a
small reader of its own; any other TOML by the standard library's
:mod:`tomllib`, whose import costs ``spamnb classify`` several milliseconds.
Every key is optional::

    model = "/var/lib/spamnb/model.spamnb"  # the model file (-m/--model)
    spam_cutoff = 0.9999992                 # spam when P(spam) >= this (--spam-cutoff)
    ham_cutoff = 0.01798620996209156        # ham when P(spam) <= this (--ham-cutoff)
    header_name = "X-Spamnb-Status"         # the header classify -p adds (--header-name)
    subject_tag = "[SPAM]"                  # put before the Subject of spam (--subject-tag; "" for none)

A command-line option wins over the file; the file wins over the cutoffs the
model was trained with.  Without either, the model's own cutoffs apply:
``spamnb train`` chooses them for its mail (``spamnb info`` prints them); the
values above are the built-in defaults it falls back on (tests/test_docs.py
checks them against the code).  An unknown key, a value of the wrong type or a
cutoff outside [0, 1] is an error (exit 3), not something silently ignored.
"""

import os

from spamnb.mail import lazy_re

__all__ = ["Settings", "SettingsError", "default_settings_path", "load_settings", "DEFAULT_HEADER_NAME"]

DEFAULT_HEADER_NAME = "X-Spamnb-Status"
_FIELD_NAME = lazy_re.pattern(r"[\x21-\x39\x3b-\x7e]{1,76}\Z")  # RFC 5322 field name, kept short
KEYS = {"model": str, "spam_cutoff": float, "ham_cutoff": float, "header_name": str, "subject_tag": str}


class SettingsError(Exception):
    """A settings file or option that cannot be used."""


class Settings:
    """The values in effect; ``None`` means "not set" (the model's or the built-in default applies)."""

    __slots__ = ("path",) + tuple(KEYS)

    def __init__(self, path=None, **values):
        self.path = path
        for key in KEYS:
            setattr(self, key, values.get(key))

    def items(self):
        return [(key, getattr(self, key)) for key in KEYS]

    @property
    def header(self):
        return self.header_name or DEFAULT_HEADER_NAME


def default_settings_path():
    from spamnb.model.store import spamnb_home

    home = spamnb_home()
    return os.path.join(home, "settings.toml")


def check(key, value):
    """``value`` checked for ``key`` (ints are accepted for cutoffs); raises SettingsError."""
    kind = KEYS.get(key)
    if kind is None:
        raise SettingsError(f"unknown setting {key!r} (known: {', '.join(KEYS)})")
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind):
        raise SettingsError(f"setting {key!r} must be a {'number' if kind is float else 'string'}, not {value!r}")
    if kind is float and not 0.0 <= value <= 1.0:
        raise SettingsError(f"setting {key!r} must be a probability in [0, 1], not {value!r}")
    if key == "header_name" and not _FIELD_NAME.match(value):
        raise SettingsError(f"setting 'header_name' must be a header field name (printable, no colon), "
                            f"not {value!r}")
    if key == "subject_tag" and ("\n" in value or "\r" in value or len(value) > 200):
        raise SettingsError("setting 'subject_tag' must be one line of at most 200 characters")
    return value


# The simple form of a settings file, read without tomllib (whose import
# brings typing, datetime and enum: several ms of every ``spamnb classify``):
# lines of ``key = "string"``, ``key = 'string'`` or ``key = number``, with
# comments and blank lines.  Anything else (escapes, tables, a tab in a
# string, a duplicate key, ...) goes to tomllib; what is read here reads the
# same with tomllib (tests/test_settings.py checks it).
_SIMPLE_LINE = lazy_re.pattern(
    r"[ \t]*(?:([A-Za-z0-9_-]+)[ \t]*=[ \t]*"
    r"(\"[^\"\\\x00-\x1f\x7f]*\"|'[^'\x00-\x1f\x7f]*'|[+-]?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)"
    r"[ \t]*)?(?:#[^\x00-\x08\x0a-\x1f\x7f]*)?\r?\Z")


def _flat_toml(raw):
    """The settings of a file in the simple form, or None when it is not in that form."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    values = {}
    lines = text.split("\n")
    if lines[-1].endswith("\r"):  # a CR must be followed by LF
        return None
    for line in lines:
        match = _SIMPLE_LINE.match(line)
        if match is None:
            return None
        key, value = match.groups()
        if key is None:
            continue
        if key in values:
            return None
        if value[0] in "\"'":
            values[key] = value[1:-1]
        elif "." in value or "e" in value or "E" in value:
            values[key] = float(value)
        else:
            values[key] = int(value)
    return values


def load_settings(path=None, overrides=None):
    """The settings: the file at ``path`` (or the default one, when it exists),
    then ``overrides`` (a dict of the values given on the command line; None
    values are not given).  Raises SettingsError with a one-line reason."""
    explicit = path is not None
    path = default_settings_path() if path is None else os.fspath(path)
    values = {}
    if explicit or os.path.exists(path):
        try:
            with open(path, "rb") as f:
                raw = f.read(1 << 20)
        except OSError as exc:
            raise SettingsError(f"{path}: {exc.strerror or exc}") from None
        data = _flat_toml(raw)
        if data is None:  # not the simple form: the standard library's reader decides
            import tomllib

            try:
                data = tomllib.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
                raise SettingsError(f"{path}: not valid TOML: {exc}") from None
        for key, value in data.items():
            try:
                values[key] = check(key, value)
            except SettingsError as exc:
                raise SettingsError(f"{path}: {exc}") from None
    else:
        path = None
    for key, value in (overrides or {}).items():
        if value is not None:
            values[key] = check(key, value)
    settings = Settings(path, **values)
    if (settings.spam_cutoff is not None and settings.ham_cutoff is not None
            and settings.ham_cutoff > settings.spam_cutoff):
        raise SettingsError(f"ham_cutoff {settings.ham_cutoff!r} is above spam_cutoff {settings.spam_cutoff!r}")
    return settings
