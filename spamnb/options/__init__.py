"""The one table of spamnb's options: every option of every command (and the
global ones, and those several commands share: ``-m``, ``--settings``,
``--wait``, the cutoffs), once: its flags, default, help and what it is
besides an option.  Made from it:

- argparse, ``--help`` and the man page (``spamnb.cli.parsing.add_options``);
- the fast reading of a mail filter's common command lines
  (``spamnb.cli.main.fast_args``: :func:`fast_flags`, :func:`fast_defaults`);
- the settings file's keys (``setting="file"``: ``spamnb.settings.KEYS``) and
  ``spamnb serve``'s settings (``setting="serve"``: ``SERVER_DEFAULTS``, the
  keys of the TOML ``[serve]`` table of ``--config``, ``RELOADABLE``).

tests/test_options.py checks that ``--help``, the man page and the settings
keys agree with it.  Importing this package imports nothing (the cold path of
``spamnb classify`` reads it); it holds the table's machinery and the rows of
``classify``, ``learn``, ``forget`` and those they share, and
:mod:`spamnb.options.commands` the other commands' rows, read only when one
of them is asked for; a command's options are made the first time they are
asked for.  A default that is the engine's (``--wait``'s, the
partition size) is a :class:`Ref` to it, read when needed.
"""

__all__ = ["Ref", "Option", "options", "default_of", "fast_flags", "fast_defaults", "kind_of", "setting_kinds",
           "serve_defaults", "reloadable", "MILTER_SPAM_ACTIONS", "MILTER_UNSURE_ACTIONS", "MILTER_TRUSTED_ACTIONS"]

# what the milter may do with spam, with unsure mail, with trusted mail (the options' choices, their
# checks in spamnb.settings and the per-domain tables' in spamnb.server.policy)
MILTER_SPAM_ACTIONS = ("tag", "reject", "quarantine")
MILTER_UNSURE_ACTIONS = ("accept", "tag", "tempfail")
MILTER_TRUSTED_ACTIONS = ("accept", "check")


class Ref:
    """A default that lives in another module (``module``'s ``name``), read when asked for."""

    __slots__ = ("module", "name")

    def __init__(self, module, name):
        self.module, self.name = module, name

    def value(self):
        return getattr(__import__(self.module, fromlist=[self.name]), self.name)


class Option:
    """One option.  ``flags``: its option strings (a positional: its name);
    ``dest``: its attribute (from the first long flag, as argparse makes it);
    ``default``: its value when not given (serve's: the built-in default,
    the parser itself gives None so that the ``--config`` file can set it);
    ``setting``: ``"file"`` (a key of the settings file), ``"serve"`` (a key of
    serve's settings), or None; ``fast``: read by the fast parser of the
    common forms; ``slow``: left out of the fast reading's namespace (a
    ``--batch`` option); ``reload``: serve re-reads it on SIGHUP; ``group``:
    the mutually exclusive group it is in (``(name, required)``); ``kw``:
    the rest of argparse's ``add_argument`` arguments (``type`` by name:
    ``int``, ``float``, ``probability``, ``rate``, ``jobs``, ``pairs``, ... as
    ``spamnb.cli.common`` defines them; ``choices`` may be a :class:`Ref`)."""

    __slots__ = ("flags", "dest", "default", "setting", "fast", "slow", "reload", "group", "kw")

    def __init__(self, *flags, dest=None, default=None, setting=None, fast=False, slow=False, reload=False,
                 group=None, **kw):
        self.flags = flags
        if dest is None:
            long = [f for f in flags if f.startswith("--")]
            dest = (long[0] if long else flags[0]).lstrip("-").replace("-", "_")
        self.dest, self.default, self.setting = dest, default, setting
        self.fast, self.slow, self.reload, self.group, self.kw = fast, slow, reload, group, kw

    def __repr__(self):
        return f"Option({'/'.join(self.flags)})"


def default_of(option):
    """The option's default, a :class:`Ref` read."""
    value = option.default
    return value.value() if isinstance(value, Ref) else value


_MADE = {}


def options(command):
    """The options of ``command`` (``"global"`` for the ones before it,
    ``"imap scan"``; the shared ones by name: ``"model"``, ``"wait"``,
    ``"cutoffs"``, ``"headers"``, ``"shared"``, ``"jobs"``, and the settings
    file's keys, ``"file settings"``), in their ``--help`` order."""
    made = _MADE.get(command)
    if made is None:
        rows = _TABLE.get(command)
        if rows is None:    # the other commands' rows: a module of their own, read when asked for
            from spamnb.options import commands

            rows = commands.ROWS[command]
        made = _MADE[command] = tuple(rows())
    return made


