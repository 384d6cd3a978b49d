"""``spamnb train``: a thin shell over ``spamnb.training.pipeline.train``
(its one library call), the model saved under the lock."""

from __future__ import annotations

import os
import sys
import time

from spamnb.errors import CorpusChanged, OneClassCorpus
from spamnb.cli.common import CommandError, UsageError, human_size, model_path, one_line, settings_of
from spamnb.cli.parsing import add_options
from spamnb.cli.exitcodes import EXIT_OK
from spamnb.mail.reader import display_name


def cmd_train(args):
    from spamnb.training.corpus import CorpusError, CorpusReport
    from spamnb.model import SpamFilter
    from spamnb.cli.progress import Progress

    if not (args.dirs or args.spam or args.ham):
        raise UsageError("spamnb train: give a corpus folder, or --spam/--ham paths")
    started = time.perf_counter()
    # Training does no dense linear algebra: numpy's OpenBLAS need not start a thread per core (each
    # spins a while after starting, ~0.1-0.2 s of CPU taken from the counting); unless the user says
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # -j not given: the cores free (this process when none is: the model is the same bytes for every -j,
    # docs/scale.md), this process for the features
    if args.jobs is None:
        from spamnb.training.workers import free_cores

        args.jobs = 1 if args.feature_weight else free_cores()
    if args.jobs != 1 and not args.dask and not args.feature_weight:
        from spamnb.training.workers import warm_up

        warm_up(args.jobs)   # the workers' forkserver starts while this process imports and plans
    settings = settings_of(args)
    report = CorpusReport()
    params = {k: v for k, v in (("alpha", args.alpha), ("counts", args.counts), ("prior", args.prior),
                                ("feature_weight", args.feature_weight), ("length_norm", args.length_norm),
                                ("spam_cutoff", settings.spam_cutoff),
                                ("ham_cutoff", settings.ham_cutoff)) if v is not None}
    if args.word_pairs not in ("auto", 0):
        from spamnb.mail.tokenizer import with_pairs

        params["tokenizer"] = with_pairs(args.word_pairs)
    spam_filter = SpamFilter(**params)
    # cutoffs from cross-validation inside the training mail (spamnb.estimator.calibrate),
    # unless the user gave cutoffs (an option or the settings file)
    calibrating = args.target_fpr > 0 and settings.spam_cutoff is None and settings.ham_cutoff is None
    if args.partition_size < 1:
        raise UsageError("spamnb train: --partition-size must be at least 1")
    if spam_filter.feature_weight and (args.jobs != 1 or args.dask):
        raise UsageError("spamnb train: message features (--feature-weight) are trained with -j 1 only")
    from spamnb.estimator.fitting import Unfitted
    from spamnb.model import AUTO_PAIRS
    from spamnb.training import pipeline

    # streaming, by partitions in this process (-j 1), on worker processes or a Dask
    # cluster (docs/scale.md), the same model whatever -j: the counting pass, then
    # the calibration's scoring pass; the corpus is never held (message features:
    # SpamFilter.fit over the corpus read twice, in this process)
    progress = Progress(0, enabled=not args.quiet, unit="messages", interval=0.1)
    if progress.enabled:   # a total to show: the files of the corpus (a walk, no file read)
        progress.total = _count_files(args)
    try:
        # the model file written from the kept variant's counts (made=False), the filter never made
        trained, calibration = pipeline.train(
            args.dirs, args.spam, args.ham, spam_filter, n_jobs=args.jobs, partition_size=args.partition_size,
            report=report, strict=args.strict, dask=args.dask, progress=progress,
            calibration={"target_fpr": args.target_fpr} if calibrating else None,
            word_pairs=AUTO_PAIRS if args.word_pairs == "auto" else 0, follow_links=args.follow_links, made=False)
    except CorpusError as exc:
        raise CommandError(str(exc)) from None
    except CorpusChanged as exc:
        raise CommandError(f"the corpus changed while it was read ({exc}); the model is unchanged") from None
    except (ImportError, OSError) as exc:
        raise CommandError(one_line(exc)) from None
    finally:
        progress.close()
    # an Unfitted (trained here or on workers): its filter takes the cutoffs, its counts are written; else a filter
    spam_filter = trained.spam_filter if isinstance(trained, Unfitted) else trained
    n_ham, n_spam = (int(v) for v in trained.class_count_)
    if n_ham + n_spam == 0:
        raise CommandError(f"no messages found ({report.summary()})")
    if n_spam == 0 or n_ham == 0:
        missing, found = ("spam", "ham") if n_spam == 0 else ("ham", "spam")
        read = ", ".join(display_name(f) for f in sorted(report.labels_of(missing == "ham"))[:8]) or "no folder"
        text = (f"the corpus holds no {missing} (read as {found}: {read}); name its folders "
                f"{'spam*/junk* (or .Junk, .Spam)' if missing == 'spam' else 'anything but spam*/junk*'} "
                f"or give --{missing} PATH")
        if not args.force:
            raise OneClassCorpus(f"{text}; the model is unchanged (--force trains it anyway)")
        print(f"spamnb: warning: {text}", file=sys.stderr)
    if calibration is not None:
        from spamnb.model import apply_calibration

        apply_calibration(spam_filter, calibration)
        spam_filter.set_cutoffs(spam_filter.cutoffs, "train" if calibration.expected_fpr is not None else "defaults")
    path = model_path(args, settings)
    n_features = trained.n_features if isinstance(trained, Unfitted) else spam_filter.vocabulary_.n_features
    replaced = _save_trained(trained, path, args.wait)
    elapsed = time.perf_counter() - started
    if not args.quiet:
        print(f"trained on {n_ham + n_spam} messages ({n_spam} spam, {n_ham} ham), "
              f"{n_features} tokens in the vocabulary, {elapsed:.2f} s; "
              f"{report.summary()}")
        print(report.folders_summary())
        print(f"model: {path} ({human_size(os.path.getsize(path))})")
        if replaced:
            print(f"the model it replaced is kept as {replaced}")
        if calibration is not None:
            from spamnb.model import describe_calibration as describe

            print(describe(calibration))
    return EXIT_OK


def _count_files(args):
    """The number of files ``train`` will read (the same walk and skips, no
    file opened): the progress line's total (an mbox counts one)."""
    from spamnb.training.corpus import CorpusError, CorpusReport
    from spamnb.training.planning import plan_training

    try:
        return sum(1 for _ in plan_training(args.dirs, args.spam, args.ham, CorpusReport(), False, None,
                                            args.follow_links))
    except (CorpusError, OSError):
        return 0   # the training says why


def _save_trained(spam_filter, path, wait):
    """Save a trained model (a filter, or an ``Unfitted``'s counts) under the
    lock; a model it replaces is kept as ``MODEL.bak`` (returned; None when there was none)."""
    from spamnb.model import save_whole
    from spamnb.model import locked

    with locked(path, wait=wait) as real:
        backup = real + ".bak" if os.path.exists(real) else None
        save_whole(spam_filter, real, backup)   # the learns journaled for the model replaced go with it
    return backup


def add_parser(sub):
    """``spamnb train``: its options are the option table's (:mod:`spamnb.options`)."""
    from spamnb.options import options

    p = sub.add_parser("train", help="train a new model from labelled mail")
    add_options(p, options("train"))
    p.set_defaults(handler=cmd_train)
