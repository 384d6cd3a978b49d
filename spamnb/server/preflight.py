"""``spamnb serve --check-config``: every file, listener, model, user and
permission the server will need, checked without starting it; one line per
problem (exit 78, ``EX_CONFIG``, when there is any).

Each check is made by the process that will need the thing, as
:mod:`spamnb.server.launch` starts the server:

- as the process that runs the check (root, when the server is started as
  root with ``-u USER``; the unit's ``User=`` when run as that user): the
  ``--config`` file, the settings, the pid file's folder, the TLS
  certificate and key, and every listening address (each is bound, then
  closed at once, ``--ui``'s too: an address in use, or a port below 1024 without the right
  to it, is found as the server would find it);
- as ``-u USER`` (the server user), in a child process that becomes that
  user (root only; the check's own process never gives up root): the
  ``--config`` file read again, the site model (opened and its header
  checked, as the server loads it), the folder it learns in, and
  ``--models-dir`` (read; written when the server learns: ``--allow-tell``,
  ``--auto-learn``, ``--shared``), the milter's allow and block lists and
  per-domain tables (each domain's model opened), and the commands'
  settings file (``$SPAMNB_HOME/settings.toml``), and with ``--ui`` the
  console's users file and history (spamnb.console.checks).  A reject score below
  the spam cutoff's score is a bad setting, found with the settings.

Nothing is written: no socket file is left, no pid file made.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import signal
import socket
import stat
import time

from spamnb.errors import CannotListen, PrivilegeError, SettingsError, SpamnbError
from spamnb.server.launch import import_everything
from spamnb.server.listeners import bind_tcp, tls_context
from spamnb.server.policy import Policy, read_domains, read_list
from spamnb.server.privileges import drop, resolve, running_as_root
from spamnb.settings import ServerSettings, read_config

_CHILD_TIMEOUT = 60     # seconds the server user's checks may take (a model on a slow disk)


def check(given, config=None, more=None):
    """``(problems, settings)``: the problems found, one line each (an empty
    list: the set-up would serve), and the settings read (None when they
    cannot be).  ``more(settings)``: further problems, checked as the server
    user with the server's files (the console's: spamnb.console.checks)."""
    problems = []
    if config:
        try:
            read_config(config)
        except SettingsError as exc:
            problems.append(f"--config {exc}")
            config = None       # the rest is checked with the command line's settings
    try:
        settings = ServerSettings(given, config, problems=problems)
    except SettingsError as exc:
        problems.append(str(exc))
        return problems, None
    problems += _user(settings)
    problems += _pidfile(settings.pidfile)
    problems += _tls(settings)
    problems += _listeners(settings)
    if settings.user and running_as_root() and not any(p.startswith(("-u ", "--group ")) for p in problems):
        problems += _as_user(settings.user, settings.group, given, config, more)
    else:
        problems += _files(given, config, more=more)
    return problems, settings


# ---------------------------------------------------------------- as this process

def _user(settings):
    if not settings.user:
        return []
    try:
        pw, gid = resolve(settings.user, settings.group)
    except PrivilegeError as exc:
        return [str(exc)]
    if pw.pw_uid == 0:
        return [f"-u {settings.user}: that is root; give an unprivileged user"]
    if not running_as_root() and os.getuid() != pw.pw_uid:
        return [f"-u {settings.user}: only root can switch users (checked as uid {os.getuid()}; "
                f"the server must be started as root to use -u)"]
    return []


def _pidfile(path):
    if not path:
        return []
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        return [f"--pidfile {path}: no folder {folder}"]
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        return [f"--pidfile {path}: {exc.strerror or exc}"]
    if st is not None and stat.S_ISLNK(st.st_mode):
        return [f"--pidfile {path}: a symbolic link (refused)"]
    if st is None:
        if not os.access(folder, os.W_OK | os.X_OK):
            return [f"--pidfile {path}: cannot create a file in {folder} (permission denied)"]
        return []
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        return [f"--pidfile {path}: {exc.strerror or exc}"]
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return [f"--pidfile {path}: held by a running server"]
    finally:
        os.close(fd)
    if not os.access(path, os.W_OK):
        return [f"--pidfile {path}: cannot be written (permission denied)"]
    return []


def _readable(path, option):
    """None, or why ``path`` cannot be opened for reading by this process."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        return f"{option} {path}: cannot read it: {exc.strerror or exc}"
    try:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            return f"{option} {path}: a folder, not a file"
    finally:
        os.close(fd)
    return None


def _tls(settings):
    if not settings.ssl_listen or not settings.ssl_cert:
        return []
    problems = [problem for problem in (_readable(settings.ssl_cert, "--ssl-cert"),
                                        settings.ssl_key and _readable(settings.ssl_key, "--ssl-key")) if problem]
    if problems:
        return problems
    try:
        tls_context(settings.ssl_cert, settings.ssl_key)
    except Exception as exc:  # noqa: BLE001 - ssl.SSLError, OSError: the one line says which
        return [f"--ssl-cert {settings.ssl_cert}: {getattr(exc, 'strerror', None) or exc}"]
    return []


def _listeners(settings):
    """Each address bound and closed at once (as root when started as root);
    a Unix socket's folder and what is at its path looked at, nothing made."""
    problems = []
    items = ([("--listen", item) for item in settings.listen]
             + [("--ssl-listen", item) for item in settings.ssl_listen]
             + [("--milter", item) for item in settings.milter]
             + ([("--metrics", settings.metrics)] if settings.metrics else [])
             + ([("--ui", settings.ui)] if settings.ui else []))
    for option, item in items:
        if item[0] == "tcp":
            try:
                for sock in bind_tcp(item[1], item[2], backlog=1):
                    sock.close()
            except CannotListen as exc:
                problems.append(f"{option}: {exc}")
        else:
            problem = _unix_socket(item[1])
            if problem:
                problems.append(f"{option}: {problem}")
    return problems


