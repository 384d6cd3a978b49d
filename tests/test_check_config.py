"""``spamnb serve --check-config`` (issue 47, item 3): every file, listener,
model, user and permission the server needs, checked without starting it;
one line on stderr per problem, exit 78 (EX_CONFIG), 0 on the set-ups
docs/serve.md and docs/spamnb-serve.service give (read from them here, so
they cannot drift apart).  As root the server user is ``nobody``: the files
are checked as that user.  And ``spamnb info``'s cutoffs, rounded."""

import os
import re
import shlex
import shutil
import socket
import tempfile
from pathlib import Path

import pytest

import installed_spamnb
from conftest import REPO, run_spamnb, slow_beyond
from spamnb.cli import exitcodes

ROOT = os.geteuid() == 0
OPENSSL = shutil.which("openssl")
NOBODY = "nobody"
BUSY = []       # listening sockets a test keeps open (closed by the site fixture)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def model(sample_model):
    return sample_model     # copied into each site, never changed in place


@pytest.fixture
def site(model, tls_certificate):
    """A set-up that checks out: /var/lib/spamnb, /etc/spamnb and /run/spamnb
    of the docs, made in a folder every user may reach; as root its state is
    the server user's (nobody), as the unit's set-up makes it spamnb's.  Its
    TLS key and certificate are copies of the session's pair (each test may
    damage its own)."""
    base = Path(tempfile.mkdtemp(prefix="spamnb-check-"))
    base.chmod(0o755)
    lib, etc, run = base / "lib", base / "etc", base / "run"
    for folder in (lib, lib / "users", etc, run):
        folder.mkdir()
        folder.chmod(0o755)
    shutil.copy(model, lib / "model.spamnb")
    (etc / "serve.toml").write_text("# settings: TOML, a [serve] table\n[serve]\n")
    # the milter's lists: docs/serve.md's example of their format (so it is checked too)
    example = re.search(r"```text\n *(# a sender address.*?)```", (REPO / "docs" / "serve.md").read_text(), re.S)
    for name in ("allow.list", "block.list"):
        (etc / name).write_text(re.sub(r"(?m)^ +", "", example.group(1)))
    if tls_certificate is not None:
        cert, key = tls_certificate
        shutil.copyfile(cert, etc / "cert.pem")
        shutil.copyfile(key, etc / "key.pem")
        (etc / "key.pem").chmod(0o600)      # root's: read before -u USER
    if ROOT:
        for path in (lib, lib / "users", lib / "model.spamnb"):
            shutil.chown(path, NOBODY)
    yield base
    while BUSY:
        BUSY.pop().close()
    shutil.rmtree(base, ignore_errors=True)


def check(*args):
    proc = run_spamnb(["serve", "--check-config", *map(str, args)], text=True, timeout=120)
    return proc.returncode, proc.stderr.splitlines(), proc.stdout


def user_args():
    """As root: check as the server user (-u nobody); else as this user."""
    return ["-u", NOBODY] if ROOT else []


def good(site, port):
    return ["-l", f"127.0.0.1:{port}", "-l", site / "run" / "spamd.sock", "-m", site / "lib" / "model.spamnb",
            "--models-dir", site / "lib" / "users", "--allow-tell", "--config", site / "etc" / "serve.toml",
            *user_args()]


def test_a_good_set_up_checks_out_and_nothing_is_left_behind(site):
    port = free_port()
    code, lines, out = check(*good(site, port))
    assert (code, lines) == (0, []), lines
    assert "checks out" in out and f"127.0.0.1:{port}" in out
    assert not (site / "run" / "spamd.sock").exists()          # bound? no: looked at only
    with socket.socket() as s:                                # the port was closed again
        s.bind(("127.0.0.1", port))


def fault_missing_config(site, args):
    (site / "etc" / "serve.toml").unlink()
    return args, "serve.toml: No such file or directory"


def fault_unreadable_model(site, args):
    """A model the server user cannot read: root's own, mode 0600 (as root);
    mode 0 (as a user)."""
    model = site / "lib" / "model.spamnb"
    if ROOT:
        shutil.chown(model, "root")
    model.chmod(0o600 if ROOT else 0)
    return args, "Permission denied"


def fault_models_dir_not_writable(site, args):
    users = site / "lib" / "users"
    if ROOT:
        shutil.chown(users, "root")
    users.chmod(0o755 if ROOT else 0o555)
    return args, "--models-dir"


def fault_port_in_use(site, args):
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    BUSY.append(busy)
    return [*args, "-l", f"127.0.0.1:{busy.getsockname()[1]}"], "Address already in use"


