#!/usr/bin/env python3
"""Where spamprobe is right and spamnb wrong on full-header mail, and the tokens that explain it.

Both trained on the fixed split's train part of a corpus (md5(relpath) % 5 != 0):
spamnb as ``spamnb train`` trains (``SpamFilter().fit(tune=True)``: its cutoffs
and its choice of word pairs), spamprobe with ``-M spam`` / ``-M good``; the
test part classified by each (spamnb's verdict at its cutoffs, unsure counted
as wrong; spamprobe's SPAM / GOOD).  For every test message spamprobe gets
right and spamnb wrong: spamprobe's 15 most significant terms (``-T score``:
header terms ``H<field>_word``, received-line terms ``Hrecv_``, two-word
phrases) and spamnb's strongest tokens; then a tally, over those messages, of
the header fields spamprobe's significant terms come from (and whether
spamnb's default tokenizer reads that field's words), and of phrases.

    python scripts/tune/spamprobe_diff.py                     # the shared SpamAssassin corpus
    python scripts/tune/spamprobe_diff.py CORPUS --show 10
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if REPO not in sys.path:
    sys.path.insert(0, REPO)
CORPUS = os.path.join(REPO, "..", "shared", "corpora", "spamassassin")
TOP = 15


def spamprobe_terms(db, path):
    """(verdict 'SPAM'/'GOOD', score, [(probability, word)] of the top terms)."""
    out = subprocess.run(["spamprobe", "-d", db, "-T", "score", path], capture_output=True, text=True,
                         errors="replace").stdout.splitlines()
    head = out[0].split()
    terms = []
    for line in out[2:]:
        fields = line.split(None, 4)
        if len(fields) == 5:
            terms.append((float(fields[0]), fields[4]))
    return head[0], float(head[1]), terms


def term_kind(word):
    """'header:<field>', 'received', 'phrase' or 'word'."""
    if word.startswith("Hrecv"):
        return "received"
    if word.startswith("H") and "_" in word:
        return "header:" + word[1:word.index("_")].lower()
    return "phrase" if " " in word else "word"


def main(argv=None):
    import numpy as np

    from spamnb import SpamFilter
    from spamnb.evaluation.crossval import md5_split
    from spamnb.training.corpus import labelled_messages

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", nargs="?", default=CORPUS)
    parser.add_argument("--show", type=int, default=5, help="print the terms of this many such messages")
    args = parser.parse_args(argv)
    items = labelled_messages([args.corpus])
    train, test = md5_split([m.relpath for m in items])
    y = np.array([m.is_spam for m in items], dtype=bool)
    spam_filter = SpamFilter().fit([items[i].data for i in train], y[train])
    with tempfile.TemporaryDirectory(prefix="spamprobe-diff-") as db:
        for label, spam in (("spam", True), ("good", False)):
            paths = [os.path.join(args.corpus, items[i].relpath) for i in train if y[i] == spam]
            for at in range(0, len(paths), 500):
                subprocess.run(["spamprobe", "-c", "-d", db, "-M", label] + paths[at:at + 500], check=True,
                               capture_output=True)
        rows = []
        for i in test:
            verdict = spam_filter.classify(items[i].data)
            word, score, terms = spamprobe_terms(db, os.path.join(args.corpus, items[i].relpath))
            nb_right = verdict.label == ("spam" if y[i] else "ham")
            sp_right = (word == "SPAM") == bool(y[i])
            rows.append((i, verdict, nb_right, sp_right, score, terms[:TOP]))
    only_sp = [r for r in rows if r[3] and not r[2]]
    only_nb = [r for r in rows if r[2] and not r[3]]
    print(f"test part: {len(test)} messages ({int(y[test].sum())} spam); spamnb wrong (unsure counted) "
          f"{sum(not r[2] for r in rows)}, spamprobe wrong {sum(not r[3] for r in rows)}; "
          f"spamprobe right where spamnb is wrong: {len(only_sp)} "
          f"({sum(bool(y[r[0]]) for r in only_sp)} spam); the reverse: {len(only_nb)}")
    kinds, fields = collections.Counter(), collections.Counter()
    for i, verdict, _nb, _sp, score, terms in only_sp:
        truth = bool(y[i])
        for p, word in terms:
            if (p > 0.5) == truth:          # the terms that pulled spamprobe the right way
                kind = term_kind(word)
                kinds[kind.split(":")[0]] += 1
                if kind.startswith("header:"):
                    fields[kind[7:]] += 1
    print("\nspamprobe's top-15 terms pulling the right way, in those messages, by kind:",
          ", ".join(f"{k} {n}" for k, n in kinds.most_common()))
    print("by header field:", ", ".join(f"{f} {n}" for f, n in fields.most_common(20)))
    reasons = collections.Counter(f"{r[1].label}" + (f" ({r[1].reason})" if r[1].reason else "") for r in only_sp)
    print("spamnb's verdicts there:", ", ".join(f"{k} {n}" for k, n in reasons.most_common()))
    for i, verdict, _nb, _sp, score, terms in only_sp[:args.show]:
        why = f", {verdict.reason}" if verdict.reason else ""
        print(f"\n{items[i].relpath} ({'spam' if y[i] else 'ham'}): spamnb {verdict.label} "
              f"(log-odds {verdict.log_odds:.2f}{why}), spamprobe {score:.7f}")
        print("  spamprobe:", "; ".join(f"{w} {p:.3f}" for p, w in terms))
        print("  spamnb:", "; ".join(f"{t} {w:+.2f}" for t, w in list(verdict.evidence)[:TOP]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
