#!/usr/bin/env python3
"""Instructions of a cold ``spamnb learn`` against a cold ``spamnb classify`` (load-insensitive).

    python scripts/bench/bench_learn_instructions.py MODEL MSG [MSG ...] [--spamnb PATH] [--model MODEL2]

For each message, under ``valgrind --tool=callgrind --trace-children=yes``
(the launcher's shell and the Python it runs, counted together): ``spamnb
classify -m COPY < MSG``, then ``spamnb learn --spam -q -m COPY < MSG'``
(MSG with a last line of its own, so the model does not know it; the copy's
journal removed first, so each learn starts the journal, as
``bench_pipe.py``'s row ``learn --spam, journal deleted`` does), and ``python -c pass`` of the
interpreter beside ``--spamnb`` once.  Prints each count and the ratios
learn / classify and classify / pass; with ``--model MODEL2`` (a model of
the same corpus N times as large: ``bench_pipe.py --scale``) the same on it
and the ratio of its learn to MODEL's; with ``--journal``, MODEL's journal
(``MODEL.journal``) is copied beside the copy before each classify and learn
instead of the journal removed: a learn that counts the journal's records
since the model file (a learned model's pair-weight mixture: its state read
and the records' scores counted), and a classify that scores through them.  With ``--relabel``, each
message is learned as it is (give ham MODEL was trained on: ``learn --spam``
relabels it, the heavier way: the model read whole, the message forgotten).
Instruction counts do not move with the machine's load, as wall and CPU
times do.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def instructions(argv, stdin, work):
    for old in glob.glob(os.path.join(work, "cg.*")):
        os.unlink(old)
    with open(stdin, "rb") as f:
        subprocess.run(["valgrind", "--tool=callgrind", "--trace-children=yes",
                        f"--callgrind-out-file={work}/cg.%p", *argv], stdin=f, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)
    total = 0
    for name in glob.glob(os.path.join(work, "cg.*")):
        for line in open(name, encoding="utf-8", errors="replace"):
            if line.startswith("summary:"):
                total += int(line.split()[1])
    return total


def measure(spamnb, model, messages, work, tag, keep_journal=False, relabel=False):
    copy = Path(work) / f"{tag}.spamnb"
    shutil.copyfile(model, copy)
    journal = Path(str(copy) + ".journal")
    rows = []
    for i, message in enumerate(messages):
        fresh = Path(work) / f"{tag}.{i}.eml"
        if relabel:   # the message as it is: the model learned it (as ham), so learn --spam relabels it
            shutil.copyfile(message, fresh)
        else:
            fresh.write_bytes(Path(message).read_bytes().rstrip(b"\n") + f"\n\ninstructions run {i}\n".encode())
        if keep_journal:
            shutil.copyfile(str(model) + ".journal", journal)
        classify = instructions([spamnb, "classify", "-m", str(copy)], message, work)
        journal.unlink(missing_ok=True)
        if keep_journal:
            shutil.copyfile(str(model) + ".journal", journal)
        learn = instructions([spamnb, "learn", "--spam", "-q", "-m", str(copy)], str(fresh), work)
        rows.append((Path(message).name, classify, learn))
        print(f"{tag} {Path(message).name}: classify {classify:,}  learn {learn:,}  learn / classify "
              f"{learn / classify:.3f}", flush=True)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("messages", nargs="+")
    parser.add_argument("--spamnb", default=str(Path(sys.executable).parent / "spamnb"),
                        help="the spamnb command (default: the one beside this Python)")
    parser.add_argument("--model", dest="large", type=Path, help="a larger model of the same corpus, measured too")
    parser.add_argument("--journal", action="store_true",
                        help="each classify and learn with MODEL's journal beside the copy (default: none)")
    parser.add_argument("--relabel", action="store_true",
                        help="learn --spam each message as it is (a ham MODEL was trained on: a relabel, which "
                             "reads the model whole) instead of with a last line of its own")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed")
    with tempfile.TemporaryDirectory() as work:
        python = str(Path(args.spamnb).resolve().parent / "python3")
        floor = instructions([python, "-c", "pass"], args.messages[0], work)
        print(f"python -c pass: {floor:,}")
        small = measure(args.spamnb, args.model, args.messages, work, "model", args.journal, args.relabel)
        for _name, classify, learn in small:
            print(f"  classify / pass {classify / floor:.2f}, learn / pass {learn / floor:.2f}")
        if args.large:
            large = measure(args.spamnb, args.large, args.messages, work, "large")
            for (name, _c, learn), (_n, _c2, big) in zip(small, large):
                print(f"{name}: learn on the larger model / on the model {big / learn:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
