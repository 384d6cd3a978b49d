"""``spamnb serve``: the SPAMC/SPAMD daemon (:mod:`spamnb.server.daemon`,
started by :mod:`spamnb.server.launch`) on the command line.  Exit codes
(spamnb.cli.exitcodes), one line on stderr each: 3 no usable site model,
64 bad settings, 66 TLS certificate or key unreadable, 69 ``--status``
found no server, 71 cannot listen (an address in use, a privileged port
without the right to bind it), 73 the pid file cannot be used (a
symbolic link, ...), 75 the pid file is held by a running server, 77
cannot become ``-u USER``, 78 ``--check-config`` found problems (one line
each: spamnb.server.preflight)."""

from __future__ import annotations

import sys
import urllib.error
import urllib.request

from spamnb.cli.exitcodes import EXIT_NO_SERVER
from spamnb.errors import CannotListen, ConfigError, SettingsError, SpamnbError
from spamnb.server import launch, preflight
from spamnb.settings import (MILTER_SPAM_ACTIONS, MILTER_TRUSTED_ACTIONS, MILTER_UNSURE_ACTIONS,
                             SERVER_DEFAULTS as DEFAULTS, ServerSettings)


def add_parser(subparsers):
    """Register ``spamnb serve`` on the CLI's subparsers; the handler is :func:`cmd_serve`."""
    p = subparsers.add_parser("serve", help="run a SPAMC/SPAMD server (spamc, Exim, Postfix call it)")
    d = DEFAULTS   # every default stated below is read from the server's own (spamnb.settings.SERVER_DEFAULTS)
    p.add_argument("-l", "--listen", action="append", metavar="ADDR",
                   help=f"HOST:PORT or a Unix socket path (repeatable; default {', '.join(d['listen'])})")
    p.add_argument("-m", "--model", metavar="PATH", help="site model (default: $SPAMNB_HOME/model.spamnb)")
    p.add_argument("--models-dir", metavar="DIR", help="per-user models: DIR/<user>/model.spamnb")
    p.add_argument("--allowed-ips", metavar="NETS",
                   help="comma-separated addresses/networks allowed to connect over TCP (default loopback)")
    p.add_argument("--allow-tell", action="store_const", const=True,
                   help="accept TELL (learning; spamc -L)")
    p.add_argument("--auto-learn", action="store_const", const=True,
                   help="learn the verdicts the checking model is sure of (2 log-odds beyond its cutoff; "
                        "never unsure mail), marked in its ledger so a later TELL or learn relabels them, "
                        "at most 120 a model and hour; the user's own model, the site model only "
                        "without --models-dir (default: off)")
    p.add_argument("--create-user-models", action="store_const", const=True,
                   help="let TELL create a model for a user without one (a copy of the site model; "
                        "default: refused)")
    p.add_argument("--max-user-models", type=int, metavar="N",
                   help=f"TELL creates no user model past N of them (default {d['max_user_models']})")
    p.add_argument("--max-user-models-bytes", type=int, metavar="BYTES",
                   help="TELL creates no user model past BYTES in all user models "
                        f"(default {d['max_user_models_bytes'] / 2**30:g} GiB)")
    p.add_argument("--max-size", type=int, metavar="BYTES",
                   help=f"largest message checked (default {d['max_size']} = {d['max_size'] / 2**20:g} MiB)")
    p.add_argument("--max-connections", type=int, metavar="N",
                   help=f"connections at once; past it new ones wait in the listen backlog "
                        f"(default {d['max_connections']})")
    p.add_argument("--max-models", type=int, metavar="N", help=f"models kept loaded (default {d['max_models']})")
    p.add_argument("--max-models-bytes", type=int, metavar="BYTES",
                   help="bytes of user models kept loaded per worker, least recently used out first; the site "
                        f"model apart (default {d['max_models_bytes'] // 2**20} MiB)")
    p.add_argument("--timeout", type=float, metavar="SECONDS",
                   help=f"time to receive a request from its first byte / send a response (default {d['timeout']:g})")
    p.add_argument("--idle-timeout", type=float, metavar="SECONDS",
                   help=f"a connection silent this long before a request is closed (default {d['idle_timeout']:g})")
    p.add_argument("--required-score", type=float, metavar="R",
                   help=f"score the spam cutoff maps to (default {d['required_score']:.1f})")
    p.add_argument("--socket-mode", metavar="OCTAL", help=f"permissions of a Unix socket (default {d['socket_mode']})")
    p.add_argument("--syslog", action="store_const", const=True, help="log to syslog (mail facility)")
    p.add_argument("--report", action="store_const", const=True,
                   help="PROCESS/HEADERS also add X-Spam-Report (the report, folded; default off)")
    p.add_argument("--subject-tag", metavar="TAG",
                   help="PROCESS/HEADERS put TAG before the Subject of spam, once (default: none)")
    p.add_argument("--config", metavar="FILE", help="settings file (key = value), re-read on SIGHUP")
    p.add_argument("-v", "--verbose", action="store_const", const=True,
                   help="log one line per request (errors, reloads, start and stop are always logged)")
    p.add_argument("-w", "--workers", metavar="N",
                   help="worker processes sharing the sockets (default: one per core; 1: a single process)")
    p.add_argument("-u", "--username", "--user", dest="user", metavar="USER",
                   help="when started as root: bind, then run as USER (and its groups)")
    p.add_argument("-g", "--groupname", "--group", dest="group", metavar="GROUP",
                   help="with -u: run with this group instead of USER's own")
    p.add_argument("-r", "--pidfile", metavar="PATH",
                   help="write the process id there (refused while another live server holds it)")
    p.add_argument("--ssl-listen", action="append", metavar="HOST:PORT",
                   help="also listen for TLS connections (spamc -S) there (repeatable)")
    p.add_argument("--ssl-cert", "--server-cert", dest="ssl_cert", metavar="FILE",
                   help="TLS certificate (PEM, may hold the key too)")
    p.add_argument("--ssl-key", "--server-key", dest="ssl_key", metavar="FILE", help="TLS private key (PEM)")
    p.add_argument("--metrics", metavar="[HOST:]PORT",
                   help="serve Prometheus /metrics and a /status report there (host: loopback by default)")
    p.add_argument("--milter", action="append", metavar="ADDR",
                   help="also (or, without -l, only) speak the milter protocol (Postfix smtpd_milters) on "
                        "HOST:PORT or a Unix socket path (repeatable; needs pip install 'spamnb[milter]')")
    p.add_argument("--milter-spam-action", choices=MILTER_SPAM_ACTIONS,
                   help=f"milter: what to do with spam: add the X-Spam-* fields, refuse it with 550 5.7.1 at the "
                        f"end of DATA, or tag it and ask the MTA to hold it (default {d['milter_spam_action']})")
    p.add_argument("--milter-on-error", choices=("accept", "tempfail"),
                   help="milter: the answer for a message that cannot be checked (over --max-size, no usable "
                        f"model, an internal error): pass it unchanged or defer it (default {d['milter_on_error']})")
    p.add_argument("--milter-user", choices=("local", "address"),
                   help="milter: the user name of a message's one recipient, for --models-dir: its local part "
                        f"without a +extension, or its whole address; lower case (default {d['milter_user']})")
    p.add_argument("--milter-timeout", type=float, metavar="SECONDS",
                   help="milter: seconds a milter connection may stay silent (an MTA waits on its SMTP "
                        f"client meanwhile; default {d['milter_timeout']:g})")
    p.add_argument("--milter-max-packets", type=int, metavar="N",
                   help="milter: packets one message may take; past it the message is refused with a temporary "
                        "failure, unchecked (default: --max-size / 2 + 4096, more than an MTA sends for a message "
                        "of --max-size)")
    p.add_argument("--milter-skip-authenticated", action="store_const", const=True,
                   help="milter: mail whose MAIL command came with the {auth_authen} macro (a SASL-authenticated "
                        "submission) gets --milter-trusted-action (default: checked as any other)")
    p.add_argument("--trusted-networks", metavar="NETS",
                   help="milter: comma-separated client addresses/networks whose mail gets --milter-trusted-action "
                        "(the {client_addr} macro; default none)")
    p.add_argument("--milter-trusted-action", choices=MILTER_TRUSTED_ACTIONS,
                   help="milter: authenticated and trusted-network mail is passed untouched, not checked (accept), "
                        f"or checked and logged, passed untouched (check) (default {d['milter_trusted_action']})")
    p.add_argument("--milter-allowlist", metavar="FILE",
                   help="milter: senders, @domains and client networks (one a line, # comments) whose mail is "
                        "delivered unchecked, its X-Spam-Status saying allowlisted=KIND; re-read on SIGHUP")
    p.add_argument("--milter-blocklist", metavar="FILE",
                   help="milter: senders, @domains and client networks (the same format) whose mail is refused "
                        "with 550 5.7.1 (the MTA refuses it during SMTP); re-read on SIGHUP")
    p.add_argument("--milter-reject-score", type=float, metavar="SCORE",
                   help="milter: spam scoring SCORE or more is refused (550 5.7.1), spam below it gets "
                        "--milter-spam-action (tag for reject); at least the spam cutoff's score "
                        "(--required-score; default: none, --milter-spam-action for all spam)")
    p.add_argument("--milter-unsure-action", choices=MILTER_UNSURE_ACTIONS,
                   help="milter: unsure mail is delivered with its fields (accept), its Subject tagged too (tag), "
                        "or deferred with 451 4.7.1 once per client, sender and first recipient in 4 hours, "
                        f"accepted on the retry (tempfail) (default {d['milter_unsure_action']})")
    p.add_argument("--milter-domains", metavar="FILE",
                   help="milter: a TOML file (settings.toml may be it) of [domain.\"NAME\"] tables: spam_action, "
                        "reject_score, unsure_action, model for mail to that domain (the first recipient's); "
                        "re-read on SIGHUP")
    p.add_argument("--shared", metavar="redis://HOST:PORT/DB",
                   help="share learning with other hosts through this Redis: TELLs go to a stream every host "
                        "follows and learns from; scoring stays local (needs pip install 'spamnb[shared]'; "
                        "docs/serve.md)")
    p.add_argument("--shared-state", metavar="DIR",
                   help="with --shared: this host's outbox and stream position (default: MODEL.shared/ "
                        "beside the site model)")
    p.add_argument("--snapshot-interval", type=float, metavar="SECONDS",
                   help="with --shared: publish a snapshot of the models this often, and trim the stream "
                        f"behind it; 0: never (default {d['snapshot_interval']:g})")
    # the web console (spamnb.console; docs/ui.md)
    p.add_argument("--ui", metavar="[HOST:]PORT",
                   help="serve the web console there (history, evidence, learning; host: loopback by default, "
                        "another only with --ui-tls and --allowed-ips; needs pip install 'spamnb[ui]')")
    p.add_argument("--ui-users", metavar="FILE",
                   help="the console's users: 'name role scrypt$...' a line, role viewer, trainer, admin or user "
                        "(a user sees only their own mail); lines from --ui-hash-password")
    p.add_argument("--ui-tls", action="store_const", const=True,
                   help="serve the console over HTTPS with --ssl-cert/--ssl-key (cookies then Secure)")
    p.add_argument("--ui-origin", metavar="URL",
                   help="the console's address as browsers see it behind a reverse proxy (https://host), "
                        "the one Origin its POSTs may come from")
    p.add_argument("--ui-history", metavar="FILE",
                   help="the history's SQLite file (default: history.sqlite beside the site model)")
    p.add_argument("--ui-history-rows", type=int, metavar="N",
                   help=f"checks kept in the history, the oldest out first (default {d['ui_history_rows']})")
    p.add_argument("--ui-history-days", type=float, metavar="DAYS",
                   help=f"checks older than this leave the history (default {d['ui_history_days']:g})")
    p.add_argument("--ui-keep-messages", type=int, metavar="N",
                   help="keep the last N messages (each up to 1 MiB) so the console can learn from the history; "
                        "they are mail content: off by default (0)")
    p.add_argument("--ui-hash-password", action="store_true",
                   help="read a password on stdin, print its scrypt hash for --ui-users, and exit")
    p.add_argument("--status", action="store_true",
                   help="print the running server's figures (from its --metrics address) and exit")
    p.add_argument("--check-config", action="store_true",
                   help="check, without starting, every file, listener, model, user and permission these "
                        "options and --config need (files as -u USER); one line on stderr per problem, "
                        "exit 78 if any, else 0")
    p.set_defaults(handler=cmd_serve, error_prefix="spamnb serve")   # its errors are named as its log lines
    return p


