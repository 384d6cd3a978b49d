"""``spamnb evaluate``: cross-validation, a fixed split, ROC and the online
(TREC-style) protocol, a thin shell over :mod:`spamnb.evaluation.crossval` and
:mod:`spamnb.evaluation.online` that prints their reports."""

from __future__ import annotations

import math
import os
import sys
import time

from spamnb.cli.exitcodes import EXIT_ERROR, EXIT_OK, EXIT_USAGE
from spamnb.cli.progress import Progress
from spamnb.evaluation.crossval import (KNN_METRICS, default_jobs, evaluate, format_compare,
                                        format_folds, json_ready, md5_split, resolved_params, compare_variants, write_plot)
from spamnb.evaluation.online import (feedback_options, format_online, learning_curve, online_figures,
                                      order_messages, read_index, run_online, write_curve_plot)
from spamnb.model import DEFAULT_TARGET_FPR, stratified_folds

EXIT_NO_MATPLOTLIB = EXIT_ERROR  # an error like any other (2 is classify's "unsure")


def add_parser(sub, full=False):
    """Register ``spamnb evaluate``; its options only when it runs (``full``: the man page), as they import numpy."""
    p = sub.add_parser("evaluate", help="measure accuracy: cross-validation, fixed split, ROC")
    if full:
        add_arguments(p)
    p.set_defaults(handler=cmd_evaluate)
    return p


def cmd_evaluate(args):
    return run(args)


def add_arguments(parser):
    """Add the options of ``spamnb evaluate`` (the option table's, :mod:`spamnb.options`) to an argparse parser."""
    from spamnb.cli.parsing import add_options
    from spamnb.options import options

    add_options(parser, options("evaluate"))
    return parser


# ---------------------------------------------------------------- folds


def _error(message, code):
    print(f"spamnb evaluate: {message}", file=sys.stderr)
    return code


