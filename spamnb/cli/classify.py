"""``spamnb classify`` (one message, several, ``--batch``, ``-p``) and
``spamnb tokens``: the cold path of a mail filter, numpy-free for one
message."""

import sys

from spamnb import errors   # its classes named where raised or caught, made then (a classify that succeeds makes none)
from spamnb.cli.common import load_filter, messages_of, read_file
from spamnb.cli.exitcodes import EXIT_OK, VERDICT_EXIT
from spamnb.report.lines import VerdictLines, format_verdict, verdict_json


def _stdin_message():
    """The one message on stdin (``spamnb.mail.checked.read_stdin``); one
    line and exit 3 for a device or a message over the size limit (refused,
    never held whole: ``-p`` passes such a message on unchecked)."""
    from spamnb.mail.checked import read_stdin

    try:
        return read_stdin(sys.stdin.buffer)
    except errors.TooLarge as exc:
        raise errors.CommandError(f"-: the message is {exc}; not classified (classify -p passes it on unchecked)") from None
    except errors.Refused as exc:
        raise errors.CommandError(f"-: {exc}; not read") from None


def cmd_classify(args):
    if args.report and not (args.passthrough and args.sa_headers):
        raise errors.UsageError("spamnb classify: --report goes with -p --sa-headers")
    if args.sa_headers and not args.passthrough:
        raise errors.UsageError("spamnb classify: --sa-headers goes with -p")
    if args.passthrough:
        if args.batch or args.mbox or len(args.files) > 1:
            raise errors.UsageError("spamnb classify: -p/--passthrough takes one message")
        from spamnb.cli.passthrough import passthrough

        return passthrough(args)
    if args.auto_learn and (args.batch or args.mbox):
        raise errors.UsageError("spamnb classify: --auto-learn takes one message (not --batch or --mbox)")
    if args.batch:
        from spamnb.cli.classify_batch import classify_batch

        return classify_batch(args)
    sources = args.files or ["-"]
    if sources == ["-"] and not args.mbox:   # stdin is one message (-M: an mbox): its verdict and exit code
        message = _stdin_message()   # read (or refused) before the model is opened
        spam_filter = load_filter(args, mapped=True)
        verdict = spam_filter.classify(message, evidence=args.json or args.verbose)
        _print_verdict(args, verdict)
        if args.auto_learn:
            sys.stdout.flush()
            from spamnb.cli.passthrough import auto_learn

            auto_learn(args, spam_filter, message, verdict)
        return VERDICT_EXIT[verdict.label]
    import os   # files (not stdin's message: a cold classify loads no os.py)

    if len(sources) == 1 and not args.mbox and not os.path.isdir(sources[0]):
        messages = messages_of(sources[0], pipes=True)
        first = next(messages, None)
        second = next(messages, None)
        spam_filter = load_filter(args, mapped=second is None)   # one message: the model mapped, as for stdin
        if first is not None and second is None:  # one message: a verdict and its exit code
            verdict = spam_filter.classify(first[1], evidence=args.json or args.verbose)   # printed only then
            _print_verdict(args, verdict)
            if args.auto_learn:
                sys.stdout.flush()
                from spamnb.cli.passthrough import auto_learn

                auto_learn(args, spam_filter, first[1], verdict)
            return VERDICT_EXIT[verdict.label]
        if args.auto_learn:
            raise errors.UsageError("spamnb classify: --auto-learn takes one message")
        out = VerdictLines(spam_filter, args.json)
        for name, data in (m for m in (first, second) if m is not None):
            out.verdict(name, data)
        for name, data in messages:
            out.verdict(name, data)
        return EXIT_OK
    spam_filter = load_filter(args)
    out = VerdictLines(spam_filter, args.json)
    for source in sources:
        for name, data in messages_of(source, pipes=True, stdin_mbox=args.mbox):
            out.verdict(name, data)
    return EXIT_OK


def _print_verdict(args, verdict):
    if args.json:
        import json

        print(json.dumps(verdict_json(verdict)))
    else:
        print(format_verdict(verdict))
        if args.verbose:
            if verdict.reason:
                from spamnb.report.lines import reason_text

                print(f"  unsure, not ham: {reason_text(verdict)}")
            for token, weight in verdict.evidence:
                print(f"  {weight:+8.3f}  {token}")


def cmd_tokens(args):
    from spamnb.mail.tokenizer import Tokenizer

    data = sys.stdin.buffer.read() if args.file == "-" else read_file(args.file)
    for token in Tokenizer().tokens(data):
        print(token)
    return EXIT_OK


def add_parser(sub):
    """``spamnb classify``: its options are the option table's (:mod:`spamnb.options`)."""
    from spamnb.cli.parsing import add_options
    from spamnb.options import options

    p = sub.add_parser("classify", help="classify mail (one message on stdin by default)")
    add_options(p, options("classify"))
    p.set_defaults(handler=cmd_classify)


def add_tokens_parser(sub):
    from spamnb.cli.parsing import add_options
    from spamnb.options import options

    p = sub.add_parser("tokens", help="print the tokens of a message")
    add_options(p, options("tokens"))
    p.set_defaults(handler=cmd_tokens)
