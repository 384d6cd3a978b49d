"""Worker processes: an ordered map over a pool, shared by the passes of a job.

Processes, not threads: the parser and tokenizer hold the GIL (only the
counting kernels release it).  Workers are forked from this process where
that is safe (Linux, one Python thread), else they come from a
``forkserver`` that has imported the training modules once; results come back
as a handful of flat arrays (one buffer each on the pipe), never a Python
object per token.
"""

from __future__ import annotations

import functools
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


def _worker_start(parent=None, initializer=None, initargs=()):
    """A worker's start.  SIGINT is ignored: a Ctrl-C at a terminal reaches the
    whole process group, and a worker that raised KeyboardInterrupt would die
    with a traceback or drop the job it was on, breaking the pool under the
    parent; the parent alone decides, and ends its workers (:meth:`_Pool.stop`).
    The parent blocked SIGINT while it forked them (:meth:`_Pool.submit`), so
    no Ctrl-C falls between the fork and this; it is unblocked once ignored.
    A worker forked by the parent (``parent``, its pid) asks the kernel to
    kill it when the parent dies (Linux ``PR_SET_PDEATHSIG``), so that a job
    killed by a signal (``SIGTERM``, ``SIGKILL``) leaves no worker behind
    holding its pipes open (a reader of the job's output would wait for ever).
    Then ``initializer(*initargs)``."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    if parent is not None:
        import ctypes

        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)   # 1: PR_SET_PDEATHSIG
        except (OSError, AttributeError):   # no prctl: the worker ends when its queue does
            pass
        if os.getppid() != parent:   # the parent died before the request was in place
            os._exit(1)
    if initializer is not None:
        initializer(*initargs)


# Seconds the workers have to exit once terminated (SIGTERM) before they are killed (SIGKILL).
STOP_TIMEOUT = 2.0


class _Recording:
    """A multiprocessing context that keeps the processes and the result
    queue it makes: the pool's workers and the pipe they answer on, for
    :meth:`_Pool.stop` to end (the executor keeps them to itself)."""

    def __init__(self, context):
        self.context = context
        self.processes = []
        self.queues = []

    def SimpleQueue(self):
        queue = self.context.SimpleQueue()
        self.queues.append(queue)
        return queue

    def __getattr__(self, name):
        return getattr(self.context, name)

    def Process(self, *args, **kwargs):
        process = self.context.Process(*args, **kwargs)
        self.processes.append(process)
        return process


@functools.cache
def _pool_class():   # concurrent.futures imported when a pool is made, not with this module
    from concurrent.futures import ProcessPoolExecutor

    class _Pool(ProcessPoolExecutor):
        """A ``ProcessPoolExecutor`` whose workers ignore SIGINT and that
        its owner ends in bounded time when a job fails or is interrupted:
        leaving its ``with`` block on an exception (``KeyboardInterrupt``
        included) calls :meth:`stop`; a clean exit waits for the workers
        as ``shutdown`` does."""

        def __init__(self, n_jobs, context, initializer, initargs):
            self.made = _Recording(context)
            super().__init__(max_workers=n_jobs, mp_context=self.made, initializer=initializer, initargs=initargs)

        def submit(self, fn, /, *args, **kwargs):
            # SIGINT blocked while the workers may be forked (the first submit forks them all): a child
            # starts with it blocked until it ignores it (_worker_start); one that comes meanwhile is
            # delivered here once the mask is restored
            import signal
            import threading

            if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
                return super().submit(fn, *args, **kwargs)
            mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
            try:
                return super().submit(fn, *args, **kwargs)
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)

        def stop(self, timeout=STOP_TIMEOUT):
            """End the pool now: the workers terminated (SIGTERM), waited
            for at most ``timeout`` seconds together, then killed (SIGKILL)
            and reaped; the pipe they answered on closed for writing here;
            then the executor's thread, which marks the jobs not done failed
            (none is cancelled here: that raced with it), joined."""
            import time

            processes = [p for p in self.made.processes if p.pid is not None]
            for process in processes:
                if process.exitcode is None:
                    process.terminate()
            deadline = time.monotonic() + timeout
            for process in processes:
                process.join(max(0.0, deadline - time.monotonic()))
            for process in processes:
                if process.exitcode is None:
                    process.kill()
                    process.join(1.0)
            # A worker ended while it wrote a result leaves the executor's thread reading the rest for
            # ever (this process holds the pipe's write end too: no end of file).  With the workers gone
            # nothing else writes there: closing this end gives the reader its end of file, and the
            # thread marks the pool broken and returns.
            for queue in self.made.queues:
                queue._writer.close()
            # Joined here, not left running: at exit the interpreter wakes every executor's thread
            # through a pipe that thread closes as it ends (Python 3.11: an EBADF traceback at exit).
            self.shutdown(wait=True, cancel_futures=True)

        def __exit__(self, exc_type, exc, tb):
            if exc_type is not None:
                self.stop()
                return False
            try:
                self.shutdown(wait=True)
            except BaseException:   # interrupted while the workers finish: end them now
                self.stop()
                raise
            return False

    return _Pool


def process_pool(n_jobs, initializer=None, initargs=(), preload=None):
    """A process pool of ``n_jobs`` workers (:func:`_worker_start`, then
    ``initializer(*initargs)``), ended in bounded time when its ``with``
    block is left on an exception (a Ctrl-C)."""
    import multiprocessing

    method = _start_method()
    context = multiprocessing.get_context(method)
    preload = preload or _PRELOAD
    if method == "forkserver":
        context.set_forkserver_preload(preload)
    else:   # what the workers need, imported once here before they fork
        import importlib

        for name in preload:
            importlib.import_module(name)
    # forked by this process on Linux: they die with it
    parent = os.getpid() if method == "fork" and sys.platform.startswith("linux") else None
    return _pool_class()(n_jobs, context, _worker_start, (parent, initializer, initargs))


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
        # a clean exit waits for the workers; an exception (a Ctrl-C) ends them at once (_Pool.stop)
        pool, self.pool = self.pool, None
        if pool is not None:
            pool.__exit__(*exc)

    def submit(self, function, *args):
        """``function(*args)`` on a worker (the workers started at the first call): a future."""
        if self.pool is None:
            self.pool = process_pool(self.n_jobs, preload=self.preload)
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
        except GeneratorExit:   # the caller stopped early: the jobs not started are dropped
            if self.pool is not None:   # (an ended pool's own thread cancels them: not here, it would race)
                for future in pending:
                    future.cancel()
            raise


def run_ordered(function, jobs, n_jobs, window=2, preload=None):
    """``function(*job)`` for each job, results in job order; with ``n_jobs``
    worker processes (0 or None: every available core; in this process for
    1, or for a single job), at most ``window * n_jobs`` jobs in flight
    (``jobs`` is consumed lazily)."""
    with Workers(n_jobs, preload) as workers:
        yield from workers.run_ordered(function, jobs, window)
