"""Worker processes: an ordered map over a pool, shared by the passes of a job.

Processes, not threads: the parser and tokenizer hold the GIL (only the
counting kernels release it).  Workers are forked from this process where
that is safe (Linux, one Python thread), else they come from a
``forkserver`` that has imported the training modules once; results come back
as a handful of flat arrays (one buffer each on the pipe), never a Python
object per token.
"""

from __future__ import annotations

import os
import sys
from collections import deque

__all__ = ["DEFAULT_JOBS", "available_cores", "warm_up", "Workers", "run_ordered"]

# -j of ``spamnb train``, ``spamnb evaluate`` and ``spamnb classify --batch`` when
# not given: 0, every core available (docs/scale.md: faster than -j 1 on an idle
# two-core machine, from the shared corpus up; a batch still answers a path at once
# when its writer waits: spamnb.training.batch).
DEFAULT_JOBS = 0


def available_cores():
    """The number of cores this process may run on (``os.sched_getaffinity``)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


_PRELOAD = ["spamnb.training.planning", "spamnb.training.pipeline", "spamnb.training.batch", "spamnb.model.spam_filter",
            "spamnb.model.calibrate", "spamnb.mail.tokenizer", "numpy"]


def warm_up(n_jobs=None, preload=None):
    """Start the forkserver the workers come from (it imports numpy and spamnb
    once), in the background, when ``n_jobs`` asks for workers: called first
    thing, its start-up overlaps this process's own imports and planning."""
    if n_jobs == 1 or _start_method() != "forkserver":
        return
    import multiprocessing
    from multiprocessing import forkserver

    multiprocessing.get_context("forkserver").set_forkserver_preload(preload or _PRELOAD)
    forkserver.ensure_running()   # spawns the server and returns; workers are forked once it is up


def _start_method():
    """"fork" where this process may fork safely (Linux, no other Python thread:
    the workers start at once with what this process has imported; the pool
    forks them all before its own threads start), else "forkserver"."""
    import threading

    if os.environ.get("SPAMNB_START_METHOD") in ("fork", "forkserver", "spawn"):
        return os.environ["SPAMNB_START_METHOD"]
    if sys.platform.startswith("linux") and threading.active_count() == 1:
        return "fork"
    return "forkserver"


def _die_with_parent(parent, initializer=None, initargs=()):
    """A forked worker's start: the kernel is asked to kill it when the process
    that forked it dies (Linux ``PR_SET_PDEATHSIG``), so that a job killed
    by a signal (``SIGTERM``, ``SIGKILL``) leaves no worker behind holding
    its pipes open (a reader of the job's output would wait for ever); then
    ``initializer(*initargs)``."""
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)   # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):   # no prctl: the worker ends when its queue does
        pass
    if os.getppid() != parent:   # the parent died before the request was in place
        os._exit(1)
    if initializer is not None:
        initializer(*initargs)


def _executor(n_jobs, initializer=None, initargs=(), preload=None):
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    method = _start_method()
    context = multiprocessing.get_context(method)
    preload = preload or _PRELOAD
    if method == "forkserver":
        context.set_forkserver_preload(preload)
    else:   # what the workers need, imported once here before they fork
        import importlib

        for name in preload:
            importlib.import_module(name)
    if method == "fork" and sys.platform.startswith("linux"):   # forked by this process: they die with it
        initializer, initargs = _die_with_parent, (os.getpid(), initializer, initargs)
    return ProcessPoolExecutor(max_workers=n_jobs, mp_context=context, initializer=initializer, initargs=initargs)


class Workers:
    """``n_jobs`` worker processes (0 or None: every available core), started
    when a pass first has two jobs and shared by the passes of a job (the
    counting pass and the calibration's scoring pass of ``spamnb train``);
    with ``n_jobs`` 1 every job runs in this process.  A context manager."""

    def __init__(self, n_jobs=None, preload=None):
        self.n_jobs = available_cores() if n_jobs is None or n_jobs <= 0 else int(n_jobs)
        self.pool = None
        self.preload = preload   # the modules the workers import first (None: training's, numpy included)

    def __enter__(self):
        if self.n_jobs > 1:
            warm_up(self.n_jobs, self.preload)
        return self

    def __exit__(self, *exc):
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None

    def submit(self, function, *args):
        """``function(*args)`` on a worker (the workers started at the first call): a future."""
        if self.pool is None:
            self.pool = _executor(self.n_jobs, preload=self.preload)
        return self.pool.submit(function, *args)

    def run_ordered(self, function, jobs, window=2):
        """``function(*job)`` for each job, results in job order, at most
        ``window * n_jobs`` jobs in flight (``jobs`` is consumed lazily)."""
        from itertools import chain, islice

        jobs = iter(jobs)
        head = list(islice(jobs, 2))
        jobs = chain(head, jobs)
        if self.n_jobs == 1 or (len(head) < 2 and self.pool is None):   # one job: no start-up for nothing
            for job in jobs:
                yield function(*job)
            return
        pending = deque()
        try:
            for job in jobs:
                pending.append(self.submit(function, *job))
                if len(pending) >= window * self.n_jobs:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()


def run_ordered(function, jobs, n_jobs, window=2, preload=None):
    """``function(*job)`` for each job, results in job order; with ``n_jobs``
    worker processes (0 or None: every available core; in this process for
    1, or for a single job), at most ``window * n_jobs`` jobs in flight
    (``jobs`` is consumed lazily)."""
    with Workers(n_jobs, preload) as workers:
        yield from workers.run_ordered(function, jobs, window)
