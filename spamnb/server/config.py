"""The daemon's settings: its defaults, the options and the key = value
file (re-read on SIGHUP), and who may connect."""

from __future__ import annotations

import ipaddress
import os

from spamnb.server.models import _site_model_path


DEFAULTS = {
    "listen": ["127.0.0.1:783"],
    "model": None,
    "models_dir": None,
    "allowed_ips": None,
    "allow_tell": False,
    "auto_learn": False,
    "create_user_models": False,
    "max_user_models": 1000,
    "max_user_models_bytes": 10 * 1024 ** 3,
    "max_size": 4 * 1024 * 1024,
    "max_connections": 64,
    "max_models": 1000,
    "max_models_bytes": 64 * 1024 ** 2,
    "timeout": 30.0,
    "idle_timeout": 5.0,
    "required_score": 5.0,
    "socket_mode": "0660",
    "syslog": False,
    "report": False,
    "subject_tag": None,
    "verbose": False,
    # the milter front end (spamnb.server.milter)
    "milter_spam_action": "tag",
    "milter_on_error": "accept",
    "milter_user": "local",
    "milter_timeout": 300.0,
    # read at start only (spamnb.server.launch): processes, privileges, TLS, metrics
    "workers": None,
    "user": None,
    "group": None,
    "pidfile": None,
    "ssl_cert": None,
    "ssl_key": None,
    "ssl_listen": None,
    "metrics": None,
    "milter": None,
}
RELOADABLE = ("model", "models_dir", "allowed_ips", "allow_tell", "auto_learn", "create_user_models", "max_user_models",
              "max_user_models_bytes", "max_size", "max_connections", "max_models", "max_models_bytes", "timeout", "idle_timeout",
              "required_score", "syslog", "report", "subject_tag", "verbose", "milter_spam_action", "milter_on_error",
              "milter_user", "milter_timeout")
_LOOPBACK = ("127.0.0.0/8", "::1/128")


class SettingsError(Exception):
    pass


# ============================================================================


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
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _networks(value):
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    out = []
    for item in items:
        item = item.strip()
        if item:
            try:
                out.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                raise SettingsError(f"--allowed-ips: {item!r} is not an address or network") from None
    return out


def read_config(path):
    """``key = value`` lines (keys as the long options, '-' or '_'), '#' comments."""
    values = {}
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise SettingsError(f"{path}: {exc.strerror or exc}") from None
    for number, line in enumerate(lines, 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        key, sep, value = line.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or key not in DEFAULTS:
            raise SettingsError(f"{path}:{number}: unknown setting {key!r}")
        value = value.strip()
        if key in ("listen", "ssl_listen", "milter"):
            values.setdefault(key, []).append(value)
        else:
            values[key] = value
    return values


class Settings:
    """The server's settings: defaults, then the config file, then the command line."""

    def __init__(self, given, config=None):
        merged = dict(DEFAULTS)
        if config:
            merged.update(read_config(config))
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
            self._milter(merged, given, config)
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
                raise SettingsError(f"listening on {item[1]} (not loopback) needs --allowed-ips")

    def _milter(self, merged, given, config):
        """The milter front end's settings: its addresses (``--milter``; given
        without ``-l``, the server speaks only the milter protocol), the
        action on spam, on a message it cannot check, how a recipient names
        its user, and how long a milter connection may stay silent."""
        milter = merged["milter"] or []
        self.milter = [_parse_listen(v, "--milter") for v in ([milter] if isinstance(milter, str) else milter)]
        if self.milter and not given.get("listen") and not (config and "listen" in read_config(config)):
            self.listen = []
        self.milter_spam_action = str(merged["milter_spam_action"]).lower()
        self.milter_on_error = str(merged["milter_on_error"]).lower()
        self.milter_user = str(merged["milter_user"]).lower()
        self.milter_timeout = float(merged["milter_timeout"])
        if self.milter_spam_action not in ("tag", "reject", "quarantine"):
            raise SettingsError("--milter-spam-action must be tag, reject or quarantine")
        if self.milter_on_error not in ("accept", "tempfail"):
            raise SettingsError("--milter-on-error must be accept or tempfail")
        if self.milter_user not in ("local", "address"):
            raise SettingsError("--milter-user must be local or address")
        if not self.milter_timeout > 0:
            raise SettingsError("--milter-timeout must be positive")
        if self.milter:
            try:
                import importlib.util

                found = importlib.util.find_spec("kilter.protocol") is not None
            except ImportError:
                found = False
            if not found:
                raise SettingsError("--milter needs the kilter.protocol package: pip install 'spamnb[milter]'")

    def _production(self, merged):
        """The settings read at start only: worker processes, the user to run
        as, the pid file, TLS and the metrics address."""
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
        if self.ssl_cert and not self.ssl_listen:
            raise SettingsError("--ssl-cert needs --ssl-listen HOST:PORT")
        metrics = merged["metrics"]
        if metrics:
            metrics = str(metrics)
            self.metrics = _parse_listen(metrics if ":" in metrics else f"127.0.0.1:{metrics}")
            if self.metrics[0] != "tcp":
                raise SettingsError("--metrics takes [HOST:]PORT")
        else:
            self.metrics = None

    @property
    def learns(self):
        """Whether the loaded models learn (TELL or auto-learn): then they keep their counts
        and follow their journals (spamnb.server.models.ModelCache's ``whole``)."""
        return self.allow_tell or self.auto_learn

    def allows(self, peer):
        try:
            address = ipaddress.ip_address(peer.split("%", 1)[0])
        except ValueError:
            return False
        if getattr(address, "ipv4_mapped", None):
            address = address.ipv4_mapped
        return any(address in network for network in self.allowed)


def _bool(value):
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "yes", "true", "on"):
        return True
    if text in ("0", "no", "false", "off", ""):
        return False
    raise ValueError(f"not a yes/no value: {value!r}")


def _words(value):
    return {w.strip().lower() for w in value.split(",")}
