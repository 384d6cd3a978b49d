"""The ``spamnb`` command: a thin shell over :class:`spamnb.SpamFilter`.

Exit codes: :mod:`spamnb.cli.exitcodes` (one set for every command; also in the
README and ``spamnb --help``).  ``classify`` of one message follows
bogofilter's convention (0 spam, 1 ham, 2 unsure); with ``-p/--passthrough``
it exits 0 whatever the verdict (a mail filter that exits non-zero is a
failed filter to procmail and maildrop), and with several messages it exits
0 once every message got a verdict.  Every error is one line on stderr,
never a traceback (``SPAMNB_DEBUG=1`` shows it).  With ``-p`` the message is
written to stdout even when scoring fails (exit 3), so mail is never lost.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from spamnb.cli.exitcodes import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, VERDICT_EXIT

COMMANDS = ("train", "classify", "learn", "forget", "info", "tokens", "evaluate", "dump", "load", "merge",
            "prune", "serve")
_VERDICT_EXIT = VERDICT_EXIT


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
    return argparse.RawDescriptionHelpFormatter(prog, width=(columns or 80) - 2)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _formatter)
        super().__init__(*args, **kwargs)

    def error(self, message):
        raise UsageError(f"{self.prog}: {message}")


# ---------------------------------------------------------------------------- helpers
def _settings(args):
    """The settings in effect: the settings file, then this run's options (cached on ``args``)."""
    if getattr(args, "_settings", None) is None:
        from spamnb.cli.settings import SettingsError, load_settings

        overrides = {key: getattr(args, key, None)
                     for key in ("model", "spam_cutoff", "ham_cutoff", "header_name", "subject_tag")}
        try:
            args._settings = load_settings(getattr(args, "settings", None), overrides)
        except SettingsError as exc:
            raise CommandError(str(exc)) from None
    return args._settings


def _model_path(args):
    from spamnb.model.spam_filter import default_model_path

    return _settings(args).model or default_model_path()


def _apply_cutoffs(spam_filter, settings):
    """The settings' cutoffs on a filter (they win over the model's own)."""
    spam = spam_filter.spam_cutoff if settings.spam_cutoff is None else settings.spam_cutoff
    ham = spam_filter.ham_cutoff if settings.ham_cutoff is None else settings.ham_cutoff
    if ham > spam:
        raise CommandError(f"ham cutoff {ham!r} is above spam cutoff {spam!r}")
    spam_filter.spam_cutoff, spam_filter.ham_cutoff = spam, ham
    return spam_filter


def _load(args):
    from spamnb.model.spam_filter import SpamFilter

    return _apply_cutoffs(SpamFilter.load(_model_path(args)), _settings(args))


def _read_file(path):
    """The bytes of a message file (the one reader: the filter's)."""
    from spamnb.model.spam_filter import _read_file

    try:
        return _read_file(path)
    except IsADirectoryError:
        raise
    except OSError as exc:
        raise CommandError(f"{path}: {exc.strerror or exc}") from None


def _mbox_messages(stream, name):
    """``(name, bytes)`` of each message of the mbox read from the binary
    ``stream``, one at a time (a one-message mbox keeps the plain name)."""
    from spamnb.mail.mbox import iter_mbox

    messages = iter_mbox(stream)
    previous, i = next(messages, None), 0
    for message in messages:  # one ahead, to know whether there is more than one
        yield f"{name}#{i}", previous
        previous, i = message, i + 1
    if previous is not None:
        yield (f"{name}#{i}" if i else name), previous


