#!/usr/bin/env python3
"""Ctrl-C at random moments of ``spamnb train``: does every run stop at once, cleanly?

The script trains CORPUS twice, untimed (the model and its ``.bak``: the
reference, byte-identical since training is deterministic), then runs
``spamnb train CORPUS -m MODEL`` N more times in a session of its own and,
at a random moment of each, sends SIGINT to the whole process group, as a
terminal's Ctrl-C does (the parent and its workers together).  For each run
it prints the moment, the exit code, the seconds from the SIGINT to the exit,
whether stderr holds a traceback, whether a process of the group outlived the
parent, and whether the model and its ``.bak`` are intact (each byte-identical
to the reference; a run the SIGINT reaches after the save leaves the same
bytes) with no temporary file left beside them.  A run still alive ``--timeout`` seconds after the SIGINT counts as
hung and its group is killed.  Exit status 0 when every run exited 130 within
``--timeout`` seconds with no traceback, no process left, both files intact
and nothing left beside them.

    python scripts/check/interrupt_train.py [-n 20] [--timeout 5] [--seed S] [--spread LO HI] CORPUS [-- TRAIN OPTIONS]

The moments are uniform in ``LO..HI`` times the duration of the second
reference trainings, the shorter (default 0.02..0.98: from the corpus walk
to the save); a training that ends before its moment comes is not counted and
another moment is drawn.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time


def digest(path):
    if not os.path.exists(path):
        return None
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def group_alive(pgid):
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus")
    ap.add_argument("-n", type=int, default=20, help="interrupted runs (default 20)")
    ap.add_argument("--timeout", type=float, default=5.0, help="seconds a run may take to exit after the SIGINT")
    ap.add_argument("--seed", type=int, default=None, help="random seed of the moments (default: printed)")
    ap.add_argument("--spread", type=float, nargs=2, default=(0.02, 0.98), metavar=("LO", "HI"),
                    help="the moments, as fractions of an uninterrupted training's duration")
    ap.add_argument("--spamnb", default=f"{sys.executable} -m spamnb", help="the command (default: this Python's)")
    ap.add_argument("train_options", nargs="*", help="more options for spamnb train (after --)")
    args = ap.parse_args(argv)
    # the trainings get SIGINT's default disposition whatever this script was started with (a shell
    # starts a background job with SIGINT ignored, and a Python started so never sees a Ctrl-C)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 30)
    rng = random.Random(seed)
    work = tempfile.mkdtemp(prefix="spamnb-interrupt-")
    model = os.path.join(work, "model.spamnb")
    command = args.spamnb.split() + ["train", args.corpus, "-m", model] + args.train_options
    env = dict(os.environ, SPAMNB_HOME=os.path.join(work, "home"))

    durations = []
    for _ in range(2):   # the model, then the model and its .bak
        t0 = time.monotonic()
        subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        durations.append(time.monotonic() - t0)
    reference = digest(model)
    saved = shutil.copyfile(model, os.path.join(work, "reference.spamnb"))
    expected = set(os.listdir(work))   # the model, its .bak and lock, the reference, the settings' home
    if digest(model + ".bak") != reference:
        sys.exit("interrupt_train: two trainings gave different model files; 'intact' cannot be checked")
    duration = min(durations)
    print(f"command: {' '.join(command)}")
    print(f"uninterrupted training: {duration:.2f} s; seed {seed}; SIGINT to the process group at "
          f"{args.spread[0]:g}..{args.spread[1]:g} of it; timeout {args.timeout:g} s")
    print(f"{'run':>3} {'SIGINT at s':>11} {'exit':>5} {'exit after s':>12} {'traceback':>9} {'left':>5} "
          f"{'model':>6} {'.bak':>5}")
    failures, worst, run, finished_first = 0, 0.0, 0, 0
    while run < args.n and finished_first < 2 * args.n:
        moment = rng.uniform(*args.spread) * duration
        with tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=err,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
            time.sleep(moment)
            t0 = time.monotonic()
            if proc.poll() is not None:   # done before the moment came (a loaded machine): drawn again
                finished_first += 1
                print(f"  - {moment:>11.2f} the training ended first (exit {proc.returncode}); another moment")
                continue
            os.killpg(proc.pid, signal.SIGINT)
            try:
                code = proc.wait(args.timeout)
                after = time.monotonic() - t0
            except subprocess.TimeoutExpired:
                code, after = "hung", time.monotonic() - t0
            left = group_alive(proc.pid)   # a worker that outlived the parent
            if left or code == "hung":
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            err.seek(0)
            stderr = err.read().decode("utf-8", "replace")
        traceback = "Traceback" in stderr
        model_ok = digest(model) == reference
        bak_ok = digest(model + ".bak") == reference
        stray = sorted(set(os.listdir(work)) - expected)   # a temporary file the interrupted save left
        for name in stray:
            os.unlink(os.path.join(work, name))
        run += 1
        ok = (code == 130 and after <= args.timeout and not traceback and not left and model_ok and bak_ok
              and not stray)
        failures += not ok
        worst = max(worst, after)
        print(f"{run:>3} {moment:>11.2f} {code!s:>5} {after:>12.2f} {'yes' if traceback else 'no':>9} "
              f"{'yes' if left else 'no':>5} {'ok' if model_ok else 'BAD':>6} {'ok' if bak_ok else 'BAD':>5}"
              + ("" if ok else "   <- " + " | ".join(stderr.strip().splitlines()[-3:])[:200])
              + (f" left behind: {', '.join(stray)}" if stray else ""))
        for path, fine in ((model, model_ok), (model + ".bak", bak_ok)):
            if not fine:   # the next run starts from the reference again
                shutil.copyfile(saved, path)
    print(f"{run - failures} of {run} interrupted runs exited 130 within {args.timeout:g} s with no traceback, "
          f"no process left and the model and .bak intact; slowest exit {worst:.2f} s after the SIGINT"
          f"{f'; {finished_first} trainings ended before their moment came' if finished_first else ''}")
    shutil.rmtree(work, ignore_errors=True)
    return 1 if failures or run < args.n else 0


if __name__ == "__main__":
    sys.exit(main())
