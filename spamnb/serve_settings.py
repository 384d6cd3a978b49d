"""``spamnb serve``'s settings (:class:`ServerSettings`): :data:`SERVER_DEFAULTS`, then
the ``[serve]`` table of the TOML file ``--config`` names (re-read on SIGHUP;
the commands' settings file may be it; the older ``key = value`` lines are read with a
notice), then the command line; a bad one is exit 64.  The keys, their
types and defaults are the option table's (:mod:`spamnb.options`).

:mod:`spamnb.settings` owns every setting and gives these names too (imported
from here when first asked for): a cold ``spamnb classify`` reads the commands'
settings there and loads none of this.
"""

import os

from spamnb.errors import SettingsError
from spamnb.options import MILTER_SPAM_ACTIONS, MILTER_TRUSTED_ACTIONS, MILTER_UNSURE_ACTIONS, setting_kinds

__all__ = ["SERVER_DEFAULTS", "RELOADABLE", "ServerSettings", "read_config", "toml_equivalent", "in_networks"]


# SERVER_DEFAULTS ({key: default}) and RELOADABLE (the keys SIGHUP re-reads) are made from the option
# table (spamnb.options: serve's options marked setting="serve"), when first asked for.
def __getattr__(name):
    if name == "SERVER_DEFAULTS":
        value = _server_defaults()
    elif name == "RELOADABLE":
        from spamnb.options import reloadable

        value = reloadable()
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def _server_defaults():
    from spamnb.options import serve_defaults

    return serve_defaults()


_LOOPBACK = ("127.0.0.0/8", "::1/128")


def _parse_listen(value, option="--listen"):
    """("unix", path) or ("tcp", host, port)."""
    if "/" in value:
        return ("unix", value)
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise SettingsError(f"{option} {value}: give HOST:PORT or a socket path")
    host = host.strip("[]") or "127.0.0.1"
    return ("tcp", host, int(port))


def _is_loopback(host):
    if host == "localhost":
        return True
    try:
        import ipaddress

        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _networks(value, option="--allowed-ips"):
    import ipaddress

    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    out = []
    for item in items:
        item = item.strip()
        if item:
            try:
                out.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                raise SettingsError(f"{option}: {item!r} is not an address or network") from None
    return out


def read_config(path):
    """The settings of serve's ``--config`` FILE, ``{key: value}``: TOML, its
    ``[serve]`` table, keys as the long options (``max_size`` or
    ``max-size``), values of their option's type (``listen``, ``ssl_listen``
    and ``milter``: a list of addresses, or one); the settings file of the
    commands may be it.  A file of the older ``key = value`` lines (no
    ``[serve]`` table) is read too, with a notice on stderr naming its TOML
    equivalent, once a process.  Raises SettingsError."""
    try:
        with open(path, "rb") as f:
            raw = f.read(1 << 20)
    except OSError as exc:
        raise SettingsError(f"{path}: {exc.strerror or exc}") from None
    import tomllib

    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        data = None
    if data is not None and ("serve" in data or not data):
        return _serve_table(path, data.get("serve", {}))
    try:
        values = _key_value_lines(path, raw)
    except SettingsError:
        if data is None:
            raise
        raise SettingsError(f"{path}: no [serve] table (spamnb serve's settings, keys as its long options)") from None
    if path not in _NOTICED:
        _NOTICED.add(path)
        import sys

        print(f"spamnb serve: {path}: key = value lines are still read; in TOML (docs/serve.md) they are: "
              f"{toml_equivalent(values)}", file=sys.stderr)
    return values


_NOTICED = set()    # the files in the old format whose notice was given


def _serve_table(path, table):
    """The ``[serve]`` table of a TOML file, its keys and types checked."""
    from spamnb.options import setting_kinds

    if not isinstance(table, dict):
        raise SettingsError(f"{path}: serve must be a table ([serve])")
    kinds = setting_kinds("serve")
    values = {}
    for key, value in table.items():
        key = key.replace("-", "_")
        kind = kinds.get(key)
        if kind is None:
            raise SettingsError(f"{path}: [serve]: unknown setting {key!r}")
        if kind == "list" and isinstance(value, str):
            value = [value]
        ok = {"bool": isinstance(value, bool),
              "int": isinstance(value, int) and not isinstance(value, bool),
              "float": isinstance(value, (int, float)) and not isinstance(value, bool),
              "list": isinstance(value, list) and all(isinstance(v, str) for v in value),
              "nets": isinstance(value, str) or isinstance(value, list) and all(isinstance(v, str) for v in value),
              "str": isinstance(value, (str, int)) and not isinstance(value, bool)}[kind]
        if not ok:
            wanted = {"bool": "true or false", "int": "an integer", "float": "a number", "str": "a string",
                      "list": "a string or a list of strings", "nets": "a string or a list of strings"}[kind]
            raise SettingsError(f"{path}: [serve]: {key} must be {wanted}, not {value!r}")
        values[key] = value
    return values


