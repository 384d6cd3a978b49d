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

from spamnb.errors import BrokenPool

__all__ = ["DEFAULT_JOBS", "available_cores", "free_cores", "busy_cores", "warm_up", "Workers", "run_ordered"]

# -j of ``spamnb train``, ``spamnb evaluate`` and ``spamnb classify --batch`` when
# not given: 0, every core available (docs/scale.md: faster than -j 1 on an idle
# two-core machine, from the shared corpus up; a batch still answers a path at once
# when its writer waits: spamnb.batch.classify).
DEFAULT_JOBS = 0


def available_cores():
    """The number of cores this process may run on (``os.sched_getaffinity``)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def free_cores(cores=None, load=None):
    """The cores ``spamnb train`` runs on when ``-j`` is not given: those this
    process may run on (``cores``, default :func:`available_cores`) less the
    ones other processes keep busy (``load``, default :func:`busy_cores`),
    rounded to the nearest, at least 1: workers cost some CPU of their own
    (the partitions' tokens numbered again and their sums added in the
    parent), so on cores others keep busy ``spamnb train`` runs in this
    process (``-j 1``), which writes the model file of any ``-j``
    (docs/scale.md)."""
    cores = available_cores() if cores is None else int(cores)
    if load is None:
        load = busy_cores()
        if load is None:   # no load figures here: every core
            return cores
    return max(1, min(cores, int(cores - load + 0.5)))


def busy_cores(average=None, running=None):
    """The cores other processes keep busy: the smaller of the one-minute load
    average (``average``, default ``os.getloadavg()``'s) and the tasks
    running now less this one (``running``, default ``/proc/loadavg``'s
    fourth field, Linux, which counts this process); the average alone lags a
    minute behind (the jobs that just ended count in it), the count alone is
    one instant.  None when neither is known."""
    if average is None:
        try:
            average = os.getloadavg()[0]
        except (OSError, AttributeError):
            pass
    if running is None:
        try:
            with open("/proc/loadavg", "rb") as f:
                running = int(f.read().split()[3].split(b"/")[0])
        except (OSError, ValueError, IndexError):
            pass
    figures = [v for v in (average, None if running is None else max(0, running - 1)) if v is not None]
    return min(figures) if figures else None


_PRELOAD = ["spamnb.training.planning", "spamnb.training.pipeline", "spamnb.model.spam_filter",
            "spamnb.estimator.calibrate", "spamnb.mail.tokenizer", "numpy"]


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

# A job whose pickled call is at most this many bytes is sent to a worker that is still busy
# (it waits in the socket's buffer), so that the worker starts it as soon as it is done; a larger
# one waits until the worker is idle: a send that cannot block.  The pool takes half the socket's
# send buffer where it can read it (Linux: 208 KiB by default, so a ``spamnb train`` partition's
# call of 500 paths, about 66 KiB, is queued), this where it cannot.
_QUEUED_CALL_BYTES = 64 * 1024


def _queued_call_bytes(conn):
    """The largest call :meth:`_Pool._dispatch` queues on ``conn`` behind the
    running one: half the socket's send buffer (``SO_SNDBUF``, the kernel's
    limit: a message of half of it goes into an empty buffer without
    blocking, the running call having been read by the worker before it
    can block sending its answer); :data:`_QUEUED_CALL_BYTES` where the
    buffer cannot be read."""
    import socket

    try:
        with socket.fromfd(conn.fileno(), socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            return sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) // 2
    except (OSError, AttributeError, ValueError):   # not a socket (a Windows pipe), or no such option
        return _QUEUED_CALL_BYTES

_PENDING, _RUNNING, _DONE, _FAILED, _CANCELLED = range(5)


class _Future:
    """The result of a job on a :class:`_Pool`: ``result()``, ``done()``,
    ``cancel()`` as ``concurrent.futures.Future``'s, but waited for by the
    owner's own thread (no other thread sets it)."""

    __slots__ = ("pool", "state", "value", "call")

    def __init__(self, pool, call):
        self.pool, self.state, self.value, self.call = pool, _PENDING, None, call

    def done(self):
        if self.state in (_PENDING, _RUNNING):
            self.pool.collect(0.0)
        return self.state not in (_PENDING, _RUNNING)

    def cancel(self):
        """Drop the job if no worker has it yet (True); a running one runs on."""
        if self.state == _PENDING:
            self.state, self.call = _CANCELLED, None
            return True
        return self.state == _CANCELLED

    def cancelled(self):
        return self.state == _CANCELLED

    def result(self):
        while self.state in (_PENDING, _RUNNING):
            self.pool.collect(None)
        if self.state == _FAILED:
            raise self.value
        if self.state == _CANCELLED:
            raise RuntimeError("the job was cancelled")
        return self.value


