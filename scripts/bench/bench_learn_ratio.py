#!/usr/bin/env python3
"""A cold ``spamnb learn`` of one message against a cold ``spamnb classify``: whole processes, round by round.

    python scripts/bench/bench_learn_ratio.py MODEL [MODEL ...] [--runs 41] [--journal train|start|append] [--compare PROGRAM]

Each round, for each model (a copy of it in a temporary folder, the model
itself never written): ``spamnb classify -m COPY < MSG``, then ``spamnb
learn --spam -q -m COPY < FILE`` (FILE: MSG with a last line of its own, so
the model does not know it), MSG the next of the sample messages (the 5
nearest the median size of the corpus given by ``--corpus``, or the
messages given by ``--message``).  Before each of the two, untimed, the
copy's journal is put back as the round starts it:

- ``--journal train``: what the program's whole save (``train``, a
  compaction) leaves beside the model, made once per program, untimed, by
  ``PROGRAM prune --expire-at 0 -q -m COPY`` (a whole save of the same
  model): a journal without records (the learn appends to it, one fsync),
  or none from a spamnb whose saves leave none (the learn starts one): a
  user's first learn after ``train``, as ``bench_pipe.py``'s learn row;
- ``--journal start`` (the default): no journal; the learn starts one (a new
  file written, renamed into place, it and its folder fsynced): the
  costliest learn that does not fold the journal, as ``bench_pipe.py``'s
  row ``learn --spam, journal deleted``;
- ``--journal append``: a journal of ``--learned`` messages learned before
  (default 1), the same for the classify and the learn; the learn appends
  its record to it (one fsync): what most learns do.

With ``--compare PROGRAM`` (another venv's ``spamnb``: the tree before a
change) the same two in the same rounds, on a copy of their own.  Prints,
for each model and program, the medians of wall and CPU (user + system,
``os.wait4``), the median of the per-round ratios learn / classify (wall,
CPU), and the load average before and after, and how many of the journals
the learns left are the same, byte for byte, as the first program's of the
same learn (the same message into the same model: a change that must not
move the journal's format); ``--json PATH`` writes every run.  Run it from a fresh venv (``pip install .``), outside the repository::

    cd /tmp && VENV/bin/python /path/to/spamnb/scripts/bench/bench_learn_ratio.py MODEL_SA MODEL_ENRON --runs 41
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))   # harness.py

from harness import check, labelled_files, run  # noqa: E402

CORPORA = [REPO.parent / "shared" / "corpora" / "spamassassin", REPO.parent / "shared" / "corpora" / "enron-spam"]


def sample_messages(corpus, n=5):
    """``n`` messages of ``corpus`` near its median size (as ``bench_pipe.py`` picks them)."""
    files = sorted(labelled_files(corpus), key=lambda item: os.path.getsize(item[0]))
    middle = len(files) // 2
    return [path for path, _ in files[middle - n // 2:middle - n // 2 + n]]


class Subject:
    """One program on one model: its copy, the journal each round starts from, its runs."""

    def __init__(self, program, model, work, tag, mode, learned, messages):
        self.program, self.tag = program, tag
        self.copy = work / f"{tag}.spamnb"
        shutil.copyfile(model, self.copy)
        self.journal = Path(str(self.copy) + ".journal")
        self.base = work / f"{tag}.base-journal"
        self.fresh = work / f"{tag}.eml"
        self.n = 0
        self.classify, self.learn = [], []
        self.journals = []   # the journal each learn left (its bytes), compared between programs
        if mode == "train":   # the journal the program's whole save leaves (or none), every round's start
            check(run([program, "prune", "--expire-at", "0", "-q", "-m", str(self.copy)]), f"{program} prune")
            if self.journal.exists():
                shutil.copyfile(self.journal, self.base)
        if mode == "append":   # the journal every round starts from: `learned` messages learned first
            for i in range(learned):
                self.fresh.write_bytes(Path(messages[i % len(messages)]).read_bytes().rstrip(b"\n")
                                       + f"\n\nbench base {i}\n".encode())
                check(run([program, "learn", "--ham", "-q", "-m", str(self.copy)], stdin=str(self.fresh)),
                      f"{program} learn")
            shutil.copyfile(self.journal, self.base)
        self.mode = mode

    def reset(self):
        if self.base.exists():
            shutil.copyfile(self.base, self.journal)
        else:
            self.journal.unlink(missing_ok=True)

    def round(self, message):
        self.reset()
        self.classify.append(check(run([self.program, "classify", "-m", str(self.copy)], stdin=str(message)),
                                   f"{self.program} classify", ok=(0, 1, 2)))
        self.reset()
        self.n += 1
        self.fresh.write_bytes(Path(message).read_bytes().rstrip(b"\n") + f"\n\nbench ratio run {self.n}\n".encode())
        self.learn.append(check(run([self.program, "learn", "--spam", "-q", "-m", str(self.copy)],
                                    stdin=str(self.fresh)), f"{self.program} learn"))
        self.journals.append(self.journal.read_bytes())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", type=Path, help="the models (e.g. `spamnb train` of each shared corpus)")
    parser.add_argument("--runs", type=int, default=41, help="rounds (default 41)")
    parser.add_argument("--journal", choices=("train", "start", "append"), default="start",
                        help="train: each learn is the first after a whole save; start: each learn starts the "
                             "journal (default); append: it appends to one")
    parser.add_argument("--learned", type=int, default=1, help="--journal append: messages in that journal (default 1)")
    parser.add_argument("--corpus", action="append", type=Path,
                        help="the corpus whose median-size messages are sampled (repeatable; default both shared ones)")
    parser.add_argument("--message", action="append", type=Path, help="a message to use (repeatable; no sampling)")
    parser.add_argument("--spamnb", default=str(Path(sys.executable).parent / "spamnb"),
                        help="the spamnb command (default: the one beside this Python)")
    parser.add_argument("--compare", action="append", default=[], metavar="PROGRAM",
                        help="another spamnb in the same rounds (repeatable)")
    parser.add_argument("--json", type=Path, help="also write every run ([wall, CPU] seconds) to this file")
    args = parser.parse_args(argv)
    messages = [str(m) for m in args.message] if args.message else [
        str(m) for corpus in (args.corpus or CORPORA) for m in sample_messages(corpus)]
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-learn-ratio-") as folder:
        work = Path(folder)
        subjects = [Subject(program, model, work, f"{k}.{j}", args.journal, args.learned, messages)
                    for k, program in enumerate([args.spamnb, *args.compare]) for j, model in enumerate(args.models)]
        for subject in subjects:   # a warm-up of each (page cache, bytecode), not counted
            subject.round(messages[0])
            subject.classify.clear()
            subject.learn.clear()
            subject.journals.clear()
        for i in range(args.runs):
            for subject in subjects:
                subject.round(messages[i % len(messages)])
    load_after = os.getloadavg()
    print(f"{args.runs} rounds, journal {args.journal}"
          + (f" ({args.learned} learned)" if args.journal == "append" else "")
          + f", {len(messages)} messages in turn; load average before "
          f"{' '.join(f'{x:.2f}' for x in load_before)}, after {' '.join(f'{x:.2f}' for x in load_after)}")
    print("| program, model | classify: wall (CPU), ms | learn --spam: wall (CPU), ms | learn / classify "
          "(median of the per-round ratios): wall, CPU |")
    print("|---|---|---|---|")
    record = []
    for subject, (program, model) in zip(subjects, [(p, m) for p in [args.spamnb, *args.compare]
                                                    for m in args.models]):
        def ms(runs, what):
            return statistics.median(getattr(r, what) for r in runs) * 1000

        wall = statistics.median(a.wall / b.wall for a, b in zip(subject.learn, subject.classify))
        cpu = statistics.median(a.cpu / b.cpu for a, b in zip(subject.learn, subject.classify) if b.cpu)
        print(f"| {program}, {model.name} | {ms(subject.classify, 'wall'):.1f} ({ms(subject.classify, 'cpu'):.1f}) "
              f"| {ms(subject.learn, 'wall'):.1f} ({ms(subject.learn, 'cpu'):.1f}) | **{wall:.3f}**, **{cpu:.3f}** |")
        record.append({"program": program, "model": str(model), "classify": [[r.wall, r.cpu] for r in subject.classify],
                       "learn": [[r.wall, r.cpu] for r in subject.learn], "ratio_wall": wall, "ratio_cpu": cpu})
    for k, subject in enumerate(subjects[len(args.models):]):   # each --compare program's against the first's
        first = subjects[k % len(args.models)]
        same = sum(a == b for a, b in zip(first.journals, subject.journals))
        print(f"journals of the same learns by {subject.program} and {first.program}, "
              f"{args.models[k % len(args.models)].name}: {same} of {len(subject.journals)} byte for byte the same")
    if args.json:
        args.json.write_text(json.dumps({"rounds": args.runs, "journal": args.journal, "learned": args.learned,
                                         "load_before": load_before, "load_after": load_after,
                                         "subjects": record}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
