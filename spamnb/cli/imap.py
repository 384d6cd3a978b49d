"""``spamnb imap scan`` and ``spamnb imap learn``: filter and train over IMAP
(spamnb.imap), the account in the settings file's ``[imap]`` table."""

from __future__ import annotations

import os
import sys

from spamnb.cli.common import CommandError, model_path, settings_of
from spamnb.cli.parsing import add_options
from spamnb.cli.exitcodes import EXIT_OK
from spamnb.errors import SettingsError


def _account(args):
    from spamnb.imap.client import check_security
    from spamnb.settings import imap_settings

    try:
        values = imap_settings(getattr(args, "settings", None))
        if args.cafile:
            values["cafile"] = args.cafile
        check_security(values["host"], values["security"])
        password = _password(values)
    except SettingsError as exc:
        raise CommandError(str(exc)) from None
    return values, password


def _password(values):
    """The password the ``[imap]`` settings point to; raises SettingsError (never saying the password)."""
    if "password_file" in values:
        path = os.path.expanduser(values["password_file"])
        try:
            with open(path, "rb") as f:
                mode = os.fstat(f.fileno()).st_mode
                if mode & 0o077:
                    raise SettingsError(f"{path}: the password file is readable by others "
                                        f"(mode {mode & 0o777:o}): chmod 600 it")
                raw = f.read(4096)
        except OSError as exc:
            raise SettingsError(f"{path}: {exc.strerror or exc}") from None
    else:
        import shlex
        import subprocess

        command = values["password_command"]
        try:
            proc = subprocess.run(shlex.split(command), capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
        except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
            raise SettingsError(f"password_command failed: {getattr(exc, 'strerror', None) or exc}") from None
        if proc.returncode != 0:
            raise SettingsError(f"password_command exited {proc.returncode}")
        raw = proc.stdout
    password = raw.decode("utf-8", "replace").split("\n")[0].rstrip("\r")
    if not password:
        raise SettingsError("the password is empty")
    return password


def _connect(values, password, args):
    """The connection; its errors (``spamnb.errors.ImapError``) carry the exit codes
    (LoginRefused 77, the others 69)."""
    from spamnb.imap.client import connect

    return connect(values["host"], values.get("port"), values["user"], password, values["security"],
                   values.get("cafile"), timeout=60, deadline=args.timeout, max_size=args.max_size)


def cmd_scan(args):
    from spamnb.cli.common import load_filter
    from spamnb.cli.progress import Progress
    from spamnb.imap import jobs
    from spamnb.imap.state import ScanState
    from spamnb.mail.status import passthrough_pieces
    from spamnb.model import spamnb_home

    settings = settings_of(args)
    spam_filter = load_filter(args, settings)
    values, password = _account(args)
    try:
        state = ScanState(values.get("state") or os.path.join(spamnb_home(), "imap-state.json"))
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    mark = None
    if args.add_header:
        def mark(raw, verdict):
            return b"".join(bytes(p) for p in passthrough_pieces(raw, verdict, settings.header, settings.subject_tag))
    account = f"{values['user']}@{values['host']}:{values.get('port') or ''}"
    conn = _connect(values, password, args)
    progress = Progress(0, enabled=not args.quiet, unit="messages", interval=0.2)
    try:
        counts = jobs.scan(conn, state, account, spam_filter.classify, values["inbox"], values["spam"],
                           values.get("unsure"), args.flag_only, mark, settings.header,
                           step=lambda n: progress.step("scanning", n))
    finally:
        progress.close()
        conn.logout()
    if not args.quiet:
        done = "flagged" if args.flag_only else f"moved to {values['spam']}"
        large = f", {counts['too large']} over --max-size left in place" if counts["too large"] else ""
        print(f"spamnb imap: {sum(counts.values())} new in {values['inbox']}: {counts['spam']} spam ({done}), "
              f"{counts['unsure']} unsure, {counts['ham']} ham{large}", file=sys.stderr)
    return EXIT_OK


def cmd_learn(args):
    from spamnb.cli.progress import Progress
    from spamnb.imap import jobs
    from spamnb.model import Tally, learning_session

    settings = settings_of(args)
    markup = {"header_name": settings.header, "subject_tag": settings.subject_tag}
    values, password = _account(args)
    ham = args.ham or values["ham"]
    conn = _connect(values, password, args)
    progress = Progress(0, enabled=not args.quiet, unit="messages", interval=0.2)
    tally = Tally()
    try:
        with learning_session(model_path(args, settings), wait=args.wait, create=True, expire=True) as session:
            def learn_one(raw, is_spam):
                try:
                    session.learn(raw, is_spam, tally, **markup)
                except ValueError:      # not mail a model can learn: skipped, as `spamnb learn` refuses it
                    pass

            jobs.learn(conn, learn_one, values["spam"], ham, step=lambda n: progress.step("learning", n))
    finally:
        progress.close()
        conn.logout()
    if not args.quiet:
        print(f"spamnb imap: {tally.learn_summary()} ({values['spam']} as spam, {', '.join(ham)} as ham)",
              file=sys.stderr)
    return EXIT_OK


def add_parser(subparsers):
    from spamnb.options import options

    p = subparsers.add_parser("imap", help="filter and learn a mailbox over IMAP (the [imap] settings)",
                              description="Filter and learn a mailbox on an IMAP server (docs/imap.md). The "
                                          "account is the settings file's [imap] table.")
    jobs = p.add_subparsers(dest="imap_command", metavar="JOB")
    for name, text, handler in (
            ("scan", "classify the inbox's new messages; spam to the spam folder", cmd_scan),
            ("learn", "learn the spam folder as spam and the ham folders as ham", cmd_learn)):
        job = jobs.add_parser(name, help=text)
        add_options(job, options(f"imap {name}"))
        job.set_defaults(handler=handler)
    p.set_defaults(handler=_no_job)
    return p


def _no_job(args):
    from spamnb.cli.common import UsageError

    raise UsageError("spamnb imap: give a job: scan or learn")