def _key_value_lines(path, raw):
    """The older form of ``--config``: ``key = value`` lines (keys as the long
    options, '-' or '_'), '#' comments, a list key repeated."""
    values = {}
    try:
        lines = raw.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        raise SettingsError(f"{path}: not UTF-8 text") from None
    defaults = _server_defaults()
    for number, line in enumerate(lines, 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        key, sep, value = line.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or key not in defaults:
            raise SettingsError(f"{path}:{number}: unknown setting {key!r}")
        value = value.strip()
        if key in ("listen", "ssl_listen", "milter"):
            values.setdefault(key, []).append(value)
        else:
            values[key] = value
    return values


def toml_equivalent(values):
    """The TOML of older ``key = value`` settings, on one line: ``serve = { key = value, ... }``
    (a ``[serve]`` table), each value of its option's type where it reads as one."""
    import json

    from spamnb.options import setting_kinds

    kinds = setting_kinds("serve")
    items = []
    for key, value in values.items():
        kind = kinds[key]
        try:
            if kind == "list":
                text = "[" + ", ".join(json.dumps(v) for v in value) + "]"
            elif kind == "bool":
                text = "true" if _bool(value) else "false"
            elif kind == "int":
                text = str(int(value))
            elif kind == "float":
                text = repr(float(value))
            else:
                text = json.dumps(value)
        except ValueError:   # as it is written: serve refuses it the same way
            text = json.dumps(value)
        items.append(f"{key} = {text}")
    return "serve = { " + ", ".join(items) + " }"


class ServerSettings:
    """``spamnb serve``'s settings: :data:`SERVER_DEFAULTS`, then the ``--config`` file, then the command line."""

    def __init__(self, given, config=None, problems=None):
        """``problems``: a list (``serve --check-config``): a listener that needs
        --allowed-ips is told there, one line each, instead of raised."""
        merged = _server_defaults()
        in_file = read_config(config) if config else {}
        merged.update(in_file)
        merged.update({k: v for k, v in given.items() if v is not None})
        try:
            self.listen = [_parse_listen(v) for v in merged["listen"]]
            self.model = _site_model_path(merged["model"])
            self.models_dir = merged["models_dir"] or None
            self.allow_tell = _bool(merged["allow_tell"])
            self.auto_learn = _bool(merged["auto_learn"])
            self.create_user_models = _bool(merged["create_user_models"])
            self.max_user_models = int(merged["max_user_models"])
            self.max_user_models_bytes = int(merged["max_user_models_bytes"])
            self.max_size = int(merged["max_size"])
            self.max_connections = int(merged["max_connections"])
            self.max_models = int(merged["max_models"])
            self.max_models_bytes = int(merged["max_models_bytes"])
            self.timeout = float(merged["timeout"])
            self.idle_timeout = float(merged["idle_timeout"])
            self.required_score = float(merged["required_score"])
            self.socket_mode = int(str(merged["socket_mode"]), 8)
            self.syslog = _bool(merged["syslog"])
            self.report = _bool(merged["report"])
            self.subject_tag = merged["subject_tag"] or None
            self.verbose = _bool(merged["verbose"])
            self._milter(merged, given, "listen" in in_file)
            self._production(merged)
        except (TypeError, ValueError) as exc:
            raise SettingsError(f"bad setting: {exc}") from None
        if (self.max_size < 1 or self.max_connections < 1 or self.max_models < 1 or not self.timeout > 0
                or not self.idle_timeout > 0 or self.max_user_models < 0 or self.max_user_models_bytes < 0
                or self.max_models_bytes < 0):
            raise SettingsError("--max-size, --max-connections, --max-models, --timeout and --idle-timeout must be"
                                " positive, --max-user-models and --max-user-models-bytes not negative")
        if self.subject_tag is not None and (len(self.subject_tag) > 200 or not self.subject_tag.isprintable()):
            raise SettingsError("--subject-tag must be one line of at most 200 printable characters")
        if not 0.2 <= self.required_score <= 900:
            raise SettingsError("--required-score must lie in [0.2, 900]")
        explicit = merged["allowed_ips"] is not None
        self.allowed = _networks(merged["allowed_ips"] if explicit else list(_LOOPBACK))
        for item in self.listen + self.ssl_listen + self.milter + ([self.metrics] if self.metrics else []):
            if item[0] == "tcp" and not _is_loopback(item[1]) and not explicit:
                problem = f"listening on {item[1]} (not loopback) needs --allowed-ips"
                if problems is None:
                    raise SettingsError(problem)
                problems.append(problem)

    def _milter(self, merged, given, listen_in_file):
        """The milter front end's settings: its addresses (``--milter``; given
        without ``-l``, the server speaks only the milter protocol), the
        action on spam, on a message it cannot check, how a recipient names
        its user, and how long a milter connection may stay silent."""
        milter = merged["milter"] or []
        self.milter = [_parse_listen(v, "--milter") for v in ([milter] if isinstance(milter, str) else milter)]
        if self.milter and not given.get("listen") and not listen_in_file:
            self.listen = []
        self.milter_spam_action = str(merged["milter_spam_action"]).lower()
        self.milter_on_error = str(merged["milter_on_error"]).lower()
        self.milter_user = str(merged["milter_user"]).lower()
        self.milter_timeout = float(merged["milter_timeout"])
        packets = merged["milter_max_packets"]
        self.milter_max_packets = self.max_size // 2 + 4096 if packets is None else int(packets)
        if self.milter_spam_action not in MILTER_SPAM_ACTIONS:
            raise SettingsError("--milter-spam-action must be tag, reject or quarantine")
        if self.milter_on_error not in ("accept", "tempfail"):
            raise SettingsError("--milter-on-error must be accept or tempfail")
        if self.milter_user not in ("local", "address"):
            raise SettingsError("--milter-user must be local or address")
        if not self.milter_timeout > 0:
            raise SettingsError("--milter-timeout must be positive")
        if self.milter_max_packets < 16:
            raise SettingsError("--milter-max-packets must be at least 16")
        self._milter_policy(merged)
        if self.milter:
            try:
                import importlib.util

                found = importlib.util.find_spec("kilter.protocol") is not None
            except ImportError:
                found = False
            if not found:
                raise SettingsError("--milter needs the kilter.protocol package: pip install 'spamnb[milter]'")

    def _milter_policy(self, merged):
        """The milter's policy options (the files they name are read by
        spamnb.server.policy): authenticated and trusted mail, the allow and
        block lists, the reject score, unsure mail, the per-domain tables."""
        self.milter_skip_authenticated = _bool(merged["milter_skip_authenticated"])
        self.trusted_networks = _networks(merged["trusted_networks"] or [], "--trusted-networks")
        self.milter_trusted_action = str(merged["milter_trusted_action"]).lower()
        self.milter_allowlist = merged["milter_allowlist"] or None
        self.milter_blocklist = merged["milter_blocklist"] or None
        self.milter_domains = merged["milter_domains"] or None
        score = merged["milter_reject_score"]
        self.milter_reject_score = None if score in (None, "") else float(score)
        self.milter_unsure_action = str(merged["milter_unsure_action"]).lower()
        if self.milter_trusted_action not in MILTER_TRUSTED_ACTIONS:
            raise SettingsError("--milter-trusted-action must be accept or check")
        if self.milter_unsure_action not in MILTER_UNSURE_ACTIONS:
            raise SettingsError("--milter-unsure-action must be accept, tag or tempfail")
        required = float(merged["required_score"])
        if self.milter_reject_score is not None and not self.milter_reject_score >= required:
            raise SettingsError(f"--milter-reject-score {self.milter_reject_score:g} is below the spam cutoff's "
                                f"score {required:g} (--required-score): it must be at or above it")

    def _production(self, merged):
        """The settings read at start only: worker processes, the user to run
        as, the pid file, TLS and the metrics address."""
        self.shared = merged["shared"] or None
        self.shared_state = merged["shared_state"] or None
        self.snapshot_interval = float(merged["snapshot_interval"])
        if self.shared:
            from spamnb.shared import SharedError, parse_url

            try:
                parse_url(self.shared)
            except SharedError as exc:
                raise SettingsError(str(exc)) from None
            import importlib.util

            if importlib.util.find_spec("redis") is None:
                raise SettingsError("--shared needs the redis package: pip install 'spamnb[shared]'")
            if merged["workers"] in (None, "", "auto"):
                merged["workers"] = 1       # one follower per host: the stream is applied by one process
            elif int(merged["workers"]) != 1:
                raise SettingsError("--shared runs one worker process (-w 1): one follower applies the stream")
        workers = merged["workers"]
        self.workers = int(workers) if workers not in (None, "", "auto", 0, "0") else (os.cpu_count() or 1)
        if not 1 <= self.workers <= 256:
            raise SettingsError("--workers must lie in [1, 256]")
        self.user = merged["user"] or None
        self.group = merged["group"] or None
        if self.group and not self.user:
            raise SettingsError("--group needs -u USER")
        self.pidfile = merged["pidfile"] or None
        ssl_listen = merged["ssl_listen"] or []
        ssl_listen = [ssl_listen] if isinstance(ssl_listen, str) else ssl_listen
        self.ssl_listen = [_parse_listen(v) for v in ssl_listen]
        if any(item[0] != "tcp" for item in self.ssl_listen):
            raise SettingsError("--ssl-listen takes HOST:PORT")
        self.ssl_cert = merged["ssl_cert"] or None
        self.ssl_key = merged["ssl_key"] or None
        if self.ssl_listen and not self.ssl_cert:
            raise SettingsError("--ssl-listen needs --ssl-cert FILE (and --ssl-key FILE unless the key is in it)")
        self._console(merged)
        if self.ssl_cert and not self.ssl_listen and not self.ui_tls:
            raise SettingsError("--ssl-cert needs --ssl-listen HOST:PORT (or --ui-tls)")
        metrics = merged["metrics"]
        if metrics:
            metrics = str(metrics)
            self.metrics = _parse_listen(metrics if ":" in metrics else f"127.0.0.1:{metrics}")
            if self.metrics[0] != "tcp":
                raise SettingsError("--metrics takes [HOST:]PORT")
        else:
            self.metrics = None

    def _console(self, merged):
        """The web console's settings (spamnb.console, docs/ui.md)."""
        ui = merged["ui"]
        self.ui = _parse_listen(str(ui) if ":" in str(ui) else f"127.0.0.1:{ui}", "--ui") if ui else None
        if self.ui is not None and self.ui[0] != "tcp":
            raise SettingsError("--ui takes [HOST:]PORT")
        self.ui_users = merged["ui_users"] or None
        self.ui_tls = _bool(merged["ui_tls"])
        self.ui_origin = (str(merged["ui_origin"]).rstrip("/") or None) if merged["ui_origin"] else None
        self.ui_history = merged["ui_history"] or None
        self.ui_history_rows = int(merged["ui_history_rows"])
        self.ui_history_days = float(merged["ui_history_days"])
        self.ui_keep_messages = int(merged["ui_keep_messages"])
        if self.ui is None:
            return
        if not self.ui_users:
            raise SettingsError("--ui needs --ui-users FILE (who may log in)")
        if self.ui_tls and not self.ssl_cert:
            raise SettingsError("--ui-tls needs --ssl-cert FILE (and --ssl-key FILE unless the key is in it)")
        if not _is_loopback(self.ui[1]) and not (self.ui_tls and merged["allowed_ips"] is not None):
            missing = [option for option, given in (("--ui-tls", self.ui_tls),
                                                     ("--allowed-ips", merged["allowed_ips"] is not None)) if not given]
            raise SettingsError(f"--ui on {self.ui[1]} (not loopback) needs {' and '.join(missing)}")
        if not (1 <= self.ui_history_rows <= 10_000_000 and self.ui_history_days > 0
                and 0 <= self.ui_keep_messages <= 100_000):
            raise SettingsError("--ui-history-rows must lie in [1, 10000000], --ui-history-days be positive, "
                                "--ui-keep-messages in [0, 100000]")

    @property
    def learns(self):
        """Whether the loaded models learn (TELL, auto-learn or lessons shared by other
        hosts): then they keep their counts and follow their journals
        (spamnb.server.models.ModelCache's ``whole``)."""
        return self.allow_tell or self.auto_learn or bool(self.shared)

    def allows(self, peer):
        return in_networks(peer, self.allowed)


def in_networks(address, networks):
    """Whether ``address`` (text: a peer's, or an MTA's ``{client_addr}``,
    maybe in ``[...]`` or after ``IPv6:``) lies in one of ``networks``."""
    import ipaddress

    if not address or not networks:
        return False
    text = address.strip().strip("[]")
    if text[:5].lower() == "ipv6:":
        text = text[5:]
    try:
        ip = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return False
    if getattr(ip, "ipv4_mapped", None):
        ip = ip.ipv4_mapped
    return any(ip in network for network in networks)


def _bool(value):
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "yes", "true", "on"):
        return True
    if text in ("0", "no", "false", "off", ""):
        return False
    raise ValueError(f"not a yes/no value: {value!r}")


def _site_model_path(path):
    from spamnb.persistence.store import default_model_path

    return os.fspath(path) if path else default_model_path()
