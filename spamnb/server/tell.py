"""TELL: a client teaches a user's model a message (learn it as spam or
ham, or forget it), whatever protocol asked.

Who may teach what: nothing without ``--allow-tell``; with ``--models-dir``
only a named user's own model (the site model, which checks every user's
mail, never learns from a client); a new user's model only with
``--create-user-models`` and within ``--max-user-models(-bytes)``.  The
lesson runs in the server's learner threads (it reads, changes and
rewrites a model file under the model's lock, and may wait for that lock),
through spamnb.model.learning as ``spamnb learn`` does
(spamnb.server.models.tell); the next check sees it.

Refusals and failures raise ProtocolError with the code the SPAMD front
end answers (EX_NOPERM, EX_NOUSER, EX_UNAVAILABLE): never reported as done.

Hook: :attr:`Teacher.lesson_hooks`, ``hook(lesson, told, path)`` called in
the event loop after each lesson that changed a model (``path``: the model
it changed), for learning shared between servers (issue 39)."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass

from spamnb.server.protocol import EX, ProtocolError
from spamnb.errors import ModelError
from spamnb.server.models import tell
from spamnb.server.server_log import one_line

NO_USER = ""     # model_path's TELL target for a request without a User: name, with --models-dir


@dataclass(frozen=True)
class Lesson:
    """What a client asks to teach: ``message`` (bytes), ``user`` (their name,
    or None), ``spam`` (True, False, or None: a forget of unknown class),
    ``learn`` and ``remove`` (learn it, forget it)."""

    message: bytes
    user: str | None
    spam: bool | None
    learn: bool
    remove: bool


@dataclass(frozen=True)
class Told:
    """What a lesson did: ``learned``, ``removed`` (whether the model changed
    so), ``note`` (why nothing was done, for the log)."""

    learned: bool
    removed: bool
    note: str = ""


class Teacher:
    """Runs the lessons of ``server`` (its settings, models, ``learners``
    thread pool); ``model_path(user)`` is the request handler's."""

    def __init__(self, server, model_path):
        self.server = server
        self.model_path = model_path
        self.lesson_hooks = []

    def check_allowed(self):
        """ProtocolError (EX_NOPERM) unless the server learns (``--allow-tell``):
        a front end asks before it reads the lesson."""
        if not self.server.settings.allow_tell:
            raise ProtocolError(EX["EX_NOPERM"], "TELL is off (spamnb serve --allow-tell)")

    async def tell(self, lesson):
        """Learn and/or forget ``lesson.message`` in its user's model; a
        :class:`Told`, or ProtocolError (module docstring)."""
        settings = self.server.settings
        self.check_allowed()
        if not (lesson.learn or lesson.remove):
            return Told(False, False, "nothing to do")
        _, own = self.model_path(lesson.user)
        if own is None:
            raise ProtocolError(EX["EX_NOUSER"], "user name not allowed for a model of its own")
        if own == NO_USER:      # the site model every user's mail is checked with: never a client's to teach
            raise ProtocolError(EX["EX_NOUSER"], "TELL needs a User: name (the site model does not learn by TELL"
                                                 " when there are user models, --models-dir)")
        if own != settings.model and not os.path.exists(own):
            if not lesson.learn:
                # nothing learned for this user: nothing to forget, and no folder or lock made
                return Told(False, False, "the user has no model")
            if not settings.create_user_models:
                raise ProtocolError(EX["EX_UNAVAILABLE"],
                                    "the user has no model (spamnb serve --create-user-models)")
        seed = settings.model if own != settings.model else None
        limits = None
        if seed is not None:
            limits = (settings.models_dir, settings.max_user_models, settings.max_user_models_bytes)
        loop = asyncio.get_running_loop()
        try:
            sharing = self.server.sharing
            if sharing is not None:     # sent to the shared stream, learned here as on every host
                learned, removed = await sharing.tell(own, lesson.user, lesson.message, lesson.spam, lesson.learn,
                                                      lesson.remove)
            else:
                learned, removed = await loop.run_in_executor(
                    self.server.learners, tell, own, lesson.message, lesson.spam, lesson.learn, lesson.remove,
                    seed, limits, settings.subject_tag)
        except ProtocolError:
            raise
        except (ModelError, OSError, ValueError) as exc:
            raise ProtocolError(EX["EX_UNAVAILABLE"], f"cannot update the model: {one_line(exc)}") from None
        # the next check sees what was learned (read in a thread: the loop goes on serving)
        await self.server.models.refresh(own, settings.required_score)
        told = Told(learned, removed)
        if learned or removed:
            for hook in self.lesson_hooks:
                hook(lesson, told, own)
        return told
