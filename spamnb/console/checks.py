"""``spamnb serve --check-config``'s checks of the console's files, made as
the server user (spamnb.server.preflight runs :func:`files` where it checks
the server's own files; the command passes it, since the server's layer
does not import the console's).  The console's address is bound and closed
with the server's listeners (spamnb.server.preflight)."""

from __future__ import annotations

import os
import stat

from spamnb.console.auth import users_file_problems
from spamnb.console.process import history_path

__all__ = ["files"]


def files(settings):
    """The problems of ``--ui-users`` (spamnb.console.auth.users_file_problems)
    and of the history's file and folder (SQLite writes its journal beside
    the file: the folder must be writable), one line each; [] without --ui."""
    if settings.ui is None:
        return []
    problems = users_file_problems(settings.ui_users)
    path = history_path(settings)
    option = "--ui-history" if settings.ui_history else "the console's history (--ui-history)"
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        problems.append(f"{option} {path}: no folder {folder}")
    elif not os.access(folder, os.W_OK | os.X_OK):
        problems.append(f"{option} {path}: cannot write in {folder} (SQLite makes its journal there)")
    else:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            st = None
        except OSError as exc:
            problems.append(f"{option} {path}: {exc.strerror or exc}")
            st = None
        if st is not None and not stat.S_ISREG(st.st_mode):
            problems.append(f"{option} {path}: not a file")
        elif st is not None and not os.access(path, os.R_OK | os.W_OK):
            problems.append(f"{option} {path}: cannot be read and written")
    return problems
