"""The server's request handler, the same for every protocol: a message,
whose mail it is (a user name, or None) and what is asked (check it, learn
it), in; a :class:`~spamnb.server.check.Checked` verdict or a
:class:`~spamnb.server.tell.Told` lesson, out.  The SPAMD front end
(spamnb.server.spamd_connection) and the milter front end
(spamnb.server.milter) only read their protocol, build a :class:`Request`,
await :meth:`RequestHandler.handle` (run with :func:`run_eagerly`: a
check whose model is loaded is answered in the callback that read it, no
task made; one that must wait for its model, or a lesson, goes on in a
task) and lay its result out.

Which model answers for a user (:meth:`RequestHandler.model_path`,
:meth:`RequestHandler.verdict_model`): their own when ``--models-dir`` holds
one that loads, else the site model, never an error (spamc would turn it
into a bounce or an unchecked pass: docs/serve.md, "Errors").

Hooks, for features that act on what the server does (each a list of
callables, called in the event loop, in order; empty by default; a hook
must be quick and must not raise):

- :attr:`RequestHandler.verdict_hooks`: ``hook(checked, message, user)``
  each time a check's verdict is produced (both front ends; issue 40's
  auto-learn hooks in here);
- ``RequestHandler.teacher.lesson_hooks`` (spamnb.server.tell): each lesson
  TELL learned (issue 39's shared learning publishes them from there).
"""

from __future__ import annotations

import asyncio
import os
import re

from spamnb.server.check import Checked
from spamnb.server.models import ModelUnavailable, classify
from spamnb.server.tell import NO_USER, Teacher

MODEL_NAME = "model.spamnb"
USER_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._@+-]{0,63}")


class Request:
    """What a front end asks of the handler: check ``message`` (bytes) for
    ``user`` (a name, or None), keeping the strongest tokens when
    ``evidence`` (the fields and reports; CHECK answers without them), with
    the model at ``paths`` when the front end chose it (the milter's
    per-domain model: :meth:`RequestHandler.model_path`'s form); or, with a
    ``lesson`` (a :class:`~spamnb.server.tell.Lesson`), learn it."""

    __slots__ = ("message", "user", "evidence", "paths", "lesson")

    def __init__(self, message=None, user=None, evidence=True, paths=None, lesson=None):
        self.message, self.user, self.evidence, self.paths, self.lesson = message, user, evidence, paths, lesson


def run_eagerly(coro):
    """Run the coroutine ``coro`` now, in the caller's callback, up to its
    first wait: ``(True, its result)`` when it ended without waiting (a
    check whose model is loaded: no task, the cost of a plain call), else
    ``(False, the task that runs the rest)``, which the caller may cancel
    (a timeout) as any task.  (Python 3.12's eager tasks, for 3.11.)"""
    try:
        waited = coro.send(None)
    except StopIteration as end:
        return True, end.value
    return False, asyncio.get_running_loop().create_task(_run_on(coro, waited))


async def _run_on(coro, waited):
    """The rest of a coroutine :func:`run_eagerly` started, which waits on
    ``waited`` (the future it yielded, or None for a bare yield:
    asyncio.sleep(0)): each future it yields waited for here, then the
    coroutine resumed (its own ``await`` reads the future's outcome); this
    task cancelled, the future is, and the coroutine sees the cancellation,
    as a task steps its coroutine."""
    loop = asyncio.get_running_loop()
    while True:
        relay = loop.create_future()
        if waited is None:
            loop.call_soon(_settle, relay)
        else:
            waited.add_done_callback(lambda _, relay=relay: _settle(relay))
        try:
            await relay
        except asyncio.CancelledError as exc:
            if waited is not None:
                waited.cancel()
            step, value = coro.throw, exc
        else:
            step, value = coro.send, None
        try:
            waited = step(value)
        except StopIteration as end:
            return end.value


def _settle(relay):
    if not relay.done():
        relay.set_result(None)


