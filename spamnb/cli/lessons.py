"""``spamnb learn`` and ``spamnb forget`` with ``--shared``: the messages sent to
the shared stream as lessons (``spamnb.shared``), not learned into the local
model.  Apart from :mod:`spamnb.cli.learn`: a learn into a model file never
loads it."""

import sys

from spamnb.cli.common import CommandError, SkippedError, messages_of
from spamnb.cli.exitcodes import EXIT_OK

__all__ = ["send_lessons"]


def send_lessons(args, settings, path, is_spam, forget):
    """``--shared``: each message goes to the shared stream as a lesson for the
    site model (or, Redis unreachable, to the outbox beside the model, sent by
    this host's ``spamnb serve --shared``); every host following the stream
    learns it, this one's server included.  The local model is not touched
    here: it changes when this host's server applies the stream, in its order."""
    from spamnb.mail.checked import looks_like_mail
    from spamnb.model import canonical
    from spamnb.shared import SharedError
    from spamnb.shared.host import Sender, state_dir
    from spamnb.shared.lessons import FORGET, LEARN, Lesson

    try:
        sender = Sender(settings.shared, state_dir(path))
    except SharedError as exc:
        raise CommandError(str(exc)) from None
    sent = queued = 0
    options = {"spam_folders": "skip" if is_spam is False else "read", "follow_links": args.follow_links,
               "stdin_mbox": args.mbox}
    for source in args.files or ["-"]:
        try:
            messages = messages_of(source, **options)
            for _name, data in messages:
                if not looks_like_mail(data):
                    continue
                lesson = Lesson(FORGET if forget else LEARN, is_spam, "",
                                canonical(data, settings.header, settings.subject_tag))
                if sender.send(lesson) is None:
                    queued += 1
                else:
                    sent += 1
        except SkippedError as exc:
            print(f"spamnb: {exc}", file=sys.stderr)
    if not sent + queued:
        raise CommandError("no message given; nothing sent")
    if not args.quiet:
        print(f"sent {sent} lesson{'s' if sent != 1 else ''} to {settings.shared}"
              + (f", {queued} queued in {sender.outbox.folder} (Redis unreachable)" if queued else ""))
    return EXIT_OK
