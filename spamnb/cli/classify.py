"""``spamnb classify`` (one message, several, ``--batch``, ``-p``) and
``spamnb tokens``: the cold path of a mail filter, numpy-free for one
message."""

import sys

from spamnb import errors   # its classes named where raised or caught, made then (a classify that succeeds makes none)
from spamnb.cli.common import load_filter, messages_of, model_path, read_file, settings_of
from spamnb.cli.exitcodes import EXIT_ERROR, EXIT_OK, VERDICT_EXIT
from spamnb.report.lines import VerdictLines, format_verdict, verdict_json


def _passthrough(args):
    """``classify -p``: the message on stdout with the status header; exit 0
    whatever the verdict.  On any error the message goes out with the status
    header saying it is unchecked (exit 3)."""
    from spamnb.mail.status import passthrough_pieces

    name = args.files[0] if args.files else "-"
    if name == "-":
        from spamnb.mail.checked import read_stdin

        try:
            message = read_stdin(sys.stdin.buffer)
        except errors.TooLarge as exc:   # never held whole: passed on untouched, as spamc passes it
            return _pass_unchecked(exc.head, str(exc))
        except errors.Refused as exc:
            raise errors.CommandError(f"-: {exc}; not read") from None
    else:
        message = read_file(name)
    settings = None
    try:
        settings = settings_of(args)
        spam_filter = load_filter(args, settings, mapped=True)
        verdict = spam_filter.classify(message)
        fields = _sa_fields(args, spam_filter, verdict) if args.sa_headers else None
        from spamnb.mail.headers import SPAM_FIELDS

        pieces = passthrough_pieces(message, verdict, settings.header, settings.subject_tag, fields, SPAM_FIELDS)
    except BaseException as exc:
        for piece in _unchecked_pieces(message, settings, exc):   # never lose the mail: passed on unchecked
            sys.stdout.buffer.write(piece)
        sys.stdout.flush()
        raise
    for piece in pieces:
        sys.stdout.buffer.write(piece)
    if args.auto_learn:
        sys.stdout.flush()      # the mail is out before the model is touched
        _auto_learn(args, spam_filter, message, verdict, settings)
    return EXIT_OK


def _unchecked_pieces(message, settings, exc):
    """``classify -p`` when the message could not be scored (``exc``): the
    message with the status header saying so (``Unchecked,
    reason=model-unreadable``, or ``reason=error``; any status header of that
    name it came with removed), or untouched when even that fails."""
    try:
        from spamnb.mail.status import passthrough_pieces

        reason = b"model-unreadable" if isinstance(exc, errors.ModelError) else b"error"
        name = (settings.header if settings is not None else "X-Spamnb-Status").encode("ascii")
        return passthrough_pieces(message, None, fields=[name + b": Unchecked, reason=" + reason],
                                  remove={name.lower()})
    except Exception:   # noqa: BLE001 -- the mail goes on untouched
        return [message]


def _auto_learn(args, spam_filter, message, verdict, settings=None):
    """``--auto-learn`` (``spamnb.model.autolearn``): learn a verdict beyond its cutoff's margin.
    A failure is one line on stderr; the verdict and its exit code stand."""
    from spamnb.model import learn_verdict
    from spamnb.model import logit

    try:
        settings = settings_of(args) if settings is None else settings
        outcome = learn_verdict(spam_filter.source_, message, verdict.log_odds, verdict.label,
                                logit(spam_filter.spam_cutoff), logit(spam_filter.ham_cutoff), wait=args.wait,
                                header_name=settings.header, subject_tag=settings.subject_tag)
    except Exception as exc:    # noqa: BLE001 -- the mail was classified; learning it is a bonus
        print(f"spamnb: auto-learn: {exc}", file=sys.stderr)
        return None
    if args.verbose:
        print(f"auto-learn: {outcome}", file=sys.stderr)
    return outcome


def _sa_fields(args, spam_filter, verdict):
    """``--sa-headers``: the X-Spam-* fields ``spamnb serve`` adds for PROCESS
    (score on the same scale: ``spamnb.report.scale.ScoreMap``)."""
    from spamnb.report.headers import spam_fields
    from spamnb.report.scale import ScoreMap
    from spamnb.settings import SERVER_DEFAULTS

    score_map = ScoreMap.from_cutoffs(spam_filter.cutoffs, SERVER_DEFAULTS["required_score"])
    score = score_map.score(verdict.log_odds, verdict.label)
    return spam_fields(verdict, score, score_map.required, score_map.points, args.report)


