"""``spamnb serve --shared``: the server's glue to :mod:`spamnb.shared`.

A TELL the server accepts is sent as a lesson to the shared stream (or the
local outbox when Redis is down) instead of being learned here at once;
this host learns it, like every other host, when its follower reads it from
the stream, through :func:`spamnb.server.models.tell` (the function a local
TELL runs).  The TELL is answered once the lesson is safe (in Redis or the
outbox); the server waits a little longer (at most ``APPLY_WAIT`` seconds)
for its own follower to apply it, so the next check on this host sees it."""

from __future__ import annotations

import asyncio
import os

from spamnb.server.models import compact_if_over, tell, tell_many
from spamnb.server.protocol import ProtocolError

__all__ = ["Sharing", "APPLY_WAIT"]

APPLY_WAIT = 1.0
# a follower folds its journal into the model when the stream is quiet (compact_if_over), and while
# lessons flow only past this size: a whole save of a large model (about 2 s for the 67 MB Enron-Spam
# one) stops the follower, and at 1 MB (the default) it would come every few hundred lessons; a batch
# of lessons that forgets (a forget, a relabel) is folded in at once all the same (whole_learning.commit)
COMPACT_LIMIT = 32 << 20


class Sharing:
    def __init__(self, server):
        from spamnb.shared import host

        self.server = server
        settings = server.settings
        folder = host.state_dir(settings.model, settings.shared_state)
        self.follower = host.Follower(settings.shared, folder, self.apply, self.models, self.model_for,
                                      log=server.log, snapshot_every=settings.snapshot_interval, idle=self.idle,
                                      max_size=settings.max_size)

    def start(self):
        self.follower.start()
        return self

    # --------------------------------------------------------- where lessons go
    def model_for(self, user):
        """The model a lesson for ``user`` teaches here ("" the site model), or None."""
        settings = self.server.settings
        if not user:
            return settings.model
        if not settings.models_dir:
            return None
        own = self.server.handler.model_path(user)[1]
        return own or None     # None: a name not allowed

    def models(self):
        """(user, path) of every model this host has: the site model and the user models."""
        settings = self.server.settings
        found = [("", settings.model)]
        if settings.models_dir:
            try:
                names = sorted(os.listdir(settings.models_dir))
            except OSError:
                names = []
            for name in names:
                path = self.model_for(name)
                if path is not None and os.path.isfile(path):
                    found.append((name, path))
        return found

    def apply(self, lessons):
        """Apply lessons read from the stream (consecutive ones, for one user), as a
        local TELL is; returns (did_learn, did_remove) of each."""
        settings = self.server.settings
        own = self.model_for(lessons[0].user)
        if own is None:
            self.server.log(f"shared: {len(lessons)} lesson(s) for {lessons[0].user!r} not applied: no model of "
                            f"that user's here (--models-dir, or a name not allowed)")
            return [None] * len(lessons)
        # a forget goes through the ledger only: applied twice (a host killed before it saved its
        # position applies its last lessons again) it changes nothing the second time
        seed = None
        outcomes = []
        if own != settings.model:
            seed = settings.model
            while lessons and not os.path.exists(own):   # a new user's model: made as a local TELL makes it
                lesson, lessons = lessons[0], lessons[1:]
                if not (lesson.learn and settings.create_user_models):
                    outcomes.append((False, False))
                    continue
                limits = (settings.models_dir, settings.max_user_models, settings.max_user_models_bytes)
                try:
                    outcomes.append(tell(own, lesson.message, lesson.spam, lesson.learn, lesson.forget, seed,
                                         limits, None, ledger_only=True))
                except ProtocolError as exc:    # past --max-user-models here: said, and the lesson let go
                    self.server.log(f"shared: a lesson for {lesson.user} not applied: "
                                    f"{exc.text}")
                    outcomes.append((False, False))
        if lessons:
            outcomes += tell_many(own, [(x.message, x.spam, x.learn, x.forget) for x in lessons], seed,
                                  ledger_only=True, compact_limit=COMPACT_LIMIT)
        return outcomes

    def idle(self):
        """The stream is quiet: fold the journals that grew past their usual size."""
        for _user, path in self.models():
            compact_if_over(path)

    # --------------------------------------------------------- TELL
    async def tell(self, own, user, message, spam, learn, remove):
        """Send a TELL's lesson; (did_learn, did_remove) as far as known when answering."""
        from spamnb.model import canonical
        from spamnb.shared.lessons import FORGET, LEARN, Lesson

        settings = self.server.settings
        key = "" if own == settings.model else user
        lesson = Lesson((LEARN if learn else 0) | (FORGET if remove else 0), spam, key,
                        canonical(message, subject_tag=settings.subject_tag))
        loop = asyncio.get_running_loop()
        entry = await loop.run_in_executor(self.server.learners, self.follower.sender.send, lesson)
        if entry is None:       # queued in the outbox: learned when Redis returns
            return learn, remove
        applied = await loop.run_in_executor(self.server.learners, self.follower.wait_applied, entry, APPLY_WAIT)
        where = entry.decode("ascii") if isinstance(entry, bytes) else str(entry)
        if not applied:
            # answered as learned (Redis has it, every host applies it as it reads it), said here: a follower
            # that does not move shows in the log, not only in a model that stays the same
            self.server.log(f"shared: TELL lesson {where} is in Redis but not applied here within {APPLY_WAIT:g} s "
                            f"(this host's follower is at {self.follower.position}); answered as learned")
            return learn, remove
        outcome = self.follower.outcomes.get(lesson.lesson_id, (learn, remove))   # gone: among 1024 newer ones
        if outcome is None:     # read and not applied here (the lines before say why): not "learned"
            self.server.log(f"shared: TELL lesson {where} was not applied on this host; answered as not learned")
            return False, False
        return outcome
