"""The models a daemon serves: loaded once and shared (a cache keyed by the
file's identity, so a replaced model is read again), scored read-only, and
learned by TELL under the model's lock.  With TELL on, a loaded model
follows its journal: a learn appended to it (by any worker or writer) is
applied to the loaded model in place, between two requests, rather than
the model read again."""

from __future__ import annotations

import os
from collections import OrderedDict

from spamnb.report.scale import ScoreMap
from spamnb.errors import ModelError, ModelUnavailable, ProtocolError
from spamnb.server.protocol import EX
from spamnb.server.server_log import one_line

MODEL_NAME = "model.spamnb"


# ============================================================================ the filter's API
# Every call into spamnb.model is here, so a change of that API is adapted in one place.
def _load_filter(path, whole=False):
    """The model at ``path`` read from the file (its journal replayed), in the
    form a server scores with (a :class:`spamnb.model.Scorer`): holding in
    memory only what classifying reads (``form="scoring"``), or, when ``whole``
    (a server that learns: TELL), the counts too, so that it can follow its
    journal (``form="following"``: :func:`_follow`), without the ledger and
    last-seen days."""
    from spamnb.model import SpamFilter

    return SpamFilter.load(path, form="following" if whole else "scoring")


def _follow(model):
    """Apply to a model of :func:`_load_filter` (``whole``) the records its
    journal got since it was read or last followed, and only those, as a
    fresh reader replays them (``SpamFilter.follow_journal``).  The number of
    records applied, or None when it cannot follow (a scoring-only model, an
    overlay, the journal replaced, ...): read the model again."""
    return model.follow_journal()


def journal_signature(path):
    """The model's journal as it is now (spamnb.persistence.journal): a learn appends there."""
    from spamnb.model import journal_signature

    return journal_signature(path)


def classify(spam_filter, message, evidence=True):
    """The filter's verdict on ``message`` (bytes); ``evidence``: keep its strongest tokens."""
    return spam_filter.classify(message, evidence)




_kept = None   # spamnb.model.Kept: the models TELL learned in, kept loaded


_creating = None   # threading.Lock: one new user's model at a time (the limits below hold)


def kept_models():
    """The models TELL (and the server's auto-learn, spamnb.server.autolearn) learned
    in, kept loaded between two learns (``spamnb.model.learning.Kept``)."""
    import threading

    from spamnb.model import Kept

    global _kept, _creating
    if _kept is None:
        _kept = Kept()
    if _creating is None:
        _creating = threading.Lock()
    return _kept


def tell(path, message, spam, learn, remove, seed_path=None, limits=None, subject_tag=None, ledger_only=False):
    """Learn and/or forget ``message`` in the model at ``path``: read, change and
    write the file under its lock, like ``spamnb learn``/``forget``, so a
    command-line learner and the server never lose each other's update.
    A model that does not exist yet starts as a copy of ``seed_path``'s (the
    site model) when there is one; ``limits`` = (folder of the user models,
    most models, most bytes in all) refuses to create one past them
    (:class:`ProtocolError`, EX_UNAVAILABLE).  ``spam`` is True/False, or
    None for a removal of unknown class (the ledger's label, else tried as
    spam, then as ham).  Returns (did_learn, did_remove): whether the
    message was learned now (False when it was learned before with this
    class, as spamd, whose ``spamc -L`` then says "already") and whether it
    was forgotten.  ``subject_tag``: the server's ``--subject-tag``, taken
    off the Subject before learning (with spamnb's own X-Spam-* fields, as
    ``spamnb learn`` strips its markup), so a delivered copy told back
    learns the mail, not the verdict it was given.  ``ledger_only``: a
    removal forgets only a message the ledger has (a lesson applied again
    after a crash, spamnb.server.sharing, then changes nothing)."""
    kept_models()
    if limits is not None and not os.path.exists(path):
        with _creating:
            if not os.path.exists(path):
                _check_room(limits, seed_path)
                if seed_path and learn:
                    _start_user_model(path, seed_path)
                return _tell(path, message, spam, learn, remove, seed_path, subject_tag, ledger_only)
    return _tell(path, message, spam, learn, remove, seed_path, subject_tag, ledger_only)


