#!/usr/bin/env python3
"""Where ``spamnb train`` spends its time and memory, stage by stage (Linux).

Runs the spamnb command line in this process with the stages of training
wrapped (``training.pipeline.train``, ``training.planning.train_on_workers``, ``_VariantMerge.result``,
``estimator.counting.count_messages``, ``count_variants``, ``_Counter.result``, ``_Sum.result``, ``Counts.to_filter``,
``estimator.calibrate.FoldModels.from_counts`` (Dask)
and ``save``, ``held_out_spilled``, ``held_out_by_fold``, ``from_scores``, ``SpamFilter.save``,
``fitting.Unfitted.save``: ``spamnb train``'s model written from its counts) and
prints, on stderr, at each stage's entry and exit: the time since the start
and since the previous line, the resident memory (VmRSS) and the peak since
the previous line (VmHWM, reset at each line through /proc/self/clear_refs).
The figures are the main process's; the workers of ``-j N`` count apart:
the last line gives this process's CPU time and peak beside the workers'
(their CPU summed, the largest one's peak: which process holds the peak).

    python scripts/bench/train_stages.py train -q -m /tmp/model.spamnb corpora/
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

T0 = time.perf_counter()
MAIN = os.getpid()
LAST = [T0]
PEAK = [0]   # the largest "peak since the line above": this process's peak (each line resets the kernel's)

STAGES = [("spamnb.training.pipeline", "train"), ("spamnb.training.planning", "train_on_workers"),
          ("spamnb.training.planning", "_VariantMerge.result"),
          ("spamnb.estimator.counting", "count_messages"), ("spamnb.estimator.counting", "count_variants"),
          ("spamnb.estimator.counting", "_Counter.result"), ("spamnb.estimator.counting", "_Sum.result"),
          ("spamnb.estimator.counting", "Counts.to_filter"),
          ("spamnb.estimator.calibrate", "FoldModels.from_counts"), ("spamnb.estimator.calibrate", "FoldModels.save"),
          ("spamnb.estimator.calibrate", "held_out_spilled"), ("spamnb.estimator.calibrate", "held_out_by_fold"),
          ("spamnb.estimator.calibrate", "from_scores"),
          ("spamnb.model.spam_filter", "SpamFilter.save"), ("spamnb.estimator.fitting", "Unfitted.save")]


def _memory():
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS", "VmHWM")):
                key, value = line.split(":")
                out[key] = int(value.split()[0]) // 1024
    return out


def _reset_peak():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def event(name):
    if os.getpid() != MAIN:   # a forked worker
        return
    memory, now = _memory(), time.perf_counter()
    PEAK[0] = max(PEAK[0], memory["VmHWM"])
    print(f"{now - T0:7.3f} s (+{now - LAST[0]:6.3f})  RSS {memory['VmRSS']:5d} MiB, peak since the line above "
          f"{memory['VmHWM']:5d} MiB  {name}", file=sys.stderr)
    LAST[0] = now
    _reset_peak()


def wrap(module_name, qualname):
    owner = importlib.import_module(module_name)
    *path, name = qualname.split(".")
    for part in path:
        owner = getattr(owner, part)
    function = owner.__dict__[name]
    is_classmethod = isinstance(function, classmethod)
    raw = function.__func__ if is_classmethod else function

    @functools.wraps(raw)
    def wrapped(*args, **kwargs):
        event(f"> {qualname}")
        try:
            return raw(*args, **kwargs)
        finally:
            event(f"< {qualname}")

    setattr(owner, name, classmethod(wrapped) if is_classmethod else wrapped)
    if not path:   # a function: the modules that imported it by name call it through their own name
        for module in list(sys.modules.values()):
            if getattr(module, "__name__", "").startswith("spamnb") and module.__dict__.get(name) is raw:
                setattr(module, name, wrapped)


def main():
    for module_name, _qualname in STAGES:   # every module first: a function imported by name is wrapped there too
        importlib.import_module(module_name)
    importlib.import_module("spamnb.training.planning")
    importlib.import_module("spamnb.estimator.fitting")
    for module_name, qualname in STAGES:
        wrap(module_name, qualname)
    _reset_peak()
    event("start")
    from spamnb.cli.main import main as spamnb_main

    code = spamnb_main(sys.argv[1:])
    event("end")
    import resource

    own, workers = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"this process: CPU {own.ru_utime + own.ru_stime:.2f} s, peak {PEAK[0]} MiB; "
          f"its workers: CPU {workers.ru_utime + workers.ru_stime:.2f} s, largest peak {workers.ru_maxrss // 1024} MiB",
          file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
