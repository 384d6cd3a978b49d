"""The ``spamnb`` command: a thin shell over :class:`spamnb.SpamFilter`.

Exit codes (also in the README):

=====  ==============================================================
0      ``classify``, one message: spam.  Any other command: success.
1      ``classify``, one message: ham.
2      ``classify``, one message: unsure.
3      error: no model yet, unreadable input, damaged or mismatched
       model, a message to forget that was not learned, ...
64     usage error (unknown command or option, bad value).
130    interrupted.
=====  ==============================================================

``classify`` follows bogofilter's convention (0 spam, 1 ham, 2 unsure) so
procmail/maildrop recipes carry over; with ``--batch`` or several messages it
exits 0 once every message got a verdict.  Every error is one line on
stderr, never a traceback (``SPAMNB_DEBUG=1`` shows it).  With
``-p/--passthrough`` the message is written to stdout even when scoring
fails, so mail is never lost.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

EXIT_SPAM = 0
EXIT_OK = 0
EXIT_HAM = 1
EXIT_UNSURE = 2
EXIT_ERROR = 3
EXIT_USAGE = 64
EXIT_INTERRUPTED = 130

COMMANDS = ("train", "classify", "learn", "forget", "info", "tokens", "evaluate", "serve")
_VERDICT_EXIT = {"spam": EXIT_SPAM, "ham": EXIT_HAM, "unsure": EXIT_UNSURE}
STATUS_HEADER = b"X-Spam-Status"
SCORE_HEADER = b"X-Spam-Score"


class UsageError(Exception):
    pass


class CommandError(Exception):
    """An error the command reports in one line (exit 3)."""


def _formatter(prog):
    """argparse's help formatter, told the terminal width: left to find it
    itself it imports shutil (with bz2 and lzma), 2.1 ms of every ``spamnb
    classify``, since ``add_argument`` builds a formatter to check metavars.
    The width is what ``shutil.get_terminal_size`` would give: $COLUMNS, else
    the terminal's, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return argparse.HelpFormatter(prog, width=(columns or 80) - 2)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _formatter)
        super().__init__(*args, **kwargs)

    def error(self, message):
        raise UsageError(f"{self.prog}: {message}")


# ---------------------------------------------------------------------------- helpers
def _model_path(args):
    from spamnb.filter import default_model_path

    return args.model if args.model else default_model_path()


def _load(args):
    from spamnb.filter import SpamFilter

    return SpamFilter.load(_model_path(args))


def _read_stdin():
    return sys.stdin.buffer.read()


class _Progress:
    """A one-line progress counter on stderr, only when stderr is a terminal."""

    def __init__(self, label, total, enabled=True):
        self.label, self.total = label, total
        self.enabled = enabled and sys.stderr.isatty()
        self.done = 0
        self._last = 0.0

    def wrap(self, items):
        for item in items:
            yield item
            self.done += 1
            if self.enabled and time.monotonic() - self._last > 0.1:
                self._last = time.monotonic()
                pct = 100.0 * self.done / self.total if self.total else 100.0
                sys.stderr.write(f"\r{self.label}: {self.done}/{self.total} messages ({pct:3.0f}%)")
                sys.stderr.flush()
        if self.enabled:
            sys.stderr.write("\r" + " " * 60 + "\r")
            sys.stderr.flush()