def fault_unreadable_tls_key(site, args):
    """As root the key is read before -u USER: a key root cannot read is one
    that is not there; as a user, mode 0."""
    if OPENSSL is None:
        pytest.skip("openssl is not installed")
    key = site / "etc" / "key.pem"
    if ROOT:
        key.unlink()
    else:
        key.chmod(0)
    return ([*args, "--ssl-listen", f"127.0.0.1:{free_port()}", "--ssl-cert", site / "etc" / "cert.pem",
             "--ssl-key", key], "--ssl-key")


def fault_open_listener_without_allowed_ips(site, args):
    return [*args, "-l", f"0.0.0.0:{free_port()}"], "needs --allowed-ips"


FAULTS = [fault_missing_config, fault_unreadable_model, fault_models_dir_not_writable, fault_port_in_use,
          fault_unreadable_tls_key, fault_open_listener_without_allowed_ips]


# Two problems alone in the default run (a listener's and a file's), all six
# with -m slow; test_six_problems_at_once_are_six_lines meets every one of
# them in the default run too.
@pytest.mark.parametrize("fault", slow_beyond(FAULTS, keep=[fault_port_in_use, fault_unreadable_tls_key]),
                         ids=lambda f: f.__name__[6:])
def test_each_problem_is_one_line_and_exit_78(site, fault):
    if not ROOT and fault in (fault_unreadable_model, fault_models_dir_not_writable) and os.access("/", os.W_OK):
        pytest.skip("permission bits do not bind this user")
    args, words = fault(site, good(site, free_port()))
    code, lines, _ = check(*args)
    assert code == exitcodes.EXIT_CONFIG == 78, lines
    assert len(lines) == 1 and lines[0].startswith("spamnb serve: ") and words.lower() in lines[0].lower(), lines


def test_six_problems_at_once_are_six_lines(site):
    args = good(site, free_port())
    for fault in FAULTS:
        if fault is fault_unreadable_tls_key and OPENSSL is None:
            continue
        args, _ = fault(site, args)
    code, lines, _ = check(*args)
    assert code == 78
    assert len(lines) == len(FAULTS) - (OPENSSL is None), "\n".join(lines)
    if ROOT:
        assert sum("(as nobody, the server user)" in line for line in lines) == 2, lines


@pytest.mark.skipif(not ROOT, reason="switching to the server user needs root")
def test_the_server_users_files_are_checked_as_that_user_not_as_root(site):
    """The same unreadable model, checked as root alone (no -u): fine; with
    -u nobody: refused.  The check forks and becomes nobody (os.access of
    root says yes to every file)."""
    model = site / "lib" / "model.spamnb"
    shutil.chown(model, "root")
    model.chmod(0o600)
    args = good(site, free_port())
    without_user = args[:-2]
    assert check(*without_user)[0] == 0
    code, lines, _ = check(*args)
    assert code == 78 and len(lines) == 1 and "permission denied" in lines[0].lower() and "as nobody" in lines[0], lines


@pytest.mark.slow   # over 6 s in the default run: CI runs it in the slow step
def test_an_unknown_user_and_a_running_server_are_found(site, model):
    code, lines, _ = check("-l", f"127.0.0.1:{free_port()}", "-m", model, "-u", "no-such-user-here")
    assert code == 78 and lines == ["spamnb serve: -u no-such-user-here: no such user"], lines
    sock = site / "run" / "spamd.sock"
    with socket.socket(socket.AF_UNIX) as live:
        live.bind(str(sock))
        live.listen(1)
        code, lines, _ = check(*good(site, free_port()))
        assert code == 78 and len(lines) == 1 and "a server answers there" in lines[0], lines
    assert check(*good(site, free_port()))[0] == 0       # a socket left by a server that is gone: replaced


# ------------------------------------------------------------------ the docs' own set-ups

def doc_commands():
    """Every ``spamnb serve`` command in a code block of docs/serve.md and the
    unit's ExecStart (docs/spamnb-serve.service): (where, how it is run, its
    arguments after ``serve``)."""
    found = []
    sources = [("docs/serve.md", (REPO / "docs" / "serve.md").read_text()),
               ("docs/spamnb-serve.service", "```\n" + (REPO / "docs" / "spamnb-serve.service").read_text() + "```\n")]
    for name, text in sources:
        for block in re.findall(r"^```[^\n`]*\n(.*?)^```", text, flags=re.S | re.M):
            joined = re.sub(r"\\\n\s*", " ", block)
            for line in joined.splitlines():
                line = line.split(" #", 1)[0].strip().rstrip("&").strip()
                match = re.match(r"(?:ExecStart=|sudo -u spamnb |runuser -u spamnb -- )?\S*spamnb serve( .*|$)", line)
                if not match or "--status" in line:
                    continue
                as_unit = line.startswith(("ExecStart=", "sudo -u spamnb", "runuser -u spamnb"))
                found.append((name, "the unit's user" if as_unit else "as started", shlex.split(match.group(1))))
    return found


