"""The console's history: one row per check, in SQLite (the standard
library's ``sqlite3``), full-text search on subject and sender (FTS5 when
the SQLite build has it, else LIKE), bounded by rows and by age; the
messages themselves (``--ui-keep-messages``) in a table of their own,
bounded by count.  The console process is the only writer; a page is one
indexed query (``id`` descending, a cursor for the next page: no OFFSET
scan, no COUNT of the table)."""

from __future__ import annotations

import json
import re
import sqlite3
import struct
import time
from email.header import decode_header, make_header

from spamnb.console.records import evidence_of, unpack

__all__ = ["History", "fields_of", "PAGE", "MAX_PAGE"]

PAGE = 50
MAX_PAGE = 200
FIELD_CHARS = 998       # a stored field (subject, sender, ...) at most this long
SEARCH_CHUNK = 500      # full-text matches read at once
SEARCH_CHUNKS = 20      # chunks read for one page of a search, at most
HISTOGRAM_SPAN = 60     # the cutoff page's histogram of log-odds: whole units in [-60, 60]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS history (
    id INTEGER PRIMARY KEY, t REAL NOT NULL, label TEXT, score REAL, log_odds REAL, p REAL,
    user TEXT, front TEXT, verb TEXT, action TEXT, size INTEGER, ms REAL,
    sender TEXT, recipients TEXT, subject TEXT, message_id TEXT,
    evidence TEXT, cutoffs TEXT, reason TEXT, tokens INTEGER, header BLOB, learned TEXT,
    client TEXT, helo TEXT, mail_from TEXT, rcpt_to TEXT, auth TEXT);
