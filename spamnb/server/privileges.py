"""``spamnb serve -u USER [--group GROUP]``: give up root once the sockets
are bound, before any mail or model is read."""

from __future__ import annotations

import grp
import os
import pwd

from spamnb.errors import PrivilegeError


def resolve(user, group=None):
    """(the user's pwd entry, the group id) for ``user`` (a name or a number)
    and ``group`` (default: the user's); PrivilegeError when either does not exist."""
    try:
        pw = pwd.getpwuid(int(user)) if str(user).isdigit() else pwd.getpwnam(user)
    except (KeyError, OverflowError):
        raise PrivilegeError(f"-u {user}: no such user") from None
    try:
        gid = pw.pw_gid if group is None else (
            grp.getgrgid(int(group)).gr_gid if str(group).isdigit() else grp.getgrnam(group).gr_gid)
    except (KeyError, OverflowError):
        raise PrivilegeError(f"--group {group}: no such group") from None
    return pw, gid


def drop(user, group=None):
    """Become ``user`` (a name or a number) with ``group`` (default: the
    user's) and the user's supplementary groups; set HOME, USER and LOGNAME.
    Raises PrivilegeError when the user or group does not exist, the switch
    fails, or the process could still become root again afterwards."""
    pw, gid = resolve(user, group)
    if pw.pw_uid == 0:
        raise PrivilegeError(f"-u {user}: that is root; give an unprivileged user")
    if os.getuid() != 0 and os.geteuid() != 0:
        if os.getuid() == pw.pw_uid and (group is None or gid in os.getgroups() or gid == os.getgid()):
            return pw          # already that user: nothing to give up
        raise PrivilegeError(f"-u {user}: only root can switch users (running as uid {os.getuid()})")
    try:
        os.setgroups(sorted(set(os.getgrouplist(pw.pw_name, gid))))
        os.setgid(gid)
        os.setuid(pw.pw_uid)
    except OSError as exc:
        raise PrivilegeError(f"-u {user}: cannot switch to uid {pw.pw_uid}: {exc.strerror or exc}") from None
    if os.getuid() == 0 or os.geteuid() == 0 or _can_become_root():
        raise PrivilegeError(f"-u {user}: still able to act as root after the switch")
    os.environ.update(HOME=pw.pw_dir, USER=pw.pw_name, LOGNAME=pw.pw_name)
    return pw


def _can_become_root():
    try:
        os.setuid(0)
    except OSError:
        return False
    return True


def running_as_root():
    return os.geteuid() == 0
