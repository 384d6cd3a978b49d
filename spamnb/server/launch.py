"""Starting ``spamnb serve`` as a production daemon, in this order:

1. read the settings; lock the pid file (``--pidfile``), so a second server
   given it refuses to start before touching the first one's sockets;
2. read the TLS certificate and key (``--ssl-cert``/``--ssl-key``), bind the
   listening sockets (``--listen``, ``--ssl-listen``) and the metrics
   address (``--metrics``), connect to $NOTIFY_SOCKET: all while still
   root when started as root; Unix sockets are given to ``-u USER``;
3. become ``-u USER`` (``--group``), or refuse to go on;
4. read the settings again as that user, load the site model (refused
   without one), write the pid file;
5. serve: one process (``--workers 1``), or pre-forked workers
   (spamnb.server.workers); tell systemd READY=1 once listening.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import sys

from spamnb.errors import TLSError
from spamnb.server.daemon import Server
from spamnb.server.listeners import bind_all, bind_tcp, close_all, tls_context
from spamnb.server.metrics import Metrics, serve_http
from spamnb.server.pidfile import Pidfile
from spamnb.server.privileges import drop, resolve, running_as_root
from spamnb.server.protocol import ProtocolError
from spamnb.server.readiness import Notifier
from spamnb.server.workers import Supervisor
from spamnb.settings import ServerSettings


def run(given, config=None, log_stream=None, attach=None):
    """Run the server until SIGTERM/SIGINT; returns 0.  ``attach(server,
    release)``: called once the site model is loaded, before any worker is
    forked (the web console forks its process there: spamnb.console.process);
    it returns a function called at exit, or None.  Raises SettingsError
    (spamnb.settings), PidfileError (spamnb.server.pidfile), TLSError,
    CannotListen or ServerError (no usable site model; spamnb.server.listeners)
    or PrivilegeError (spamnb.server.privileges) before it serves anything."""
    settings = ServerSettings(given, config)
    pidfile = Pidfile(settings.pidfile).acquire() if settings.pidfile else None
    if pidfile is not None and settings.user and running_as_root():
        pidfile.keep_remover()      # USER may not remove a file from root's /run: a process of root's will
    listeners, metrics_sock, notifier, detach = [], None, None, None
    try:
        tls = None
        if settings.ssl_listen:
            try:
                tls = tls_context(settings.ssl_cert, settings.ssl_key)
            except (OSError, ssl.SSLError) as exc:
                raise TLSError(f"--ssl-cert {settings.ssl_cert}: {getattr(exc, 'strerror', None) or exc}") from None
        listeners = bind_all(settings, tls)
        if settings.metrics:
            metrics_sock, *others = bind_tcp(settings.metrics[1], settings.metrics[2], backlog=16)
            for sock in others:     # a name with several addresses: the first one serves
                sock.close()
        notifier = Notifier()
        if settings.user:
            pw, gid = resolve(settings.user, settings.group)
            for listener in listeners:      # USER's, like the server: it removes them at exit
                if listener.item[0] == "unix" and running_as_root():
                    os.chown(listener.item[1], pw.pw_uid, gid)
            import_everything()
            drop(settings.user, settings.group)
        server = Server(given, config, log_stream)        # as the user: HOME, the config file's permissions
        server.listeners = listeners
        workers = settings.workers
        metrics = Metrics(workers + 1 if workers > 1 else 1) if metrics_sock is not None else None
        if metrics is not None:
            metrics.use_slot(workers if workers > 1 else 0)
            server.metrics = metrics
            server.models.on_load = metrics.model_loaded
        if settings.shared:             # a snapshot and the stream's tail first: then the site model is current
            from spamnb.server.sharing import Sharing

            server.sharing = Sharing(server).start()
        server.load_site_model()        # none usable: ServerError (the server does not start without one)
        if running_as_root():
            server.log("running as root: give -u USER to drop privileges once listening")
        if pidfile is not None:
            pidfile.write()
        inherited = [notifier.close] + ([pidfile.close_inherited] if pidfile is not None else [])
        if metrics_sock is not None:
            inherited.append(metrics_sock.close)
        if attach is not None:
            detach = attach(server, inherited)

        def figures(kind, alive=lambda: 1):
            render = metrics.prometheus if kind == "metrics" else metrics.status
            return render(server.settings.model, alive())

        if workers == 1:
            async def ready():
                if metrics_sock is not None:
                    await asyncio.start_server(
                        lambda r, w: serve_http(r, w, figures, server.settings.allows), sock=metrics_sock)
                notifier.notify(READY=1, MAINPID=os.getpid(), STATUS="listening")

            server.on_ready.append(ready)
            asyncio.run(server.serve())
            notifier.notify(STOPPING=1)
            return 0

        def reload():
            server.reload()
            _preload(server)

        def ready():
            notifier.notify(READY=1, MAINPID=os.getpid(), STATUS=f"listening, {workers} workers")

        where = ", ".join(listener.where for listener in listeners)
        server.log(f"listening on {where}; site model {server.settings.model}"
                   + (f"; user models in {server.settings.models_dir}" if server.settings.models_dir else "")
                   + f"; {workers} workers")

        supervisor = Supervisor(server, workers, reload, ready, metrics, metrics_sock,
                                lambda kind: figures(kind, supervisor.alive), inherited)
        code = supervisor.run()
        notifier.notify(STOPPING=1)
        return code
    finally:
        if detach is not None:
            detach()
        close_all(listeners, unlink=True)
        if metrics_sock is not None:
            metrics_sock.close()
        if notifier is not None:
            notifier.close()
        if pidfile is not None:
            problem = pidfile.release()
            if problem:
                print(f"spamnb serve: {problem}", file=log_stream or sys.stderr)


# what classifying and learning import on first use (modules import lazily), and every codec a
# message's charset may name: imported before -u USER, who may not be able to read the Python
# installation (one under /root, or hidden by systemd's ProtectHome=)
_LAZY_IMPORTS = ("copy", "ctypes", "hashlib", "html", "syslog", "tempfile", "numpy", "unicodedata",
                 "spamnb.mail.tokenizer", "spamnb.bayes.wordcounts", "spamnb.bayes.vocabulary",
                 "spamnb.model.spam_filter", "spamnb.persistence.store", "spamnb.model.learning",
                 "spamnb.estimator.ledger", "spamnb.estimator.ledger_table", "spamnb.persistence.journal",
                 "spamnb.persistence.journal_view",   # a journal's read at load (journal imports it when asked)
                 "spamnb.persistence.journal_replay",   # the replay of its records, a viewed journal's other uses
                 "spamnb.estimator.ages", "spamnb.estimator.messages",
                 "spamnb.estimator.labels", "spamnb.estimator.message_features", "spamnb.estimator.defaults",
                 "spamnb.model.lifecycle", "spamnb.persistence.deltas", "spamnb.server.milter")


def import_everything():
    """Import now what the server may import once it runs as ``-u USER``
    (:data:`_LAZY_IMPORTS`, every codec); ``serve --check-config`` does the same
    before it checks the files as USER."""
    import encodings
    import importlib
    import pkgutil

    names = list(_LAZY_IMPORTS) + [f"encodings.{m.name}" for m in pkgutil.iter_modules(encodings.__path__)]
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a platform's codec (mbcs, ...) or an optional module
            pass
    from spamnb.mail import charsets

    charsets.known_names()      # lists the codecs' folder once


def _preload(server):
    """Load the site model now rather than at the first request (and, with
    workers, before they are forked, so they share its memory)."""
    try:
        server.models.get(server.settings.model, server.settings.required_score)
    except ProtocolError as exc:
        server.log(f"site model not loaded: {exc.text}")