def _messages_of(path):
    """``(name, bytes)`` of each message in ``path``: a message file, an mbox
    (read one message at a time), a folder or Maildir (each message below it),
    or ``-`` (stdin: a message, or an mbox).  A single message is held once,
    never copied (a 50 MB message stays 50 MB)."""
    from spamnb.mail.mbox import is_mbox_start

    if path == "-":
        data = sys.stdin.buffer.read()
        if is_mbox_start(data):
            import io

            yield from _mbox_messages(io.BytesIO(data), "-")  # BytesIO shares the bytes, no copy
        else:
            yield "-", data
    elif os.path.isdir(path):
        from spamnb.training.corpus import CorpusError, CorpusReport, read_messages

        report = CorpusReport()
        try:
            for relpath, data in read_messages(path, report):
                yield os.path.join(path, relpath), data
        except CorpusError as exc:
            raise CommandError(str(exc)) from None
        if report.n_skipped:
            print(f"spamnb: {path}: {report.summary()}", file=sys.stderr)
    else:
        try:
            f = open(path, "rb")
        except OSError as exc:
            raise CommandError(f"{path}: {exc.strerror or exc}") from None
        with f:
            head = f.read(5)
            seekable = f.seekable()
            if is_mbox_start(head):
                if seekable:
                    f.seek(0)
                    yield from _mbox_messages(f, path)
                else:  # a pipe: what was read cannot be read again
                    import io

                    yield from _mbox_messages(io.BytesIO(head + f.read()), path)
                return
            if not seekable:
                yield path, head + f.read()
                return
        yield path, _read_file(path)  # read again, whole: one copy of the message