CREATE INDEX IF NOT EXISTS history_user ON history(user, id);
CREATE INDEX IF NOT EXISTS history_label ON history(label, id);
CREATE TABLE IF NOT EXISTS kept (id INTEGER PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS actions (id INTEGER PRIMARY KEY, t REAL, who TEXT, what TEXT, record INTEGER, result TEXT);
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS spools (path TEXT PRIMARY KEY, offset INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS search_index (one INTEGER PRIMARY KEY CHECK (one = 1), indexed INTEGER NOT NULL);
"""
ENVELOPE_COLUMNS = ("client", "helo", "mail_from", "rcpt_to", "auth")     # the milter's envelope (a later schema)
_FTS_TABLE = ("CREATE VIRTUAL TABLE IF NOT EXISTS history_fts USING fts5(subject, sender, content='history',"
              " content_rowid='id', columnsize=0)")
_FTS = _FTS_TABLE + """;
DROP TRIGGER IF EXISTS history_ai;
DROP TRIGGER IF EXISTS history_ad;
"""
# columnsize=0: no row of column sizes a record (only a ranking reads them; a search here is in id order); a
# history written before it has its index made again once, at open (:func:`_fts_columnsize`)
# the full-text index is filled lazily, not as rows are stored: the rows up to search_index.indexed are in it,
# those after it are added by :meth:`History.index` (one statement a transaction, no trigger a row) before a
# search reads the index and when the recorder is idle; rows pruned leave it the same way, only those indexed
# (:meth:`History.prune`)
_SAME = 4096            # add_frames' cleaned strings kept, at most (a batch holds few distinct ones)
_EMPTY_ENVELOPE = ["", "", "", "", ""]      # a SPAMD check's envelope strings, as a frame's strings hold them
_NO_ENVELOPE = (None, None, None, None, None)
_LIST = ("id, t, label, score, log_odds, user, front, verb, action, size, ms, sender, recipients, subject, "
         "learned, client, mail_from")
_LIST_NAMES = [name.strip() for name in _LIST.split(",")]


def _text(value):
    text = " ".join(str(value).split()) if value is not None else ""
    return text[:FIELD_CHARS]


# a field at a line's start: the pattern begins with the line end (the block is given one first), a literal the
# matcher skips to, where "^" with re.M is tried at every byte (3 us against 9 on a 2 KiB header block); the
# lookahead turns a line that starts with none of the names' letters down at its first byte
_FIELD = re.compile(rb"\n(?=[FfTtSsMm])(?:from|to|subject|message-id)[ \t]*:(.*(?:\r?\n[ \t].*)*)", re.I)
_SLOT = {**{ord(letter): n for n, letter in enumerate("ftsm")}, **{ord(letter): n for n, letter in enumerate("FTSM")}}
# (a name's first letter: its place in fields_of's answer)
_RAW_BYTES = 4 * FIELD_CHARS    # a field's raw bytes decoded, at most


def fields_of(header):
    """(sender, recipients, subject, message id) of a header block (bytes):
    each field's first occurrence, unfolded, its encoded words (RFC 2047)
    decoded, one line, at most :data:`FIELD_CHARS`; a field whose encoded
    words do not decode is kept as its raw text.  A pattern, not the
    structured header parser: it is quick (the console reads every check's
    record) and cannot raise on hostile fields (an attacker writes them)."""
    out = ["", "", "", ""]
    seen = 0
    text = b"\n" + header
    for match in _FIELD.finditer(text):
        index = _SLOT[text[match.start() + 1]]
        if seen >> index & 1:
            continue
        seen |= 1 << index
        raw = match.group(1)
        if len(raw) > _RAW_BYTES:
            raw = raw[:_RAW_BYTES]
        value = raw.decode("utf-8", "replace")
        if b"=?" in raw:
            try:
                value = str(make_header(decode_header(" ".join(value.split()))))
            except Exception:  # noqa: BLE001 - an unknown charset, a broken encoded word: the raw text
                pass
        out[index] = " ".join(value.split())[:FIELD_CHARS]
        if seen == 15:
            break
    return tuple(out)


OPEN_SECONDS = 10.0     # a history locked by another process (the console's, the recorder's) waited for this long
REBUILD_SECONDS = 300.0     # ... and this long while the other one makes an older history's search index again


def _wal(db):
    """``db`` in WAL mode.  SQLite answers this pragma "database is locked"
    at once, not after the connection's busy timeout, while another process
    opens the same new file (the console and the recorder start together:
    the console died at its start, the keeper started another a second
    later): tried again for :data:`OPEN_SECONDS` at most."""
    deadline = time.monotonic() + OPEN_SECONDS
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.005)


def _fts_columnsize(db):
    """A full-text index made before columnsize=0 (:data:`_FTS`) made again
    as it is now, from the rows (FTS5's 'rebuild'), in one transaction: the
    console and the recorder open the history together, one of them does it
    and the other waits for it (:data:`REBUILD_SECONDS` at most; then the
    error, and the keeper starts that process again)."""
    def old():
        row = db.execute("SELECT sql FROM sqlite_master WHERE name = 'history_fts'").fetchone()
        return row is not None and "columnsize=0" not in row[0]

    deadline = time.monotonic() + REBUILD_SECONDS
    while old():
        try:
            with db:
                db.execute("BEGIN IMMEDIATE")
                if old():
                    db.execute("DROP TABLE history_fts")
                    db.execute(_FTS_TABLE)
                    db.execute("INSERT INTO history_fts (history_fts) VALUES ('rebuild')")
                    db.execute("UPDATE search_index SET indexed = (SELECT coalesce(max(id), 0) FROM history)")
        except sqlite3.OperationalError as exc:     # the other process is making it: waited for
            if "locked" not in str(exc) and "busy" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.05)


def _index_mark(db):
    """The full-text index's mark (search_index.indexed: the rows up to it are
    in the index), made once: at the last row of a history written before
    the index was filled lazily (each batch was indexed as stored, or the
    index made again whole by :func:`_fts_columnsize`), 0 in a new one."""
    if db.execute("SELECT 1 FROM search_index").fetchone() is not None:
        return
    with db:
        db.execute("BEGIN IMMEDIATE")
        # (OR IGNORE: the other process opening a new history may have made it first)
        db.execute("INSERT OR IGNORE INTO search_index (one, indexed) SELECT 1, coalesce(max(id), 0) FROM history")


class History:
    """The store at ``path`` (":memory:" for tests): at most ``rows`` rows,
    none older than ``days``, at most ``kept`` messages."""

    def __init__(self, path, rows=100_000, days=30.0, kept=1000):
        self.rows, self.days, self.max_kept = rows, days, kept
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=OPEN_SECONDS)
        _wal(self.db)
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(_SCHEMA)
        have = {row[1] for row in self.db.execute("PRAGMA table_info(history)")}
        for column in ENVELOPE_COLUMNS:     # a history written before the envelope was recorded
            if column not in have:
                self.db.execute(f"ALTER TABLE history ADD COLUMN {column} TEXT")
        try:
            _fts_columnsize(self.db)
            self.db.executescript(_FTS)
            self.fts = True
            _index_mark(self.db)
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise       # not a SQLite without FTS5: this process ends, the keeper starts another
            self.fts = False
        self.last_age_prune = 0.0

    def close(self):
        self.db.close()

    # ------------------------------------------------------------------ writing
    def add(self, records, counters=None, spools=None, spools_done=()):
        """Store ``records`` ((head, header block, message) each) in one
        transaction, with the ``counters`` (a dict for :meth:`count`) and the
        workers' spool files read so far (``spools``: path -> the offset up to
        which their records are in this transaction or an earlier one; the
        recorder resumes a file there: :meth:`spool_offset`); ``spools_done``:
        paths of files deleted since, forgotten.  Returns the records' ids
        (consecutive: the recorder is the one writer of rows)."""
        rows, kept = [], []
        for n, (head, header, message) in enumerate(records):
            sender, recipients, subject, message_id = fields_of(header)
            evidence = head.get("evidence")
            rows.append((float(head.get("t") or time.time()), _text(head.get("label")), head.get("score"),
                         head.get("log_odds"), head.get("p"), _text(head.get("user"))[:64], _text(head.get("front")),
                         _text(head.get("verb")), _text(head.get("action")), int(head.get("size") or 0),
                         head.get("ms"), sender, recipients, subject, message_id,
                         # packed as the record carried it (records.decode): no JSON a record; read a row at a time
                         evidence if isinstance(evidence, bytes) else json.dumps(evidence)[:8192] if evidence else "[]",
                         json.dumps(head.get("cutoffs")),
                         _text(head.get("reason")), int(head.get("tokens") or 0),
                         bytes(header) if message and self.max_kept > 0 else None,
                         *(_text(head.get(column)) or None for column in ENVELOPE_COLUMNS)))
            if message and self.max_kept > 0:
                kept.append((n, bytes(message)))
        return self._store(rows, kept, counters, spools, spools_done)

    def add_frames(self, frames, counters=None, spools=None, spools_done=()):
        """:meth:`add` of the records' frames as the workers sent them (each
        the body after its length: spamnb.console.records), read straight
        into the rows (no dict a record: the recorder's way); a malformed
        frame is skipped.  Returns the ids of those stored."""
        rows, kept = [], []
        keep = self.max_kept > 0
        cut, cut_text = None, "null"
        same = {}       # label, front, verb, action, user, reason: a few values, each cleaned once a batch
        now = time.time()
        for frame in frames:
            try:
                values, strings, evidence, header, message = unpack(frame)
            except (ValueError, struct.error):
                continue
            if values[8:10] != cut:     # the cutoffs: the same for every check of a model, its JSON made once
                cut = values[8:10]
                cut_text = json.dumps([None if v != v else v for v in cut])
            tag = (*strings[:6],)
            clean = same.get(tag)
            if clean is None:
                if len(same) >= _SAME:
                    same.clear()
                label, user, verb, front, action, reason = tag
                clean = same[tag] = (_text(label), _text(user)[:64] if user else "", _text(front), _text(verb),
                                     _text(action), _text(reason) if reason else "")
            envelope = strings[6:11]
            fields = fields_of(header)
            if message and keep:
                kept.append((len(rows), message))
            else:
                header = None       # kept beside its message only
            rows.append((values[2] or now, clean[0], values[3], values[5], values[6], clean[1], clean[2], clean[3],
                         clean[4], values[10], values[7], *fields, evidence or "[]", cut_text, clean[5], values[11],
                         header,
                         *(_NO_ENVELOPE if envelope == _EMPTY_ENVELOPE else
                           [_text(value) or None if value else None for value in envelope])))
        return self._store(rows, kept, counters, spools, spools_done)

    def _store(self, rows, kept, counters, spools, spools_done):
        if not rows:
            if spools or spools_done:
                with self.db:
                    self.db.execute("BEGIN")
                    self._spools(spools, spools_done)
                    if counters:
                        self.count(**counters)
            return []
        with self.db:
            self.db.execute("BEGIN")
            self.db.executemany(
                "INSERT INTO history (t, label, score, log_odds, p, user, front, verb, action, size, ms, sender,"
                " recipients, subject, message_id, evidence, cutoffs, reason, tokens, header,"
                " client, helo, mail_from, rcpt_to, auth)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
            last = self.db.execute("SELECT max(id) FROM history").fetchone()[0]
            first = last - len(rows) + 1
            if self.fts and first == 1:     # (ids begin again in an emptied table: none of them is indexed)
                self.db.execute("UPDATE search_index SET indexed = 0")
            if kept:
                self.db.executemany("INSERT INTO kept (id, data) VALUES (?, ?)",
                                    [(first + n, data) for n, data in kept[-self.max_kept:]])
            self.prune()
            self._spools(spools, spools_done)
            if counters:
                self.count(**counters)
        return list(range(first, last + 1))

    def _spools(self, spools, done):
        if done:
            self.db.executemany("DELETE FROM spools WHERE path = ?", [(path,) for path in done])
        if spools:
            self.db.executemany("INSERT INTO spools (path, offset) VALUES (?, ?)"
                                " ON CONFLICT(path) DO UPDATE SET offset = excluded.offset", list(spools.items()))

    def spool_offset(self, path):
        """Where the records of spool file ``path`` not stored yet begin (0: none stored)."""
        row = self.db.execute("SELECT offset FROM spools WHERE path = ?", (path,)).fetchone()
        return row[0] if row else 0

    def forget_spools(self, exists):
        """Forget the spool files gone (``exists(path)`` false): a recorder
        that died between deleting a file and the next commit left its row."""
        gone = [(path,) for (path,) in self.db.execute("SELECT path FROM spools") if not exists(path)]
        if gone:
            with self.db:
                self.db.executemany("DELETE FROM spools WHERE path = ?", gone)

    def prune(self, now=None):
        """Keep the bounds: rows, kept messages, age (checked at most once a minute)."""
        top = self.db.execute("SELECT max(id) FROM history").fetchone()[0] or 0
        self._delete_through(top - self.rows)
        self.db.execute("DELETE FROM kept WHERE id <= (SELECT id FROM kept ORDER BY id DESC LIMIT 1 OFFSET ?)",
                        (self.max_kept,))
        now = time.time() if now is None else now
        if now - self.last_age_prune >= 60.0:
            self.last_age_prune = now
            self._delete_through(self.first_since(now - self.days * 86400.0) - 1)
            self.db.execute("DELETE FROM kept WHERE id NOT IN (SELECT id FROM history)")

    def _delete_through(self, last):
        """Delete the rows up to id ``last``, and their full-text entries (by
        their own subject and sender, as an external-content index is told)."""
        if self.db.execute("SELECT 1 FROM history WHERE id <= ? LIMIT 1", (last,)).fetchone() is None:
            return
        if self.fts:       # the rows indexed among them (:meth:`index`: the others never were)
            self.db.execute("INSERT INTO history_fts (history_fts, rowid, subject, sender)"
                            " SELECT 'delete', id, subject, sender FROM history"
                            " WHERE id <= min(?, (SELECT indexed FROM search_index))", (last,))
        self.db.execute("DELETE FROM history WHERE id <= ?", (last,))

    def pending(self):
        """The rows not in the full-text index yet (0 without FTS5)."""
        if not self.fts:
            return 0
        row = self.db.execute("SELECT coalesce(max(id), 0) - (SELECT indexed FROM search_index) FROM history"
                              ).fetchone()
        return max(0, row[0] or 0)

    def index(self, rows=None):
        """Add the rows stored since the last call to the full-text index (at
        most ``rows`` of them, the oldest first; None: all), in one
        transaction; returns how many were added.  A search calls it first
        (:meth:`page`: every row stored is found), the recorder when it is
        idle (spamnb.console.process.Recorder): the rows' stores pay nothing
        for the index, and a busy server's recorder, which is never idle,
        indexes only what is searched before it is pruned."""
        if not self.fts or not self.pending():     # (read without the write lock: a search of an indexed history
            return 0                                # takes none)
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")      # the mark read and moved under the write lock
            done = self.db.execute("SELECT indexed FROM search_index").fetchone()[0]
            top = self.db.execute("SELECT coalesce(max(id), 0) FROM history").fetchone()[0]
            upto = top if rows is None else min(top, done + rows)
            if upto <= done:
                return 0
            self.db.execute("INSERT INTO history_fts (rowid, subject, sender) SELECT id, subject, sender"
                            " FROM history WHERE id > ? AND id <= ?", (done, upto))
            self.db.execute("UPDATE search_index SET indexed = ?", (upto,))
        return upto - done

    def count(self, **values):
        """Set the counters ``values`` (name=number): the recorder's received
        and dropped records, read by the dashboard and the history page."""
        self.db.executemany("INSERT INTO counters (name, value) VALUES (?, ?)"
                            " ON CONFLICT(name) DO UPDATE SET value = excluded.value", list(values.items()))

    def counters(self):
        """The counters (:meth:`count`) as a dict."""
        return dict(self.db.execute("SELECT name, value FROM counters"))

    def first_since(self, t):
        """The first id whose row is at ``t`` or later (past the last id when
        none): rows come in time order, so a binary search by id (no index on
        ``t`` to keep up for every row)."""
        lo, hi = self.db.execute("SELECT coalesce(min(id), 1), coalesce(max(id), 0) + 1 FROM history").fetchone()
        while lo < hi:
            mid = (lo + hi) // 2
            row = self.db.execute("SELECT id, t FROM history WHERE id >= ? ORDER BY id LIMIT 1", (mid,)).fetchone()
            if row is None or row[1] >= t:
                hi = mid
            else:
                lo = row[0] + 1
        return lo

    def mark(self, record, learned):
        with self.db:
            self.db.execute("UPDATE history SET learned = ? WHERE id = ?", (learned, record))

    def action(self, who, what, record, result):
        """One line of the console's action log (bounded as the history)."""
        with self.db:
            cur = self.db.execute("INSERT INTO actions (t, who, what, record, result) VALUES (?,?,?,?,?)",
                                  (time.time(), who, what, record, _text(result)))
            self.db.execute("DELETE FROM actions WHERE id <= ?", (cur.lastrowid - self.rows,))

    # ------------------------------------------------------------------ reading
    def page(self, user=None, label=None, front=None, query=None, before=None, limit=PAGE):
        """One page of rows, newest first: dicts of the listed columns; ``user``
        (a user role's own name) restricts the rows to theirs; ``before``: the
        last id of the previous page.  A search reads the full-text index
        newest first in chunks of :data:`SEARCH_CHUNK` matches, at most
        :data:`SEARCH_CHUNKS` of them a page (bounded work however common the
        word; the page's ``next`` cursor goes on from there)."""
        where, args = [], []
        if user is not None:
            where.append("user = ?")
            args.append(user)
        if label:
            where.append("label = ?")
            args.append(label)
        if front:
            where.append("front = ?")
            args.append(front)
        limit = max(1, min(int(limit), MAX_PAGE))
        before = int(before) if before else None
        terms = query.split()[:8] if query else []
        columns = ", ".join(_LIST_NAMES)
        if not terms:
            sql = (f"SELECT {columns} FROM history WHERE " + " AND ".join(where + ["id < ?"])
                   + " ORDER BY id DESC LIMIT ?")
            rows = self.db.execute(sql, (*args, before if before else 1 << 62, limit)).fetchall()
            return [dict(zip(_LIST_NAMES, row)) for row in rows]
        if not self.fts:
            for term in terms:
                where.append("(subject LIKE ? ESCAPE '\\' OR sender LIKE ? ESCAPE '\\')")
                like = "%" + term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
                args += [like, like]
            sql = (f"SELECT {columns} FROM history WHERE " + " AND ".join(where + ["id < ?"])
                   + " ORDER BY id DESC LIMIT ?")
            rows = self.db.execute(sql, (*args, before if before else 1 << 62, limit)).fetchall()
            return [dict(zip(_LIST_NAMES, row)) for row in rows]
        self.index()        # the rows stored since the last search or idle moment: found too
        match = " ".join('"' + term.replace('"', '""') + '"' for term in terms)
        out, cursor = [], before if before else 1 << 62
        for _ in range(SEARCH_CHUNKS):
            ids = [r[0] for r in self.db.execute(
                "SELECT rowid FROM history_fts WHERE history_fts MATCH ? AND rowid < ? ORDER BY rowid DESC LIMIT ?",
                (match, cursor, SEARCH_CHUNK))]
            if not ids:
                break
            cursor = ids[-1]
            marks = ",".join("?" * len(ids))
            sql = (f"SELECT {columns} FROM history WHERE " + " AND ".join(where + [f"id IN ({marks})"])
                   + " ORDER BY id DESC LIMIT ?")
            out += [dict(zip(_LIST_NAMES, row)) for row in self.db.execute(sql, (*args, *ids, limit - len(out)))]
            if len(out) >= limit or len(ids) < SEARCH_CHUNK:
                break
        return out

    def get(self, record):
        """One row, whole (evidence and cutoffs decoded), or None."""
        cur = self.db.execute("SELECT * FROM history WHERE id = ?", (int(record),))
        row = cur.fetchone()
        if row is None:
            return None
        out = dict(zip([d[0] for d in cur.description], row))
        evidence = out["evidence"]
        try:
            out["evidence"] = evidence_of(evidence) if isinstance(evidence, bytes) else json.loads(evidence or "[]")
        except (ValueError, IndexError, struct.error):
            out["evidence"] = []
        out["cutoffs"] = json.loads(out["cutoffs"] or "null")
        out["header"] = bytes(out["header"] or b"")
        return out

    def message(self, record):
        row = self.db.execute("SELECT data FROM kept WHERE id = ?", (int(record),)).fetchone()
        return None if row is None else bytes(row[0])

    def actions(self, limit=100):
        rows = self.db.execute("SELECT id, t, who, what, record, result FROM actions ORDER BY id DESC LIMIT ?",
                               (max(1, min(int(limit), MAX_PAGE)),)).fetchall()
        return [dict(zip(("id", "t", "who", "what", "record", "result"), row)) for row in rows]

    def stats(self, since, user=None, buckets=60):
        """The dashboard's figures since ``since``: per time bucket, checks by
        verdict and the mean time taken."""
        width = max(1.0, (time.time() - since) / buckets)
        rows = self._stats_rows(since, width, user)
        return {"since": since, "width": width, "buckets": buckets,
                "rows": [{"b": b, "label": label, "n": n, "ms": ms} for b, label, n, ms in rows]}

    def cutoff_effect(self, spam_cut, ham_cut, user=None):
        """What cutoffs ``spam_cut`` and ``ham_cut`` (log-odds) would do on
        the rows (a user role's own): each verdict's count under them and as
        recorded; of the rows corrected in the console (learned as spam or
        ham), how many each would call spam, unsure and ham; a histogram of
        the recorded log-odds (whole units, clipped at +-HISTOGRAM_SPAN).
        One pass over the rows (bounded by ``--ui-history-rows``)."""
        mine = " AND user = ?" if user is not None else ""
        args = (user,) if user is not None else ()
        truth = ("CASE WHEN learned LIKE 'spam by %' THEN 'spam' WHEN learned LIKE 'ham by %' THEN 'ham' END")
        rows = self.db.execute(
            f"SELECT {truth} AS truth, label, sum(log_odds >= ?), sum(log_odds <= ?), count(*) FROM history"
            f" WHERE log_odds IS NOT NULL{mine} GROUP BY truth, label", (spam_cut, ham_cut, *args)).fetchall()
        would = {"spam": 0, "unsure": 0, "ham": 0}
        recorded = {"spam": 0, "unsure": 0, "ham": 0}
        corrected = {truth: {"spam": 0, "unsure": 0, "ham": 0, "recorded_right": 0} for truth in ("spam", "ham")}
        for truth, label, spam, ham, n in rows:
            spam, ham = spam or 0, ham or 0
            would["spam"] += spam
            would["ham"] += ham
            would["unsure"] += n - spam - ham
            if label in recorded:
                recorded[label] += n
            if truth in corrected:
                corrected[truth]["spam"] += spam
                corrected[truth]["ham"] += ham
                corrected[truth]["unsure"] += n - spam - ham
                if label == truth:
                    corrected[truth]["recorded_right"] += n
        span = HISTOGRAM_SPAN
        histogram = self.db.execute(
            f"SELECT CAST(round(max(-{span}, min({span}, log_odds))) AS INTEGER) AS b, count(*) FROM history"
            f" WHERE log_odds IS NOT NULL{mine} GROUP BY b ORDER BY b", args).fetchall()
        return {"would": would, "recorded": recorded, "corrected": corrected,
                "histogram": [[b, n] for b, n in histogram]}

    def accuracy(self, since, user=None, buckets=30):
        """Accuracy over time from the corrections since ``since``: per time
        bucket, the checks, the rows learned in the console (a user's
        correction or confirmation), the spam that had been let through
        (learned as spam, checked ham or unsure) and the ham that had been
        called spam (learned as ham, checked spam)."""
        width = max(60.0, (time.time() - since) / buckets)
        mine = " AND user = ?" if user is not None else ""
        rows = self.db.execute(
            "SELECT CAST((t - ?) / ? AS INTEGER) AS b, count(*), count(learned),"
            " sum(learned LIKE 'spam by %' AND label != 'spam'), sum(learned LIKE 'ham by %' AND label = 'spam'),"
            " sum(label = 'unsure') FROM history WHERE id >= ?" + mine + " GROUP BY b ORDER BY b",
            (since, width, self.first_since(since)) + ((user,) if user is not None else ())).fetchall()
        return {"since": since, "width": width, "buckets": buckets,
                "rows": [{"b": b, "checks": n, "learned": learned, "missed_spam": missed or 0,
                          "false_positives": false or 0, "unsure": unsure or 0}
                         for b, n, learned, missed, false, unsure in rows]}

    def _stats_rows(self, since, width, user):
        sql = ("SELECT CAST((t - ?) / ? AS INTEGER) AS b, label, count(*), avg(ms) FROM history WHERE id >= ?"
               + (" AND user = ?" if user is not None else "") + " GROUP BY b, label ORDER BY b")
        args = (since, width, self.first_since(since)) + ((user,) if user is not None else ())
        return self.db.execute(sql, args).fetchall()
