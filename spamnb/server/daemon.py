"""``spamnb serve``: a daemon speaking the SPAMC/SPAMD protocol and, with
``--milter``, the milter protocol; :class:`Server` puts its parts together
and runs their life cycle (start, SIGHUP reload, stop).

One asyncio event loop serves every connection: a verdict costs tens of
microseconds of CPU under the GIL, so threads would add switching without
adding parallelism (docs/serve.md has the figures).  TELL (learning) is the
exception: it reads, changes and rewrites a model file under the model's lock
(as ``spamnb learn`` does) and may wait for that lock, so it runs in a small
thread pool while classification goes on.

A request's way (docs/architecture.md, "A message to a verdict"):
spamnb.server.accepting (allowed IPs, connection limit) ->
spamnb.server.spamd_connection (SPAMD; its one reader:
spamnb.server.request_reader) or spamnb.server.milter (the milter) ->
spamnb.server.handler (the check or the lesson, any protocol: the user's
model, spamnb.server.models; TELL in spamnb.server.tell) -> the answer laid
out by the front end; spamnb.server.server_log logs and counts it.

- Models: the site model (``-m``), and with ``--models-dir DIR`` a model per
  user, ``DIR/<user>/model.spamnb`` (``User:`` header), used when it exists
  and loads.  The site model is loaded before the server listens (it does
  not start without one).  A model is stat()ed at every request and, when
  the file changed, read again in a thread while the one loaded before
  serves (models are replaced by rename, so a loaded model is always
  whole); with ``--allow-tell`` a loaded model follows its journal
  (spamnb.server.models).
- SIGHUP re-reads ``--config`` and the milter's policy files (a bad one
  keeps the old policy: spamnb.server.policy) and drops the loaded models; SIGTERM/SIGINT
  stop accepting, let requests in flight finish, then exit 0.
- Errors and spamc: once connected, spamc turns any error answer into exit
  74/76 (a bounce for an MTA's pipe), and only a failed connect into 69
  (75 with ``-X``, a deferral); so conditions that are the server's own
  (load, a user's missing or damaged model) are answered with a verdict
  of the site model, never an error (docs/serve.md, "Errors").
- Hooks for spamnb.server.launch (which binds the sockets, drops privileges
  and may fork worker processes around this class): ``listeners`` (bound
  sockets, else bound in :meth:`Server.start`), ``owns_listeners`` (False in a
  forked worker: the parent removes the Unix sockets), ``metrics``
  (spamnb.server.metrics counters, or None), ``on_ready`` (coroutine
  functions awaited once listening) and ``on_stop`` (coroutine functions
  awaited at a graceful stop, every request answered).  For features: ``handler.verdict_hooks``
  and ``handler.teacher.lesson_hooks`` (spamnb.server.handler), and
  ``request_hooks``: ``hook(verb, user, outcome, size, ms, peer, protocol,
  action, envelope)`` once each request is answered and logged (``envelope``:
  the milter's, else None), in the event loop
  (quick, must not raise; the web console completes its record there).
"""

from __future__ import annotations

import asyncio
import os
import signal
from concurrent.futures import ThreadPoolExecutor

from spamnb.server.accepting import Acceptor
from spamnb.server.autolearn import AutoLearner
from spamnb.server.handler import RequestHandler
from spamnb.server.listeners import ServerError, bind_all
from spamnb.server.models import ModelCache, ModelUnavailable
from spamnb.server.policy import Policy
from spamnb.server.server_log import ServerLog
from spamnb.server.spamd_connection import SpamdConnection
from spamnb.settings import ServerSettings, SettingsError