def _pass_unchecked(head, reason):
    """``classify -p`` of a message over the size limit: ``head`` (what was read)
    and the rest of stdin copied to stdout untouched, a chunk at a time; one
    line on stderr; exit 0 (the mail goes on, unchecked)."""
    out = sys.stdout.buffer
    out.write(head)
    del head
    while chunk := sys.stdin.buffer.read(1 << 20):   # a regular file from where it stands, a pipe to its end
        out.write(chunk)
    out.flush()
    print(f"spamnb: the message is {reason}: passed on unchecked", file=sys.stderr)
    return EXIT_OK


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
        return _passthrough(args)
    if args.auto_learn and (args.batch or args.mbox):
        raise errors.UsageError("spamnb classify: --auto-learn takes one message (not --batch or --mbox)")
    if args.batch:
        return _classify_batch(args)
    sources = args.files or ["-"]
    if sources == ["-"] and not args.mbox:   # stdin is one message (-M: an mbox): its verdict and exit code
        message = _stdin_message()   # read (or refused) before the model is opened
        spam_filter = load_filter(args, mapped=True)
        verdict = spam_filter.classify(message, evidence=args.json or args.verbose)
        _print_verdict(args, verdict)
        if args.auto_learn:
            sys.stdout.flush()
            _auto_learn(args, spam_filter, message, verdict)
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
                _auto_learn(args, spam_filter, first[1], verdict)
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


def _batch_paths(args, idle=None):
    """The paths of ``--batch``: its arguments, or the lines of stdin, each
    given as soon as it is read; ``idle`` (when not None) is given whenever
    no whole line is ready, so that a writer who waits for the answers gets
    them."""
    if args.files:
        yield from args.files
        return
    import os
    import select

    fd = sys.stdin.buffer.fileno()
    rest = b""
    while True:
        if idle is not None and not select.select([fd], [], [], 0)[0]:
            yield idle   # nothing more to read now: the writer may be waiting for the answers
        chunk = os.read(fd, 1 << 16)   # what is there, up to 64 KiB: waits only when there is nothing
        if not chunk:
            lines, rest = [rest], b""
        else:
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop()
            if len(rest) > 1 << 16:   # no path is that long: answered (an error line), not held
                lines.append(rest)
                rest = b""
        for line in lines:
            path = os.fsdecode(line.rstrip(b"\r"))
            if path.strip():
                yield path
        if not chunk:
            return


def _classify_batch(args):
    """``--batch``: each path (arguments, or lines of stdin) answered at once;
    a path that cannot be read gets an error line and the batch goes on (exit
    3 at the end when any did)."""
    if args.jobs != 1:  # partitions on worker processes, the same lines in the same order (docs/scale.md)
        from spamnb.batch import classify as batch
        from spamnb.training import workers

        args.jobs = workers.DEFAULT_JOBS if args.jobs is None else args.jobs
        workers.warm_up(args.jobs, batch.PRELOAD)   # the workers' forkserver starts while the model loads
        settings = settings_of(args)
        path = model_path(args, settings)
        try:
            identity = batch.file_identity(path)   # before the load: the workers start with this model
        except OSError:
            identity = None   # load_filter names the error
        spam_filter = load_filter(args, settings)
        try:
            n_errors = batch.classify_batch(path, _batch_paths(args, batch.IDLE), spam_filter.cutoffs, args.jobs,
                                            args.partition_size, args.json, loaded=(identity, spam_filter))
        except ValueError as exc:
            raise errors.UsageError(f"spamnb classify: {exc}") from None
        return EXIT_ERROR if n_errors else EXIT_OK
    out = VerdictLines(load_filter(args), args.json)
    for path in _batch_paths(args):
        try:
            for name, data in messages_of(path):
                out.verdict(name, data)
        except (errors.CommandError, OSError) as exc:
            from spamnb.mail.reader import display_name

            reason = str(exc) if isinstance(exc, errors.CommandError) else (exc.strerror or str(exc))
            out.error(path, reason.removeprefix(f"{display_name(path)}: "))
    return EXIT_ERROR if out.errors else EXIT_OK


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
