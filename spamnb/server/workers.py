"""``spamnb serve --workers N``: pre-forked worker processes.

The parent binds the listening sockets, drops privileges and loads the site
model (spamnb.server.launch), then forks N workers: each runs the asyncio
server (spamnb.server.daemon) on the inherited sockets, the kernel handing
each new connection to one of them, and starts with the model already in
memory (its buffers shared with the parent copy-on-write: nothing writes
them).  Each worker then reloads a model that changed on disk by itself,
as a single server does.

The parent only supervises: a worker that dies is replaced (at most one
start a second per slot while they keep dying at once), any other child's
end is logged (the console's keeper, spamnb.console.process, restarts the
console itself); on SIGHUP the
parent re-reads the settings and the model, then forks fresh workers
(sharing that model) and tells the old ones to finish the requests they
have and exit; SIGTERM/SIGINT are passed on and the parent waits for the
workers to finish the requests in flight.  It also answers ``--metrics`` (spamnb.server.metrics) from its
loop, which waits on a pipe the signal handlers write to (no threads: the
parent forks).
"""

from __future__ import annotations

import asyncio
import os
import selectors
import signal
import sys
import time
import traceback

from spamnb.server.metrics import serve_http_blocking

_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD)


def describe_status(status):
    """A child's end, from ``os.waitpid``'s status: 'was killed by SIGKILL', 'exited with status 70'."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = str(number)
        return f"was killed by {name}"
    return f"exited with status {os.waitstatus_to_exitcode(status)}"


class Supervisor:
    """Forks ``n_workers`` workers serving ``server`` and keeps them running;
    :meth:`run` returns 0 once stopped by SIGTERM/SIGINT.

    ``reload`` is called in the parent on SIGHUP (before the workers are
    told); ``on_ready`` once the first workers are forked; ``metrics`` (or
    None) gets a slot per worker and the parent counts in slot ``n_workers``;
    ``metrics_sock`` is the bound ``--metrics`` socket the parent answers on,
    ``figures(kind)`` what it answers; ``inherited`` are callables a worker
    runs first, to let go of what only the parent keeps (pid file, ...)."""

    def __init__(self, server, n_workers, reload, on_ready=None, metrics=None, metrics_sock=None,
                 figures=None, inherited=()):
        self.server = server
        self.n_workers = n_workers
        self.reload = reload
        self.on_ready = on_ready
        self.metrics = metrics
        self.metrics_sock = metrics_sock
        self.figures = figures
        self.inherited = inherited
        self.pids = [None] * n_workers
        self.started = [0.0] * n_workers
        self.next_start = [0.0] * n_workers
        self.retiring = set()       # workers replaced after SIGHUP, finishing their requests
        self.stopping = False
        self._pipe = None
        self._selector = None

    def alive(self):
        return sum(pid is not None for pid in self.pids)

    # ------------------------------------------------------------------ the parent's loop
    def run(self):
        log = self.server.log
        r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._pipe = (r, w)
        previous = {s: signal.signal(s, _noop) for s in _SIGNALS}
        old_fd = signal.set_wakeup_fd(w)
        try:
            for slot in range(self.n_workers):
                self._spawn(slot)
            self._selector = selectors.DefaultSelector()
            self._selector.register(r, selectors.EVENT_READ)
            if self.metrics_sock is not None:
                self._selector.register(self.metrics_sock, selectors.EVENT_READ)
            if self.on_ready is not None:
                self.on_ready()
            while not self.stopping:
                self._wait()
            self._stop_workers()
        finally:
            signal.set_wakeup_fd(old_fd)
            for s, handler in previous.items():
                signal.signal(s, handler)
            if self._selector is not None:
                self._selector.close()
            os.close(r)
            os.close(w)
        log("stopped")
        return 0

    def _wait(self):
        now = time.monotonic()
        pending = [t for pid, t in zip(self.pids, self.next_start) if pid is None]
        timeout = max(0.0, min(pending) - now) if pending else 1.0
        for key, _ in self._selector.select(min(timeout, 1.0)):
            if key.fileobj == self._pipe[0]:
                try:
                    self._signals(os.read(self._pipe[0], 512))
                except BlockingIOError:
                    pass
            else:
                allows = self.server.settings.allows
                serve_http_blocking(self.metrics_sock, self.figures, allows)
        self._reap()
        if not self.stopping:
            now = time.monotonic()
            for slot, pid in enumerate(self.pids):
                if pid is None and now >= self.next_start[slot]:
                    self._spawn(slot)
                    if self.metrics is not None:
                        self.metrics.worker_restarted()

    def _signals(self, received):
        numbers = set(received)
        if numbers & {signal.SIGTERM, signal.SIGINT}:
            self.stopping = True
            return
        if signal.SIGHUP in numbers:
            self.reload()
            old = [pid for pid in self.pids if pid is not None]
            for slot in range(self.n_workers):
                self._spawn(slot)
            self.retiring.update(old)
            for pid in old:
                kill_quietly(pid, signal.SIGTERM)
            self.server.log(f"SIGHUP: {len(old)} worker(s) replaced by {self.n_workers} reading the new settings")

    def _tell(self, signum):
        for pid in [*self.pids, *self.retiring]:
            if pid is not None:
                kill_quietly(pid, signum)

    def _reap(self):
        for pid, status in ended_children():
            if pid in self.retiring:
                self.retiring.discard(pid)
                continue
            if pid not in self.pids:
                # not a worker: the console's keeper (spamnb.console.process), which restarts the console
                # itself; its end is said, never reaped silently
                self.server.log(f"child (pid {pid}) {describe_status(status)}")
                continue
            slot = self.pids.index(pid)
            self.pids[slot] = None
            if self.stopping:
                continue
            lived = time.monotonic() - self.started[slot]
            self.next_start[slot] = time.monotonic() + (1.0 if lived < 1.0 else 0.0)
            self.server.log(f"worker {slot} (pid {pid}) {describe_status(status)}; starting another"
                            + (" in 1 s" if lived < 1.0 else ""))

    def _stop_workers(self):
        self._tell(signal.SIGTERM)
        deadline = time.monotonic() + self.server.settings.timeout + 5.0
        while (self.alive() or self.retiring) and time.monotonic() < deadline:
            self._reap()
            time.sleep(0.02)
        for pid in [*self.pids, *self.retiring]:
            if pid is not None:
                self.server.log(f"worker (pid {pid}) still running after the timeout: killed")
                kill_quietly(pid, signal.SIGKILL)
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass
        self.pids = [None] * self.n_workers
        self.retiring.clear()

    # ------------------------------------------------------------------ a worker
    def _spawn(self, slot):
        parent = os.getpid()
        # the signals held back from the fork until the child has its own handlers: a SIGTERM
        # sent to a worker just forked (a SIGHUP then SIGTERM at once) would otherwise run the
        # parent's handler in it, be lost there, and leave the worker serving (it waits pending)
        pid, held = fork_holding(_SIGNALS)
        if pid:
            self.pids[slot] = pid
            self.started[slot] = time.monotonic()
            return
        def serve():
            self._become_worker(slot, parent)
            signal.pthread_sigmask(signal.SIG_SETMASK, held)    # a pending SIGTERM ends it now, as asked
            asyncio.run(self.server.serve())

        # the parent logs the exit and starts another
        run_child(serve, lambda exc: self.server.log(f"worker {slot}: {traceback.format_exc(limit=5)}"))

    def _become_worker(self, slot, parent):
        signal.set_wakeup_fd(-1)
        for s in _SIGNALS:
            signal.signal(s, signal.SIG_DFL)
        term_with_parent(parent)
        os.close(self._pipe[0])
        os.close(self._pipe[1])
        if self._selector is not None:
            self._selector.close()
        if self.metrics_sock is not None:
            self.metrics_sock.close()
        for release in self.inherited:
            release()
        if self.metrics is not None:
            self.metrics.use_slot(slot)
        self.server.owns_listeners = False
        self.server.worker = slot


def term_with_parent(parent):
    """SIGTERM this worker when the parent dies, even by SIGKILL (Linux's
    PR_SET_PDEATHSIG), so no worker goes on serving unsupervised."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGTERM), 0, 0, 0)     # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:          # the parent died before the call
        os.kill(os.getpid(), signal.SIGTERM)


def fork_holding(signals):
    """``os.fork()`` with ``signals`` blocked across it (stdout and stderr
    flushed first): ``(pid, held)``; the parent's signal mask is restored at
    once, the child returns with them blocked and restores ``held`` once it
    has its own handlers."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    held = signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    try:
        pid = os.fork()
    except BaseException:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        raise
    if pid:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
    return pid, held


def run_child(main, failed):
    """In a child just forked: ``main()``, then ``os._exit`` with what it
    returned (0 for None), or 70 when it raised, ``failed(exception)`` told
    first; the child never returns into its parent's code."""
    code = 70
    try:
        code = main() or 0
    except BaseException as exc:  # noqa: BLE001 - told, and the child ends
        try:
            failed(exc)
        except BaseException:  # noqa: BLE001
            pass
    finally:
        os._exit(code)


def ended_children():
    """(pid, status) of each child process that has ended, reaped now (never waits)."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        yield pid, status


def kill_quietly(pid, signum):
    """``os.kill``, a process gone already is no error."""
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _noop(signum, frame):
    """The signal's number reaches the loop through the wakeup pipe."""