def _start_user_model(path, seed_path):
    """Start the model at ``path`` (a user's, none yet) as the site model
    ``seed_path`` is now, without copying it: its file hard-linked (an
    atomic rename replaces model files, never a write in place, so the two
    names share the bytes until the user's model is compacted), and the
    site's journal, if any, copied (it names the same file).  The user's
    learns then go to their own journal: the user's folder holds a few KB
    per learned message, not a model.  Under the site model's lock, so the
    file and its journal are a pair.  Where a link cannot be made (another
    file system, fs.protected_hardlinks, ...) nothing is done and the
    learn saves a whole copy, as before."""
    from spamnb.model import journal_path
    from spamnb.model import locked, replace_file, resolve

    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    with locked(seed_path) as site:
        site = resolve(site)
        if not os.path.isfile(site):
            return
        with locked(path) as real:
            if os.path.lexists(real):
                return
            try:
                os.link(site, real, follow_symlinks=False)
            except OSError:
                return
            try:
                with open(journal_path(site), "rb") as f:
                    data = f.read(64 * 1024 * 1024 + 1)
            except OSError:
                return
            if len(data) > 64 * 1024 * 1024:
                os.unlink(real)             # a large journal: the learn saves a whole model instead
                return
            try:
                replace_file(journal_path(real), lambda f: f.write(data), mode=0o600)
            except BaseException:
                try:
                    os.unlink(real)
                except OSError:
                    pass
                raise


def _check_room(limits, seed_path):
    """Raise ProtocolError when one more user model would pass the limits.
    Bytes are counted once per file (a model hard-linked to the site
    model's file, :func:`_start_user_model`, counts none of it), journals included."""
    from spamnb.model import JOURNAL_SUFFIX as SUFFIX

    folder, most, most_bytes = limits
    count = size = 0
    seen = set()
    try:
        seen.add(_identity(os.stat(seed_path)))
    except (OSError, TypeError):
        pass
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                try:
                    st = os.stat(os.path.join(entry.path, MODEL_NAME), follow_symlinks=False)
                except OSError:
                    continue
                count += 1
                for st in (st, _stat_or_none(os.path.join(entry.path, MODEL_NAME + SUFFIX))):
                    if st is not None and _identity(st) not in seen:
                        seen.add(_identity(st))
                        size += st.st_size
    except FileNotFoundError:
        pass
    if count + 1 > most:
        raise ProtocolError(EX["EX_UNAVAILABLE"], f"{count} user models already (--max-user-models {most})")
    if size > most_bytes:
        raise ProtocolError(EX["EX_UNAVAILABLE"],
                            f"user models take {size} bytes (--max-user-models-bytes {most_bytes})")


def _identity(st):
    return st.st_dev, st.st_ino


def _stat_or_none(path):
    try:
        return os.stat(path, follow_symlinks=False)
    except OSError:
        return None


def _tell(path, message, spam, learn, remove, seed_path, subject_tag=None, ledger_only=False):
    return tell_many(path, [(message, spam, learn, remove)], seed_path, subject_tag, ledger_only)[0]