def _human_size(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024.0


# ---------------------------------------------------------------------------- train
class _CorpusChanged(Exception):
    pass


def cmd_train(args):
    from spamnb.training.corpus import CorpusError, CorpusReport
    from spamnb.model.spam_filter import SpamFilter
    from spamnb.cli.progress import Progress

    if not (args.dirs or args.spam or args.ham):
        raise UsageError("spamnb train: give a corpus folder, or --spam/--ham paths")
    started = time.perf_counter()
    if args.jobs is None:   # not given: every core, or this process for the message features
        from spamnb.training.parallel import DEFAULT_JOBS

        args.jobs = 1 if args.feature_weight else DEFAULT_JOBS
    if args.jobs != 1 and not args.dask and not args.feature_weight:
        from spamnb.training.parallel import warm_up

        warm_up(args.jobs)   # the workers' forkserver starts while this process imports and plans
    settings = _settings(args)
    report = CorpusReport()
    params = {k: v for k, v in (("alpha", args.alpha), ("counts", args.counts), ("prior", args.prior),
                                ("feature_weight", args.feature_weight), ("length_norm", args.length_norm),
                                ("spam_cutoff", settings.spam_cutoff),
                                ("ham_cutoff", settings.ham_cutoff)) if v is not None}
    if args.word_pairs not in ("auto", 0):
        from spamnb.mail.tokenizer import with_pairs

        params["tokenizer"] = with_pairs(args.word_pairs)
    spam_filter = SpamFilter(**params)
    # cutoffs from cross-validation inside the training mail (spamnb.model.calibrate),
    # unless the user gave cutoffs (an option or the settings file)
    calibrating = args.target_fpr > 0 and settings.spam_cutoff is None and settings.ham_cutoff is None
    if args.partition_size < 1:
        raise UsageError("spamnb train: --partition-size must be at least 1")
    if spam_filter.feature_weight:
        if args.jobs != 1 or args.dask:
            raise UsageError("spamnb train: message features (--feature-weight) are trained with -j 1 only")
        calibration = _train_with_features(args, spam_filter, report, calibrating)
    else:
        from spamnb.training import parallel

        # streaming, one message at a time in this process (-j 1) or by partitions on
        # worker processes or a Dask cluster (docs/scale.md): the counting pass, then
        # the calibration's scoring pass; the corpus is never held
        progress = Progress(0, enabled=not args.quiet, unit="messages", interval=0.1)
        try:
            spam_filter, calibration = parallel.train(
                args.dirs, args.spam, args.ham, spam_filter, n_jobs=args.jobs, partition_size=args.partition_size,
                report=report, strict=args.strict, dask=args.dask, progress=progress,
                calibration={"target_fpr": args.target_fpr} if calibrating else None,
                word_pairs=parallel.AUTO_PAIRS if args.word_pairs == "auto" else 0)
        except CorpusError as exc:
            raise CommandError(str(exc)) from None
        except parallel.CorpusChanged as exc:
            raise CommandError(f"the corpus changed while it was read ({exc}); the model is unchanged") from None
        except (ImportError, OSError) as exc:
            raise CommandError(_one_line(exc)) from None
        finally:
            progress.close()
    n_ham, n_spam = (int(v) for v in spam_filter.class_count_)
    if n_ham + n_spam == 0:
        raise CommandError(f"no messages found ({report.summary()})")
    if n_spam == 0 or n_ham == 0:
        print(f"spamnb: warning: the corpus holds only {'ham' if n_spam == 0 else 'spam'}", file=sys.stderr)
    if calibration is not None:
        from spamnb.model import calibrate

        calibrate.apply(spam_filter, calibration)
    path = _model_path(args)
    replaced = _save_trained(spam_filter, path, args.wait)
    elapsed = time.perf_counter() - started
    if not args.quiet:
        print(f"trained on {n_ham + n_spam} messages ({n_spam} spam, {n_ham} ham), "
              f"{spam_filter.vocabulary_.n_features} tokens in the vocabulary, {elapsed:.2f} s; "
              f"{report.summary()}")
        print(f"model: {path} ({_human_size(os.path.getsize(path))})")
        if replaced:
            print(f"the model it replaced is kept as {replaced}")
        if calibration is not None:
            from spamnb.model.calibrate import describe

            print(describe(calibration))
    return EXIT_OK


def _train_with_features(args, spam_filter, report, calibrating):
    """``spamnb train --feature-weight W``: ``SpamFilter.fit`` over the corpus
    read twice (the labels, then the messages), one message at a time; the
    calibration keeps the default cutoffs (its fold scores have no features)."""
    from spamnb.training.corpus import CorpusError, CorpusReport, iter_labelled
    from spamnb.cli.progress import Progress

    sources = dict(trees=args.dirs, spam=args.spam, ham=args.ham, strict=args.strict)
    try:
        labels = bytearray(m.is_spam for m in iter_labelled(report=report, **sources))
    except CorpusError as exc:
        raise CommandError(str(exc)) from None
    if not labels:
        raise CommandError(f"no messages found ({report.summary()})")
    progress = Progress(len(labels), enabled=not args.quiet, unit="messages", interval=0.1)

    def again():  # the second pass must see what the first saw, or the labels would be off
        for i, message in enumerate(iter_labelled(report=CorpusReport(), **sources)):
            if i >= len(labels) or message.is_spam != labels[i]:
                raise _CorpusChanged(message.relpath)
            yield message.data

    try:
        spam_filter.fit(progress.wrap(again(), "training"), [bool(v) for v in labels])
    except (ValueError, _CorpusChanged) as exc:
        raise CommandError(f"the corpus changed while it was read ({exc}); the model is unchanged") from None
    if not calibrating:
        return None
    from spamnb.model import calibrate

    n_spam = sum(labels)
    return calibrate.calibration_check(spam_filter, len(labels) - n_spam, n_spam, args.target_fpr)


def _save_trained(spam_filter, path, wait):
    """Save a trained model under the lock; a model it replaces is kept as
    ``MODEL.bak`` (returned; None when there was none)."""
    from spamnb.model.store import locked

    with locked(path, wait=wait) as real:
        backup = real + ".bak" if os.path.exists(real) else None
        spam_filter.save(real, backup=backup)
    return backup


# ---------------------------------------------------------------------------- classify
def _verdict_json(verdict, name=None):
    out = {"verdict": verdict.label, "probability": verdict.probability, "log_odds": verdict.log_odds,
           "tokens": verdict.tokens, "known_tokens": verdict.known_tokens,
           "evidence": [[token, weight] for token, weight in verdict.evidence]}
    if name is not None:
        out = {"message": name, **out}
    return out


def _format_verdict(verdict):
    return f"{verdict.label} {verdict.probability:.7f} log-odds {verdict.log_odds:+.3f}"


def _passthrough(args):
    """``classify -p``: the message on stdout with the status header; exit 0
    whatever the verdict.  On any error the message goes out untouched (exit 3)."""
    from spamnb.mail.status import passthrough_pieces

    name = args.files[0] if args.files else "-"
    message = sys.stdin.buffer.read() if name == "-" else _read_file(name)
    try:
        settings = _settings(args)
        verdict = _load(args).classify(message)
        pieces = passthrough_pieces(message, verdict, settings.header, settings.subject_tag)
    except BaseException:
        sys.stdout.buffer.write(message)  # never lose the mail: pass it on untouched
        sys.stdout.flush()
        raise
    for piece in pieces:
        sys.stdout.buffer.write(piece)
    return EXIT_OK


def cmd_classify(args):
    if args.passthrough:
        if args.batch or args.mbox or len(args.files) > 1:
            raise UsageError("spamnb classify: -p/--passthrough takes one message")
        return _passthrough(args)
    if args.batch:
        return _classify_batch(args)
    spam_filter = _load(args)
    sources = args.files or ["-"]
    if len(sources) == 1 and not args.mbox and (sources[0] == "-" or not os.path.isdir(sources[0])):
        messages = _messages_of(sources[0])
        first = next(messages, None)
        second = next(messages, None)
        if first is not None and second is None:  # one message: a verdict and its exit code
            verdict = spam_filter.classify(first[1])
            _print_verdict(args, verdict)
            return _VERDICT_EXIT[verdict.label]
        out = _Lines(args, spam_filter)
        for name, data in (m for m in (first, second) if m is not None):
            out.verdict(name, data)
        for name, data in messages:
            out.verdict(name, data)
        return EXIT_OK
    out = _Lines(args, spam_filter)
    for source in sources:
        for name, data in _messages_of(source):
            out.verdict(name, data)
    return EXIT_OK


def _print_verdict(args, verdict):
    if args.json:
        import json

        print(json.dumps(_verdict_json(verdict)))
    else:
        print(_format_verdict(verdict))
        if args.verbose:
            for token, weight in verdict.evidence:
                print(f"  {weight:+8.3f}  {token}")


class _Lines:
    """One line per message (tab-separated, or JSON), flushed as it is written."""

    def __init__(self, args, spam_filter):
        self.json, self.spam_filter = args.json, spam_filter
        self.out = sys.stdout
        self.errors = 0

    def verdict(self, name, data):
        verdict = self.spam_filter.classify(data)
        if self.json:
            import json

            self.out.write(json.dumps(_verdict_json(verdict, name)) + "\n")
        else:
            self.out.write(f"{name}\t{verdict.label}\t{verdict.probability:.7f}\t{verdict.log_odds:+.3f}\n")
        self.out.flush()

    def error(self, name, reason):
        self.errors += 1
        if self.json:
            import json

            self.out.write(json.dumps({"message": name, "error": reason}) + "\n")
        else:
            self.out.write(f"{name}\terror\t{reason}\n")
        self.out.flush()
        print(f"spamnb: {name}: {reason}", file=sys.stderr)


def _batch_paths(args):
    if args.files:
        yield from args.files
        return
    stdin = sys.stdin.buffer
    while True:  # one line at a time: each path is answered as it arrives
        line = stdin.readline()
        if not line:
            return
        path = os.fsdecode(line.rstrip(b"\r\n"))
        if path.strip():
            yield path


def _classify_batch(args):
    """``--batch``: each path (arguments, or lines of stdin) answered at once;
    a path that cannot be read gets an error line and the batch goes on (exit
    3 at the end when any did)."""
    if args.jobs != 1:  # partitions on worker processes, the same lines in the same order (docs/scale.md)
        from spamnb.training import parallel

        parallel.warm_up(args.jobs)   # the workers' forkserver starts while the model loads
        spam_filter = _load(args)
        try:
            n_errors = parallel.classify_batch(_model_path(args), _batch_paths(args),
                                               (spam_filter.spam_cutoff, spam_filter.ham_cutoff), args.jobs,
                                               args.partition_size, args.json)
        except ValueError as exc:
            raise UsageError(f"spamnb classify: {exc}") from None
        return EXIT_ERROR if n_errors else EXIT_OK
    out = _Lines(args, _load(args))
    for path in _batch_paths(args):
        try:
            for name, data in _messages_of(path):
                out.verdict(name, data)
        except (CommandError, OSError) as exc:
            reason = str(exc) if isinstance(exc, CommandError) else (exc.strerror or str(exc))
            out.error(path, reason.removeprefix(f"{path}: "))
    return EXIT_ERROR if out.errors else EXIT_OK


# ---------------------------------------------------------------------------- learn / forget
def _update_model(args, forget):
    """learn/forget through the ledger of learned messages (spamnb.model.ledger):
    learning a known message again is a no-op, with the other label a move;
    forget takes the label from the ledger."""
    from spamnb.model import ledger as ledgers
    from spamnb.model.spam_filter import SpamFilter
    from spamnb.cli.progress import Progress
    from spamnb.model.store import locked

    settings = _settings(args)
    markup = {"header_name": settings.header, "subject_tag": settings.subject_tag}
    path = _model_path(args)
    is_spam = None if args.label is None else args.label == "spam"
    if is_spam is None and not forget:
        raise UsageError(f"spamnb {args.command}: give --spam or --ham")
    if forget:
        SpamFilter.load(path)  # no model, or a damaged one: say so before creating a lock beside it
    progress = Progress(0, enabled=not args.quiet, unit="messages", interval=0.1)
    tally = ledgers.Tally()
    with locked(path, wait=args.wait) as real:
        if os.path.exists(real) or forget:
            spam_filter = SpamFilter.load(real)
        else:
            spam_filter = SpamFilter()
        ledger = ledgers.ledger_of(spam_filter)
        seen = 0
        for source in args.files or ["-"]:
            for name, data in progress.wrap(_messages_of(source), "forgetting" if forget else "learning"):
                seen += 1
                try:
                    if forget:
                        ledgers.forget(spam_filter, ledger, data, is_spam, tally, **markup)
                    else:
                        ledgers.learn(spam_filter, ledger, data, is_spam, tally, **markup)
                except ValueError as exc:
                    raise CommandError(f"{name}: {exc}; the model is unchanged") from None
        if not seen:
            raise CommandError("no message given; the model is unchanged")
        if not forget:  # automatic expiry, when the model has a size limit (spamnb prune --expire-at)
            from spamnb.model.lifecycle import expire

            spam_filter = expire(spam_filter)[0]
        ledgers.attach(spam_filter, ledger)
        spam_filter.save(real)
    if not args.quiet:
        ham, spam_count = spam_filter.class_count_
        if forget:
            done = f"forgot {tally.forgotten} message{'s' if tally.forgotten != 1 else ''}"
        else:
            done = f"{tally.learn_summary()} (as {args.label})"
        print(f"{done}; model: {path} ({spam_count:.0f} spam, {ham:.0f} ham)")
    return EXIT_OK


def cmd_learn(args):
    return _update_model(args, forget=False)


def cmd_forget(args):
    return _update_model(args, forget=True)


# ---------------------------------------------------------------------------- info / tokens
def _log_odds(p):
    from spamnb.model.verdict import logit

    return f"{logit(p):+.3f}"   # "+inf" / "-inf" at 1 and 0


def cmd_info(args):
    settings = _settings(args)
    spam_filter = _load(args)
    path = spam_filter.source_
    ham, spam = spam_filter.class_count_
    print(f"model:          {path} ({_human_size(os.path.getsize(path))})")
    print(f"messages:       {spam + ham:.0f} ({spam:.0f} spam, {ham:.0f} ham)")
    print(f"vocabulary:     {spam_filter.vocabulary_.n_features} tokens")
    print(f"spam cutoff:    P(spam) >= {spam_filter.spam_cutoff!r} (log-odds >= {_log_odds(spam_filter.spam_cutoff)})")
    print(f"ham cutoff:     P(spam) <= {spam_filter.ham_cutoff!r} (log-odds <= {_log_odds(spam_filter.ham_cutoff)})")
    print(f"header:         {settings.header}" + (f"; subject tag {settings.subject_tag!r}" if settings.subject_tag
                                                   else "; no subject tag"))
    print(f"settings file:  {settings.path or '(none)'}")
    print(f"model settings: alpha {spam_filter.alpha!r}, prior {spam_filter.prior}, counts {spam_filter.counts}, "
          f"feature weight {spam_filter.feature_weight!r}, length norm {spam_filter.length_norm!r}")
    tokenizer = spam_filter.tokenizer_
    print(f"tokenizer:      " + ", ".join(f"{key} {value!r}" for key, value in sorted(tokenizer.settings.items())))
    if tokenizer.version < tokenizer.VERSION:
        print(f"note:           this model uses the older tokenizer version {tokenizer.version}; retraining it "
              f"(spamnb train) brings version {tokenizer.VERSION}'s attack hardening")
    from spamnb.cli.models import info_lines  # size, age, hapaxes, what pruning would remove

    print("\n".join(info_lines(spam_filter)))
    if args.tokens > 0 and spam_filter.vocabulary_.n_features:
        spammy, hammy = spam_filter.strongest_tokens(args.tokens)
        for title, rows in (("strongest spam tokens", spammy), ("strongest ham tokens", hammy)):
            print(f"{title} (log-ratio, ham count, spam count):")
            for token, weight, n_ham, n_spam in rows:
                print(f"  {weight:+8.3f}  {n_ham:7.0f} {n_spam:7.0f}  {token}")
    return EXIT_OK


def cmd_tokens(args):
    from spamnb.mail.tokenizer import Tokenizer

    data = sys.stdin.buffer.read() if args.file == "-" else _read_file(args.file)
    for token in Tokenizer().tokens(data):
        print(token)
    return EXIT_OK


def cmd_evaluate(args):
    from spamnb.evaluation import crossval as evaluate

    return evaluate.run(args)


# ---------------------------------------------------------------------------- parser
def _epilog():
    from spamnb.cli.exitcodes import TABLE

    codes = "\n".join(f"  {code:>3}  {text}" for code, text in TABLE)
    return (f"exit codes:\n{codes}\n\n"
            "environment:\n"
            "  SPAMNB_HOME   folder of the model (model.spamnb) and of the settings file\n"
            "                (settings.toml); default ~/.spamnb\n"
            "  SPAMNB_DEBUG  set: errors show their traceback\n\n"
            "Options -m and --settings go before or after the command.")


def _probability(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"a probability in [0, 1], not {text}")
    return value


def build_parser(command=None, full=False):
    """The argument parser; with ``command``, only that subcommand's parser is
    built (the rest cost start-up time that ``spamnb classify`` cannot spare).
    ``full`` adds evaluate's options too (the man page)."""
    parser = _Parser(prog="spamnb", description="A Bayesian e-mail spam filter.", epilog=_epilog())
    from spamnb import __version__

    parser.add_argument("--version", action="version", version=f"spamnb {__version__}")
    parser.add_argument("-m", "--model", metavar="PATH",
                        help="model file (default: $SPAMNB_HOME/model.spamnb or ~/.spamnb/model.spamnb)")
    parser.add_argument("--settings", metavar="PATH",
                        help="settings file (default: $SPAMNB_HOME/settings.toml, when it exists)")
    parser.add_argument("--man", action="store_true", help="print the manual page (roff) and exit")
    parser.add_argument("--completion", choices=("bash",), help="print a shell completion script and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    def model_option(p):  # also after the command; SUPPRESS keeps a value given before it
        p.add_argument("-m", "--model", metavar="PATH", default=argparse.SUPPRESS,
                       help="model file (default: $SPAMNB_HOME/model.spamnb or ~/.spamnb/model.spamnb)")
        p.add_argument("--settings", metavar="PATH", default=argparse.SUPPRESS,
                       help="settings file (default: $SPAMNB_HOME/settings.toml, when it exists)")

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
        p = sub.add_parser("info", help="describe a model and the settings in effect")
        p.add_argument("--tokens", type=int, default=10, metavar="N", help="strongest tokens to list")
        model_option(p)
        p.set_defaults(handler=cmd_info)
    if wanted("tokens"):
        p = sub.add_parser("tokens", help="print the tokens of a message")
        p.add_argument("file", nargs="?", default="-", metavar="FILE")
        p.set_defaults(handler=cmd_tokens)
    if wanted("evaluate"):
        p = sub.add_parser("evaluate", help="measure accuracy: cross-validation, fixed split, ROC")
        if command == "evaluate" or full:  # evaluate imports numpy: only when it runs
            from spamnb.evaluation import crossval as evaluate

            evaluate.add_arguments(p)
        p.set_defaults(handler=cmd_evaluate)
    if command is None or command in ("dump", "load", "merge", "prune"):
        from spamnb.cli import models as lifecycle_cli

        lifecycle_cli.register(sub, model_option, wanted)
    if wanted("serve"):
        from spamnb.server import daemon as serve

        serve.add_parser(sub)
    return parser


def _cutoff_options(p):
    p.add_argument("--spam-cutoff", type=_probability, metavar="P",
                   help="spam when P(spam) >= P (default: the model's, 0.9999992 as trained)")
    p.add_argument("--ham-cutoff", type=_probability, metavar="P",
                   help="ham when P(spam) <= P (default: the model's, 0.5 as trained)")


def _add_train(sub, model_option):
    p = sub.add_parser("train", help="train a new model from labelled mail")
    p.add_argument("dirs", nargs="*", metavar="DIR",
                   help="folder tree: folders named spam* or junk* (and Maildir++ .Spam, .Junk) hold spam, "
                        "others ham; files may be mboxes")
    p.add_argument("--spam", action="append", default=[], metavar="PATH", help="spam: folder, Maildir or mbox")
    p.add_argument("--ham", action="append", default=[], metavar="PATH",
                   help="ham: folder, Maildir or mbox (its spam folders are left out)")
    p.add_argument("--strict", action="store_true", help="fail on unreadable or non-mail files instead of skipping")
    p.add_argument("--alpha", type=float, help="Dirichlet soft count")
    p.add_argument("--counts", choices=("binary", "raw", "log"), help="per-message token weighting")
    p.add_argument("--prior", choices=("mle", "map", "uniform"), help="class prior estimator")
    p.add_argument("--length-norm", type=float, metavar="S",
                   help="scale each message's token counts to this Euclidean length (default 5; 0: off)")
    p.add_argument("--feature-weight", type=float, metavar="W",
                   help="weight of the continuous message features (default 0: off; see docs/features.md)")
    p.add_argument("--word-pairs", type=_word_pairs, default="auto", metavar="auto|0|W",
                   help="word pairs of window W as tokens too; auto (the default): train with and without "
                        "pairs of window 2 and keep what the cross-validation favours (see docs/accuracy.md)")
    _cutoff_options(p)
    p.add_argument("--target-fpr", type=_rate, default=0.001, metavar="RATE",
                   help="choose the cutoffs by cross-validation for this false-positive rate "
                        "(default 0.001; 0: keep the default cutoffs; see docs/accuracy.md)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress and no summary")
    _wait_option(p)
    model_option(p)
    from spamnb.training.parallel import add_arguments

    add_arguments(p, "train")
    p.set_defaults(handler=cmd_train)


def _word_pairs(text):
    from spamnb.evaluation.crossval import pairs_window

    if text == "auto":
        return text
    try:
        return pairs_window(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"auto, 0 or a window from 2 to 8 is needed, not {text!r}") from None


def _rate(text):
    value = float(text)
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"a rate from 0 to below 1 is needed, not {text!r}")
    return value


def _add_classify(sub, model_option):
    p = sub.add_parser("classify", help="classify mail (one message on stdin by default)")
    p.add_argument("files", nargs="*", metavar="FILE",
                   help="message files, mboxes, folders or - for stdin; several messages: one line each")
    p.add_argument("--batch", action="store_true",
                   help="paths (arguments, or lines of stdin answered as they arrive): one line per message; "
                        "an unreadable path gets an error line and the batch goes on")
    p.add_argument("-M", "--mbox", action="store_true",
                   help="one line per message even for a single message (as for an mbox)")
    p.add_argument("-p", "--passthrough", action="store_true",
                   help="write the message to stdout with the status header; exit 0 whatever the verdict")
    _cutoff_options(p)
    p.add_argument("--header-name", metavar="NAME", help="the status header of -p (default: X-Spamnb-Status)")
    p.add_argument("--subject-tag", metavar="TAG", help="with -p: put TAG before the Subject of spam")
    p.add_argument("--json", action="store_true", help="JSON output")
    p.add_argument("-v", "--verbose", action="store_true", help="also list the strongest evidence")
    model_option(p)
    from spamnb.training.parallel import add_arguments

    add_arguments(p, "classify")
    p.set_defaults(handler=cmd_classify)


def _add_update(sub, model_option, name, handler, text):
    p = sub.add_parser(name, help=text)
    label = p.add_mutually_exclusive_group(required=name == "learn")
    if name == "learn":
        texts = ("learn the messages as spam (a message learned as ham before moves to spam)",
                 "learn the messages as ham (a message learned as spam before moves to ham)")
    else:
        texts = ("the messages were learned as spam (needed only for messages learned "
                 "before the ledger; the ledger knows the others)",
                 "the messages were learned as ham (as --spam)")
    label.add_argument("--spam", dest="label", action="store_const", const="spam", help=texts[0])
    label.add_argument("--ham", dest="label", action="store_const", const="ham", help=texts[1])
    p.add_argument("files", nargs="*", metavar="FILE",
                   help="message files, mboxes, folders, Maildirs or - (stdin, a message or an mbox; the default)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress and no summary")
    _wait_option(p)
    model_option(p)
    p.set_defaults(handler=handler)


def _wait_option(p):
    from spamnb.model.store import DEFAULT_WAIT

    p.add_argument("--wait", type=float, default=DEFAULT_WAIT, metavar="SECONDS",
                   help=f"how long to wait for another writer's lock on the model (default {DEFAULT_WAIT:g})")


_VALUE_OPTIONS = ("-m", "--model", "--settings", "--completion")


def _command_of(argv):
    """The command word of ``argv`` (global options may come before it)."""
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in _VALUE_OPTIONS:
            skip = True
        elif not arg.startswith("-"):
            return arg if arg in COMMANDS else None
    return None


def main(argv=None):
    """Run the command line; returns the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        command = _command_of(argv)
        args = build_parser(command).parse_args(argv)
        if args.man or args.completion:
            from spamnb.cli import manpage

            parser = build_parser(full=True)
            sys.stdout.write(manpage.roff(parser) if args.man else manpage.bash_completion(parser))
            return EXIT_OK
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
    from spamnb.model.store import ModelError

    if isinstance(exc, (ModelError, CommandError)):
        text = str(exc)
    elif isinstance(exc, OSError):
        text = f"{exc.filename + ': ' if exc.filename else ''}{exc.strerror or exc}"
    elif isinstance(exc, MemoryError):
        text = "out of memory"
    else:
        from spamnb.training.corpus import CorpusError

        text = str(exc) if isinstance(exc, CorpusError) else f"{type(exc).__name__}: {exc}"
    return " ".join(text.split()) or type(exc).__name__
