#!/usr/bin/env python3
"""CPU seconds of ``spamnb train``'s held-out stages, in this process.

Runs the spamnb command line in this process (the ``spamnb`` found on the
Python path: ``PYTHONPATH=CHECKOUT`` measures another checkout, for a
before/after in the same run) with two stages timed by ``time.process_time``
(load-insensitive, unlike walls on a busy machine): ``-j 1``'s held-out pass
(``estimator.calibrate.held_out_by_fold``: each variant's folds summed,
their models made and their messages scored; with workers, the parent's
half), the fold models the parent builds (``FoldModels.from_counts``, Dask),
and the ``-j N`` parent's merge (``training.planning._VariantMerge.add``,
``_without``, ``_VariantMerge.result``), the waits for the workers' answers
(``training.workers._Future.result``: the parent idle or reading) and the
model's save (``estimator.fitting.Unfitted.save``), and the corpus's
planning (``training.planning.plan_training``, the time in its generator).  Prints on stderr, at
the end, each stage's CPU, this process's and its workers' (summed).

    PYTHONPATH=. python3 scripts/bench/train_stage_cpu.py train -q -j 1 -m /tmp/model.spamnb CORPUS
"""

from __future__ import annotations

import atexit
import resource
import sys
import time

SPENT = {}


def _timed(function, name):
    def timed(*args, **kwargs):
        start = time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            SPENT[name] = SPENT.get(name, 0.0) + time.process_time() - start
    return timed


def _report():
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    stages = " ".join(f"{name} {seconds:.3f} s" for name, seconds in SPENT.items())
    print(f"{stages}; this process {time.process_time():.2f} s, workers {children.ru_utime + children.ru_stime:.2f} s",
          file=sys.stderr)


def _timed_generator(function, name):
    def timed(*args, **kwargs):
        items = function(*args, **kwargs)
        while True:
            start = time.process_time()
            try:
                item = next(items)
            except StopIteration:
                return
            finally:
                SPENT[name] = SPENT.get(name, 0.0) + time.process_time() - start
            yield item
    return timed


def main(argv):
    from spamnb.cli.main import main as spamnb_main
    from spamnb.estimator import calibrate, fitting
    from spamnb.training import planning, workers

    calibrate.held_out_by_fold = _timed(calibrate.held_out_by_fold, "held-out pass (-j 1)")
    from_counts = calibrate.FoldModels.from_counts.__func__
    calibrate.FoldModels.from_counts = classmethod(_timed(from_counts, "fold models (parent, -j N)"))
    for owner, name, label in ((planning._VariantMerge, "add", "merge add (parent)"),
                               (planning._VariantMerge, "result", "merge result (parent)"),
                               (workers._Future, "result", "answers waited for and read (parent)"),
                               (fitting.Unfitted, "save", "save")):
        setattr(owner, name, _timed(getattr(owner, name), label))
    planning._without = _timed(planning._without, "_without (parent)")
    planning.plan_training = _timed_generator(planning.plan_training, "planning")
    atexit.register(_report)
    sys.argv = ["spamnb", *argv]
    return spamnb_main()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
