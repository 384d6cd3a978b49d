"""Every setting of spamnb and its built-in default, read and checked here
(one owner): the settings file of the commands, and ``spamnb serve``'s
options and ``--config`` file.  A setting that cannot be used raises
:class:`spamnb.errors.SettingsError` with a one-line reason.

The settings file: ``$SPAMNB_HOME/settings.toml`` (``~/.spamnb/settings.toml``), or ``--settings PATH``.

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

The server's settings (``ServerSettings``, ``SERVER_DEFAULTS``, ``read_config``,
...) are :mod:`spamnb.serve_settings`'s, given here too and imported from there
when first asked for: this module imports neither the server nor numpy, and a
cold ``spamnb classify`` (which reads it) loads none of serve's
(``classify --sa-headers`` takes the server's required score from here).
"""

import posix   # os's calls without os.py (a cold classify never loads it: spamnb.persistence.store)

from spamnb import errors   # SettingsError: named where raised or caught, made then
from spamnb.mail import lazy_re
from spamnb.options import MILTER_SPAM_ACTIONS, MILTER_TRUSTED_ACTIONS, MILTER_UNSURE_ACTIONS, setting_kinds

__all__ = ["Settings", "SettingsError", "default_settings_path", "load_settings", "imap_settings",
           "DEFAULT_HEADER_NAME", "SERVER_DEFAULTS", "RELOADABLE", "ServerSettings", "read_config", "toml_equivalent",
           "in_networks",
           "MILTER_SPAM_ACTIONS", "MILTER_UNSURE_ACTIONS", "MILTER_TRUSTED_ACTIONS"]

DEFAULT_HEADER_NAME = "X-Spamnb-Status"
_FIELD_NAME = lazy_re.pattern(r"[\x21-\x39\x3b-\x7e]{1,76}\Z")  # RFC 5322 field name, kept short
# the settings file's keys: the commands' options marked setting="file" in the option table
KEYS = {key: float if kind in ("float", "probability") else str for key, kind in setting_kinds("file").items()}


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
    from spamnb.persistence.store import in_home

    return in_home("settings.toml")


def check(key, value):
    """``value`` checked for ``key`` (ints are accepted for cutoffs); raises SettingsError."""
    kind = KEYS.get(key)
    if kind is None:
        raise errors.SettingsError(f"unknown setting {key!r} (known: {', '.join(KEYS)})")
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind):
        raise errors.SettingsError(f"setting {key!r} must be a {'number' if kind is float else 'string'}, not {value!r}")
    if kind is float and not 0.0 <= value <= 1.0:
        raise errors.SettingsError(f"setting {key!r} must be a probability in [0, 1], not {value!r}")
    if key == "header_name" and not _FIELD_NAME.match(value):
        raise errors.SettingsError(f"setting 'header_name' must be a header field name (printable, no colon), "
                            f"not {value!r}")
    if key == "subject_tag" and ("\n" in value or "\r" in value or len(value) > 200):
        raise errors.SettingsError("setting 'subject_tag' must be one line of at most 200 characters")
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
    from spamnb.persistence.store import stat_or_none   # os.path.exists without os.py

    explicit = path is not None
    path = default_settings_path() if path is None else posix.fspath(path)
    values = {}
    if explicit or stat_or_none(path) is not None:
        try:
            with open(path, "rb") as f:
                raw = f.read(1 << 20)
        except OSError as exc:
            raise errors.SettingsError(f"{path}: {exc.strerror or exc}") from None
        data = _flat_toml(raw)
        if data is None:  # not the simple form: the standard library's reader decides
            import tomllib

            try:
                data = tomllib.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
                raise errors.SettingsError(f"{path}: not valid TOML: {exc}") from None
        for key, value in data.items():
            if key in ("imap", "domain", "serve"):   # tables of spamnb imap's (imap_settings), serve's (--config) and
                # its --milter-domains
                continue
            try:
                values[key] = check(key, value)
            except errors.SettingsError as exc:
                raise errors.SettingsError(f"{path}: {exc}") from None
    else:
        path = None
    for key, value in (overrides or {}).items():
        if value is not None:
            values[key] = check(key, value)
    settings = Settings(path, **values)
    if (settings.spam_cutoff is not None and settings.ham_cutoff is not None
            and settings.ham_cutoff > settings.spam_cutoff):
        raise errors.SettingsError(f"ham_cutoff {settings.ham_cutoff!r} is above spam_cutoff {settings.spam_cutoff!r}")
    return settings


# The [imap] table: spamnb imap's account (docs/imap.md).  The password is
# never a setting itself: a file only its owner can read, or a command.
IMAP_KEYS = {"host": str, "port": int, "user": str, "security": str, "cafile": str, "password_file": str,
             "password_command": str, "inbox": str, "spam": str, "unsure": str, "ham": list, "state": str}
IMAP_DEFAULTS = {"security": "tls", "inbox": "INBOX", "spam": "Junk", "ham": ["INBOX"]}


def imap_settings(path=None):
    """The ``[imap]`` table of the settings file, checked, with the defaults; raises SettingsError."""
    path = default_settings_path() if path is None else posix.fspath(path)
    try:
        with open(path, "rb") as f:
            raw = f.read(1 << 20)
    except OSError as exc:
        raise errors.SettingsError(f"{path}: {exc.strerror or exc} (spamnb imap needs an [imap] table there)") from None
    import tomllib

    try:
        table = tomllib.loads(raw.decode("utf-8")).get("imap")
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise errors.SettingsError(f"{path}: not valid TOML: {exc}") from None
    if not isinstance(table, dict):
        raise errors.SettingsError(f"{path}: no [imap] table (host, user, password_file or password_command)")
    values = dict(IMAP_DEFAULTS)
    for key, value in table.items():
        kind = IMAP_KEYS.get(key)
        if kind is None:
            if key == "password":
                raise errors.SettingsError(f"{path}: [imap] takes no password: give password_file (mode 0600) "
                                    f"or password_command")
            raise errors.SettingsError(f"{path}: unknown [imap] setting {key!r} (known: {', '.join(IMAP_KEYS)})")
        if not isinstance(value, kind) or isinstance(value, bool) or (
                kind is list and not all(isinstance(v, str) for v in value)):
            raise errors.SettingsError(f"{path}: [imap] setting {key!r} must be a "
                                f"{ {str: 'string', int: 'number', list: 'list of strings'}[kind] }")
        values[key] = value
    for key in ("host", "user"):
        if not values.get(key):
            raise errors.SettingsError(f"{path}: [imap] needs {key!r}")
    if values["security"] not in ("tls", "starttls", "none"):
        raise errors.SettingsError(f"{path}: [imap] security must be tls, starttls or none")
    if ("password_file" in values) == ("password_command" in values):
        raise errors.SettingsError(f"{path}: [imap] needs one of password_file and password_command")
    if "port" in values and not 0 < values["port"] < 65536:
        raise errors.SettingsError(f"{path}: [imap] port must be from 1 to 65535")
    return values


# spamnb serve's settings live in spamnb.serve_settings; given here too, imported when first asked for
# (the cold path of spamnb classify, which imports this module, never loads them).
_SERVE_NAMES = frozenset(("SERVER_DEFAULTS", "RELOADABLE", "ServerSettings", "read_config", "toml_equivalent",
                          "in_networks"))


def __getattr__(name):
    if name not in _SERVE_NAMES:   # SettingsError: spamnb.errors' (made when first named)
        return errors.reexported(__name__, name, ("SettingsError",))
    from spamnb import serve_settings

    value = getattr(serve_settings, name)
    globals()[name] = value
    return value