def run(args):
    """Run ``spamnb evaluate`` with parsed ``args``; returns the exit code."""
    import json

    from spamnb.training.corpus import CorpusError, CorpusReport, labelled_messages

    if getattr(args, "online", False):
        return run_online_command(args)
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            return _error("--plot needs matplotlib, which is not installed (pip install matplotlib)",
                          EXIT_NO_MATPLOTLIB)
    separate = bool(args.train or args.test)
    if separate and not (args.train and args.test):
        return _error("--train and --test go together", EXIT_USAGE)
    if separate and (args.corpus or args.spam or args.ham):
        return _error("give either CORPUS/--spam/--ham or --train with --test", EXIT_USAGE)
    if not separate and not (args.corpus or args.spam or args.ham):
        return _error("give a corpus: CORPUS folder(s), --spam/--ham paths, or --train A --test B", EXIT_USAGE)
    params = {k: getattr(args, k) for k in ("alpha", "prior", "counts") if getattr(args, k, None) is not None}
    if args.word_pairs not in ("auto", 0):
        params["word_pairs"] = args.word_pairs
    tune = not args.plain
    if args.plain and args.target_fpr != DEFAULT_TARGET_FPR:
        return _error("--target-fpr chooses cutoffs as spamnb train does; --plain keeps the default ones", EXIT_USAGE)

    import numpy as np

    report = CorpusReport()
    try:
        if separate:
            train = labelled_messages(trees=args.train, report=report)
            test = labelled_messages(trees=args.test, report=report)
            items = train + test
            splits = [("test", np.arange(len(train)), np.arange(len(train), len(items)))]
            protocol = "train/test corpora"
        else:
            items = labelled_messages(trees=args.corpus, spam=args.spam, ham=args.ham, report=report)
    except CorpusError as exc:
        return _error(str(exc), EXIT_ERROR)
    messages = [m.data for m in items]
    y = np.array([m.is_spam for m in items], dtype=bool)
    n_spam = int(y.sum())
    if n_spam == 0 or n_spam == len(y):
        return _error(f"need both spam and ham, found {n_spam} spam and {len(y) - n_spam} ham "
                      "(spam lives in folders named spam*)", EXIT_USAGE)
    if not separate:
        if args.split == "md5":
            train_idx, test_idx = md5_split([m.relpath for m in items])
            splits = [("md5", train_idx, test_idx)]
            protocol = "fixed md5 split"
        else:
            k = args.folds
            if k < 2:
                return _error("--folds must be at least 2", EXIT_USAGE)
            if min(n_spam, len(y) - n_spam) < k:
                return _error(f"--folds {k} needs at least {k} messages of each class", EXIT_USAGE)
            tests = stratified_folds(y, k, args.seed)
            everything = np.arange(len(y))
            splits = [(f"{i + 1}/{k}", np.setdiff1d(everything, t), t) for i, t in enumerate(tests)]
            protocol = f"stratified {k}-fold cross-validation, seed {args.seed}"
    for name, train_idx, test_idx in splits:
        if len(train_idx) == 0 or len(test_idx) == 0 or y[train_idx].all() or not y[train_idx].any():
            return _error(f"split {name}: the training part needs both classes and the test part messages",
                          EXIT_USAGE)

    print(f"{len(y)} messages ({n_spam} spam, {len(y) - n_spam} ham); {report.summary()}")
    print(f"protocol: {protocol}")
    n_steps = len(splits) * (1 + (len(compare_variants(resolved_params(params))) + len(KNN_METRICS) if args.compare else 0))
    progress = Progress(n_steps + (1 if args.compare else 0), enabled=not args.no_progress)
    started = time.monotonic()
    try:
        result = evaluate(messages, y, splits, params, compare=args.compare, progress=progress,
                          n_jobs=default_jobs(getattr(args, "jobs", None)), tune=tune,
                          target_fpr=args.target_fpr, word_pairs=args.word_pairs)
    finally:
        progress.close()
    elapsed = time.monotonic() - started
    p = result["params"]
    pairs = f"word_pairs={params['word_pairs']} " if params.get("word_pairs") else ""
    if tune:
        if not pairs and args.word_pairs == "auto":
            pairs = "word pairs decided by each fold (window 2, column 'pairs') "
        print(f"filter: as spamnb train builds it: alpha={p['alpha']:g} prior={p['prior']} counts={p['counts']} "
              + pairs + f"cutoffs chosen by each fold for a false-positive rate of {args.target_fpr:g} "
              "(columns 'spam>=' and 'ham<=', log-odds); --plain: the plain model")
    else:
        print(f"filter: plain (counts only): alpha={p['alpha']:g} prior={p['prior']} counts={p['counts']} "
              + pairs + f"cutoffs: spam if P >= {p['spam_cutoff']!r}, ham if P <= {p['ham_cutoff']!r}")
    print()
    print(format_folds(result))
    from spamnb.bayes import metrics

    print("pooled over the test folds, at each fold's cutoffs:" if tune else
          "pooled over the test folds, at the filter's cutoffs:")
    print(metrics.classification_report(result["y_test"], result["verdicts"]))
    if args.compare:
        print("baselines on the same folds (mean ± sample std over folds):")
        print("  NB: naive Bayes, one setting changed at a time from the filter's, same cutoffs;")
        print(f"  kNN: on the filter's {p['counts']} token vectors, score = share of spam among the k nearest")
        print("  training messages, spam if most of them are spam.")
        print(format_compare(result["compare"]))
    print(f"took {elapsed:.1f} s")
    settings = {"protocol": protocol, "n_messages": int(len(y)), "n_spam": n_spam,
                "corpus": list(args.corpus) + [f"spam:{p}" for p in args.spam] + [f"ham:{p}" for p in args.ham],
                "train": list(args.train), "test": list(args.test), "seed": args.seed,
                "fit": ({"tune": True, "target_fpr": args.target_fpr, "word_pairs": args.word_pairs} if tune
                        else {"tune": False, "word_pairs": args.word_pairs if args.word_pairs != "auto" else 0}),
                "skipped": dict(report.skipped), "seconds": elapsed}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(json_ready(result, settings), f, indent=1)
            f.write("\n")
        print(f"wrote {args.json}")
    if args.plot:
        write_plot(args.plot, result["y_test"], result["log_odds"], None if tune else (p["spam_cutoff"], p["ham_cutoff"]))
        print(f"wrote {args.plot}")
    return EXIT_OK


