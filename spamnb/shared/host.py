"""A host's side of shared learning: sending lessons, following the stream, snapshots.

Redis keys (``PREFIX`` = ``spamnb:``):

- ``spamnb:lessons``: the stream; one entry per lesson, field ``r`` (:mod:`spamnb.shared.lessons`).
- ``spamnb:sender:<sender id>``: the sequence number of the last lesson a sender (one
  process: a server, a ``spamnb learn``) added, kept 30 days after its last lesson: a lesson
  is added only past it, so one sent twice (an outbox file sent, then the host killed before
  removing it; a send whose answer was lost) is added once.  A lesson's id is its sender's
  id and its number; a sender's lessons reach Redis in their order (the outbox is drained
  oldest first, and a sender sends directly only while its outbox is empty), so one number a
  sender is all Redis keeps, not one key a lesson.
- ``spamnb:snapshot``: the newest snapshot, a hash: ``pos`` (the stream id of the last
  lesson it includes), ``m:<user>``/``j:<user>`` the model file and journal of each model
  (user "" is the site model; an empty ``m:<user>``: the site model's file, which a new
  user's model shares until it is compacted).
- ``spamnb:trimmed``: the stream was trimmed below this id (XTRIM MINID), the position
  of the snapshot before the newest: a host whose position is below it (down, or behind,
  for more than a snapshot interval) starts again from the newest snapshot.
- ``spamnb:snapshot-lock``: the host publishing a snapshot now (SET NX EX).

Acknowledgement.  :meth:`Sender.send` returns once Redis has the lesson (the
script that adds it answered; with ``appendonly yes`` and ``appendfsync always``
it is on Redis's disk), or once it is in the local outbox (fsynced) when
Redis cannot be reached or the outbox still holds older lessons (they go
first: one host's lessons keep their order).  Queuing locally rather than
refusing keeps a user's "this is spam" from being lost or bounced back to a
mail client during a Redis outage; the price is that other hosts see the
lesson only when Redis returns.

Following.  :class:`Follower` reads the stream after its position in a thread
and applies each lesson with the function the server gives (a local TELL:
learning session, journal, ledger), then saves its position
(``STATE/position``, fsynced) after each batch.  A host killed between
applying and saving its position applies the last lessons again: through the
ledger a learn of a message already learned with that class, or a forget of
a message no longer learned, changes nothing, so nothing is counted twice.

Whoever can write to Redis is not trusted with this host's memory (issue 45).
The stream is read by a script (``_READ``) that walks it one entry at a time
on the Redis side and sends back, for an entry over ``max_entry`` bytes (the
lesson's message at most ``--max-size``, plus ``LESSON_OVERHEAD`` for its
header and user name), its size instead of its bytes: the entry is logged and
skipped, never read here (redis-py reads a reply whole: a check after the
read would come too late).  One read brings at most ``BATCH`` entries and
about ``READ_BYTES`` bytes (at least one entry).  Waiting for new lessons
polls that script (a blocking XREAD would bring an entry of any size): every
``POLL`` seconds for a second after the last lesson, then every
``POLL_QUIET`` seconds; a lesson this host sends wakes its follower at once.
A bookkeeping value (``spamnb:trimmed``, the snapshot's ``pos``) is read at
most 64 bytes long; one that is not a stream id is logged (once per value)
and ignored.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections import OrderedDict

from spamnb.shared import SharedError, client
from spamnb.shared import lessons as lesson_codec
from spamnb.shared.outbox import Outbox

__all__ = ["Sender", "Follower", "stream_id", "PREFIX", "state_dir"]

PREFIX = "spamnb:"
STREAM = PREFIX + "lessons"
SNAPSHOT = PREFIX + "snapshot"
TRIMMED = PREFIX + "trimmed"
SNAPSHOT_LOCK = PREFIX + "snapshot-lock"
_SENDER_TTL = 30 * 86400
BATCH = 64              # lessons read at once (each at most --max-size, 4 MiB by default)
LESSON_OVERHEAD = 64 * 1024 + 256   # a lesson's bytes beyond its message: its header, user name, checksum
READ_BYTES = 16 << 20   # one read brings entries up to about this many bytes (at least one entry)
POLL = 0.01             # seconds between two reads of the stream while lessons flow
POLL_QUIET = 0.2        # ... once none came for a second
RETRY_AFTER = 1.0       # seconds after Redis failed during which lessons go to the outbox without trying it
# add a lesson once: only past the last number its sender added (atomic: a script); numbers are
# 16 hex digits, compared as strings.  A lesson added before answers false.
_ADD_ONCE = """
local last = redis.call('GET', KEYS[2])
if last and last >= ARGV[3] then return false end
local id = redis.call('XADD', KEYS[1], '*', 'r', ARGV[1])
redis.call('SET', KEYS[2], ARGV[3], 'EX', tonumber(ARGV[2]))
return id
"""
# one read: up to ARGV[2] entries after ARGV[1], one XRANGE COUNT 1 at a time; an entry over ARGV[3]
# bytes answered as {id, its size} (never its bytes), one within as {id, field r or ""}; stops once
# ARGV[4] bytes were walked (at least one entry).  First: when KEYS[2] (spamnb:trimmed) holds a stream id
# above ARGV[1] and KEYS[3] (the snapshot) has a position, only {"trimmed"} (checked in the same script as
# the read, at every read: no lesson trimmed away between the check and the read is passed over unseen)
_READ = """
local function parse(id)
  local ms, seq = string.match(id or '', '^(%d+)-(%d+)$')
  if not ms then return nil end
  return {tonumber(ms), tonumber(seq)}