def cmd_serve(args):
    """Run the server; an error before it serves ends the command with the
    error's exit code (:mod:`spamnb.errors`, mapped by ``spamnb.cli.main``)."""
    given = {key: getattr(args, key) for key in DEFAULTS}
    if args.ui_hash_password:
        from spamnb.console.auth import hash_password

        password = sys.stdin.readline().rstrip("\r\n")
        if not password:
            raise SettingsError("--ui-hash-password: no password on stdin")
        print(hash_password(password))
        return 0
    if args.status:
        return _status(given, args.config)
    if args.check_config:
        return _check_config(given, args.config)
    try:
        from spamnb.console.process import attach

        return launch.run(given, args.config, attach=attach)
    except OSError as exc:   # any other OSError of the start-up is a socket's
        if isinstance(exc, SpamnbError):
            raise
        raise CannotListen(f"cannot listen: {exc.strerror or exc}") from None


def _check_config(given, config):
    """``spamnb serve --check-config``: each problem on a line of its own, the
    last one as the :class:`ConfigError` that ends the command (exit 78)."""
    from spamnb.console.checks import files

    problems, settings = preflight.check(given, config, more=files)
    if problems:
        for problem in problems[:-1]:
            print(f"spamnb serve: {problem}", file=sys.stderr)
        raise ConfigError(problems[-1])
    where = [_listener_text(item) for item in settings.listen + settings.ssl_listen + settings.milter]
    print(f"spamnb serve: the set-up checks out: listening on {', '.join(where) or 'nothing'}; "
          f"site model {settings.model}" + (f"; user models in {settings.models_dir}" if settings.models_dir else "")
          + (f"; console on {_listener_text(settings.ui)}" if settings.ui else "")
          + (f"; as {settings.user}" if settings.user else ""))
    return 0


def _listener_text(item):
    return item[1] if item[0] == "unix" else f"{item[1]}:{item[2]}"


def _status(given, config):
    """``spamnb serve --status``: the running server's /status report."""
    settings = ServerSettings(given, config)
    if settings.metrics is None:
        raise SettingsError("--status reads the server's --metrics address: give --metrics [HOST:]PORT "
                            "(or the server's --config)")
    host, port = settings.metrics[1], settings.metrics[2]
    host = "127.0.0.1" if host in ("0.0.0.0", "") else "::1" if host == "::" else host
    url = f"http://{f'[{host}]' if ':' in host else host}:{port}/status"
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            sys.stdout.write(answer.read().decode("utf-8", "replace"))
    except (urllib.error.URLError, OSError) as exc:
        print(f"spamnb serve: no server answers at {url}: {getattr(exc, 'reason', None) or exc}", file=sys.stderr)
        return EXIT_NO_SERVER
    return 0
