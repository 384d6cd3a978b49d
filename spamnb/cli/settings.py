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
    shared = "redis://10.0.0.5:6379/0"      # learn/forget send lessons to the hosts sharing learning (--shared)

A command-line option wins over the file; the file wins over the cutoffs the
model was trained with.  Without either, the model's own cutoffs apply:
``spamnb train`` chooses them for its mail (``spamnb info`` prints them); the
values above are the built-in defaults it falls back on (tests/test_docs.py
checks them against the code).  An unknown key, a value of the wrong type or a
cutoff outside [0, 1] is an error (exit 3), not something silently ignored.
"""

import os

from spamnb.mail import lazy_re

__all__ = ["Settings", "SettingsError", "default_settings_path", "load_settings", "imap_settings",
           "imap_password", "DEFAULT_HEADER_NAME"]

DEFAULT_HEADER_NAME = "X-Spamnb-Status"
_FIELD_NAME = lazy_re.pattern(r"[\x21-\x39\x3b-\x7e]{1,76}\Z")  # RFC 5322 field name, kept short
KEYS = {"model": str, "spam_cutoff": float, "ham_cutoff": float, "header_name": str, "subject_tag": str, "shared": str}


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
            if key == "imap":      # the [imap] table: spamnb imap's (imap_settings)
                continue
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


# The [imap] table: spamnb imap's account (docs/imap.md).  The password is
# never a setting itself: a file only its owner can read, or a command.
IMAP_KEYS = {"host": str, "port": int, "user": str, "security": str, "cafile": str, "password_file": str,
             "password_command": str, "inbox": str, "spam": str, "unsure": str, "ham": list, "state": str}
IMAP_DEFAULTS = {"security": "tls", "inbox": "INBOX", "spam": "Junk", "ham": ["INBOX"]}


def imap_settings(path=None):
    """The ``[imap]`` table of the settings file, checked, with the defaults; raises SettingsError."""
    path = default_settings_path() if path is None else os.fspath(path)
    try:
        with open(path, "rb") as f:
            raw = f.read(1 << 20)
    except OSError as exc:
        raise SettingsError(f"{path}: {exc.strerror or exc} (spamnb imap needs an [imap] table there)") from None
    import tomllib

    try:
        table = tomllib.loads(raw.decode("utf-8")).get("imap")
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise SettingsError(f"{path}: not valid TOML: {exc}") from None
    if not isinstance(table, dict):
        raise SettingsError(f"{path}: no [imap] table (host, user, password_file or password_command)")
    values = dict(IMAP_DEFAULTS)
    for key, value in table.items():
        kind = IMAP_KEYS.get(key)
        if kind is None:
            if key == "password":
                raise SettingsError(f"{path}: [imap] takes no password: give password_file (mode 0600) "
                                    f"or password_command")
            raise SettingsError(f"{path}: unknown [imap] setting {key!r} (known: {', '.join(IMAP_KEYS)})")
        if not isinstance(value, kind) or isinstance(value, bool) or (
                kind is list and not all(isinstance(v, str) for v in value)):
            raise SettingsError(f"{path}: [imap] setting {key!r} must be a "
                                f"{ {str: 'string', int: 'number', list: 'list of strings'}[kind] }")
        values[key] = value
    for key in ("host", "user"):
        if not values.get(key):
            raise SettingsError(f"{path}: [imap] needs {key!r}")
    if values["security"] not in ("tls", "starttls", "none"):
        raise SettingsError(f"{path}: [imap] security must be tls, starttls or none")
    if ("password_file" in values) == ("password_command" in values):
        raise SettingsError(f"{path}: [imap] needs one of password_file and password_command")
    if "port" in values and not 0 < values["port"] < 65536:
        raise SettingsError(f"{path}: [imap] port must be from 1 to 65535")
    return values


def imap_password(values):
    """The password the ``[imap]`` settings point to; raises SettingsError (never saying the password)."""
    if "password_file" in values:
        path = os.path.expanduser(values["password_file"])
        try:
            with open(path, "rb") as f:
                mode = os.fstat(f.fileno()).st_mode
                if mode & 0o077:
                    raise SettingsError(f"{path}: the password file is readable by others "
                                        f"(mode {mode & 0o777:o}): chmod 600 it")
                raw = f.read(4096)
        except OSError as exc:
            raise SettingsError(f"{path}: {exc.strerror or exc}") from None
    else:
        import shlex
        import subprocess

        command = values["password_command"]
        try:
            proc = subprocess.run(shlex.split(command), capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
        except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
            raise SettingsError(f"password_command failed: {getattr(exc, 'strerror', None) or exc}") from None
        if proc.returncode != 0:
            raise SettingsError(f"password_command exited {proc.returncode}")
        raw = proc.stdout
    password = raw.decode("utf-8", "replace").split("\n")[0].rstrip("\r")
    if not password:
        raise SettingsError("the password is empty")
    return password
