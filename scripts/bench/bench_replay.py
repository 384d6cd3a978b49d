#!/usr/bin/env python3
"""A corpus replayed as a user lives it: train on the first half, then the
second half in arrival order, each message classified and the mistakes a
user sees corrected; spamnb and bogofilter side by side (issue 46, item 4).

Each corpus is one stream in the order ``spamnb evaluate --online`` uses
(``spamnb.evaluation.online.order_messages``: by Date: header when most
messages have one, else by folder and file name).  The first half is written
to a folder tree (``spam/`` and ``ham/``) and trained on:

- spamnb: ``spamnb train -m MODEL TREE`` (its defaults: cutoffs chosen by
  cross-validation, word pairs decided, the ledger of the messages counted);
- bogofilter: ``bogofilter -C -d DB -s -b`` fed the spam file list, then
  ``-n -b`` the ham list.

Then each message of the second half, in order:

- spamnb: its verdict by the model as it stands (the model file and its
  journal, loaded again after each learn: what ``spamnb classify`` reads; in
  this process, so the replay is not a thousand process starts), and when the
  user would correct it, ``spamnb learn --spam|--ham -m MODEL < MSG`` (a
  process, as a user or Dovecot's learn-on-move runs it: the ledger, the
  journal, the held-out cutoffs of a model that learns);
- bogofilter: ``bogofilter -C -d DB -I MSG`` (exit 0 spam, 1 ham, 2 unsure),
  and when corrected, ``bogofilter -C -d DB -s|-n -I MSG``.

What a user corrects: a spam not filed as spam (ham or unsure: it sits in the
inbox; they move it to Junk: learn as spam) and a ham filed as spam (they move
it out of Junk: learn as ham).  Unsure ham stays in the inbox, uncorrected.

Figures per system: false positives (ham called spam), spam not caught (ham
or unsure), unsure ham, corrections made, wall seconds of the replay (the
training apart).

    python scripts/bench/bench_replay.py                          # both shared corpora
    python scripts/bench/bench_replay.py --corpus corpora/ --limit 200
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


class Tally:
    def __init__(self):
        self.ham = self.spam = self.fp = self.missed = self.unsure_ham = self.corrections = 0
        self.seconds = 0.0

    def add(self, is_spam, verdict):
        """Count one verdict ("spam", "ham", "unsure"); True when the user corrects it."""
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

    def row(self, name):
        def pct(n, d):
            return f"{n} ({100.0 * n / d:.2f} %)" if d else "0"

        return (f"| {name} | {pct(self.fp, self.ham)} | {pct(self.missed, self.spam)} | "
                f"{pct(self.unsure_ham, self.ham)} | {self.corrections} | {self.seconds:.1f} s |")


def spamnb_replay(second, work, spamnb, env):
    from spamnb import SpamFilter

    model = os.path.join(work, "model.spamnb")
    tally = Tally()
    started = time.perf_counter()
    spam_filter = SpamFilter.load(model)
    for _relpath, is_spam, data in second:
        verdict = spam_filter.classify(data, evidence=False).label
        if tally.add(is_spam, verdict):
            subprocess.run([*spamnb, "learn", "-q", "--spam" if is_spam else "--ham", "-m", model], input=data,
                           env=env, check=True, capture_output=True)
            spam_filter = SpamFilter.load(model)   # the model and its journal, as the next classify reads them
    tally.seconds = time.perf_counter() - started
    return tally


def bogofilter_replay(second, work, env):
    db = os.path.join(work, "bogo")
    tally = Tally()
    message = os.path.join(work, "message")
    started = time.perf_counter()
    for _relpath, is_spam, data in second:
        with open(message, "wb") as f:
            f.write(data)
        code = subprocess.run(["bogofilter", "-C", "-d", db, "-I", message], env=env).returncode
        verdict = {0: "spam", 1: "ham", 2: "unsure"}.get(code)
        if verdict is None:
            raise SystemExit(f"bogofilter exited {code}")
        if tally.add(is_spam, verdict):
            subprocess.run(["bogofilter", "-C", "-d", db, "-s" if is_spam else "-n", "-I", message], env=env,
                           check=True)
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
        say("\n| system | ham called spam | spam not caught (ham or unsure) | ham unsure | corrections "
            "(learns) | replay wall |\n|---|---|---|---|---|---|")
        say(spamnb_replay(second, work, spamnb, env).row("spamnb (`train`, then `classify`; `learn` of each "
                                                          "correction)"))
        say(bogofilter_replay(second, work, env).row("bogofilter (`-s -b`/`-n -b`, then `-I`; `-s`/`-n` of "
                                                     "each correction)"))
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
    args = parser.parse_args()
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