# ----------------------------------------------------------------------------
# the options several commands share

def _model():
    """``-m``/``--settings`` after a command (before it: the global ones)."""
    return [
        Option("-m", "--model", metavar="PATH", setting="file",
               help="model file (default: $SPAMNB_HOME/model.spamnb or ~/.spamnb/model.spamnb)"),
        Option("--settings", metavar="PATH",
               help="settings file (default: $SPAMNB_HOME/settings.toml, when it exists)"),
    ]


def _global():
    model, settings = options("model")
    return [
        Option("--version", action="version", slow=True),
        model,
        settings,
        Option("--man", action="store_true", default=False, help="print the manual page (roff) and exit"),
        Option("--completion", choices=("bash",), help="print a shell completion script and exit"),
    ]


def _wait():
    return [Option("--wait", type="float", default=Ref("spamnb.persistence.store", "DEFAULT_WAIT"), metavar="SECONDS",
                   help="how long to wait for another writer's lock on the model (default {default:g})")]


def _cutoffs():
    return [
        Option("--spam-cutoff", type="probability", metavar="P", setting="file",
               help="spam when P(spam) >= P (default: the model's, which spamnb train chooses for its mail "
                    "and spamnb info prints; {spam_cutoff!r} when it has too little mail to choose)"),
        Option("--ham-cutoff", type="probability", metavar="P", setting="file",
               help="ham when P(spam) <= P (default: the model's: {ham_cutoff!r}, log-odds "
                    "{ham_log_odds:g}, or higher when spamnb train finds more than "
                    "{max_unsure_percent:g} %% of its mail between the cutoffs)"),
    ]


def _headers():
    return [
        Option("--header-name", metavar="NAME", setting="file",
               help="the status header of -p (default: X-Spamnb-Status)"),
        Option("--subject-tag", metavar="TAG", setting="file",
               help="with -p: put TAG before the Subject of spam (once)"),
    ]


def _shared():
    return [Option("--shared", metavar="redis://HOST:PORT/DB", setting="file",
                   help="send the messages as lessons to the hosts sharing learning through this Redis "
                        "(spamnb serve --shared learns them); the local model changes only through its server")]


def _file_settings():
    """The settings file's keys: the rows above marked ``setting="file"``."""
    return [option for group in ("model", "cutoffs", "headers", "shared") for option in options(group)
            if option.setting == "file"]


def _jobs():
    """``-j``/``--partition-size`` of ``classify --batch`` (train's own are in spamnb.cli.train)."""
    return [
        Option("-j", "--jobs", type="jobs", metavar="N", slow=True,
               help="worker processes of --batch (default {default_jobs}: every core available; "
                    "1: this process; see docs/scale.md)"),
        Option("--partition-size", type="int", default=Ref("spamnb.training.planning", "DEFAULT_PARTITION_SIZE"),
               metavar="N", slow=True, help="messages per partition with -j (default {default})"),
    ]


# ----------------------------------------------------------------------------
# classify, learn, forget: the cold path

def _classify():
    wait = Option("--wait", type="float", default=Ref("spamnb.persistence.store", "DEFAULT_WAIT"), metavar="SECONDS",
                  help="with --auto-learn: how long to wait for another writer's lock on the model "
                       "(default {default:g})")
    return [
        Option("files", nargs="*", metavar="FILE", slow=True,
               help="message files, mboxes, folders or - for stdin (one message; an mbox with -M); several "
                    "messages: one line each"),
        Option("--batch", action="store_true", default=False,
               help="paths (arguments, or lines of stdin answered as they arrive): one line per message; "
                    "an unreadable path, a device, a FIFO, a file over 64 MiB that is not an mbox gets an "
                    "error line (unread) and the batch goes on; names are escaped (a tab: \\t)"),
        Option("-M", "--mbox", action="store_true", default=False, fast=True,
               help="stdin is an mbox (without it stdin is one message, whatever its first line); one "
                    "line per message, even for a single message"),
        Option("-p", "--passthrough", action="store_true", default=False, fast=True,
               help="write the message to stdout with the status header; exit 0 whatever the verdict"),
        *options("cutoffs"),
        *options("headers"),
        Option("--sa-headers", action="store_true", default=False,
               help="with -p: SpamAssassin's fields instead of the status header: X-Spam-Flag (spam), "
                    "X-Spam-Status, X-Spam-Score, X-Spam-Level, X-Spam-Checker-Version, as spamnb serve "
                    "adds them (X-Spam-* fields already there are removed)"),
        Option("--report", action="store_true", default=False, help="with -p --sa-headers: add X-Spam-Report too"),
        Option("--json", action="store_true", default=False, help="JSON output"),
        Option("-v", "--verbose", action="store_true", default=False, help="also list the strongest evidence"),
        Option("--auto-learn", action="store_true", default=False,
               help="learn the verdict of one message when it is at least 2 log-odds beyond its cutoff "
                    "(never unsure mail; through the ledger, so a later learn, move or TELL relabels it; "
                    "at most 120 a model and hour)"),
        wait,
        *options("model"),
        *options("jobs"),
    ]