end
do
  local ok, trimmed = pcall(redis.call, 'GETRANGE', KEYS[2], 0, 63)
  local has, snapshot = pcall(redis.call, 'HEXISTS', KEYS[3], 'pos')
  local t, p = parse(ok and trimmed or nil), parse(ARGV[1])
  if has and snapshot == 1 and t and p and (t[1] > p[1] or (t[1] == p[1] and t[2] > p[2])) then
    return {'trimmed'}
  end
end
local out = {}
local walked = 0
local after = ARGV[1]
for i = 1, tonumber(ARGV[2]) do
  local found = redis.call('XRANGE', KEYS[1], '(' .. after, '+', 'COUNT', 1)
  if #found == 0 then break end
  local id, fields = found[1][1], found[1][2]
  local size, body = 0, ''
  for j = 1, #fields, 2 do
    size = size + #fields[j] + #fields[j + 1]
    if fields[j] == 'r' then body = fields[j + 1] end
  end
  if size > tonumber(ARGV[3]) then out[#out + 1] = {id, size} else out[#out + 1] = {id, body} end
  found, fields, body = nil, nil, nil
  after = id
  walked = walked + size
  if walked >= tonumber(ARGV[4]) then break end
end
return out
"""


def stream_id(value):
    """A stream id ("ms-seq", bytes or str) as a comparable tuple."""
    if isinstance(value, bytes):
        value = value.decode("ascii")
    ms, _, seq = str(value).partition("-")
    return (int(ms), int(seq or 0))


def state_dir(model_path, given=None):
    """Where a host keeps its outbox and position: ``given``, else beside the site model (MODEL.shared/)."""
    from spamnb.persistence.store import resolve

    return given or resolve(model_path) + ".shared"


def _redis_errors():
    import redis

    return (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError, redis.ReadOnlyError)


class Sender:
    """Sends lessons to the stream, through the outbox when Redis cannot take them."""

    def __init__(self, url, folder, log=None):
        self.redis = client(url)
        self.errors = _redis_errors()
        self.outbox = Outbox(os.path.join(folder, "outbox"))
        self.log = log or (lambda line: None)
        self._lock = threading.Lock()
        self._add = self.redis.register_script(_ADD_ONCE)
        self.ident = os.urandom(8)          # this sender's id; its lessons are numbered from 1
        self._numbers = itertools.count(1)
        self.down_since = None
        self.last_failure = float("-inf")
        self.sent = lambda: None        # called once Redis took a lesson sent directly (the follower's wake-up)

    def _send(self, record):
        lesson = lesson_codec.decode(record)   # ValueError: never sent
        sender, number = lesson.lesson_id[:8].hex(), lesson.lesson_id[8:].hex()
        return self._add(keys=[STREAM, PREFIX + "sender:" + sender], args=[record, _SENDER_TTL, number])

    def send(self, lesson):
        """Send ``lesson``; returns its stream id (bytes) once Redis has it, or
        None once it is queued in the outbox (fsynced)."""
        with self._lock:
            lesson.lesson_id = self.ident + next(self._numbers).to_bytes(8, "big")
            record = lesson_codec.encode(lesson)
            recently_down = self.down_since is not None and time.monotonic() - self.last_failure < RETRY_AFTER
            if not recently_down and not self.outbox.names():
                try:
                    entry = self._send(record)
                    self.sent()
                    return entry
                except self.errors as exc:
                    self._down(exc)
            self.outbox.put(record)
        if not recently_down:
            self.drain()    # older lessons queued (another process's, say): they go first
        return None

    def _down(self, exc):
        self.last_failure = time.monotonic()
        if self.down_since is None:
            self.down_since = time.monotonic()
            self.log(f"shared: Redis unreachable ({exc}); lessons are queued in {self.outbox.folder}")

    def drain(self):
        """Send what the outbox holds, oldest first; False when Redis is still unreachable."""
        if not self.outbox.names():
            return True     # nothing to send: nothing learned about Redis either
        try:
            sent = self.outbox.drain(self._send, bad=self.log)
        except self.errors as exc:
            self._down(exc)
            return False
        if self.down_since is not None or sent:
            self.down_since = None
            self.log(f"shared: Redis reachable; {sent} queued lesson{'s' if sent != 1 else ''} sent")
        return True


class Follower:
    """Follows the stream in a thread, applying lessons with ``apply(lessons)``
    (consecutive lessons for one user; returns what each learn did); publishes
    snapshots every ``snapshot_every`` seconds (0: never) and starts from the
    newest one when its position is missing or trimmed.

    ``models()``: the (user, path) of every model this host has (for a snapshot);
    ``model_for(user)``: where a snapshot's model of ``user`` goes (None: not taken);
    ``idle()``: called when a read found nothing new (``block_ms`` of quiet)."""

    def __init__(self, url, folder, apply, models, model_for, log=None, snapshot_every=300.0, block_ms=1000,
                 idle=None, max_size=4 << 20):
        self.url, self.folder = url, folder
        self.apply, self.models, self.model_for, self.idle = apply, models, model_for, idle
        self.log = log or (lambda line: None)
        self.snapshot_every, self.block_ms = snapshot_every, block_ms
        self.redis = client(url, timeout=block_ms / 1000 + 5)
        self.errors = _redis_errors()
        self.max_entry = max_size + LESSON_OVERHEAD   # a stream entry over this is skipped, never read
        self._read = self.redis.register_script(_READ)
        self._said = set()                            # the malformed bookkeeping values already logged
        self.sender = Sender(url, folder, self.log)
        self.wake = threading.Event()       # set when this host sent a lesson (and at stop)
        self.sender.sent = self.wake.set
        self.last_lesson = time.monotonic()
        self.position_path = os.path.join(folder, "position")
        self.position = self._read_position()
        self.applying = threading.Lock()     # held while lessons are applied (a snapshot waits for it)
        self.changed = threading.Condition()
        self.outcomes = OrderedDict()        # lesson id -> what applying it did (the last 1024)
        self._stop = threading.Event()
        self._thread = None
        self._next_snapshot = time.monotonic() + snapshot_every if snapshot_every else None
        self.connected = None

    # ------------------------------------------------------------ position
    def _read_position(self):
        try:
            with open(self.position_path, encoding="ascii") as f:
                text = f.read().strip()
            stream_id(text)
            return text
        except (OSError, ValueError):
            return None

    def _save_position(self, position):
        from spamnb.persistence.store import replace_file

        replace_file(self.position_path, lambda f: f.write(position.encode("ascii") + b"\n"), mode=0o600)
        with self.changed:
            self.position = position
            self.changed.notify_all()

    def bookkeeping(self, key, field=None):
        """The stream id a bookkeeping key holds (``spamnb:trimmed``, a hash's ``field``), as text; None
        when it is missing, or (logged once per value) not a stream id.  At most 64 bytes are read."""
        import redis

        try:
            if field is None:
                raw = self.redis.getrange(key, 0, 63)
            elif self.redis.hstrlen(key, field) > 64:
                raw = b"(longer than 64 bytes)"
            else:
                raw = self.redis.hget(key, field)
        except redis.ResponseError as exc:      # a key of the wrong type, say
            raw = f"({exc})".encode()
        if not raw:
            return None
        try:
            text = raw.decode("ascii")
            stream_id(text)
            return text
        except (UnicodeDecodeError, ValueError):
            where = key + (f" {field}" if field else "")
            if (where, raw) not in self._said:
                self._said.add((where, raw))
                if len(self._said) > 1024:
                    self._said.clear()
                self.log(f"shared: {where} holds {raw[:64]!r}, not a stream id: ignored")
            return None

    def applied(self, entry_id):
        return self.position is not None and stream_id(self.position) >= stream_id(entry_id)

    def wait_applied(self, entry_id, timeout):
        """Wait until the lesson at ``entry_id`` is applied here; False on timeout."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while not self.applied(entry_id):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.changed.wait(left)
        return True

    # ------------------------------------------------------------ start
    def start(self, sync_timeout=30.0):
        """Catch up (a snapshot when needed, then the stream to its end) for at
        most ``sync_timeout`` seconds, then follow in a thread.  Redis
        unreachable: the host starts with the models it has and catches up later."""
        os.makedirs(self.folder, mode=0o700, exist_ok=True)
        deadline = time.monotonic() + sync_timeout
        try:
            self._catch_up_start()
            while time.monotonic() < deadline and self._step(block=False):
                pass
            self.connected = True
        except self.errors as exc:
            self.log(f"shared: Redis unreachable at start ({exc}); serving the local models, following later")
            self.connected = False
        self._thread = threading.Thread(target=self._run, name="spamnb-shared", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout=5.0):
        self._stop.set()
        self.wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _catch_up_start(self):
        """From the snapshot when this host has no position, or its position was trimmed away."""
        trimmed = self.bookkeeping(TRIMMED)
        if self.position is not None and (trimmed is None or stream_id(self.position) >= stream_id(trimmed)):
            return
        pos = self.bookkeeping(SNAPSHOT, "pos")
        if pos is None:
            if self.position is None:
                self._save_position("0-0")   # the stream from its start, over the model this host has
            return
        self.install_snapshot()

    def install_snapshot(self):
        from spamnb.persistence.journal import journal_path, start
        from spamnb.persistence.store import locked, replace_file

        started = time.monotonic()
        with self.applying:
            snapshot = self.redis.hgetall(SNAPSHOT)
            try:
                pos = snapshot.pop(b"pos").decode("ascii")
                stream_id(pos)
            except (KeyError, UnicodeDecodeError, ValueError):
                self.log("shared: the snapshot has no stream position (spamnb:snapshot pos): not installed")
                return
            n = 0
            for key, data in snapshot.items():
                if not key.startswith(b"m:"):
                    continue
                user = key[2:].decode("utf-8")
                path = self.model_for(user)
                if path is None:
                    continue
                os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
                journal = snapshot.get(b"j:" + key[2:], b"")
                if not data:     # the site model's file: a copy of it
                    data = snapshot.get(b"m:", b"")
                with locked(path) as real:
                    replace_file(real, lambda f: f.write(data))
                    if journal:
                        replace_file(journal_path(real), lambda f: f.write(journal))
                    else:   # none in the snapshot: one without records for the file (the old one stale)
                        start(real)
                n += 1
            self._save_position(pos)
        self.log(f"shared: started from the snapshot at {pos} ({n} model{'s' if n != 1 else ''}, "
                 f"{time.monotonic() - started:.1f} s)")

    # ------------------------------------------------------------ the thread
    def _run(self):
        quiet = False
        while not self._stop.is_set():
            try:
                if self.connected is not True:
                    self._catch_up_start()
                    if self.connected is False:
                        self.log("shared: Redis reachable again; following the stream")
                    self.connected = True
                self.sender.drain()
                if not self._step(block=True) and self.idle is not None:
                    with self.applying:
                        self.idle()     # nothing came for a while: housekeeping (compactions)
                self._maybe_snapshot()
                quiet = False
            except self.errors as exc:
                if not quiet:
                    self.log(f"shared: Redis unreachable ({exc}); scoring goes on with the local models")
                    quiet = True
                self.connected = False
                self._stop.wait(1.0)
            except Exception as exc:   # noqa: BLE001 - the thread must go on; said once per kind
                self.log(f"shared: {type(exc).__name__}: {exc}")
                self._stop.wait(1.0)

    def _step(self, block):
        """Read and apply one batch; True when there were lessons."""
        # a malformed bookkeeping key is logged once; the read script itself checks, at every read, whether
        # the stream was trimmed past this host's position (a check made once before a wait that lasts
        # block_ms missed a trim made meanwhile, and the lessons between were skipped)
        self.bookkeeping(TRIMMED)
        self.bookkeeping(SNAPSHOT, "pos")
        entries = self.read()
        waited = time.monotonic()
        while block and not entries and time.monotonic() - waited < self.block_ms / 1000:
            quiet = time.monotonic() - self.last_lesson > 1.0
            self.wake.wait(POLL_QUIET if quiet else POLL)
            self.wake.clear()
            if self._stop.is_set():
                return False
            entries = self.read()
        if entries == "trimmed":
            self.log(f"shared: the stream was trimmed past this host's position {self.position}")
            self.install_snapshot()     # lessons after our position are gone: the snapshot has them
            return True
        if not entries:
            return False
        self.last_lesson = time.monotonic()
        batch = []
        for entry_id, body in entries:
            where = entry_id.decode("ascii")
            if isinstance(body, int):
                self.log(f"shared: stream entry {where} skipped: {body} bytes, over the {self.max_entry} a lesson "
                         f"may have here (--max-size + {LESSON_OVERHEAD}); not read")
                continue
            try:
                batch.append(lesson_codec.decode(body))
            except ValueError as exc:
                self.log(f"shared: stream entry {where} skipped: {exc}")
        with self.applying:
            # consecutive lessons for one model are applied in one session (one journal record)
            start = 0
            while start < len(batch):
                end = start + 1
                while end < len(batch) and batch[end].user == batch[start].user:
                    end += 1
                group = batch[start:end]
                try:
                    outcomes = self.apply(group)
                except Exception as exc:   # noqa: BLE001 - lessons a model refuses must not stop the host
                    self.log(f"shared: {len(group)} lesson(s) for {group[0].user or 'the site model'} "
                             f"not applied: {type(exc).__name__}: {exc}")
                    outcomes = [None] * len(group)
                for lesson, outcome in zip(group, outcomes):
                    self.outcomes[lesson.lesson_id] = outcome
                start = end
            while len(self.outcomes) > 1024:
                self.outcomes.popitem(last=False)
            self._save_position(entries[-1][0].decode("ascii"))
        return True

    def read(self):
        """The next entries after this host's position: [(id, the lesson's bytes, or the size of an entry
        over ``max_entry``)] (the ``_READ`` script: an entry too large never crosses the network);
        "trimmed" when a snapshot is published and the stream was trimmed past the position."""
        answer = self._read(keys=[STREAM, TRIMMED, SNAPSHOT], args=[self.position or "0-0", BATCH, self.max_entry,
                                                          max(READ_BYTES, self.max_entry)])
        if answer and not isinstance(answer[0], list):
            return "trimmed"
        return [(entry[0], entry[1]) for entry in answer]

    # ------------------------------------------------------------ snapshots
    def _maybe_snapshot(self):
        if self._next_snapshot is None or time.monotonic() < self._next_snapshot:
            return
        self._next_snapshot = time.monotonic() + self.snapshot_every
        if self.redis.set(SNAPSHOT_LOCK, os.uname().nodename, nx=True, ex=max(1, int(self.snapshot_every))):
            self.publish_snapshot()

    def publish_snapshot(self):
        """Publish this host's models with the stream position they include; trim the stream behind it."""
        from spamnb.persistence.journal import journal_path
        from spamnb.persistence.store import locked

        with self.applying:
            pos = self.position
            if pos is None or pos == "0-0":
                return None
            fields = {"pos": pos}
            site = None
            for user, path in self.models():
                with locked(path) as real:
                    try:
                        st = os.stat(real)
                        if user and site is not None and (st.st_dev, st.st_ino) == site:
                            fields["m:" + user] = b""   # the site model's very file (a new user's, linked)
                        else:
                            with open(real, "rb") as f:
                                fields["m:" + user] = f.read()
                    except FileNotFoundError:
                        continue
                    if not user:
                        site = (st.st_dev, st.st_ino)
                    try:
                        with open(journal_path(real), "rb") as f:
                            fields["j:" + user] = f.read()
                    except FileNotFoundError:
                        fields["j:" + user] = b""
        # the stream is trimmed below the snapshot before this one: the oldest still needed, by a
        # host less than one interval behind (it follows on without installing a snapshot)
        previous = self.bookkeeping(SNAPSHOT, "pos")     # None when missing or malformed (logged)
        pipe = self.redis.pipeline(transaction=True)
        pipe.delete(SNAPSHOT)
        pipe.hset(SNAPSHOT, mapping=fields)
        if previous is not None:
            pipe.set(TRIMMED, previous)
            pipe.xtrim(STREAM, minid=previous, approximate=False)
        pipe.execute()
        self.log(f"shared: snapshot published at {pos}"
                 + (f"; stream trimmed below the one before, {previous}" if previous else ""))
        return pos
