#!/usr/bin/env python3
"""A cold ``spamnb classify`` of one message in instructions: callgrind's count, beside the venv's ``python -c pass``.

Instructions do not move with the machine's load, where wall and CPU times
of a fresh process do (by 2-5x on a shared machine): this script measures
what ``scripts/bench/bench_pipe.py`` times, the pipe's one message, in
instructions counted by ``valgrind --tool=callgrind`` (every instruction of
the process, the interpreter's start and teardown included).

For each ``--venv`` (a venv with spamnb installed as the README installs it,
``pip install .``; repeatable, e.g. the tree before a change and this one):

- ``python -c pass`` of the venv's interpreter (the floor);
- the Python line the venv's ``bin/spamnb`` launcher runs (read from the
  launcher itself, so each venv runs its own), with ``classify -m MODEL``
  and the message on stdin, for each ``--model``.

With ``--learn``, also ``learn --spam -q -m COPY`` of the message (a last
line of its own added, so the model does not know it) into a copy of the
first ``--model`` whose journal is removed before each run: the first
learn of a journal, as ``bench_pipe.py``'s row ``learn --spam, journal
deleted`` and ``bench_learn_instructions.py`` measure it.

The shell launcher's own start (``sh``, well under a millisecond) is left
out: callgrind follows one process.  Each figure is the median of
``--runs`` runs (the counts move by well under 1 % between runs: the hash
seed).  Example, from a folder without a ``spamnb`` package in it::

    python3 scripts/bench/bench_cold_instructions.py --venv OLD --venv NEW \\
        --model enron-spam.spamnb --model enron-spam.journal-200.spamnb --message MSG --learn
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # harness.py
from harness import callgrind_instructions as instructions, launcher_args  # noqa: E402


def learn_instructions(argv, model, message):
    """Instructions of ``argv`` (a learn, its ``-m`` to be appended) into a new copy
    of ``model`` without a journal, ``message`` with a last line of its own on stdin."""
    with tempfile.TemporaryDirectory(prefix="bench-cold-learn-") as tmp:
        copy, fresh = Path(tmp) / "model.spamnb", Path(tmp) / "message.eml"
        shutil.copyfile(model, copy)
        fresh.write_bytes(message.read_bytes().rstrip(b"\n") + b"\n\nbench_cold_instructions learn\n")
        return instructions([*argv, "-m", str(copy)], fresh)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", action="append", type=Path, required=True, help="a venv with spamnb installed")
    parser.add_argument("--model", action="append", type=Path, required=True, help="a model file (repeatable)")
    parser.add_argument("--message", type=Path, required=True, help="the message classified (stdin)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each command (default 3; the median)")
    parser.add_argument("--learn", action="store_true",
                        help="also a learn --spam of the message into a copy of the first model (no journal)")
    parser.add_argument("--passthrough", action="store_true", help="also classify -p of the message, each model")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed")
    print(f"callgrind instructions, median of {args.runs} runs; load average {os.getloadavg()[0]:.2f}")
    print()
    forms = [["classify"]] + ([["classify", "-p"]] if args.passthrough else [])
    heads = ([f"`{' '.join(form)}`, {m.name}" for form in forms for m in args.model]
             + ([f"`learn`, {args.model[0].name}"] if args.learn else []))
    print("| venv | `python -c pass` | " + " | ".join(heads) + " |")
    print("|---|---|" + "---|" * len(heads))
    for venv in args.venv:
        venv = Path(os.path.abspath(venv))   # absolute (the runs start elsewhere); its python3 left a link
        python = str(venv / "bin" / "python3")
        launch = launcher_args(venv)
        floor = statistics.median(instructions([python, "-c", "pass"]) for _ in range(args.runs))
        cells = [f"{floor / 1e6:.1f} M"]
        for form, model in [(form, model) for form in forms for model in args.model]:
            argv = [python, *launch, *form, "-m", str(model.resolve())]
            count = statistics.median(instructions(argv, args.message) for _ in range(args.runs))
            cells.append(f"{count / 1e6:.1f} M ({count / floor:.2f}x)")
        if args.learn:
            argv = [python, *launch, "learn", "--spam", "-q"]
            count = statistics.median(learn_instructions(argv, args.model[0].resolve(), args.message)
                                      for _ in range(args.runs))
            cells.append(f"{count / 1e6:.1f} M ({count / floor:.2f}x)")
        print(f"| {venv.name} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