_FILES_LEARNED = ("message files, mboxes, folders, Maildirs or - (stdin, one message, the default; an "
                  "mbox with -M); "
                  "with --ham, a folder's spam and bulk sub-folders (.Junk, .Spam.2023, Bulk) are left out; "
                  "devices, FIFOs, non-mail and files over 64 MiB (not mboxes) are skipped, said on stderr")


def _learning(texts, required):
    group = ("label", required)
    return [
        Option("--spam", dest="label", action="store_const", const="spam", fast=True, group=group, help=texts[0]),
        Option("--ham", dest="label", action="store_const", const="ham", fast=True, group=group, help=texts[1]),
        Option("files", nargs="*", metavar="FILE", slow=True, help=_FILES_LEARNED),
        Option("-M", "--mbox", action="store_true", default=False, fast=True,
               help="stdin is an mbox (without it stdin is one message, whatever its first line)"),
        Option("--follow-links", action="store_true", default=False,
               help="read links to files outside the folders given (skipped by default)"),
        Option("-q", "--quiet", action="store_true", default=False, fast=True, help="no progress and no summary"),
        *options("shared"),
        *options("wait"),
        *options("model"),
    ]


def _learn():
    return _learning(("learn the messages as spam (a message learned as ham before moves to spam)",
                      "learn the messages as ham (a message learned as spam before moves to ham)"), True)


def _forget():
    return _learning(("the messages were learned as spam (needed only for messages learned "
                      "before the ledger; the ledger knows the others)",
                      "the messages were learned as ham (as --spam)"), False)


def fast_flags(command):
    """``{flag: (dest, value)}`` of the options the fast parser reads for ``command``."""
    flags = {}
    for option in options(command):
        if option.fast:
            value = option.kw["const"] if option.kw.get("action") == "store_const" else True
            for flag in option.flags:
                flags[flag] = (option.dest, value, option.group is not None)
    return flags


def fast_defaults(command):
    """``{dest: default}`` of ``command``'s options as the parser gives them when
    absent (its ``--batch`` options, its positionals and ``-m``/``--settings``,
    which the global reading gives, apart)."""
    shared = options("model") if command != "global" else ()
    return {option.dest: default_of(option) for option in options(command)
            if not option.slow and option not in shared}


def serve_defaults():
    """``{key: default}`` of serve's settings (``spamnb.settings.SERVER_DEFAULTS``)."""
    return {option.dest: option.default for option in options("serve") if option.setting == "serve"}


def reloadable():
    """The keys of serve's settings a SIGHUP re-reads."""
    return tuple(option.dest for option in options("serve") if option.reload)


def kind_of(option):
    """What a settings file gives for ``option``: ``"str"``, ``"int"``,
    ``"float"``, ``"probability"``, ``"bool"``, ``"list"`` (of strings) or
    ``"nets"`` (networks: a string, comma-separated, or a list of strings)."""
    action = option.kw.get("action")
    if action == "append":
        return "list"
    if option.kw.get("metavar") == "NETS":
        return "nets"
    if action in ("store_const", "store_true") and option.kw.get("const", True) is True:
        return "bool"
    return option.kw.get("type", "str")


def setting_kinds(scope):
    """``{key: kind}`` of the settings of ``scope``: ``"file"`` (the settings
    file's keys, from the commands' options) or ``"serve"``."""
    rows = options("file settings" if scope == "file" else "serve")
    return {option.dest: kind_of(option) for option in rows if option.setting == scope}


_TABLE = {"global": _global, "model": _model, "wait": _wait, "cutoffs": _cutoffs, "headers": _headers,
          "shared": _shared, "file settings": _file_settings, "jobs": _jobs, "classify": _classify, "learn": _learn,
          "forget": _forget}
