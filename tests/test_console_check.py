"""``spamnb serve --check-config`` with the console (``--ui``): its users
file (read as the server user, each line a user with a scrypt hash, no name
twice, at least one user, not readable by every user), its address (in use;
not loopback without --ui-tls or --allowed-ips) and its history's folder
(writable by the server user); one line each, exit 78.  The set-up of
test_check_config with the console added."""

import os
import shutil
import socket

import pytest

from spamnb.cli import exitcodes
from spamnb.console.auth import hash_password
from test_check_config import BUSY, NOBODY, ROOT, check, free_port, good, model, site  # noqa: F401 - fixtures

pytest.importorskip("h11")


def console_site(site):
    """``site`` with a console: a users file of the server user's, mode 0600."""
    users = site / "etc" / "console-users"
    users.write_text("# name role hash\n"
                     f"ann admin {hash_password('ann-pw', params=(2 ** 10, 8, 1))}\n"
                     f"vic viewer {hash_password('vic-pw', params=(2 ** 10, 8, 1))}\n")
    users.chmod(0o600)
    if ROOT:
        shutil.chown(users, NOBODY)
    return users


def console_args(site, users, port=None):
    return [*good(site, free_port()), "--ui", str(port or free_port()), "--ui-users", users]


def test_a_good_console_set_up_checks_out(site):
    users = console_site(site)
    port = free_port()
    code, lines, out = check(*console_args(site, users, port))
    assert (code, lines) == (0, []), lines
    assert "checks out" in out and f"console on 127.0.0.1:{port}" in out, out
    with socket.socket() as s:          # bound and closed again
        s.bind(("127.0.0.1", port))


def fault_users_unreadable(site, users, args):
    if ROOT:
        shutil.chown(users, "root")
    users.chmod(0o600 if ROOT else 0)
    return args, "--ui-users"


def fault_users_readable_by_all(site, users, args):
    users.chmod(0o644)
    return args, "every user may read it"


def fault_users_bad_line(site, users, args):
    users.write_text(users.read_text() + "bob superuser scrypt$1$2\n")
    return args, "line 4: expected 'name role scrypt$...'"


def fault_users_bad_hash(site, users, args):
    users.write_text(users.read_text() + "bob trainer scrypt$16384$8$1$c2FsdA==$short\n")
    return args, "line 4: the hash is not"


def fault_users_twice(site, users, args):
    users.write_text(users.read_text() + users.read_text().splitlines()[1] + "\n")
    return args, "ann is given twice"


def fault_users_empty(site, users, args):
    users.write_text("# nobody yet\n")
    return args, "no user in it"


def fault_ui_port_in_use(site, users, args):
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    BUSY.append(busy)
    return [*args, "--ui", busy.getsockname()[1]], "--ui: "


def fault_history_folder_not_writable(site, users, args):
    folder = site / "history"
    folder.mkdir()
    folder.chmod(0o555)
    return [*args, "--ui-history", folder / "history.sqlite"], "cannot write in"


FAULTS = [fault_users_unreadable, fault_users_readable_by_all, fault_users_bad_line, fault_users_bad_hash,
          fault_users_twice, fault_users_empty, fault_ui_port_in_use, fault_history_folder_not_writable]


@pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f.__name__[6:])
@pytest.mark.slow   # several seconds: the default run stays near three minutes
def test_each_console_problem_is_one_line_and_exit_78(site, fault):
    if not ROOT and fault in (fault_users_unreadable, fault_history_folder_not_writable) and os.access("/", os.W_OK):
        pytest.skip("permission bits do not bind this user")
    users = console_site(site)
    args, words = fault(site, users, console_args(site, users))
    code, lines, _ = check(*args)
    assert code == exitcodes.EXIT_CONFIG == 78, lines
    assert len(lines) == 1 and lines[0].startswith("spamnb serve: ") and words.lower() in lines[0].lower(), lines
    if ROOT and fault is not fault_ui_port_in_use:
        assert lines[0].endswith("(as nobody, the server user)"), lines


@pytest.mark.parametrize("extra, missing", [([], "needs --ui-tls and --allowed-ips"),
                                            (["--allowed-ips", "10.0.0.0/8"], "needs --ui-tls")])
def test_a_console_off_loopback_needs_tls_and_allowed_ips(site, extra, missing):
    users = console_site(site)
    code, lines, _ = check(*console_args(site, users), "--ui", f"0.0.0.0:{free_port()}", *extra)
    assert code == 78 and len(lines) == 1 and lines[0].endswith(missing), lines


def test_several_console_problems_are_several_lines(site):
    users = console_site(site)
    args = console_args(site, users)
    for fault in (fault_users_readable_by_all, fault_users_bad_line, fault_ui_port_in_use,
                  fault_history_folder_not_writable):
        args, _ = fault(site, users, args)
    code, lines, _ = check(*args)
    assert code == 78 and len(lines) == 4, "\n".join(lines)