class _Worker:
    __slots__ = ("process", "conn", "jobs")

    def __init__(self, process, conn):
        self.process, self.conn, self.jobs = process, conn, deque()


def _serve(conn, parent, initializer, initargs):
    """A worker's life: :func:`_worker_start`, then each call read from
    ``conn`` run and its result (or exception) sent back, until ``None`` or
    the end of the pipe."""
    _worker_start(parent, initializer, initargs)
    while True:
        try:
            call = conn.recv()
        except (EOFError, OSError):
            return
        if call is None:
            return
        function, args = call
        del call
        if not _answer(conn, function, args):   # the owner is gone
            return
        del function, args


def _answer(conn, function, args):
    """Send ``function(*args)`` on ``conn`` as ``(True, value)``, or ``(False,
    exception)`` (raised by the owner); False when the owner is gone."""
    try:
        answer = (True, function(*args))
    except BaseException as exc:   # sent back to the owner, raised there by result()
        answer = (False, exc)
    try:
        _send_answer(conn, answer)
    except (EOFError, OSError):
        return False
    except Exception as exc:   # an answer that does not pickle
        _send_answer(conn, (False, RuntimeError(f"a worker's answer could not be sent back: {exc!r}")))
    return True


# A buffer of an answer (a numpy array's data) of at least this many bytes goes out of its pickle (_send_answer).
_OUT_OF_BAND_BYTES = 64 * 1024


def _descriptor(conn):
    """``conn``'s file descriptor where its bytes can be written and read as
    they are (a Unix socket: :class:`multiprocessing.connection.Connection`),
    else None (a Windows pipe)."""
    from multiprocessing.connection import Connection

    return conn.fileno() if isinstance(conn, Connection) and sys.platform != "win32" else None


def _send_answer(conn, answer):
    """Send ``answer`` on ``conn``: a pickle of protocol 5 whose buffers of
    :data:`_OUT_OF_BAND_BYTES` or more (a numpy array's data) are left out
    of it, their sizes before it, then their bytes as they are on the same
    descriptor (:func:`_receive`: each read into a buffer of its own, the
    arrays made on it).  No array is copied into a pickle here, nor out of
    one in the reader, which never holds a pickle of megabytes beside the
    arrays; where ``conn`` has no descriptor everything is in the pickle.
    Nothing is sent if the answer does not pickle (the exception raised)."""
    import io
    import struct
    from multiprocessing.reduction import ForkingPickler

    fd, buffers = _descriptor(conn), []

    def in_band(buffer):
        view = buffer.raw()
        if fd is None or view.nbytes < _OUT_OF_BAND_BYTES:
            return True
        buffers.append(view)
        return False

    data = io.BytesIO()
    ForkingPickler(data, 5, True, in_band).dump(answer)
    conn.send_bytes(struct.pack(f"<I{len(buffers)}Q", len(buffers), *[view.nbytes for view in buffers])
                    + data.getbuffer())
    del data
    for view in buffers:
        while view.nbytes:
            view = view[os.write(fd, view):]


def _receive(conn):
    """An answer :func:`_send_answer` sent on ``conn``."""
    import pickle
    import struct

    head = conn.recv_bytes()
    (count,) = struct.unpack_from("<I", head)
    buffers = []
    for size in struct.unpack_from(f"<{count}Q", head, 4):
        buffer = bytearray(size)
        view = memoryview(buffer)
        while view.nbytes:
            got = os.readv(conn.fileno(), [view])
            if not got:
                raise EOFError("the answer was cut short")
            view = view[got:]
        buffers.append(buffer)
    return pickle.loads(memoryview(head)[4 + 8 * count:], buffers=buffers)


def _run_forked(conn, parent, function, args):
    """The life of a :class:`_Forked` process: :func:`_worker_start`, then
    ``function(*args)`` answered on ``conn``."""
    _worker_start(parent)
    _answer(conn, function, args)
    conn.close()


class _SigintBlocked:
    """SIGINT blocked in this thread while processes are forked (``with``): a
    child starts with it blocked until it ignores it (:func:`_worker_start`);
    one that comes meanwhile is delivered here once the mask is restored.
    Only in the main thread, where Python handles signals."""

    def __enter__(self):
        import signal
        import threading

        self.block = hasattr(signal, "pthread_sigmask") and threading.current_thread() is threading.main_thread()
        self.mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}) if self.block else None
        return self

    def __exit__(self, *exc):
        if self.block:
            import signal

            signal.pthread_sigmask(signal.SIG_SETMASK, self.mask)
        return False