def test_the_docs_give_server_set_ups():
    commands = doc_commands()
    assert len(commands) >= 8, commands
    assert any("--ssl-listen" in args for _, _, args in commands)
    assert any("--check-config" in args for _, _, args in commands)


def localised(args, site, ports):
    """A doc's command with its folders moved into ``site`` and its ports to free ones."""
    out = []
    for arg in args:
        if arg == "--check-config":
            continue
        folders = {"/run/spamnb.pid": site / "run" / "spamnb.pid", "/var/lib/spamnb": site / "lib",
                   "/etc/spamnb": site / "etc", "/run/spamnb": site / "run"}
        arg = re.sub("|".join(map(re.escape, folders)), lambda m: str(folders[m.group(0)]), arg)
        arg = re.sub(r"(?<=:)(\d+)$", lambda m: str(ports.setdefault(m.group(1), free_port())), arg)
        if re.fullmatch(r"\d+", arg) and out and out[-1] == "--metrics":
            arg = str(ports.setdefault(arg, free_port()))
        out.append(arg)
    return out


@pytest.mark.parametrize("where, how, args", doc_commands(), ids=lambda v: v if isinstance(v, str) else None)
@pytest.mark.slow   # several seconds: the default run stays near three minutes
def test_the_docs_set_ups_check_out(site, where, how, args):
    if OPENSSL is None and "--ssl-listen" in args:
        pytest.skip("openssl is not installed")
    if any(arg.startswith("redis://") for arg in args) and shutil.which("redis-server") is None:
        pytest.skip("--shared needs the redis package")
    args = localised(args, site, {})
    if "-m" not in args and "--model" not in args:      # `spamnb serve`: $SPAMNB_HOME/model.spamnb
        args += ["-m", site / "lib" / "model.spamnb"]
    if "-l" not in args and "--listen" not in args and "--milter" not in args:
        args += ["-l", f"127.0.0.1:{free_port()}"]     # the default 127.0.0.1:783 may be taken here
    if "-u" in args:
        i = args.index("-u")
        args[i:i + 2] = user_args()
    elif how == "the unit's user":
        args += user_args()
    code, lines, _ = check(*args)
    assert (code, lines) == (0, []), (where, args, lines)


# ------------------------------------------------------------------ as the unit's user (systemd User=)

@pytest.mark.slow
@pytest.mark.skipif(not ROOT, reason="runs the installed spamnb as nobody (needs root)")
@pytest.mark.skipif(installed_spamnb.missing() is not None, reason=str(installed_spamnb.missing()))
def test_as_the_units_user_a_tls_key_only_root_can_read_is_found(site):
    """systemd's User=spamnb: the server reads its TLS key as that user.
    `runuser -u nobody -- /opt/spamnb/bin/spamnb serve --check-config ...`
    (docs/serve.md) finds root's 0600 key unreadable; the same with the key
    given to nobody checks out."""
    if OPENSSL is None:
        pytest.skip("openssl is not installed")
    program = installed_spamnb.program()
    key = site / "etc" / "key.pem"
    args = ["serve", "--check-config", "-l", f"127.0.0.1:{free_port()}", "-m", site / "lib" / "model.spamnb",
            "--ssl-listen", f"127.0.0.1:{free_port()}", "--ssl-cert", site / "etc" / "cert.pem", "--ssl-key", key]
    proc = installed_spamnb.run_as(NOBODY, [program, *args], text=True)
    assert proc.returncode == 78, proc.stderr
    assert proc.stderr.splitlines() == [f"spamnb serve: --ssl-key {key}: cannot read it: Permission denied"]
    shutil.chown(key, NOBODY)
    proc = installed_spamnb.run_as(NOBODY, [program, *args], text=True)
    assert proc.returncode == 0, proc.stderr


# ------------------------------------------------------------------ spamnb info's cutoffs

def test_info_prints_cutoffs_rounded(model):
    out = run_spamnb(["info", "-m", model], text=True).stdout
    lines = {line.split(":", 1)[0]: line for line in out.splitlines()}
    for name in ("spam cutoff", "ham cutoff"):
        probability = re.search(r"P\(spam\) [<>]= (\S+)", lines[name]).group(1)
        digits = probability.split("e")[0].replace(".", "").lstrip("0")
        assert len(digits) <= 4 or set(digits[:-4]) == {"9"}, lines[name]      # 4 significant digits of 1 - p
        assert re.search(r"log-odds [<>]= [+-]\d+\.\d{3}\)", lines[name]), lines[name]
