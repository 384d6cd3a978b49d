"""``spamnb learn`` and ``spamnb forget``: through the ledger of learned
messages, under the model's lock."""

import _stat as stat   # the S_IS* tests and S_IMODE, which stat.py re-exports: its module not run (0.2 M instructions)
import sys

from spamnb import errors   # its classes named where raised or caught, made then (a learn that succeeds makes none)
from spamnb.cli.common import messages_of, model_path, settings_of
from spamnb.cli.exitcodes import EXIT_OK


def _is_file(path):
    """``os.path.isfile(path)``, without os.py (a cold learn or forget never loads it)."""
    from spamnb.model import stat_or_none

    st = stat_or_none(path)
    return st is not None and stat.S_ISREG(st.st_mode)


def _update_model(args, forget):
    """learn/forget through the ledger of learned messages (spamnb.estimator.ledger):
    learning a known message again is a no-op, with the other label a move;
    forget takes the label from the ledger.  The changes are appended to the
    model's journal (spamnb.persistence.journal), not written into the whole model."""
    from spamnb.model import SpamFilter, Tally, learning_session

    settings = settings_of(args)
    markup = {"header_name": settings.header, "subject_tag": settings.subject_tag}
    path = model_path(args, settings)
    is_spam = None if args.label is None else args.label == "spam"
    if is_spam is None and not forget:
        raise errors.UsageError(f"spamnb {args.command}: give --spam or --ham")
    if settings.shared:   # the messages sent as lessons (its own module: a learn into a model file does without it)
        from spamnb.cli.lessons import send_lessons

        return send_lessons(args, settings, path, is_spam, forget)
    if forget and not _is_file(path):
        SpamFilter.load(path)  # no model: say so before creating a lock beside it
    from spamnb.mail.checked import display_name, looks_like_mail   # not the reader of folders: stdin's one message

    isatty = getattr(sys.stderr, "isatty", None)
    wrap = None   # no progress line to draw (nor its module to import, nor a function made for it)
    if not (args.quiet or isatty is None or not isatty()):
        from spamnb.cli.progress import Progress

        wrap = Progress(0, unit="messages", interval=0.1).wrap
    tally = Tally()
    # a --ham folder's spam and bulk folders are not ham (spamnb.training.corpus); links
    # to files outside a folder given are not read without --follow-links
    options = {"spam_folders": "skip" if is_spam is False else "read", "follow_links": args.follow_links,
               "stdin_mbox": args.mbox}
    skipped = []

    def skip(text):   # said on stderr; a lone one is said once, in the error when nothing else was read
        skipped.append(text)
        if len(skipped) > 1:
            for line in skipped[-2 if len(skipped) == 2 else -1:]:
                print(f"spamnb: {line}", file=sys.stderr)

    # a learn appends its record without reading the model whole (spamnb.model.learning: light)
    # a forget or relabel folded in at once: every classify after it is a fresh process (learning.session)
    with learning_session(path, wait=args.wait, create=not forget, expire=not forget, mapped=True,
                          light=not forget, fold_forgets=True) as session:
        seen = 0
        for source in args.files or ["-"]:
            try:
                messages = messages_of(source, **options)
                if wrap is not None:
                    messages = wrap(messages, "forgetting" if forget else "learning")
                for name, data in messages:
                    if not looks_like_mail(data):   # an ELF binary, a PDF, a text file: never learned, as train skips it
                        skip(f"{display_name(name)}: not mail (no header line at the top); "
                             f"not {'forgotten' if forget else 'learned'}")
                        continue
                    seen += 1
                    try:
                        if forget:
                            session.forget(data, is_spam, tally, **markup)
                        else:
                            session.learn(data, is_spam, tally, **markup)
                    except ValueError as exc:
                        raise errors.CommandError(f"{display_name(name)}: {exc}; the model is unchanged") from None
            except errors.SkippedError as exc:   # a device, a FIFO, a file over the limit: the others are read
                skip(str(exc))
        if not seen:
            if len(skipped) == 1:
                raise errors.CommandError(f"{skipped[0]}; the model is unchanged")
            raise errors.CommandError(f"no message {'given' if not skipped else 'to learn'}; the model is unchanged")
        if len(skipped) == 1:
            print(f"spamnb: {skipped[0]}", file=sys.stderr)
    if not args.quiet:
        ham, spam_count = session.class_count()
        if forget:
            done = f"forgot {tally.forgotten} message{'s' if tally.forgotten != 1 else ''}"
        else:
            done = f"{tally.learn_summary()} (as {args.label})"
        print(f"{done}; model: {path} ({spam_count:.0f} spam, {ham:.0f} ham)")
    return EXIT_OK


def cmd_learn(args):
    return _update_model(args, forget=False)


def cmd_forget(args):
    return _update_model(args, forget=True)


def add_parser(sub, name, handler, text):
    """``spamnb learn``/``forget``: their options are the option table's (:mod:`spamnb.options`)."""
    from spamnb.cli.parsing import add_options
    from spamnb.options import options

    p = sub.add_parser(name, help=text)
    add_options(p, options(name))
    p.set_defaults(handler=handler)
