"""``spamnb classify --batch``: each path (the arguments, or the lines of stdin) answered at once, in
this process or on worker processes (``--jobs``).  Out of :mod:`spamnb.cli.classify`: a classify of
one message does not load this code."""

import sys

from spamnb import errors   # its classes named where raised or caught, made then
from spamnb.cli.common import load_filter, messages_of, model_path, settings_of
from spamnb.cli.exitcodes import EXIT_ERROR, EXIT_OK
from spamnb.report.lines import VerdictLines

__all__ = ["classify_batch"]


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


def classify_batch(args):
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
