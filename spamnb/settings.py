"""The settings file: ``$SPAMNB_HOME/settings.toml`` (``~/.spamnb/settings.toml``), or ``--settings PATH``.

TOML, read with the standard library's :mod:`tomllib` (imported only when a
settings file exists: ``spamnb classify`` starts as fast without one).  Every
key is optional::

    model = "/var/lib/spamnb/model.spamnb"  # the model file (-m/--model)
    spam_cutoff = 0.9999992                 # spam when P(spam) >= this (--spam-cutoff)
    ham_cutoff = 0.5                        # ham when P(spam) <= this (--ham-cutoff)
    header_name = "X-Spamnb-Status"         # the header classify -p adds (--header-name)
    subject_tag = "[SPAM]"                  # put before the Subject of spam (--subject-tag; "" for none)

A command-line option wins over the file; the file wins over the cutoffs the
model was trained with.  An unknown key, a value of the wrong type or a
cutoff outside [0, 1] is an error (exit 3), not something silently ignored.
"""

import os
import re

__all__ = ["Settings", "SettingsError", "default_settings_path", "load_settings", "DEFAULT_HEADER_NAME"]

DEFAULT_HEADER_NAME = "X-Spamnb-Status"
_FIELD_NAME = re.compile(r"[\x21-\x39\x3b-\x7e]{1,76}\Z")  # RFC 5322 field name, kept short
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
    home = os.environ.get("SPAMNB_HOME") or os.path.join(os.path.expanduser("~"), ".spamnb")
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


def load_settings(path=None, overrides=None):
    """The settings: the file at ``path`` (or the default one, when it exists),
    then ``overrides`` (a dict of the values given on the command line; None
    values are not given).  Raises SettingsError with a one-line reason."""
    explicit = path is not None
    path = default_settings_path() if path is None else os.fspath(path)
    values = {}
    if explicit or os.path.exists(path):
        import tomllib

        try:
            with open(path, "rb") as f:
                data = tomllib.load(f)
        except OSError as exc:
            raise SettingsError(f"{path}: {exc.strerror or exc}") from None
        except tomllib.TOMLDecodeError as exc:
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
