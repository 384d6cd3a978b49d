"""``spamnb classify -p`` (procmail's pipe, a delivery filter): the message passed on with its status
header, whatever the verdict, never lost (unchecked on any error); and ``--auto-learn``'s learn of a
verdict.  Out of :mod:`spamnb.cli.classify`: a classify of the one message on stdin without ``-p``
does not load this code."""

import sys

from spamnb import errors   # its classes named where raised or caught, made then (a classify that succeeds makes none)
from spamnb.cli.common import load_filter, read_file, settings_of
from spamnb.cli.exitcodes import EXIT_OK

__all__ = ["passthrough", "auto_learn"]


def passthrough(args):
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
        auto_learn(args, spam_filter, message, verdict, settings)
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


def auto_learn(args, spam_filter, message, verdict, settings=None):
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
