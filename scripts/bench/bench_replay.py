#!/usr/bin/env python3
"""A corpus replayed as a user lives it: train on the first half, then the
second half in arrival order, each message classified and the mail a user
gives back learned; spamnb and bogofilter side by side, in three modes.

Each corpus is one stream in the order ``spamnb evaluate --online`` uses
(``spamnb.evaluation.online.order_messages``: by Date: header when most
messages have one, else by folder and file name).  The first half is written
to a folder tree (``spam/`` and ``ham/``) and trained on:

- spamnb: ``spamnb train -m MODEL TREE`` (its defaults: cutoffs chosen by
  cross-validation, word pairs decided, the ledger of the messages counted);
- bogofilter: ``bogofilter -C -d DB -s -b`` fed the spam file list, then
  ``-n -b`` the ham list.

Then each message of the second half, in order, is classified by the model as
it stands and learned as the mode says (``--modes``, default all three):

- ``error``: what a user corrects: a spam not filed as spam (ham or unsure: it
  sits in the inbox; they move it to Junk: learn as spam) and a ham filed as
  spam (they move it out of Junk: learn as ham).  Unsure ham stays in the
  inbox, uncorrected;
- ``auto``: that, and the model's confident verdicts learned as themselves
  (spamnb: ``spamnb.model.autolearn.auto_label``, 2 log-odds beyond a cutoff,
  recorded as auto-learned, as ``classify --auto-learn`` and ``serve
  --auto-learn`` learn, without their hourly limit; a correction relabels it
  through the ledger; bogofilter: ``-u``, then ``-Sn``/``-Ns`` for a
  registered error, ``-s`` for unsure spam);
- ``full``: every message learned with its label.

spamnb: the verdict of the model and journal as they stand, and each learn
through ``spamnb.model.learning.session`` (the ledger, the journal, the held-out
cutoffs of a model that learns: the code ``spamnb learn``, Dovecot's
learn-on-move and serve's TELL run), the model kept loaded between sessions
as serve keeps it (``learning.Kept``), in this process; ``--cli`` runs
``spamnb learn --spam|--ham -m MODEL`` instead, one process per learn (as a
user runs it; error mode only: a process per message of the other modes is
hours).  bogofilter: ``bogofilter -C -d DB -T -I MSG`` (its verdict and
spamicity) and ``-s|-n`` (``-Sn|-Ns``) to learn, one process each.

Figures per system and mode: (1-ROCA) % of the scores given before each
message was learned (spamnb: log-odds; bogofilter: spamicity), false
positives (ham called spam), spam not caught (ham or unsure), unsure ham,
messages learned, wall seconds of the replay (the training apart).

    python scripts/bench/bench_replay.py                          # both shared corpora, three modes
    python scripts/bench/bench_replay.py --corpus corpora/ --limit 200 --modes error --cli
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if REPO not in sys.path:
    sys.path.insert(0, REPO)
CORPORA = (os.path.join(REPO, "..", "shared", "corpora", "spamassassin"),
           os.path.join(REPO, "..", "shared", "corpora", "enron-spam"))


def stream_of(corpus, limit=None):
    """``[(relpath, is_spam, data)]`` of a corpus in arrival order, and the order's name."""
    from spamnb.evaluation.online import order_messages
    from spamnb.training.corpus import labelled_messages

    items = labelled_messages([corpus])
    order, how = order_messages([m.relpath for m in items], [m.data for m in items], "auto")
    if limit:   # every k-th message of the stream, in order
        order = order[::max(1, len(order) // limit)][:limit]
    return [(items[i].relpath, items[i].is_spam, items[i].data) for i in order], how


MODES = ("error", "auto", "full")


class Tally:
    def __init__(self):
        self.ham = self.spam = self.fp = self.missed = self.unsure_ham = self.corrections = self.learned = 0
        self.seconds = 0.0
        self.scores, self.labels = [], []

    def add(self, is_spam, verdict, score):
        """Count one verdict ("spam", "ham", "unsure") and its score; True when the user corrects it."""
        self.scores.append(score)
        self.labels.append(is_spam)
        if is_spam:
            self.spam += 1
            wrong = verdict != "spam"
            self.missed += wrong
        else:
            self.ham += 1
            wrong = verdict == "spam"
            self.fp += wrong
            self.unsure_ham += verdict == "unsure"
        self.corrections += wrong
        return wrong

    def row(self, name, mode):
        from spamnb.bayes import metrics

        def pct(n, d):
            return f"{n} ({100.0 * n / d:.2f} %)" if d else "0"

        roca = metrics.one_minus_auc_percent(self.labels, self.scores) if self.ham and self.spam else float("nan")
        return (f"| {mode} | {name} | {roca:.4f} | {pct(self.fp, self.ham)} | {pct(self.missed, self.spam)} | "
                f"{pct(self.unsure_ham, self.ham)} | {self.corrections} | {self.learned} | {self.seconds:.1f} s |")


def spamnb_replay(second, work, spamnb, env, mode, cli=False):
    from spamnb import SpamFilter
    from spamnb.model import learning
    from spamnb.model.autolearn import auto_label
    from spamnb.estimator.ledger import Tally as LearnTally
    from spamnb.estimator.verdict import logit

    model = os.path.join(work, f"model-{mode}.spamnb")
    shutil.copyfile(os.path.join(work, "model.spamnb"), model)
    tally = Tally()
    kept = learning.Kept()
    started = time.perf_counter()
    spam_filter = SpamFilter.load(model) if cli else None
    for _relpath, is_spam, data in second:
        if cli:
            verdict = spam_filter.classify(data, evidence=False)
            if tally.add(is_spam, verdict.label, verdict.log_odds):
                subprocess.run([*spamnb, "learn", "-q", "--spam" if is_spam else "--ham", "-m", model], input=data,
                               env=env, check=True, capture_output=True)
                tally.learned += 1
                spam_filter = SpamFilter.load(model)   # the model and its journal, as the next classify reads them
            continue
        with learning.session(model, create=False, kept=kept) as session:
            sf = session.filter
            verdict = sf.classify(data, evidence=False)
            wrong = tally.add(is_spam, verdict.label, verdict.log_odds)
            said = LearnTally()
            if mode == "auto":
                label = auto_label(verdict.log_odds, logit(sf.spam_cutoff), logit(sf.ham_cutoff))
                if label is not None:
                    session.learn(data, label, said, auto=True)
            if mode == "full" or wrong:
                session.learn(data, is_spam, said)
            tally.learned += said.learned + said.relabelled
    tally.seconds = time.perf_counter() - started
    return tally


def bogofilter_replay(second, work, env, mode):
    db = os.path.join(work, f"bogo-{mode}")
    shutil.copytree(os.path.join(work, "bogo"), db)
    tally = Tally()
    message = os.path.join(work, "message")
    started = time.perf_counter()
    for _relpath, is_spam, data in second:
        with open(message, "wb") as f:
            f.write(data)
        proc = subprocess.run(["bogofilter", "-C", "-d", db, *(["-u"] if mode == "auto" else []), "-T", "-I", message],
                              env=env, capture_output=True, text=True)
        verdict = {0: "spam", 1: "ham", 2: "unsure"}.get(proc.returncode)
        if verdict is None:
            raise SystemExit(f"bogofilter exited {proc.returncode}: {proc.stderr.strip()}")
        wrong = tally.add(is_spam, verdict, float(proc.stdout.split()[-1]))
        learn = None
        if mode == "full" or (wrong and not (mode == "auto" and verdict != "unsure")):
            learn = ["-s" if is_spam else "-n"]         # not registered by -u: learned as it is
        elif wrong:
            learn = ["-N", "-s"] if is_spam else ["-S", "-n"]    # -u registered the wrong verdict: moved
        if learn:
            subprocess.run(["bogofilter", "-C", "-d", db, *learn, "-I", message], env=env, check=True)
            tally.learned += 1
        elif mode == "auto" and verdict != "unsure":
            tally.learned += 1
    tally.seconds = time.perf_counter() - started
    return tally


def replay(corpus, args, spamnb, say):
    stream, how = stream_of(corpus, args.limit)
    half = len(stream) // 2
    first, second = stream[:half], stream[half:]
    work = tempfile.mkdtemp(prefix="bench-replay-")
    env = dict(os.environ, SPAMNB_HOME=os.path.join(work, "home"))
    try:
        tree = os.path.join(work, "tree")
        lists = {True: [], False: []}
        for n, (_relpath, is_spam, data) in enumerate(first):
            folder = os.path.join(tree, "spam" if is_spam else "ham")
            os.makedirs(folder, exist_ok=True)
            path = os.path.join(folder, f"{n:06d}")
            with open(path, "wb") as f:
                f.write(data)
            lists[is_spam].append(path)
        proc = subprocess.run([*spamnb, "train", "-m", os.path.join(work, "model.spamnb"), tree], env=env,
                              capture_output=True, text=True, check=True)
        os.mkdir(os.path.join(work, "bogo"))
        for flag, paths in (("-s", lists[True]), ("-n", lists[False])):
            subprocess.run(["bogofilter", "-C", "-d", os.path.join(work, "bogo"), flag, "-b"],
                           input="".join(p + "\n" for p in paths).encode(), env=env, check=True)
        n_spam = sum(s for _, s, _ in second)
        say(f"\n### {os.path.basename(os.path.normpath(corpus))}: trained on the first {len(first)} messages "
            f"(in {how} order), replayed the next {len(second)} ({n_spam} spam, {len(second) - n_spam} ham)\n")
        for line in proc.stdout.strip().splitlines():
            if line.startswith(("cutoffs:", "expected:", "skipped", "trained")):
                say(f"    spamnb train: {line}")
        say("\n| mode | system | (1-ROCA) % | ham called spam | spam not caught (ham or unsure) | ham unsure | "
            "corrections | learned | replay wall |\n|---|---|---:|---|---|---|---:|---:|---:|")
        for mode in args.modes:
            how_learned = "`learn` of each correction" if args.cli else "learning.session"
            say(spamnb_replay(second, work, spamnb, env, mode, args.cli).row(
                f"spamnb (`train`, then `classify`; {how_learned})", mode))
            say(bogofilter_replay(second, work, env, mode).row("bogofilter (`-s -b`/`-n -b`, then `-T -I`)", mode))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", action="append", metavar="DIR", help="corpus folder (repeatable; default: "
                                                                         "both shared corpora)")
    parser.add_argument("--limit", type=int, default=None, metavar="N",
                        help="every k-th message of each stream, N in all (default: every message)")
    parser.add_argument("--spamnb", default=f"{sys.executable} -m spamnb", metavar="COMMAND",
                        help="the spamnb command for train and learn (default: this Python's -m spamnb)")
    parser.add_argument("--modes", default=",".join(MODES), help="error, auto, full (default: all three)")
    parser.add_argument("--cli", action="store_true",
                        help="spamnb learns by `spamnb learn` processes (error mode only)")
    args = parser.parse_args()
    args.modes = [m for m in args.modes.split(",") if m]
    if any(m not in MODES for m in args.modes) or (args.cli and args.modes != ["error"]):
        parser.error("--modes: error, auto, full; --cli with --modes error only")
    if shutil.which("bogofilter") is None:
        raise SystemExit("bogofilter is not installed")
    spamnb = args.spamnb.split()
    version = subprocess.run(["bogofilter", "-V"], capture_output=True, text=True).stdout.splitlines()[0]

    def say(text):
        print(text, flush=True)

    say(f"spamnb: `{args.spamnb}`; {version}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for corpus in args.corpus or CORPORA:
        replay(corpus, args, spamnb, say)
    say(f"\nload average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