def run_online_command(args):
    """``spamnb evaluate --online`` with parsed ``args`` (see ``spamnb.evaluation.crossval``); returns the exit code."""
    import json
    import sys

    import numpy as np

    from spamnb.training.corpus import CorpusError, CorpusReport, labelled_messages

    def error(message, code):
        print(f"spamnb evaluate: {message}", file=sys.stderr)
        return code

    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            return error("--plot needs matplotlib, which is not installed (pip install matplotlib)",
                         EXIT_NO_MATPLOTLIB)
    if args.train or args.test:
        return error("--online takes CORPUS/--spam/--ham or --index, not --train/--test", EXIT_USAGE)
    if args.compare:
        return error("--compare is for cross-validation, not --online", EXIT_USAGE)
    if args.window < 1:
        return error("--window must be at least 1", EXIT_USAGE)
    if args.margin < 0 or not math.isfinite(args.margin):
        return error("--margin must be a number >= 0", EXIT_USAGE)
    auto_learn = getattr(args, "auto_learn", False)
    if auto_learn and not args.train_on_error:
        return error("--auto-learn goes with --train-on-error (full feedback learns every message anyway)",
                     EXIT_USAGE)
    if auto_learn and args.margin:
        return error("--margin is for --train-on-error without --auto-learn", EXIT_USAGE)
    report = CorpusReport()
    if args.index:
        if args.corpus or args.spam or args.ham:
            return error("give either --index or a corpus", EXIT_USAGE)
        try:
            rows = read_index(args.index)
        except (OSError, ValueError) as exc:
            return error(f"{args.index}: {getattr(exc, 'strerror', None) or exc}", EXIT_ERROR)
        messages, labels = [p for _, p in rows], [s for s, _ in rows]
        for path in messages:
            if not os.path.isfile(path):
                return error(f"{path}: no such message file (from {args.index})", EXIT_ERROR)
        order_used = "index file"
    else:
        if not (args.corpus or args.spam or args.ham):
            return error("give a corpus: CORPUS folder(s), --spam/--ham paths, or --index FILE", EXIT_USAGE)
        try:
            items = labelled_messages(trees=args.corpus, spam=args.spam, ham=args.ham, report=report)
        except CorpusError as exc:
            return error(str(exc), EXIT_ERROR)
        order, order_used = order_messages([m.relpath for m in items], [m.data for m in items], args.order)
        messages = [items[i].data for i in order]
        labels = [items[i].is_spam for i in order]
    y = np.asarray(labels, dtype=bool)
    if not y.any() or y.all():
        return error(f"need both spam and ham, found {int(y.sum())} spam and {int((~y).sum())} ham", EXIT_USAGE)
    params = {k: getattr(args, k) for k in ("alpha", "prior", "counts") if getattr(args, k, None) is not None}
    tokenizer = None   # auto: as a model that grows by learning is made (spamnb.model.learning.learned_model)
    if getattr(args, "word_pairs", "auto") != "auto":   # learned one message at a time: nothing decides them
        from spamnb.mail.tokenizer import Tokenizer, with_pairs

        tokenizer = with_pairs(args.word_pairs) if args.word_pairs else Tokenizer()
    if auto_learn:   # the mode bench_online.py runs, through the same options (feedback_options)
        from spamnb.model import AUTO_LEARN_MARGIN

        feedback = f"train on error + auto-learn (margin {AUTO_LEARN_MARGIN:g} log-odds)"
        options = feedback_options("auto")
    else:
        feedback = "train on error" + (f", margin {args.margin:g}" if args.margin else "") \
            if args.train_on_error else "full feedback"
        options = {"train_on_error": args.train_on_error, "margin": args.margin}
    if tokenizer is None:
        from spamnb.model import LEARNED_PAIR_WEIGHT, PairMixture, mixture_setting

        if mixture_setting():   # as learned_model: the pair weight chosen on the stream's own mail
            options["variants"] = PairMixture(LEARNED_PAIR_WEIGHT)
            feedback += ", the pair weight chosen on the stream's own mail"
    print(f"protocol: online (TREC Spam Track), {feedback}, from an empty model; order: {order_used}; "
          f"{report.summary()}")
    try:
        result = run_online(messages, y, params, tokenizer=tokenizer, **options)
    except OSError as exc:
        return error(f"{exc.filename or ''}: {exc.strerror or exc}", EXIT_ERROR)
    figures = online_figures(result)
    if auto_learn:
        figures["n_auto"] = int(result.auto_learned.sum())
    curve = learning_curve(result, args.window)
    print(format_online(figures, curve), end="")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"protocol": "online", "feedback": feedback, "order": order_used,
                       "params": dict(params, word_pairs=args.word_pairs if args.word_pairs != "auto" else 0),
                       "figures": figures, "learning_curve": curve}, f, indent=1)
            f.write("\n")
        print(f"wrote {args.json}")
    if args.plot:
        write_curve_plot(args.plot, result, args.window, title=f"online, {feedback}")
        print(f"wrote {args.plot}")
    return EXIT_OK