class Server:
    """The asyncio server.  ``serve()`` runs until SIGTERM/SIGINT."""

    def __init__(self, given, config=None, log_stream=None):
        self.given = given
        self.config = config
        self.settings = ServerSettings(given, config)
        self.policy = Policy.load(self.settings)    # the milter's (spamnb.server.policy): a bad file is exit 64
        self.handler = RequestHandler(self)
        self.logbook = ServerLog(lambda: self.settings, log_stream,
                                 user_model=lambda user: self.handler.model_path(user)[0] != self.settings.model)
        self.models = ModelCache(self.settings.max_models, self.log, pinned=self.settings.model,
                                 whole=self.settings.learns, max_bytes=self.settings.max_models_bytes)
        self.listeners = []     # listening sockets (spamnb.server.listeners.Listener)
        self.acceptors = []     # one spamnb.server.accepting.Acceptor a protocol
        self.stopping = None
        self.learners = ThreadPoolExecutor(max_workers=2, thread_name_prefix="spamnb-tell")
        self.loader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="spamnb-load")
        self.auto_learner = AutoLearner(self)   # --auto-learn (spamnb.server.autolearn)
        self.handler.verdict_hooks.append(self.auto_learner.on_verdict)
        self.sharing = None     # spamnb.server.sharing.Sharing, with --shared (spamnb.server.launch sets it)
        # spamnb.server.launch's hooks (see the module's docstring)
        self.owns_listeners = True
        self.on_ready = []
        self.on_stop = []
        self.request_hooks = []     # hook(verb, user, outcome, size, ms, peer, protocol, action, envelope): each request done
        self.reload_hooks = []      # hook(): each SIGHUP, in the process that took the signal

    @property
    def metrics(self):
        return self.logbook.metrics

    @metrics.setter
    def metrics(self, metrics):
        self.logbook.metrics = metrics

    # ------------------------------------------------------------------ logging
    def log(self, line):
        """One line to syslog or stderr (spamnb.server.server_log)."""
        self.logbook.line(line)

    def request_done(self, verb, user, outcome, size, ms, peer, protocol="spamd", action="none", envelope=None):
        """Count and log a request (spamnb.server.server_log.ServerLog.request);
        ``envelope``: the milter's (client address, HELO, MAIL FROM, RCPT TO
        joined, SASL login), for the request hooks."""
        self.logbook.request(verb, user, outcome, size, ms, peer, protocol, action)
        for hook in self.request_hooks:
            hook(verb, user, outcome, size, ms, peer, protocol, action, envelope)

    def refused(self, peer):
        """A TCP client outside --allowed-ips, closed at accept: logged at most once a second."""
        self.logbook.refused(peer, asyncio.get_running_loop().time())

    # ------------------------------------------------------------------ models
    def load_site_model(self):
        """Load the site model (at start): raises :class:`ServerError` when it is
        missing or unusable, so the server never runs without one."""
        try:
            self.handler.load_site_model()
        except ModelUnavailable as exc:
            raise ServerError(f"no usable site model: {exc.text} (train one with `spamnb train`, "
                              "or give its path with -m)") from None

    # ------------------------------------------------------------------ life cycle
    def reload(self):
        """SIGHUP: re-read the settings (listening addresses stay) and drop the models;
        then the ``reload_hooks`` (the console's: it re-reads its users file)."""
        try:
            self._reload()
        finally:
            for hook in self.reload_hooks:
                hook()

    def _reload(self):
        try:
            fresh = ServerSettings(self.given, self.config)
        except SettingsError as exc:
            self.log(f"SIGHUP: settings not reloaded: {exc}")
            return
        fresh.listen, fresh.milter = self.settings.listen, self.settings.milter
        self.models.clear()
        self.models.whole = fresh.learns
        self.models.pinned = fresh.model
        try:
            self.models.get(fresh.model, fresh.required_score)
        except ModelUnavailable as exc:
            self.models.pinned, self.models.whole = self.settings.model, self.settings.learns
            self.log(f"SIGHUP: settings not reloaded: no usable site model: {exc.text}")
            return
        try:
            self.policy = Policy.load(fresh)
        except SettingsError as exc:
            self.log(f"SIGHUP: the milter's policy not reloaded (the old lists kept): {exc}")
        self.settings = fresh
        self.models.max_models = fresh.max_models
        self.models.max_bytes = fresh.max_models_bytes
        for acceptor in self.acceptors:
            acceptor.limit_changed()        # --max-connections raised
        self.log("SIGHUP: settings reloaded, models will be read again")

    def stop(self):
        """SIGTERM/SIGINT (and an old worker's end after SIGHUP): stop
        accepting new requests; each connection is told (the SPAMD ones idle
        between requests close, a milter connection stays until its MTA
        closes it: spamnb.server.spamd_connection, spamnb.server.milter)."""
        if self.stopping is None:
            self.stopping = asyncio.get_running_loop().create_future()
            self.stopping.set_result(None)
            for acceptor in self.acceptors:
                acceptor.stop()

    async def start(self):
        """Listen and accept: on :attr:`listeners` when set (spamnb.server.launch
        binds them), else on the --listen, --ssl-listen and --milter addresses
        (:func:`spamnb.server.listeners.bind_all`)."""
        loop = asyncio.get_running_loop()
        if not self.listeners:
            self.listeners = bind_all(self.settings)
        # a model that changed is read again in a thread while the one loaded before serves
        self.models.run = lambda function: loop.run_in_executor(self.loader, function)
        spamd = [listener for listener in self.listeners if listener.protocol == "spamd"]
        milter = [listener for listener in self.listeners if listener.protocol == "milter"]
        if spamd:
            self.acceptors.append(Acceptor(self, spamd, SpamdConnection, "SPAMD"))
        if milter:
            from spamnb.server.milter import MilterConnection

            # an MTA waiting in the backlog when the server stops is better reset (it applies its
            # milter_default_action at once) than taken for a session the server will not serve
            self.acceptors.append(Acceptor(self, milter, MilterConnection, "milter", drain=False))
        for acceptor in self.acceptors:
            acceptor.start()
        if self.owns_listeners:
            where = ", ".join(listener.where for listener in self.listeners)
            self.log(f"listening on {where}; site model {self.settings.model}"
                     + (f"; user models in {self.settings.models_dir}" if self.settings.models_dir else ""))

    def close_listeners(self):
        for acceptor in self.acceptors:
            acceptor.close_listeners()
        for listener in self.listeners:
            listener.sock.close()
        self.listeners = []

    def in_flight(self):
        """Requests under way, for the log of a stop."""
        return sum(acceptor.in_flight() for acceptor in self.acceptors)

    async def serve(self):
        loop = asyncio.get_running_loop()
        done = asyncio.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, lambda: (self.stop(), done.set()))
        loop.add_signal_handler(signal.SIGHUP, self.reload)
        await self.start()
        for hook in self.on_ready:
            await hook()
        await done.wait()
        self.close_listeners()
        self.log(f"stopping: {self.in_flight()} request(s) in flight")
        deadline = loop.time() + self.settings.timeout + 1.0
        # every connection to its end (SPAMD connections: answers sent included; the milter's: held
        # until the MTA closes them)
        while any(acceptor.active > 0 for acceptor in self.acceptors) and loop.time() < deadline:
            await asyncio.sleep(0.02)
        for hook in self.on_stop:
            await hook()
        self.learners.shutdown(wait=True)
        self.loader.shutdown(wait=True, cancel_futures=True)
        if self.owns_listeners:     # a forked worker leaves the Unix sockets to its parent
            for item in self.settings.listen + self.settings.milter:
                if item[0] == "unix":
                    try:
                        os.unlink(item[1])
                    except OSError:
                        pass
            self.log("stopped")
