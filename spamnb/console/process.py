"""Where the console runs: two processes of its own, forked (through a
keeper) by the server's parent (spamnb.server.launch calls :func:`attach`)
once the site model is loaded and privileges are dropped, before the
workers are forked: the console (the pages and the API) and the recorder
(:class:`Recorder`: the workers' records into the history).

Why there: each worker runs one asyncio loop that answers checks; HTTP,
SQLite writes and page queries there would take that loop's time from the
checks, and with several workers there would be several histories.  The
parent forks (no threads) and only supervises.  Processes of their own
keep the console's memory and CPU apart and measurable, and a fault in
either costs no check: the workers write their records to the recorder's
Unix socket without waiting (spamnb.console.records), and go on if it is
gone.  The recorder, whose work grows with the checks, runs under
Linux's SCHED_IDLE policy (:func:`_idle`): on a machine whose cores the
checks fill it waits for them, the records held in the workers' bounded
queues and spools meanwhile (past them dropped and counted).  The console
runs :data:`NICE` steps nicer: its work is a person's clicks, small and
bounded a request, and a person waits for it.

The parent forks a :class:`Keeper` there, which forks both and starts
another when one dies (a bounded back-off, one log line each), and passes
the server's SIGHUP on: the console re-reads ``--ui-users``.  The record
socket lives in a private (0700) folder made for it; the parent removes it
at exit.  The records' spool (:func:`spool_path`: a folder beside the
history) is kept: what a stop leaves there the next start stores first.  The keeper dies with the parent and its children with the keeper
(Linux's PR_SET_PDEATHSIG); all end on SIGTERM."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import struct
import tempfile
import time

from spamnb.console.records import SPOOL_READY, FrameReader, RecordSender, peek, spool_files, write_all
from spamnb.server.workers import (describe_status, ended_children, fork_holding, kill_quietly, run_child,
                                   term_with_parent)

__all__ = ["attach", "Keeper", "Recorder", "NICE", "RECORDER_NICE"]

NICE = 0        # the console process's niceness above the server's (pages: a person waits for them)


class Recorder:
    """The records' writer: the workers' frames from the record socket
    (``listener``) into ``history``, one transaction a batch
    (:data:`BATCH` records or :data:`BATCH_BYTES`, or what came in
    :data:`BATCH_SECONDS` after its first record).  It runs in a process
    of its own (:meth:`Keeper.spawn`) at the lowest priority (:func:`_idle`):
    the checks and the pages come first.  The queue is bounded: each worker's
    transport buffer (spamnb.console.records.QUEUE_BYTES), then its spool
    (SPOOL_BYTES: past it the worker drops the record and counts it), the
    sockets' buffers and one batch here;
    while a batch is written nothing is read.  The counts it writes with each
    batch (``received``; ``dropped``: the latest count each worker reported,
    by its process id) are what the dashboard and the history page show."""

    def __init__(self, history, listener, folder=None):
        self.history, self.listener = history, listener
        if folder is None:
            name = listener.getsockname()
            folder = os.path.dirname(name) if isinstance(name, str) and name else None
        self.folder = folder        # the workers' spools (spamnb.console.records): read when the sockets are
        self.readers = {}           # connection -> its FrameReader
        self.batch, self.batch_bytes, self.first = [], 0, None
        self.received = 0
        self.drops = {}             # worker pid -> the drops it last reported (at most MAX_WORKERS kept)
        self.counts_due = False     # a count changed with no record to write it with
        self.spooled = None         # the spool file being read: (path, file, FrameReader)
        self.read_spools = []       # spool files read whole: deleted once their records are committed
        self.positions = {}         # spool file -> the offset its records in the batch reach (committed with them)
        self.deleted = []           # spool files deleted since the last commit: their offsets forgotten with it
        self.scanned = 0.0          # the last look for spool files (time.monotonic())
        self.from_spool = 0         # records read from the spools (counted with the others in ``received``)
        self.from_sockets = []      # the batch's frames read from the workers' connections (kept at a stop)
        self.rescued = None         # stopping: the frames read from the connections since, for the spool ...
        self.rescue_fd, self.rescue_name = None, ""     # ... and the recorder's spool file they go to
        self.last = 0.0             # the last batch stored (time.monotonic()): idle IDLE_SECONDS after it ...
        self.unindexed = True       # ... the rows stored since are added to the search index (History.index)

    def dropped(self):
        return sum(self.drops.values())

    def run(self, stopping):
        """Read and write until ``stopping()`` is true (checked at least every
        :data:`BATCH_SECONDS`), then store nothing more: read on until the
        workers' connections are closed (a worker stopping spools what it
        gathered and lets its socket's queue drain first:
        spamnb.console.records.RecordSender.close), for :data:`STOP_SECONDS`
        at most, and put every record read from the connections and not
        committed (the batch's, then these) in a spool file of its own,
        written to disk (:meth:`rescue`).  The records the batch held from
        the spool files are still there past their committed offsets.  The
        next start's recorder stores the spool first: a stop loses no record
        however slow the recorder (a saturated machine, SCHED_IDLE), and
        costs it a read and one write, no transaction."""
        import selectors

        select = selectors.DefaultSelector()
        self.listener.setblocking(False)
        select.register(self.listener, selectors.EVENT_READ)
        self.history.forget_spools(os.path.exists)
        ending = None
        while True:
            if ending is None and stopping():
                ending = time.monotonic() + STOP_SECONDS
                self._stop_storing()
            wait = BATCH_SECONDS if self.first is None else max(0.0, self.first + BATCH_SECONDS - time.monotonic())
            if self.spooled is not None or ending is not None:
                wait = min(wait, 0.0 if self.spooled is not None else 0.05)
            events = select.select(wait)
            if ending is not None and (time.monotonic() >= ending or (not events and not self.readers)):
                break       # (a connection still in the listener's backlog is an event: accepted first)
            for key, _ in events:
                if key.fileobj is self.listener:
                    self._accept(select)
                else:
                    self._read(select, key.fileobj)
            if ending is not None:
                self._save()
                continue
            if len(self.batch) < BATCH and self.batch_bytes < BATCH_BYTES:
                self._read_spool()
            if self.batch and (len(self.batch) >= BATCH or self.batch_bytes >= BATCH_BYTES
                               or time.monotonic() - self.first >= BATCH_SECONDS):
                self.write()
            elif self.counts_due and not self.batch:
                self.counts_due = False
                self.history.count(received=self.received, dropped=self.dropped(), spooled=self.from_spool)
            elif (self.unindexed and not events and not self.batch and self.spooled is None
                  and time.monotonic() - self.last >= IDLE_SECONDS):
                # idle: the rows stored since are added to the search index (a search would add them first)
                try:
                    self.unindexed = self.history.index(INDEX_ROWS) >= INDEX_ROWS
                except Exception:  # noqa: BLE001 - the history locked past its timeout: after the next idle spell
                    self.last = time.monotonic()
        if ending is None:
            self.write()
        else:
            self.rescue()

    def _stop_storing(self):
        """Stopping: the batch's frames read from the connections kept for
        the spool (:meth:`rescue`), those read from spool files forgotten
        (their offsets not committed: read again from there), the spool
        file being read let go."""
        self.rescued = bytearray()
        for frame in self.from_sockets:
            self.rescued += len(frame).to_bytes(4, "big") + frame
        self.batch, self.from_sockets, self.batch_bytes, self.first = [], [], 0, None
        self.positions, self.read_spools = {}, []
        if self.spooled is not None:
            self.spooled[1].close()
            self.spooled = None
        self._save()        # on disk at once: they were only in this process's memory

    def _save(self):
        """Stopping: the frames read from the connections so far appended to
        the recorder's own spool file (``spool-0-<time>.part``: the workers'
        are ``spool-PID-SEQ``), one write a read: a recorder killed at the
        keeper's deadline leaves them there (the next start hands a ``.part``
        file over)."""
        if not self.rescued or self.folder is None:
            return
        data, self.rescued = self.rescued, bytearray()
        try:
            if self.rescue_fd is None:
                self.rescue_name = os.path.join(self.folder, f"spool-0-{time.time_ns():020d}")
                self.rescue_fd = os.open(self.rescue_name + ".part",
                                         os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC, 0o600)
            write_all(self.rescue_fd, data)
        except OSError:
            pass        # the disk refused: these records are lost (the workers' spools are not)

    def rescue(self):
        """At the stop's end: the recorder's spool file written to disk
        (``fsync``) and handed over for the next start; then the spool files
        deleted since the last commit forgotten (a name may be used again)."""
        self._save()
        self.rescued = None
        fd, self.rescue_fd = self.rescue_fd, None
        if fd is not None:
            try:
                os.fsync(fd)
                os.close(fd)
                os.rename(self.rescue_name + ".part", self.rescue_name + SPOOL_READY)
            except OSError:
                pass        # left as .part: handed over at the next start
        deleted, self.deleted = self.deleted, []
        if deleted:
            self.history.add_frames([], None, None, deleted)

    def _accept(self, select):
        import selectors

        try:
            conn, _ = self.listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        if len(self.readers) >= MAX_WORKERS:
            conn.close()
            return
        conn.setblocking(False)
        self.readers[conn] = FrameReader()
        select.register(conn, selectors.EVENT_READ)

    def _read(self, select, conn):
        try:
            data = conn.recv(READ_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        try:
            frames = self.readers[conn].feed(data) if data else None
        except ValueError:
            frames = None       # a frame past the limit: that connection is closed
        if frames is None:
            select.unregister(conn)
            del self.readers[conn]
            conn.close()
            return
        for frame in frames:
            self._frame(frame)

    def _read_spool(self):
        """Read :data:`READ_BYTES` of the oldest spool file the workers handed
        over (looked for at most every :data:`SPOOL_SCAN` seconds when none is
        being read), from where the records stored before end (the offset
        committed with them: a recorder that died while reading it resumes
        there, so no record is stored twice); a file read whole is deleted
        once its records are committed (:meth:`write`)."""
        if self.spooled is None:
            now = time.monotonic()
            if self.folder is None or now - self.scanned < SPOOL_SCAN:
                return
            self.scanned = now
            taken = set(self.read_spools)
            for path in spool_files(self.folder):
                if path in taken:
                    continue
                try:
                    file = open(path, "rb")
                except OSError:
                    continue
                file.seek(self.history.spool_offset(path))
                self.spooled = (path, file, FrameReader())
                break
            else:
                return
        path, file, reader = self.spooled
        try:
            data = file.read(READ_BYTES)
            frames = reader.feed(data) if data else None
        except (OSError, ValueError):
            frames = None       # unreadable, or a frame past the limit: the rest of that file is skipped
        if frames is None:
            try:
                self.positions[path] = max(file.tell(), self.positions.get(path, 0))
            except (OSError, ValueError):
                pass
            file.close()
            self.spooled = None
            self.scanned = 0.0      # the next file at once
            self.read_spools.append(path)
            if not self.batch:
                self.write()        # nothing of it waits to be committed: its offset, then the file, go now
            return
        before = self.received
        for frame in frames:
            self._frame(frame, spooled=True)
        self.positions[path] = file.tell() - len(reader.buffer)     # the frames read whole are in the batch
        self.from_spool += self.received - before

    def _delete_read(self):
        for path in self.read_spools:
            try:
                os.unlink(path)
            except OSError:
                pass
            self.deleted.append(path)
        self.read_spools = []

    def _frame(self, frame, spooled=False):
        try:
            pid, dropped, count_alone = peek(frame)
        except (ValueError, TypeError, struct.error):
            return
        if pid not in self.drops and len(self.drops) >= MAX_WORKERS:
            self.drops.pop(next(iter(self.drops)))
        self.drops[pid] = max(self.drops.get(pid, 0), dropped)
        if count_alone:
            self.counts_due = True      # a worker's count of drops alone: no check, nothing stored
            return
        if self.rescued is not None:
            if not spooled:     # stopping: kept for the spool (and counted when read from it)
                self.rescued += len(frame).to_bytes(4, "big") + frame
            return
        self.received += 1
        if not spooled:
            self.from_sockets.append(frame)
        if self.first is None:
            self.first = time.monotonic()
        self.batch.append(frame)        # read whole when the batch is stored (History.add_frames)
        self.batch_bytes += len(frame) + 512

    def write(self):
        """The batch, the counts and the spools' offsets in one transaction;
        then the spool files read whole are deleted (their offsets forgotten
        with the next commit)."""
        batch, self.batch, self.batch_bytes, self.first = self.batch, [], 0, None
        self.from_sockets = []
        positions, self.positions = self.positions, {}
        deleted, self.deleted = self.deleted, []
        self.counts_due = False
        if batch:
            self.last, self.unindexed = time.monotonic(), True
        if batch or positions or deleted:
            self.history.add_frames(batch, {"received": self.received, "dropped": self.dropped(),
                                            "spooled": self.from_spool}, positions, deleted)
        self._delete_read()     # their records committed (or none were in them)


BATCH = 2000                # records written in one transaction, at most ...
BATCH_BYTES = 16 * 1024 * 1024      # ... and their bytes (header blocks and kept messages)
BATCH_SECONDS = 0.25        # a record waits this long at most to be written (a page shows it then)
READ_BYTES = 256 * 1024     # read from a worker's connection (or a spool file) at once
SPOOL_SCAN = 0.25           # the workers' spool folder is looked at this often at most, when no file is being read
STOP_SECONDS = 9.5          # a recorder told to stop reads on this long at most, once it sees the stop
KEEPER_STOP_SECONDS = 30.0  # the keeper kills the console and the recorder this long after their SIGTERM: a
# recorder in a transaction when the stop came (seconds at nice 19 on a saturated machine) ends it, then
# spools what it holds: killed in it, the batch's records read from its connections
# would be lost (those from spool files are read again)
IDLE_SECONDS = 1.0          # the recorder is idle this long after its last record: it fills the search index ...
INDEX_ROWS = 5000           # ... this many rows a transaction (spamnb.console.history.History.index)
MAX_WORKERS = 1024          # record connections (one a worker) at once, and workers whose drops are counted
RECORDER_NICE = 19          # the recorder's niceness above the server's (the console's is NICE)


def history_path(settings):
    return settings.ui_history or os.path.join(os.path.dirname(os.path.abspath(settings.model)), "history.sqlite")


def spool_path(settings):
    """The records' spool (spamnb.console.records): a folder beside the
    history, kept across restarts (what a stop leaves there is stored at
    the next start)."""
    return history_path(settings) + "-spool"


def open_spool(folder):
    """Make the spool's folder (0700); the files a killed worker was still
    writing (``.part``) handed over: no worker of an earlier run writes
    them any more."""
    os.makedirs(folder, mode=0o700, exist_ok=True)
    for name in os.listdir(folder):
        if name.startswith("spool-") and name.endswith(".part"):
            try:
                os.rename(os.path.join(folder, name), os.path.join(folder, name[:-len(".part")] + SPOOL_READY))
            except OSError:
                pass


def attach(server, release=()):
    """With ``--ui``: bind the console's address, fork the console's keeper
    (:class:`Keeper`: it forks the console process and starts another when
    one dies), and hook the record sender into ``server`` (its handler's
    verdict hooks, its request hooks, its ``on_ready``: each worker connects
    once listening) and the SIGHUP into its ``reload_hooks``.  ``release``:
    a list of what a forked process lets go of; the console's sockets are
    added to it (the workers close them).  Returns a function that stops the
    console, or None."""
    settings = server.settings
    if settings.ui is None:
        return None
    from spamnb.console.auth import Users
    from spamnb.server.listeners import bind_tcp

    users = Users(settings.ui_users)        # a bad users file stops the start, with its line
    spool = spool_path(settings)
    open_spool(spool)
    folder = tempfile.mkdtemp(prefix="spamnb-ui-")
    path = os.path.join(folder, "records")
    records = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    records.bind(path)
    records.listen(256)
    http_socks = bind_tcp(settings.ui[1], settings.ui[2], backlog=64)
    port = http_socks[0].getsockname()[1] if http_socks else settings.ui[2]
    url = f"{'https' if settings.ui_tls else 'http'}://{settings.ui[1]}:{port}/"
    given = list(release)       # what the server's own children let go of (pid file, notifier, ...)
    parent = os.getpid()
    pid, _ = fork_holding(KEEPER_SIGNALS)     # the keeper keeps them blocked: it waits for them
    if pid == 0:
        def keep():
            for listener in server.listeners:
                listener.sock.close()
            for function in given:
                function()
            term_with_parent(parent)
            os.nice(NICE)
            return Keeper(server, users, records, http_socks, url).run()

        # logged; the server goes on without its console
        run_child(keep, lambda exc: server.log(f"console: stopped: {type(exc).__name__}: {exc}"))
    records.close()
    for sock in http_socks:
        sock.close()
    sender = RecordSender(path, keep=settings.ui_keep_messages > 0, spool=spool)
    server.handler.verdict_hooks.append(sender.on_verdict)
    server.request_hooks.append(sender.on_request)
    server.on_ready.append(sender.connect)
    server.on_stop.append(sender.close)

    def hangup():
        if os.getpid() == parent:       # a worker that took a SIGHUP itself has no keeper to tell
            kill_quietly(pid, signal.SIGHUP)

    server.reload_hooks.append(hangup)

    def stop():
        try:
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + KEEPER_STOP_SECONDS + 5.0
            while time.monotonic() < deadline:
                done, _ = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
                time.sleep(0.02)
            else:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass        # reaped already (the supervisor reaps every child)
        shutil.rmtree(folder, ignore_errors=True)

    return stop


KEEPER_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD)
BACKOFF_FIRST = 1.0         # seconds before a console that died is started again ...
BACKOFF_MAX = 60.0          # ... doubled while they keep dying, up to this
STEADY = 60.0               # a console that lived this long starts the back-off afresh


class Keeper:
    """The console's keeper: a process forked by the server's parent that
    does nothing but fork the console's two processes, the console (HTTP:
    the pages and the API) and the recorder (:class:`Recorder`: the
    workers' records into the history), start another when one dies (after
    :data:`BACKOFF_FIRST` seconds, doubled for each one that dies within
    :data:`STEADY` seconds of its start, at most :data:`BACKOFF_MAX`; one log
    line each), pass SIGHUP on to the console (it re-reads ``--ui-users``),
    and stop both on SIGTERM.  It holds their listening sockets, so a new
    console answers on the same address and the workers' record connections
    made meanwhile wait in the socket's backlog.

    Why a process of its own and not the server's supervisor
    (spamnb.server.workers): with ``--workers 1`` there is none, and the
    single server runs threads (the model loader, TELL's learners) and an
    asyncio loop, from which a fork is not safe; the keeper is forked where
    the console always was, before any of them, and forks from a process
    that has no thread and no loop.  It waits with ``sigtimedwait`` on
    signals it keeps blocked: no handler, no race."""

    def __init__(self, server, users, records, http_socks, url):
        self.server, self.users, self.records, self.http_socks, self.url = server, users, records, http_socks, url
        # per process: pid (None while down), started, back-off delay, when due
        self.children = {name: {"pid": None, "started": 0.0, "delay": 0.0, "due": 0.0}
                         for name in ("console", "recorder")}
        self.restarts = 0

    def run(self):
        for name in self.children:
            self.spawn(name)
        while True:
            down = [child["due"] for child in self.children.values() if child["pid"] is None]
            timeout = max(0.0, min(down) - time.monotonic()) if down else 5.0
            info = signal.sigtimedwait(KEEPER_SIGNALS, min(timeout, 5.0) or 0.001)
            self.reap()
            if info is not None and info.si_signo in (signal.SIGTERM, signal.SIGINT):
                return self.stop()
            console = self.children["console"]["pid"]
            if info is not None and info.si_signo == signal.SIGHUP and console is not None:
                kill_quietly(console, signal.SIGHUP)
            for name, child in self.children.items():
                if child["pid"] is None and time.monotonic() >= child["due"]:
                    self.spawn(name)

    def reap(self):
        for pid, status in ended_children():
            for name, child in self.children.items():
                if pid != child["pid"]:
                    continue
                child["pid"] = None
                lived = time.monotonic() - child["started"]
                child["delay"] = (BACKOFF_FIRST if lived >= STEADY or not child["delay"]
                                  else min(child["delay"] * 2, BACKOFF_MAX))
                child["due"] = time.monotonic() + child["delay"]
                self.server.log(f"{name} (pid {pid}) {describe_status(status)} after {lived:.0f} s; "
                                f"starting another in {child['delay']:.0f} s")

    def spawn(self, name):
        keeper = os.getpid()
        pid, _ = fork_holding(KEEPER_SIGNALS)
        if pid:
            self.children[name].update(pid=pid, started=time.monotonic())
            self.restarts += 1
            return

        def console():
            term_with_parent(keeper)
            self.records.close()        # the recorder's
            signal.pthread_sigmask(signal.SIG_UNBLOCK, KEEPER_SIGNALS)
            self.server.log(f"console on {self.url} (pid {os.getpid()})")
            asyncio.run(_serve(self.server, self.users, self.http_socks))

        def recorder():
            term_with_parent(keeper)
            for sock in self.http_socks:
                sock.close()            # the console's
            return _record(self.server, self.records)       # signals stay blocked: it polls them

        run_child(console if name == "console" else recorder, self.stopped)      # logged; the keeper starts another

    def stopped(self, exc):
        self.server.log(f"console: stopped: {type(exc).__name__}: {exc}")

    def stop(self):
        recorder = self.children["recorder"]["pid"]
        if recorder is not None:    # out of SCHED_IDLE first: a saturated machine's recorder sees its SIGTERM now
            _unidle(recorder)
        for child in self.children.values():
            if child["pid"] is not None:
                kill_quietly(child["pid"], signal.SIGTERM)
        deadline = time.monotonic() + KEEPER_STOP_SECONDS
        for child in self.children.values():
            while child["pid"] is not None and time.monotonic() < deadline:
                done, _ = os.waitpid(child["pid"], os.WNOHANG)
                if done:
                    child["pid"] = None
                    break
                time.sleep(0.02)
            if child["pid"] is not None:
                kill_quietly(child["pid"], signal.SIGKILL)
                os.waitpid(child["pid"], 0)
        return 0


def _idle():
    """The recorder's priority: Linux's SCHED_IDLE (it runs on CPU no other
    process wants, apart from the scheduler's least share, a weight of 3
    against a normal process's 1024, and a check's wake-up preempts it), and
    :data:`RECORDER_NICE` steps nicer than the server
    where that policy is missing (the keeper is :data:`NICE` already; Linux
    stops at 19).  Under a saturated machine its records wait in the
    workers' queues and spools meanwhile (spamnb.console.records)."""
    try:
        os.nice(RECORDER_NICE - NICE)
    except OSError:
        pass
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (OSError, AttributeError):
        pass


def _unidle(pid=0):
    """Process ``pid`` (0: this one, the recorder) back to the normal policy
    (at its niceness) once the server stops: an unprivileged process may
    leave SCHED_IDLE for SCHED_OTHER."""
    try:
        if os.sched_getscheduler(pid) == os.SCHED_IDLE:
            os.sched_setscheduler(pid, os.SCHED_OTHER, os.sched_param(0))
    except (OSError, AttributeError):
        pass


def _record(server, records):
    """The recorder process's body: :class:`Recorder` until SIGTERM (or the
    keeper's death), the last batch written."""
    from spamnb.console.history import History

    settings = server.settings
    history = History(history_path(settings), settings.ui_history_rows, settings.ui_history_days,
                      settings.ui_keep_messages)
    recorder = Recorder(history, records, spool_path(settings))
    # idle once ready: its start (the modules, the database opened) at the scheduler's least share would
    # take a saturated machine's recorder tens of seconds, every record of them waiting
    _idle()
    server.log(f"console's recorder (pid {os.getpid()})")
    ending = (signal.SIGTERM, signal.SIGINT)

    def stopping():
        if not any(signum in signal.sigpending() for signum in ending):
            return False
        _unidle()   # the records the workers handed over at the stop are stored now, not on CPU left over
        return True

    recorder.run(stopping)
    history.close()
    return 0


async def _serve(server, users, http_socks):
    from spamnb.console.app import Console
    from spamnb.console.history import History
    from spamnb.console.http import HttpServer

    settings = server.settings
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, done.set)
    server.models.run = lambda function: loop.run_in_executor(server.loader, function)
    history = History(history_path(settings), settings.ui_history_rows, settings.ui_history_days,
                      settings.ui_keep_messages)
    tls = None
    if settings.ui_tls:
        from spamnb.server.listeners import tls_context

        tls = tls_context(settings.ssl_cert, settings.ssl_key)
    hosts = {settings.ui[1], "localhost", "127.0.0.1", "::1", "[::1]"}
    if settings.ui_origin:
        from urllib.parse import urlsplit

        hosts.add(urlsplit(settings.ui_origin).hostname or "")
    app = Console(history, users, server, server.log, hosts, settings.ui_origin)
    loop.add_signal_handler(signal.SIGHUP, app.reload_users)    # the keeper passes the server's SIGHUP on
    http = HttpServer(app, server.log, tls, settings.allows, app.upload_limit)
    await http.start(http_socks)
    await done.wait()
    http.close()
    history.close()