def _unix_socket(path):
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        return (f"cannot listen on {path}: no folder {folder} (make it, or let systemd's "
                "RuntimeDirectory= make it at start)")
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"cannot listen on {path}: cannot create a socket in {folder} (permission denied)"
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot listen on {path}: {exc.strerror or exc}"
    if not stat.S_ISSOCK(st.st_mode):
        return f"cannot listen on {path}: a file that is not a socket is there (not replaced)"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(2)
        try:
            probe.connect(path)
        except OSError:
            return None     # a socket left by a server that is gone: the server replaces it
    return f"cannot listen on {path}: Address already in use (a server answers there)"


# ---------------------------------------------------------------- as the server user

def _as_user(user, group, given, config, more=None):
    """:func:`_files` run by a child process that has become ``user``."""
    r, w = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:    # pragma: no cover - the child; its findings come back through the pipe
        code = 0
        try:
            os.close(r)
            try:
                import_everything()     # as the server does before it becomes USER
                drop(user, group)
                found = _files(given, config, who=user, more=more)
            except SpamnbError as exc:
                found = [str(exc)]
            except Exception as exc:  # noqa: BLE001 - whatever it is, one line to the parent
                found = [f"checking as {user}: {type(exc).__name__}: {exc}"]
            os.write(w, json.dumps(found).encode())
        except BaseException:  # noqa: BLE001 - never return into the parent's code
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    chunks, deadline = [], time.monotonic() + _CHILD_TIMEOUT
    with os.fdopen(r, "rb", buffering=0) as pipe:
        while (left := deadline - time.monotonic()) > 0 and select.select([pipe], [], [], left)[0]:
            chunk = pipe.read(65536)
            if not chunk:
                break
            chunks.append(chunk)
    if time.monotonic() >= deadline:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        return [f"-u {user}: the check of the files as that user took over {_CHILD_TIMEOUT} s (a hung disk?)"]
    _, status = os.waitpid(pid, 0)
    try:
        return list(json.loads(b"".join(chunks) or b"null"))
    except (ValueError, TypeError):
        return [f"-u {user}: the check as that user did not finish (status {status})"]


def _files(given, config, who=None, more=None):
    """The files and folders the server reads and writes once it runs as
    ``who`` (this process's user when None): the settings as it reads them
    then (its HOME names the default site model), the site model, the folder
    it learns in, ``--models-dir``."""
    from spamnb.errors import ModelError
    from spamnb.model import map_model

    suffix = f" (as {who}, the server user)" if who else ""
    problems = []
    if config:
        try:
            read_config(config)
        except SettingsError as exc:
            return [f"--config {exc}{suffix}"]
    try:
        settings = ServerSettings(given, config, problems=[])
    except SettingsError as exc:
        return [f"{exc}{suffix}"]
    model = settings.model
    try:
        header, arrays = map_model(model)
        arrays.file.close()
    except ModelError as exc:
        problems.append(f"site model (-m): {exc}{suffix}")
    except OSError as exc:
        problems.append(f"site model (-m) {model}: {exc.strerror or exc}{suffix}")
    if settings.learns and not settings.models_dir:
        folder = os.path.dirname(os.path.abspath(model))
        if os.path.isdir(folder) and not os.access(folder, os.W_OK | os.X_OK):
            problems.append(f"site model (-m) {model}: cannot write in {folder}, where the server learns "
                            f"(its journal, its lock){suffix}")
    if settings.models_dir:
        problems += _models_dir(settings, suffix)
    problems += [f"{problem}{suffix}" for problem in _policy(settings)]
    if more is not None:
        problems += [f"{problem}{suffix}" for problem in more(settings)]
    return problems


def _policy(settings):
    """The milter's policy files (spamnb.server.policy), each read as the
    server reads it, each domain's model opened, and the settings file of
    the commands (``$SPAMNB_HOME/settings.toml``, when there is one)."""
    from spamnb.errors import ModelError
    from spamnb.model import map_model
    from spamnb.settings import load_settings

    problems = []
    for path, option in ((settings.milter_allowlist, "--milter-allowlist"),
                         (settings.milter_blocklist, "--milter-blocklist")):
        if path:
            try:
                read_list(path, option)
            except SettingsError as exc:
                problems.append(str(exc))
    if settings.milter_domains:
        try:
            domains = read_domains(settings.milter_domains, Policy.load_base(settings), settings.required_score)
        except SettingsError as exc:
            problems.append(str(exc))
            domains = {}
        for name, policy in domains.items():
            if policy.model:
                try:
                    map_model(policy.model)[1].file.close()
                except (ModelError, OSError) as exc:
                    problems.append(f"--milter-domains [domain.{name!r}] model {policy.model}: "
                                    f"{getattr(exc, 'strerror', None) or exc}")
    try:
        load_settings()
    except SettingsError as exc:
        problems.append(f"settings file: {exc}")
    return problems


def _models_dir(settings, suffix):
    folder = settings.models_dir
    try:
        st = os.stat(folder)
    except OSError as exc:
        return [f"--models-dir {folder}: {exc.strerror or exc}{suffix}"]
    if not stat.S_ISDIR(st.st_mode):
        return [f"--models-dir {folder}: not a folder{suffix}"]
    if not os.access(folder, os.R_OK | os.X_OK):
        return [f"--models-dir {folder}: cannot read it{suffix}"]
    if settings.learns and not os.access(folder, os.W_OK):
        why = ("--allow-tell" if settings.allow_tell else "--auto-learn" if settings.auto_learn else "--shared")
        return [f"--models-dir {folder}: cannot write in it, and the server learns there ({why}){suffix}"]
    return []