class RequestHandler:
    """Checks and lessons for ``server`` (a spamnb.server.daemon.Server: its
    current ``settings``, its ``models`` cache, its thread pools)."""

    def __init__(self, server):
        self.server = server
        self.verdict_hooks = []
        self.teacher = Teacher(server, self.model_path)

    # ------------------------------------------------------------------ which model
    def model_path(self, user):
        """The model for ``user``: theirs when it exists, else the site model;
        second item: where TELL learns for them (None for a name outside
        ``[A-Za-z0-9_][A-Za-z0-9._@+-]{0,63}`` or with ``..``, and
        :data:`~spamnb.server.tell.NO_USER` for no name or an empty one when
        there are user models: such a client is checked with the site model
        and can learn nothing; the site model learns through TELL only on a
        server without ``--models-dir``)."""
        settings = self.server.settings
        site = settings.model
        if not settings.models_dir:
            return site, site
        if not user or not user.strip():
            return site, NO_USER
        if USER_NAME.fullmatch(user) is None or ".." in user:
            return site, None
        own = os.path.join(settings.models_dir, user, MODEL_NAME)
        return (own if os.path.exists(own) else site), own

    def verdict_model(self, paths):
        """(filter, ScoreMap, note for the log) to check a user's mail with,
        ``paths`` their :meth:`model_path`: their model, else the site model,
        also when their name is not allowed or their model cannot be loaded
        (damaged, unreadable).  Raises ModelUnavailable only when the site
        model cannot be used either."""
        settings = self.server.settings
        models = self.server.models
        required = settings.required_score
        path, own = paths
        site = settings.model
        note = ""
        if path != site:
            try:
                return (*models.get(path, required), "")
            except ModelUnavailable as exc:
                note = f" model=site (the user's model is not usable: {exc.text})"
        elif own is None:
            note = " model=site (user name not allowed)"
        elif own != site and own != NO_USER:
            note = " model=site (the user has no model)"
        return (*models.get(site, required), note)

    def load_site_model(self):
        """Load the site model now; raises ModelUnavailable when it cannot be."""
        self.server.models.get(self.server.settings.model, self.server.settings.required_score)

    # ------------------------------------------------------------------ the one entry
    async def handle(self, request):
        """Answer ``request`` (a :class:`Request`), the one entry of both
        front ends: a :class:`~spamnb.server.tell.Told` for a lesson (or
        ProtocolError with the code it is refused with), else a
        :class:`~spamnb.server.check.Checked` (ModelUnavailable when no model
        can be used).  A check whose model is loaded never waits: the
        coroutine ends without suspending, so a front end that runs it with
        :func:`run_eagerly` answers in the callback that read the request, no
        task made; a model not loaded yet is read first in a thread (the
        loop serves on meanwhile), a lesson learned in one."""
        if request.lesson is not None:
            return await self.teacher.tell(request.lesson)
        paths = request.paths or self.model_path(request.user)
        models = self.server.models
        if not models.loaded(paths[0]):
            await models.first_load(paths[0], self.server.settings.required_score)
        return self.check_now(request.message, request.user, request.evidence, paths)

    def check_now(self, message, user, evidence=True, paths=None):
        """Check ``message`` (bytes) for ``user`` with the model loaded for them
        (``paths``: their :meth:`model_path`, else looked up); ``evidence``: keep
        the strongest tokens (for the fields and reports; CHECK answers
        without them).  Raises ModelUnavailable when no model can be used."""
        if paths is None:
            paths = self.model_path(user)
        spam_filter, score_map, note = self.verdict_model(paths)
        verdict = classify(spam_filter, message, evidence)
        checked = Checked(verdict, score_map.score(verdict.log_odds, verdict.label), score_map, note, paths, spam_filter)
        for hook in self.verdict_hooks:
            hook(checked, message, user)
        return checked

    # ------------------------------------------------------------------ lessons
    async def tell(self, lesson):
        """Learn or forget a message (a :class:`~spamnb.server.tell.Lesson`);
        returns a :class:`~spamnb.server.tell.Told`, or raises ProtocolError
        with the code a refusal or failure is answered with."""
        return await self.teacher.tell(lesson)