def _human_size(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024.0


# ---------------------------------------------------------------------------- train
def cmd_train(args):
    from spamnb.corpus import CorpusReport, labelled_messages
    from spamnb.filter import SpamFilter

    if not (args.dirs or args.spam or args.ham):
        raise UsageError("spamnb train: give a corpus folder, or --spam/--ham paths")
    started = time.perf_counter()
    report = CorpusReport()
    messages = labelled_messages(args.dirs, args.spam, args.ham, report=report, strict=args.strict)
    if not messages:
        raise CommandError(f"no messages found ({report.summary()})")
    n_spam = sum(m.is_spam for m in messages)
    if n_spam == 0 or n_spam == len(messages):
        print(f"spamnb: warning: the corpus holds only {'ham' if n_spam == 0 else 'spam'}", file=sys.stderr)
    params = {k: v for k, v in (("alpha", args.alpha), ("counts", args.counts), ("prior", args.prior),
                                ("feature_weight", args.feature_weight)) if v is not None}
    spam_filter = SpamFilter(**params)
    progress = _Progress("training", len(messages), enabled=not args.quiet)
    spam_filter.fit(progress.wrap(m.data for m in messages), [m.is_spam for m in messages])
    path = _model_path(args)
    spam_filter.save(path)
    elapsed = time.perf_counter() - started
    if not args.quiet:
        print(f"trained on {len(messages)} messages ({n_spam} spam, {len(messages) - n_spam} ham), "
              f"{spam_filter.vocabulary_.n_features} tokens in the vocabulary, {elapsed:.2f} s; "
              f"{report.summary()}")
        print(f"model: {path} ({_human_size(os.path.getsize(path))})")
    return EXIT_OK


# ---------------------------------------------------------------------------- classify
def _verdict_json(verdict, name=None):
    out = {"verdict": verdict.label, "probability": verdict.probability, "log_odds": verdict.log_odds,
           "tokens": verdict.tokens, "known_tokens": verdict.known_tokens,
           "evidence": [[token, weight] for token, weight in verdict.evidence]}
    if name is not None:
        out = {"message": name, **out}
    return out


def _format_verdict(verdict):
    return f"{verdict.label} {verdict.probability:.6f} log-odds {verdict.log_odds:+.3f}"


def add_spam_headers(message, verdict):
    """The message with ``X-Spam-Status`` and ``X-Spam-Score`` at the end of its
    header block (any such headers it already had are removed: a sender must
    not be able to pre-label its own mail).  A message with no header block
    gets the two headers and a blank line in front of it."""
    return b"".join(_passthrough_pieces(message, verdict))


def _passthrough_pieces(message, verdict):
    """``add_spam_headers`` as pieces to write one after the other; the body is
    a view of ``message``, not a copy (a 50 MB message stays one copy)."""
    status = {"spam": b"Yes", "ham": b"No", "unsure": b"Unsure"}[verdict.label]
    lines = [STATUS_HEADER + b": " + status + b", probability=" + f"{verdict.probability:.6f}".encode(),
             SCORE_HEADER + b": " + f"{verdict.log_odds:+.3f}".encode()]
    from spamnb.corpus import looks_like_mail

    if not looks_like_mail(message):
        return [b"\n".join(lines) + b"\n\n", message]
    end = _header_end(message)
    head = message[:end]
    newline = b"\r\n" if b"\r\n" in head[:2000] else b"\n"
    kept = _strip_headers(head, (STATUS_HEADER.lower(), SCORE_HEADER.lower()))
    if kept and not kept.endswith(b"\n"):
        kept += newline
    return [kept + newline.join(lines) + newline, memoryview(message)[end:]]


def _header_end(message):
    """Offset just past the last header line (the blank line and body follow)."""
    positions = [p for p in (message.find(b"\n\n"), message.find(b"\n\r\n")) if p >= 0]
    return min(positions) + 1 if positions else len(message)


def _strip_headers(head, names):
    out = []
    skipping = False
    for line in head.splitlines(keepends=True):
        if line[:1] in (b" ", b"\t"):  # a continuation line goes with its field
            if not skipping:
                out.append(line)
            continue
        name = line.split(b":", 1)[0].strip().lower()
        skipping = name in names
        if not skipping:
            out.append(line)
    return b"".join(out)


def cmd_classify(args):
    import json

    if args.passthrough and (args.batch or len(args.files) > 1):
        raise UsageError("spamnb classify: -p/--passthrough takes one message")
    if args.batch or len(args.files) > 1:
        return _classify_many(args)
    name = args.files[0] if args.files else "-"
    try:
        message = _read_stdin() if name == "-" else _read_path(name)
    except OSError as exc:
        raise CommandError(f"{name}: {exc.strerror or exc}") from None
    try:
        spam_filter = _load(args)
        verdict = spam_filter.classify(message)
    except BaseException:
        if args.passthrough:  # never lose the mail: pass it on untouched
            sys.stdout.buffer.write(message)
            sys.stdout.flush()
        raise
    if args.passthrough:
        for piece in _passthrough_pieces(message, verdict):
            sys.stdout.buffer.write(piece)
    elif args.json:
        print(json.dumps(_verdict_json(verdict)))
    else:
        print(_format_verdict(verdict))
        if args.verbose:
            for token, weight in verdict.evidence:
                print(f"  {weight:+8.3f}  {token}")
    return _VERDICT_EXIT[verdict.label]


def _read_path(path):
    with open(path, "rb") as f:
        return f.read()


def _classify_many(args):
    import json

    from spamnb.corpus import CorpusReport, read_messages

    spam_filter = _load(args)
    paths = args.files
    if args.batch and not paths:
        paths = [line.rstrip("\n") for line in sys.stdin if line.strip()]
    report = CorpusReport()
    out = sys.stdout
    for path in paths:
        if path == "-":
            items = [("-", _read_stdin())]
        elif os.path.isdir(path):
            items = ((os.path.join(path, rel), data) for rel, data in read_messages(path, report))
        else:
            try:
                items = [(path, _read_path(path))]
            except OSError as exc:
                raise CommandError(f"{path}: {exc.strerror or exc}") from None
        for name, data in items:
            verdict = spam_filter.classify(data)
            if args.json:
                out.write(json.dumps(_verdict_json(verdict, name)) + "\n")
            else:
                out.write(f"{name}\t{verdict.label}\t{verdict.probability:.6f}\t{verdict.log_odds:+.3f}\n")
    if report.n_skipped:
        print(f"spamnb: {report.summary()}", file=sys.stderr)
    return EXIT_OK


# ---------------------------------------------------------------------------- learn / forget
def _messages_of(paths):
    """(name, bytes) for message files, folders, mboxes, or '-' (stdin)."""
    from spamnb.corpus import read_messages

    if not paths:
        paths = ["-"]
    out = []
    for path in paths:
        if path == "-":
            out.append(("-", _read_stdin()))
        elif os.path.isdir(path):
            out.extend(read_messages(path))
        else:
            try:
                out.append((path, _read_path(path)))
            except OSError as exc:
                raise CommandError(f"{path}: {exc.strerror or exc}") from None
    return out


def _update_model(args, forget):
    from spamnb.filter import SpamFilter
    from spamnb.store import locked

    messages = _messages_of(args.files)
    path = _model_path(args)
    spam = args.label == "spam"
    with locked(path):
        if os.path.exists(path) or forget:
            spam_filter = SpamFilter.load(path)
        else:
            spam_filter = SpamFilter()
        for name, data in messages:
            try:
                (spam_filter.forget if forget else spam_filter.learn)(data, spam=spam)
            except ValueError as exc:
                raise CommandError(f"{name}: {exc}; the model is unchanged") from None
        spam_filter.save(path)
    if not args.quiet:
        verb = "forgot" if forget else "learned"
        ham, spam_count = spam_filter.class_count_
        print(f"{verb} {len(messages)} message{'s' if len(messages) != 1 else ''} as {args.label}; "
              f"model: {path} ({spam_count:.0f} spam, {ham:.0f} ham)")
    return EXIT_OK


def cmd_learn(args):
    return _update_model(args, forget=False)


def cmd_forget(args):
    return _update_model(args, forget=True)


# ---------------------------------------------------------------------------- info / tokens
def cmd_info(args):
    spam_filter = _load(args)
    path = spam_filter.source_
    ham, spam = spam_filter.class_count_
    print(f"model:       {path} ({_human_size(os.path.getsize(path))})")
    print(f"messages:    {spam + ham:.0f} ({spam:.0f} spam, {ham:.0f} ham)")
    print(f"vocabulary:  {spam_filter.vocabulary_.n_features} tokens")
    print(f"settings:    alpha={spam_filter.alpha} prior={spam_filter.prior} counts={spam_filter.counts} "
          f"spam_cutoff={spam_filter.spam_cutoff} ham_cutoff={spam_filter.ham_cutoff}")
    print(f"tokenizer:   {spam_filter.tokenizer_.settings}")
    if args.tokens > 0 and spam_filter.vocabulary_.n_features:
        spammy, hammy = spam_filter.strongest_tokens(args.tokens)
        for title, rows in (("strongest spam tokens", spammy), ("strongest ham tokens", hammy)):
            print(f"{title} (log-ratio, ham count, spam count):")
            for token, weight, n_ham, n_spam in rows:
                print(f"  {weight:+8.3f}  {n_ham:7.0f} {n_spam:7.0f}  {token}")
    return EXIT_OK


def cmd_tokens(args):
    from spamnb.tokenizer import Tokenizer

    data = _read_stdin() if args.file == "-" else _read_path(args.file)
    for token in Tokenizer().tokens(data):
        print(token)
    return EXIT_OK


def cmd_evaluate(args):
    from spamnb import evaluate

    return evaluate.run(args)


# ---------------------------------------------------------------------------- parser
def build_parser(command=None):
    """The argument parser; with ``command``, only that subcommand's parser is
    built (the rest cost start-up time that ``spamnb classify`` cannot spare)."""
    parser = _Parser(prog="spamnb", description="A Bayesian e-mail spam filter.")
    from spamnb import __version__

    parser.add_argument("--version", action="version", version=f"spamnb {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    def model_option(p):
        p.add_argument("-m", "--model", metavar="PATH",
                       help="model file (default: $SPAMNB_HOME/model.spamnb or ~/.spamnb/model.spamnb)")

    def wanted(name):
        return command is None or command == name

    if wanted("train"):
        _add_train(sub, model_option)
    if wanted("classify"):
        _add_classify(sub, model_option)
    for name, handler, text in (("learn", cmd_learn, "add messages to the model (train on error)"),
                                ("forget", cmd_forget, "remove messages learned before (exact undo)")):
        if wanted(name):
            _add_update(sub, model_option, name, handler, text)
    if wanted("info"):
        p = sub.add_parser("info", help="describe a model")
        p.add_argument("--tokens", type=int, default=10, metavar="N", help="strongest tokens to list")
        model_option(p)
        p.set_defaults(handler=cmd_info)
    if wanted("tokens"):
        p = sub.add_parser("tokens", help="print the tokens of a message")
        p.add_argument("file", nargs="?", default="-", metavar="FILE")
        p.set_defaults(handler=cmd_tokens)
    if wanted("evaluate"):
        p = sub.add_parser("evaluate", help="measure accuracy: cross-validation, fixed split, ROC")
        if command == "evaluate":  # evaluate imports numpy: only when it runs
            from spamnb import evaluate

            evaluate.add_arguments(p)
        p.set_defaults(handler=cmd_evaluate)
    if wanted("serve"):
        from spamnb import serve

        serve.add_parser(sub)
    return parser


def _add_train(sub, model_option):
    p = sub.add_parser("train", help="train a new model from labelled mail")
    p.add_argument("dirs", nargs="*", metavar="DIR", help="folder tree: folders named spam* hold spam, others ham")
    p.add_argument("--spam", action="append", default=[], metavar="PATH", help="spam: folder, Maildir or mbox")
    p.add_argument("--ham", action="append", default=[], metavar="PATH", help="ham: folder, Maildir or mbox")
    p.add_argument("--strict", action="store_true", help="fail on unreadable or non-mail files instead of skipping")
    p.add_argument("--alpha", type=float, help="Dirichlet soft count")
    p.add_argument("--counts", choices=("binary", "raw", "log"), help="per-message token weighting")
    p.add_argument("--prior", choices=("mle", "map", "uniform"), help="class prior estimator")
    p.add_argument("--feature-weight", type=float, metavar="W",
                   help="weight of the continuous message features (default 0: off; see docs/features.md)")
    p.add_argument("-q", "--quiet", action="store_true")
    model_option(p)
    p.set_defaults(handler=cmd_train)


def _add_classify(sub, model_option):
    p = sub.add_parser("classify", help="classify mail (one message on stdin by default)")
    p.add_argument("files", nargs="*", metavar="FILE", help="message files, folders or - for stdin")
    p.add_argument("--batch", action="store_true",
                   help="several messages: one line each (paths from stdin when no FILE is given)")
    p.add_argument("-p", "--passthrough", action="store_true",
                   help="write the message to stdout with X-Spam-Status and X-Spam-Score headers")
    p.add_argument("--json", action="store_true", help="JSON output")
    p.add_argument("-v", "--verbose", action="store_true", help="also list the strongest evidence")
    model_option(p)
    p.set_defaults(handler=cmd_classify)


def _add_update(sub, model_option, name, handler, text):
    p = sub.add_parser(name, help=text)
    label = p.add_mutually_exclusive_group(required=True)
    label.add_argument("--spam", dest="label", action="store_const", const="spam")
    label.add_argument("--ham", dest="label", action="store_const", const="ham")
    p.add_argument("files", nargs="*", metavar="FILE", help="message files, folders, mboxes or - (stdin)")
    p.add_argument("-q", "--quiet", action="store_true")
    model_option(p)
    p.set_defaults(handler=handler)


def main(argv=None):
    """Run the command line; returns the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        command = argv[0] if argv and argv[0] in COMMANDS else None
        args = build_parser(command).parse_args(argv)
        if getattr(args, "handler", None) is None:
            raise UsageError("spamnb: give a command (train, classify, learn, forget, info, tokens, evaluate); "
                             "see spamnb --help")
        return args.handler(args)
    except UsageError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("spamnb: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_ERROR
    except SystemExit:
        raise
    except BaseException as exc:  # one line, never a traceback
        if os.environ.get("SPAMNB_DEBUG"):
            raise
        print(f"spamnb: {_one_line(exc)}", file=sys.stderr)
        return EXIT_ERROR


def _one_line(exc):
    from spamnb.store import ModelError

    if isinstance(exc, (ModelError, CommandError)):
        text = str(exc)
    elif isinstance(exc, OSError):
        text = f"{exc.filename + ': ' if exc.filename else ''}{exc.strerror or exc}"
    elif isinstance(exc, MemoryError):
        text = "out of memory"
    else:
        from spamnb.corpus import CorpusError

        text = str(exc) if isinstance(exc, CorpusError) else f"{type(exc).__name__}: {exc}"
    return " ".join(text.split()) or type(exc).__name__
