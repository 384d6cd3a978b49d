"""``spamnb classify --batch``: partitions of paths scored by worker
processes that load the model file once each, the lines written in order,
and the verdict lines themselves (text or JSON), the same in one process.

A batch answers a reader who waits: the path source yields :data:`IDLE`
when nothing more is ready (``spamnb classify --batch`` reading paths from
a pipe whose writer waits for the answers), and every path read so far is
then answered before the next is read (the partition in flight scored here,
in this process).  Paths that come faster than they are scored go to the
workers a full partition at a time."""

from __future__ import annotations

import os
import sys

from spamnb.report.lines import VerdictLines
from spamnb.training.errors import CorpusError
from spamnb.training.planning import SHARD_ABOVE, DEFAULT_PARTITION_SIZE, Piece, partitions, plan_scoring

__all__ = ["IDLE", "classify_batch", "score_partition"]


_MODELS = {}
# what a path source yields when no path is ready: answer every path read so far
IDLE = object()
# what a batch worker imports before it forks (scoring needs no numpy: its import and
# thread pool would cost every -j N batch ~0.1 s)
PRELOAD = ["spamnb.batch.classify", "spamnb.mail.reader", "spamnb.model.spam_filter", "spamnb.mail.tokenizer",
           "spamnb.mail.mbox"]


def file_identity(path):
    st = os.stat(path)
    return (st.st_size, st.st_mtime_ns)   # the same on every machine of a shared file system


def worker_model(path, identity, cutoffs=None):
    """The model at ``path``, loaded once per worker (``cutoffs``: the
    :class:`~spamnb.estimator.verdict.Cutoffs` in effect, set on it); ModelError when the file
    is not the one the job started with (replaced while the job ran)."""
    from spamnb.model.spam_filter import SpamFilter
    from spamnb.persistence.store import ModelError

    key = (path, identity)
    model = _MODELS.get(key)
    if model is None:
        model = SpamFilter.load(path)
        if identity is not None and file_identity(path) != identity:
            raise ModelError(f"{path}: the model file was replaced while the job ran; run it again")
        _MODELS.clear()
        _MODELS[key] = model
    if cutoffs is not None:
        model.cutoffs = cutoffs
    return model


def _pieces(paths):
    """``plan_scoring(paths)``, with one ``stat`` per path: only a regular file
    large enough to be cut into mbox shards goes through ``plan_scoring``; any
    other path is a ``"path"`` piece, as ``plan_scoring`` makes it (a folder,
    a message file or small mbox, a path that cannot be read: the worker
    answers it, or names its error)."""
    import stat

    for path in paths:
        if path is IDLE:
            yield IDLE
            continue
        if path == "-":
            yield from plan_scoring([path])
            continue
        try:
            info = os.stat(path)
            large = stat.S_ISREG(info.st_mode) and info.st_size > SHARD_ABOVE
        except OSError:
            large = False
        if large:
            yield from plan_scoring([path])
        else:
            yield Piece("path", path, path, None, 0, None, 0)


def score_partition(model_path, identity, cutoffs, pieces, json_lines=False):
    """``spamnb classify --batch`` over one partition with the model at
    ``model_path``: ``(text, stderr, n_errors)``, the lines the one-process
    batch writes for these pieces (an unreadable path: an error line, and
    the partition goes on), what it writes to stderr, and how many errors."""
    import contextlib
    import io

    from spamnb.mail.mbox import iter_mbox_range
    from spamnb.mail.reader import messages_of

    lines = VerdictLines(worker_model(model_path, identity, cutoffs), json_lines, io.StringIO())
    errors = io.StringIO()
    with contextlib.redirect_stderr(errors):
        for piece in pieces:
            try:
                if piece.kind == "shard":
                    messages = ((f"{piece.name}#{piece.first + i}", data)
                                for i, data in enumerate(iter_mbox_range(piece.path, piece.start, piece.end)))
                elif piece.kind == "data":
                    messages = [("-", piece.path)]
                else:
                    messages = messages_of(piece.path)
                for name, data in messages:
                    lines.verdict(name, data)
            except (CorpusError, OSError) as exc:
                reason = str(exc) if isinstance(exc, CorpusError) else (exc.strerror or str(exc))
                lines.error(piece.name, reason.removeprefix(f"{piece.name}: "))   # escaped there
    return lines.out.getvalue(), errors.getvalue(), lines.errors


def classify_batch(model_path, paths, cutoffs=None, n_jobs=None, partition_size=DEFAULT_PARTITION_SIZE,
                   json_lines=False, out=None, err=None, loaded=None, window=2):
    """``spamnb classify --batch``: the one-process batch's lines for
    ``paths`` (a path may be a message, an mbox, a folder or ``-``; or
    :data:`IDLE`), in order, written to ``out`` as each partition is done,
    scored by ``n_jobs`` processes (0 or None: every core) that load the
    model file once each.  Returns the number of paths that could not be
    read (each has an error line).

    Workers start when a second partition comes (a batch of one partition
    is scored here); at most ``window * n_jobs`` partitions are in flight.
    :data:`IDLE` in ``paths`` ends the partition so far; then every
    partition given is answered (those in flight waited for, one not given
    to the workers scored here) before the next path is read.

    ``loaded``: ``(identity, model)``, the model the caller loaded from
    ``model_path`` and the file's identity (``file_identity``) taken before
    it did: used instead of loading the file again when the file is still
    that one (forked workers start with it)."""
    from collections import deque

    from spamnb.training.workers import Workers

    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    model_path = os.path.abspath(os.fspath(model_path))
    identity = file_identity(model_path)
    if loaded is not None and loaded[0] == identity:
        _MODELS.clear()
        _MODELS[(model_path, identity)] = loaded[1]
    worker_model(model_path, identity, cutoffs)   # a bad model fails here, once, not in every worker
    n_errors = 0

    def write(result):
        nonlocal n_errors
        text, errors, n = result
        out.write(text)
        out.flush()
        err.write(errors)
        n_errors += n

    def here(part):
        if part is not None:
            write(score_partition(model_path, identity, cutoffs, part, json_lines))

    with Workers(n_jobs, PRELOAD) as workers:
        pending, held = deque(), None   # futures in order; a first partition, until a second comes
        for part in partitions(_pieces(paths), partition_size, IDLE):
            if part is IDLE:   # the source waits: answer all read so far
                while pending:
                    write(pending.popleft().result())
                here(held)
                held = None
            elif workers.n_jobs == 1:
                here(part)
            elif held is None and workers.pool is None:
                held = part
            else:
                if held is not None:
                    pending.append(workers.submit(score_partition, model_path, identity, cutoffs, held,
                                                  json_lines))
                    held = None
                pending.append(workers.submit(score_partition, model_path, identity, cutoffs, part, json_lines))
                while pending and (pending[0].done() or len(pending) >= window * workers.n_jobs):
                    write(pending.popleft().result())
        while pending:
            write(pending.popleft().result())
        here(held)
    return n_errors
