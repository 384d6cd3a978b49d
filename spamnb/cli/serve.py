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
from spamnb.settings import SERVER_DEFAULTS as DEFAULTS, ServerSettings


def add_parser(subparsers):
    """Register ``spamnb serve`` on the CLI's subparsers; the handler is :func:`cmd_serve`."""
    from spamnb.cli.parsing import add_options
    from spamnb.options import options

    p = subparsers.add_parser("serve", help="run a SPAMC/SPAMD server (spamc, Exim, Postfix call it)")
    add_options(p, options("serve"))   # each a setting of the --config file too, its default the table's
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