class _Forked:
    """``function(*args)`` run in a process forked from this one (it starts
    with this process's memory: nothing is sent to it but the call, nothing
    pickled but its answer); :meth:`result` waits for the answer and raises
    the exception it raised (BrokenPool when it died); :meth:`close` (also
    on an exception here, a Ctrl-C) ends it at once."""

    def __init__(self, function, args):
        import multiprocessing

        context = multiprocessing.get_context("fork")
        with _SigintBlocked():
            self.conn, theirs = context.Pipe(duplex=False)
            self.process = context.Process(target=_run_forked, args=(theirs, os.getpid(), function, args),
                                           daemon=True)
            self.process.start()
            theirs.close()   # the child holds the only other end: its death is an end of file here

    def result(self):
        try:
            ok, value = _receive(self.conn)
        except (EOFError, OSError):
            ok, value = False, BrokenPool("a forked process died before it answered")
        finally:
            self.close(answered=True)
        if not ok:
            raise value
        return value

    def close(self, answered=False):
        """End the process: waited for once it has answered, else terminated
        (SIGTERM), then killed after :data:`STOP_TIMEOUT` seconds."""
        process, self.process = self.process, None
        if process is None:
            return
        self.conn.close()
        if process.exitcode is None and not answered:
            process.terminate()
        process.join(STOP_TIMEOUT)
        if process.exitcode is None:
            process.kill()
            process.join(1.0)