def tell_many(path, lessons, seed_path=None, subject_tag=None, ledger_only=False, compact_limit=None):
    """:func:`tell` of several lessons ``(message, spam, learn, remove)`` in one
    session of the model at ``path`` (one journal record, one fsync), in
    order; returns (did_learn, did_remove) of each.  The model must exist or
    ``seed_path`` start it (no limits checked: :func:`tell` checks them).
    ``compact_limit``: see :func:`spamnb.model.learning.session`."""
    from spamnb.model import Kept, Tally, learning_session

    global _kept
    if _kept is None:
        _kept = Kept()
    # appended to the model's journal (spamnb.persistence.journal), as `spamnb learn`/`forget`; the model
    # stays loaded for the next TELL, read again only when another writer changed it (learning.Kept)
    outcomes = []
    with learning_session(path, wait=None, create=True, seed_path=seed_path, expire=False, kept=_kept,
                          compact_limit=compact_limit) as session:
        spam_filter = session.filter
        # through the ledger of learned messages, as `spamnb learn`/`forget`:
        # a message told twice counts once, told with the other class it moves
        tally = Tally()
        for message, spam, learn, remove in lessons:
            did_remove = False
            if remove and spam_filter.is_fitted:
                for as_spam in ((None,) if ledger_only else (spam,) if spam is not None else (None, True, False)):
                    try:
                        session.forget(message, as_spam, tally, subject_tag=subject_tag)
                    except ValueError:
                        continue
                    did_remove = True
                    break
            did_learn = False
            if learn:   # DidSet only when the model changed, as spamd: spamc says "already learned" otherwise
                did_learn = session.learn(message, spam, tally, subject_tag=subject_tag) != "known"
            outcomes.append((did_learn, did_remove))
    return outcomes


def compact_if_over(path):
    """Fold the journal of the model at ``path`` into it when the journal is past
    :func:`spamnb.persistence.journal.compact_at` (a follower that compacts late,
    spamnb.server.sharing, does it when the stream is quiet).  True when it did."""
    from spamnb.model import compact_at, journal_path, learning_session

    try:
        if os.path.getsize(journal_path(path)) <= compact_at(os.path.getsize(path)):
            return False
    except OSError:
        return False
    with learning_session(path, wait=None, create=False, expire=False, kept=_kept) as session:
        session.compact()
    return True


