"""The ``spamnb`` command: a thin shell over :class:`spamnb.SpamFilter`.

Exit codes: :mod:`spamnb.cli.exitcodes` (one set for every command; also in the
README and ``spamnb --help``).  ``classify`` of one message follows
bogofilter's convention (0 spam, 1 ham, 2 unsure); with ``-p/--passthrough``
it exits 0 whatever the verdict (a mail filter that exits non-zero is a
failed filter to procmail and maildrop), and with several messages it exits
0 once every message got a verdict.  Every error is one line on stderr,
never a traceback (``SPAMNB_DEBUG=1`` shows it).  With ``-p`` the message is
written to stdout even when scoring fails (exit 3), so mail is never lost.

One module a command group: ``train``, ``classify`` (and ``tokens``),
``learn`` (and ``forget``), ``models`` (``info``, ``dump``, ``load``,
``merge``, ``prune``), ``evaluate``, ``serve``; ``common`` holds what they
share.  Nothing below the command line imports it.
"""

from __future__ import annotations

import os
import sys

from spamnb.cli.common import Parser, UsageError, one_line, one_line_warnings
from spamnb.cli.exitcodes import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE

COMMANDS = ("train", "classify", "learn", "forget", "info", "tokens", "evaluate", "dump", "load", "merge",
            "prune", "serve", "imap")


def _epilog():
    from spamnb.cli.exitcodes import TABLE

    codes = "\n".join(f"  {code:>3}  {text}" for code, text in TABLE)
    return (f"exit codes:\n{codes}\n\n"
            "environment:\n"
            "  SPAMNB_HOME   folder of the model (model.spamnb) and of the settings file\n"
            "                (settings.toml); default ~/.spamnb\n"
            "  SPAMNB_DEBUG  set: errors show their traceback\n\n"
            "Options -m and --settings go before or after the command.")


def build_parser(command=None, full=False):
    """The argument parser; with ``command``, only that subcommand's parser is
    built (the rest cost start-up time that ``spamnb classify`` cannot spare).
    ``full`` adds evaluate's options too (the man page)."""
    parser = Parser(prog="spamnb", description="A Bayesian e-mail spam filter.", epilog=_epilog())
    from spamnb import __version__

    parser.add_argument("--version", action="version", version=f"spamnb {__version__}")
    parser.add_argument("-m", "--model", metavar="PATH",
                        help="model file (default: $SPAMNB_HOME/model.spamnb or ~/.spamnb/model.spamnb)")
    parser.add_argument("--settings", metavar="PATH",
                        help="settings file (default: $SPAMNB_HOME/settings.toml, when it exists)")
    parser.add_argument("--man", action="store_true", help="print the manual page (roff) and exit")
    parser.add_argument("--completion", choices=("bash",), help="print a shell completion script and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)

    def wanted(name):
        return command is None or command == name

    if wanted("train"):
        from spamnb.cli import train

        train.add_parser(sub)
    if wanted("classify"):
        from spamnb.cli import classify

        classify.add_parser(sub)
    for name, text in (("learn", "add messages to the model (train on error)"),
                       ("forget", "remove messages learned before (exact undo)")):
        if wanted(name):
            from spamnb.cli import learn

            learn.add_parser(sub, name, learn.cmd_learn if name == "learn" else learn.cmd_forget, text)
    if wanted("info"):
        from spamnb.cli import models

        models.add_info_parser(sub)
    if wanted("tokens"):
        from spamnb.cli import classify

        classify.add_tokens_parser(sub)
    if wanted("evaluate"):
        from spamnb.cli import evaluate

        evaluate.add_parser(sub, full=command == "evaluate" or full)
    if command is None or command in ("dump", "load", "merge", "prune"):
        from spamnb.cli import models

        models.register(sub, wanted)
    if wanted("serve"):
        from spamnb.cli import serve

        serve.add_parser(sub)
    if wanted("imap"):
        from spamnb.cli import imap

        imap.add_parser(sub)
    return parser


_VALUE_OPTIONS = ("-m", "--model", "--settings", "--completion")


def _command_of(argv):
    """The command word of ``argv`` (global options may come before it)."""
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in _VALUE_OPTIONS:
            skip = True
        elif not arg.startswith("-"):
            return arg if arg in COMMANDS else None
    return None


def main(argv=None):
    """Run the command line; returns the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    with one_line_warnings():
        return _run(argv)


def _run(argv):
    try:
        command = _command_of(argv)
        args = build_parser(command).parse_args(argv)
        if args.man or args.completion:
            from spamnb.cli import manpage

            parser = build_parser(full=True)
            sys.stdout.write(manpage.roff(parser) if args.man else manpage.bash_completion(parser))
            return EXIT_OK
        if getattr(args, "handler", None) is None:
            raise UsageError("spamnb: give a command (train, classify, learn, forget, info, tokens, evaluate); "
                             "see spamnb --help")
        return args.handler(args)
    except UsageError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("spamnb: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_ERROR
    except SystemExit:
        raise
    except BaseException as exc:  # one line, never a traceback
        if os.environ.get("SPAMNB_DEBUG"):
            raise
        print(f"spamnb: {one_line(exc)}", file=sys.stderr)
        return getattr(exc, "exit_code", EXIT_ERROR)