class _Pool:
    """``n_jobs`` worker processes owned by this process, each with a pipe
    of its own: jobs go out and results come back in this process's own
    thread, when a result is asked for (no management thread: a Ctrl-C,
    raised in the main thread wherever it is, meets nothing else running
    here).  The workers ignore SIGINT; leaving the ``with`` block on an
    exception (``KeyboardInterrupt`` included) calls :meth:`stop`; a clean
    exit waits for the jobs given and ends the workers."""

    def __init__(self, n_jobs, context, initializer=None, initargs=()):
        self.n_jobs = n_jobs
        self.context = context
        self.start_args = (initializer, initargs)
        self.workers = []
        self.queue = deque()   # futures not given to a worker yet
        self.broken = None
        self.queued_bytes = _QUEUED_CALL_BYTES   # the largest call queued behind a running one (_start)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self.stop()
            return False
        try:
            self.shutdown()
        except BaseException:   # interrupted while the jobs finish: end the workers now
            self.stop()
            raise
        return False

    def _start(self):
        """Fork the workers, SIGINT blocked meanwhile (:class:`_SigintBlocked`)."""
        with _SigintBlocked():
            initializer, initargs = self.start_args
            parent = os.getpid() if self.context.get_start_method() == "fork" and sys.platform.startswith("linux") else None
            for _ in range(self.n_jobs):
                mine, theirs = self.context.Pipe(duplex=True)
                process = self.context.Process(target=_serve, args=(theirs, parent, initializer, initargs), daemon=True)
                self.workers.append(_Worker(process, mine))
                process.start()
                theirs.close()   # the worker holds the only other end: its death is an end of file here
            self.queued_bytes = min(_queued_call_bytes(w.conn) for w in self.workers)

    def submit(self, function, /, *args):
        """``function(*args)`` on a worker (the workers forked at the first call): a future."""
        if self.broken is not None:
            raise BrokenPool(self.broken)
        if not self.workers:
            self._start()
        future = _Future(self, (function, args))
        self.queue.append(future)
        self._dispatch()
        return future

    def map(self, function, *iterables):
        """``function(*args)`` for each ``zip(*iterables)``, the results in order."""
        futures = [self.submit(function, *args) for args in zip(*iterables)]
        for future in futures:
            yield future.result()

    def _dispatch(self):
        """Give the jobs waiting to the workers: one to each idle worker, and
        a second one, when small, to a busy worker (it starts it at once)."""
        from multiprocessing.reduction import ForkingPickler

        for queued_too in (False, True):
            for worker in sorted(self.workers, key=lambda w: len(w.jobs)):
                while self.queue and self.queue[0].state == _CANCELLED:
                    self.queue.popleft()
                if not self.queue:
                    return
                if len(worker.jobs) > int(queued_too):
                    continue
                future = self.queue[0]
                if isinstance(future.call, tuple):   # pickled once
                    future.call = ForkingPickler.dumps(future.call)
                if worker.jobs and len(future.call) > self.queued_bytes:
                    continue
                self.queue.popleft()
                data, future.state, future.call = future.call, _RUNNING, None
                worker.jobs.append(future)
                try:
                    worker.conn.send_bytes(data)
                except OSError:   # the worker is gone
                    self._break(worker)
                    return

    def collect(self, timeout):
        """Read the results the workers have sent (waiting up to ``timeout``
        seconds, None: until one comes) and give them more jobs."""
        from multiprocessing.connection import wait

        busy = [w for w in self.workers if w.jobs]
        if not busy:
            if any(f.state == _PENDING for f in self.queue):   # (cannot happen: a job waits only for a busy worker)
                self._dispatch()
            return
        ready = wait([w.conn for w in busy] + [w.process.sentinel for w in busy], timeout)
        for worker in busy:
            if worker.conn in ready:
                try:
                    ok, value = _receive(worker.conn)
                except (EOFError, OSError):
                    self._break(worker)
                    return
                except Exception as exc:   # an answer that does not unpickle here
                    ok, value = False, RuntimeError(f"a worker's answer could not be read: {exc!r}")
                future = worker.jobs.popleft()
                future.state, future.value = (_DONE if ok else _FAILED), value
            elif worker.process.sentinel in ready:   # ended, nothing left to read
                self._break(worker)
                return
        self._dispatch()

    def _break(self, worker):
        """A worker ended with jobs: every job not done fails, the pool is ended."""
        self.broken = (f"a worker process ended abruptly (exit code {worker.process.exitcode}) "
                       "while it had a job")
        for future in [f for w in self.workers for f in w.jobs] + list(self.queue):
            if future.state in (_PENDING, _RUNNING):
                future.state, future.value, future.call = _FAILED, BrokenPool(self.broken), None
        self.queue.clear()
        for w in self.workers:
            w.jobs.clear()
        self.stop()

    def shutdown(self):
        """Wait for the jobs given, then end the workers (each told to stop, then joined)."""
        while any(w.jobs for w in self.workers) or any(f.state == _PENDING for f in self.queue):
            self.collect(None)
        for worker in self.workers:
            try:
                worker.conn.send(None)
            except OSError:   # already gone
                pass
        for worker in self.workers:
            worker.process.join()
            worker.conn.close()
        self.workers = []

    def stop(self, timeout=STOP_TIMEOUT):
        """End the pool now: the workers terminated (SIGTERM), waited for at
        most ``timeout`` seconds together, then killed (SIGKILL) and reaped;
        their pipes closed.  The jobs not done are dropped."""
        import time

        workers, self.workers = self.workers, []
        processes = [w.process for w in workers if w.process.pid is not None]
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
        for worker in workers:
            worker.conn.close()
        for future in [f for w in workers for f in w.jobs] + list(self.queue):
            if future.state in (_PENDING, _RUNNING):
                future.state, future.value, future.call = _FAILED, BrokenPool("the pool was stopped"), None
        self.queue.clear()
        if self.broken is None:
            self.broken = "the pool was stopped"


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
    return _Pool(n_jobs, context, initializer, initargs)


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

    def poll(self):
        """Read the results the workers have sent, without waiting, and give
        them the jobs waiting (a caller busy between its own steps keeps them
        fed); nothing before the workers are started."""
        if self.pool is not None:
            self.pool.collect(0.0)

    def submit(self, function, *args):
        """``function(*args)`` on a worker (the workers started at the first call): a future."""
        if self.pool is None:
            self.pool = process_pool(self.n_jobs, preload=self.preload)
        return self.pool.submit(function, *args)

    def shares_files(self):
        """Whether the workers, not started yet, will be forked from this
        process (:func:`_start_method`): a file opened now is then open in
        them too, at the same descriptor."""
        return self.n_jobs > 1 and self.pool is None and _start_method() == "fork"

    def fork(self, function, *args):
        """``function(*args)`` in a process forked from this one now (it has
        this process's memory as it is: arrays, open files), beside this
        process's own work: a handle whose ``result()`` gives its value and
        ``close()`` ends it; None with ``n_jobs`` 1, or where this process may
        not fork (another thread, not Linux: :func:`_start_method`), or
        before any worker started (a job too small for them), when the
        caller does the work itself.  For the short tail of a job the workers
        are idle in (``spamnb train``'s held-out pass: half of each variant's
        folds scored there)."""
        if self.n_jobs < 2 or self.pool is None or _start_method() != "fork":   # no workers: a small job
            return None
        return _Forked(function, args)

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