class ModelCache:
    """Loaded models by path, least recently used first out (but the
    ``pinned`` one, the site model, which stays) past ``max_models`` of them
    or past ``max_bytes`` of them (the bytes of each model's file and
    journal, which a loaded model holds about as much of: many users'
    models cannot add up past it; the one just loaded always stays); each is checked against
    the file's (device, inode, size, mtime) and its journal's at every use
    and reloaded when either changed.  A failed reload, or a file gone,
    keeps serving the model it had, and says so in the log once."""

    def __init__(self, max_models, log, pinned=None, whole=False, max_bytes=None):
        self.max_models = max_models
        self.max_bytes = max_bytes
        # whole: models loaded with their counts (a server with TELL), so that a
        # grown journal is followed, its new records applied in place (_follow),
        # instead of the model read again
        self.whole = whole
        self.log = log
        self.pinned = pinned
        # run(function) -> an asyncio future of function() run in a thread: when set (by the
        # server, once its loop runs), a changed model that is loaded already is read again in
        # the background while the one loaded before serves (a large model takes a while)
        self.run = None
        self._loading = set()
        self._entries = OrderedDict()   # path -> (stat key, filter, ScoreMap)
        self._missing = set()           # paths whose loaded model serves while the file is gone
        self._bad = OrderedDict()       # path -> (stat key, text): a file that failed to load, not read again
        self.on_load = None             # called with the path after each model read (spamnb.server.metrics)

    def clear(self):
        """Drop the loaded models (SIGHUP); the pinned one is only checked again
        (a file that fails to load then keeps the one loaded before)."""
        pinned = self._entries.get(self.pinned)
        self._entries.clear()
        self._bad.clear()
        if pinned is not None:
            self._entries[self.pinned] = (("reload",),) + pinned[1:]

    def __len__(self):
        return len(self._entries)

    def get(self, path, required):
        """(filter, ScoreMap) for the model at ``path``; raises
        :class:`ModelUnavailable` when none was ever loaded from it and it
        cannot be loaded now."""
        try:
            st = os.stat(path)
            key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, journal_signature(path))
        except OSError as exc:
            key, missing = None, exc
        entry = self._entries.get(path)
        if entry is not None and key is None:
            if path not in self._missing:
                self._missing.add(path)
                self.log(f"model {path} cannot be read ({one_line(missing)}): serving the one loaded before")
            self._entries.move_to_end(path)
            return entry[1], entry[2]
        self._missing.discard(path)
        if entry is not None and (entry[0] == key or self._followed(path, entry, key)):
            self._entries.move_to_end(path)
            entry = self._entries[path]     # _followed may have a new score map
            return entry[1], entry[2]
        if entry is not None and self.run is not None:
            if entry[2].required != round(float(required), 1):     # --required-score changed (SIGHUP)
                entry = (entry[0], entry[1], ScoreMap.from_cutoffs(entry[1].cutoffs, required))
                self._entries[path] = entry
            if path not in self._loading:
                self._loading.add(path)
                self.run(lambda: self._load(path, required)).add_done_callback(
                    lambda future: self._loaded(future, path, key, required))
            self._entries.move_to_end(path)
            return entry[1], entry[2]
        if key is None:
            raise ModelUnavailable(f"no model at {path}: {one_line(missing)}")
        bad = self._bad.get(path)
        if bad is not None and bad[0] == key and entry is None:
            raise ModelUnavailable(bad[1])
        try:
            spam_filter, score_map = self._load(path, required)
        except (ModelError, ValueError, OSError, MemoryError) as exc:
            return self._failed(path, key, entry, required, exc)
        return self._install(path, key, spam_filter, score_map)

    def loaded(self, path):
        """Whether a model from ``path`` is loaded (or known not to load as the file is now)."""
        return path in self._entries or path in self._bad

    async def first_load(self, path, required):
        """Load the model at ``path`` for the first time, in a thread when
        :attr:`run` is set (a large model takes a while; the loop serves on),
        so that :meth:`get` then answers at once.  A failure is remembered as
        :meth:`get` remembers it, and left to :meth:`get` to raise."""
        if self.loaded(path) or self.run is None:
            return
        key = _file_key(path)
        if key is None:
            return
        try:
            spam_filter, score_map = await self.run(lambda: self._load(path, required))
        except (ModelError, ValueError, OSError, MemoryError) as exc:
            if not self.loaded(path):
                try:
                    self._failed(path, key, None, required, exc)
                except ModelUnavailable:
                    pass
            return
        if not self.loaded(path):
            self._install(path, key, spam_filter, score_map)

    async def refresh(self, path, required):
        """Read the model at ``path`` again now if it is loaded and changed (after
        a TELL: its next check sees what it learned), in a thread when :attr:`run` is set."""
        entry = self._entries.get(path)
        if entry is None:
            return
        key = _file_key(path)
        if key is None:
            return
        if entry[0] == key or self._followed(path, entry, key):
            return
        try:
            if self.run is not None:
                spam_filter, score_map = await self.run(lambda: self._load(path, required))
            else:
                spam_filter, score_map = self._load(path, required)
        except (ModelError, ValueError, OSError, MemoryError) as exc:
            self._failed(path, key, self._entries.get(path), required, exc)
            return
        self._install(path, key, spam_filter, score_map)

    def _followed(self, path, entry, key):
        """Whether the loaded model ``entry`` was brought up to ``key`` by
        following its journal: the file is the one loaded, only the journal
        changed, and the records new in it (a TELL's, another worker's, a
        ``spamnb learn``'s) were applied in place (:func:`_follow`), in this
        thread, between two requests.  Then ``key`` is its key."""
        if key is None or entry[0][:4] != key[:4]:
            return False
        if _follow(entry[1]) is None:
            return False
        status, size, end = entry[1].journal_state()
        if status == "ok" and size > end:
            # a record not whole yet (a writer appending; the size may not change when it is):
            # looked at again at the next request (a read of the bytes after the last record)
            key = key[:4] + (None,)
        score_map = entry[2]
        fresh = ScoreMap.from_cutoffs(entry[1].cutoffs, score_map.required)
        if (fresh.ham_log_odds, fresh.spam_log_odds) != (score_map.ham_log_odds, score_map.spam_log_odds):
            score_map = fresh   # the records refitted the model's cutoffs (spamnb.estimator.prequential)
        self._entries[path] = (key, entry[1], score_map)
        return True

    def _load(self, path, required):
        spam_filter = self._overlay(path) or _load_filter(path, self.whole)
        return spam_filter, ScoreMap.from_cutoffs(spam_filter.cutoffs, required)

    def _overlay(self, path):
        """A user model that is the site model's file plus a journal, held as
        what its journal changed (:mod:`spamnb.server.overlay`), in a server
        that learns (its models are loaded with their counts); else None."""
        site = self._entries.get(self.pinned) if self.whole and self.pinned and path != self.pinned else None
        if site is None:
            return None
        from spamnb.server import overlay

        try:
            return overlay.build(path, site[1], self.pinned)
        except (ValueError, IndexError, TypeError, AttributeError, OSError) as exc:   # loaded whole, as before
            self.log(f"model {path} loaded whole, not as an overlay of the site model: {one_line(exc)}")
            return None

    def _loaded(self, future, path, key, required):
        self._loading.discard(path)
        if future.cancelled():
            return
        exc = future.exception()
        if exc is None:
            self._install(path, key, *future.result())
        elif isinstance(exc, (ModelError, ValueError, OSError, MemoryError)):
            try:
                self._failed(path, key, self._entries.get(path), required, exc)
            except ModelUnavailable:
                pass
        else:
            self.log(f"model {path} not reloaded: {type(exc).__name__}: {one_line(exc)}")

    def _failed(self, path, key, entry, required, exc):
        """A load failed: keep serving ``entry`` (logged), or raise ModelUnavailable."""
        if entry is not None:
            self.log(f"model {path} not reloaded, serving the one loaded before: {one_line(exc)}")
            score_map = entry[2]
            if score_map.required != round(float(required), 1):     # --required-score changed (SIGHUP)
                score_map = ScoreMap.from_cutoffs(entry[1].cutoffs, required)
            self._entries[path] = (key, entry[1], score_map)
            return entry[1], score_map
        text = f"model {path} not usable: {one_line(exc)}"
        self._bad[path] = (key, text)
        while len(self._bad) > self.max_models:
            self._bad.popitem(last=False)
        raise ModelUnavailable(text) from None

    def _install(self, path, key, spam_filter, score_map):
        self._entries[path] = (key, spam_filter, score_map)
        self._entries.move_to_end(path)
        if self.on_load is not None:
            self.on_load(path)
        while len(self._entries) > 1 and (len(self._entries) > self.max_models or self._over_bytes()):
            oldest = next(iter(self._entries))
            if oldest == self.pinned:
                self._entries.move_to_end(oldest)
                oldest = next(iter(self._entries))
            if oldest in (self.pinned, path):
                break
            del self._entries[oldest]
        return spam_filter, score_map

    def loaded_bytes(self):
        """The bytes of the loaded models but the pinned one: what an overlay
        holds (:mod:`spamnb.server.overlay`), else :func:`_key_bytes`."""
        return sum(_held_bytes(entry) for path, entry in self._entries.items() if path != self.pinned)

    def _over_bytes(self):
        return self.max_bytes is not None and self.loaded_bytes() > self.max_bytes


def _file_key(path):
    """What tells a model's file and journal apart from their next version
    (device, inode, size, mtime and the journal's signature), None when the
    file cannot be stat()ed."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, journal_signature(path)


def _held_bytes(entry):
    held = getattr(entry[1], "held_bytes", None)   # an overlay: its arrays, the site's file not counted
    return held if held is not None else _key_bytes(entry[0])


def _key_bytes(key):
    """What a model loaded with stat key ``key`` (:func:`_file_key`) holds in
    memory, about: its file's size and its journal's (read whole; a model
    that follows its journal holds what the journal added)."""
    if not key or len(key) < 5:
        return 0
    journal = key[4]
    return key[2] + (journal[1] if journal else 0)
