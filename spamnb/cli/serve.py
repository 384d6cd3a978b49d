"""``spamnb serve``: the SPAMC/SPAMD daemon (:mod:`spamnb.server.daemon`) on
the command line.  Exit codes (spamnb.cli.exitcodes): 64 bad settings, 3 no
usable site model, 71 cannot listen (an address in use, a privileged port
without the right to bind it); one line on stderr each."""

from __future__ import annotations

import asyncio
import sys

from spamnb.cli.exitcodes import EXIT_CANNOT_LISTEN, EXIT_ERROR, EXIT_OK, EXIT_USAGE
from spamnb.server.config import DEFAULTS, SettingsError
from spamnb.server.daemon import CannotListen, Server, ServerError, bind_listeners


def add_parser(subparsers):
    """Register ``spamnb serve`` on the CLI's subparsers; the handler is :func:`cmd_serve`."""
    p = subparsers.add_parser("serve", help="run a SPAMC/SPAMD server (spamc, Exim, Postfix call it)")
    d = DEFAULTS   # every default stated below is read from the server's own (server.config.DEFAULTS)
    p.add_argument("-l", "--listen", action="append", metavar="ADDR",
                   help=f"HOST:PORT or a Unix socket path (repeatable; default {', '.join(d['listen'])})")
    p.add_argument("-m", "--model", metavar="PATH", help="site model (default: $SPAMNB_HOME/model.spamnb)")
    p.add_argument("--models-dir", metavar="DIR", help="per-user models: DIR/<user>/model.spamnb")
    p.add_argument("--allowed-ips", metavar="NETS",
                   help="comma-separated addresses/networks allowed to connect over TCP (default loopback)")
    p.add_argument("--allow-tell", action="store_const", const=True,
                   help="accept TELL (learning; spamc -L)")
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
    p.set_defaults(handler=cmd_serve)
    return p


def cmd_serve(args):
    given = {key: getattr(args, key) for key in DEFAULTS}
    try:
        server = Server(given, args.config)
    except SettingsError as exc:
        print(f"spamnb serve: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        server.load_site_model()
        sockets = bind_listeners(server.settings.listen, server.settings.socket_mode)
    except CannotListen as exc:
        print(f"spamnb serve: {exc}", file=sys.stderr)
        return EXIT_CANNOT_LISTEN
    except ServerError as exc:
        print(f"spamnb serve: {exc}", file=sys.stderr)
        return EXIT_ERROR
    asyncio.run(server.serve(sockets))
    return EXIT_OK
