#!/usr/bin/env python3
"""Online evaluation (TREC Spam Track protocol) of spamnb, bogofilter and spamprobe, side by side.

Each corpus is one stream, in the order ``spamnb evaluate --online`` uses
(``spamnb.evaluation.online.order_messages``: by Date: header when most messages have
one, else by folder and the number a file name starts with).  Every system
starts empty; each message is scored, then learned with its true label
(full feedback):

- spamnb: ``spamnb.evaluation.online.run_online`` (in this process; classify + learn),
  as a model that grows by learning is made (``spamnb.model.learning.learned_model``:
  word pairs of window 2 weighed 0.5 when scoring), or as ``--word-pairs`` and
  ``--pair-weight`` say (``--word-pairs 0``: words alone);
- bogofilter: ``bogofilter -C -d DB -TT -I FILE`` (its 16-digit bogosity; an
  empty database scores 0.5), then ``bogofilter -C -d DB -s|-n -I FILE``;
- spamprobe: ``spamprobe -c -d DB -M score FILE`` (its score), then
  ``spamprobe -c -d DB -M spam|good FILE``.

Train on error (``--train-on-error``) learns a message only when the system's
binary decision was wrong (spamnb: log-odds >= 0 is spam; bogofilter and
spamprobe: score >= 0.5; these thresholds also give hm/sm/lam).

    python scripts/bench/bench_online.py                       # both shared corpora, all systems
    python scripts/bench/bench_online.py --systems spamnb,bogofilter --limit 2000

Figures: (1-ROCA) %, lam %, ham misclassified at 0.1 % spam misclassified
(h=.1) and the reverse (s=.1), wall seconds per system (the C tools: one
process per classify and per learn, so their time is mostly process starts).
"""

from __future__ import annotations

import argparse
import json
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
SYSTEMS = ("spamnb", "bogofilter", "spamprobe")


def stream_of(corpus, limit=None, shuffle=None):
    """(paths, labels, order name) of a corpus in arrival order."""
    from spamnb.training.corpus import labelled_messages
    from spamnb.evaluation.online import order_messages

    items = labelled_messages([corpus])
    order, how = order_messages([m.relpath for m in items], [m.data for m in items], "auto")
    if shuffle is not None:
        import random

        random.Random(shuffle).shuffle(order)
        how = f"shuffled, seed {shuffle}"
    if limit:  # every k-th message of the stream, in order (the first N may be one class)
        order = order[::max(1, len(order) // limit)][:limit]
    return ([os.path.join(corpus, items[i].relpath) for i in order], [items[i].is_spam for i in order],
            [items[i].data for i in order], how)


MODES = ("full", "error", "auto")   # spamnb.evaluation.online.FEEDBACK, in this order
# The peers' own unsure bands (bogofilter's compiled-in tri-state cutoffs: spam at
# >= 0.99, ham at <= 0.45); spamprobe's verdict is the word it prints.
BOGOFILTER_CUTOFFS = (0.99, 0.45)


def _verdict(name, fields):
    """(score, verdict 'S' / 'H' / 'U') from a tool's output line (an empty database: 0.5, unsure)."""
    if name == "bogofilter":     # -TT: the spamicity alone; nothing when the database is empty
        if fields:
            score = float(fields[-1])
            spam_cut, ham_cut = BOGOFILTER_CUTOFFS
            return score, "S" if score >= spam_cut else "H" if score <= ham_cut else "U"
        return 0.5, "U"
    if len(fields) >= 2:         # spamprobe: "SPAM 0.9999999 digest" / "GOOD 0.0000001 digest"
        return float(fields[1]), "S" if fields[0] == "SPAM" else "H"
    return 0.5, "U"


def run_tool(name, paths, labels, mode, work):
    """Scores given before learning each message; which were learned (None: the tool decides
    and does not say); the verdicts ('S', 'H', 'U'); seconds.

    ``mode``: ``full`` (score, then learn the true label), ``error`` (learn when the
    tool's verdict was wrong or unsure: bogofilter ``-s|-n`` after ``-TT``; spamprobe
    ``train-spam|train-good``, its own learn-when-wrong-or-difficult), ``auto``
    (the tool learns its own verdicts, the user corrects its errors: bogofilter
    ``-u -TT``, then ``-Sn|-Ns`` for a registered error, ``-s|-n`` for unsure
    mail; spamprobe ``receive``, then ``spam|good``, which reclassify a message
    it knows by its digest).
    """
    db = tempfile.mkdtemp(prefix=f"{name}-", dir=work)
    if name == "bogofilter":
        base = ["bogofilter", "-C", "-d", db]
        score_cmd = base + (["-u", "-TT", "-I"] if mode == "auto" else ["-TT", "-I"])
        learn_cmd = {True: base + ["-s", "-I"], False: base + ["-n", "-I"]}
        fix_cmd = {True: base + ["-N", "-s", "-I"], False: base + ["-S", "-n", "-I"]}
    else:
        base = ["spamprobe", "-c", "-d", db]
        score_cmd = base + ["-M", "receive" if mode == "auto" else "score"]
        if mode == "error":
            learn_cmd = {True: base + ["-M", "train-spam"], False: base + ["-M", "train-good"]}
        else:
            learn_cmd = {True: base + ["-M", "spam"], False: base + ["-M", "good"]}
        fix_cmd = learn_cmd
    scores, trained, verdicts = [], [], []
    started = time.perf_counter()
    for n, (path, is_spam) in enumerate(zip(paths, labels)):
        out = subprocess.run(score_cmd + [path], capture_output=True, text=True)
        score, verdict = _verdict(name, out.stdout.split())
        scores.append(score)
        verdicts.append(verdict)
        right = verdict == ("S" if is_spam else "H")
        cmd = None
        if mode == "full":
            cmd = learn_cmd[is_spam]
        elif mode == "error":
            cmd = learn_cmd[is_spam] if (name == "spamprobe" or not right) else None
        elif not right:   # auto: the user corrects an error (or sorts unsure mail)
            registered = verdict != "U" if name == "bogofilter" else out.stdout.strip() != ""
            cmd = fix_cmd[is_spam] if registered else learn_cmd[is_spam]
        if cmd is not None:
            rc = subprocess.run(cmd + [path], capture_output=True).returncode
            if rc not in (0, 1, 2):
                raise RuntimeError(f"{name}: learning {path} failed (exit {rc})")
        if name == "spamprobe" and mode == "error":
            trained.append(None)
        else:
            trained.append(cmd is not None or (mode == "auto" and (name == "spamprobe" or verdict != "U")))
        if n % 1000 == 999:
            print(f"  {name}: {n + 1}/{len(paths)} ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    seconds = time.perf_counter() - started
    shutil.rmtree(db, ignore_errors=True)
    return scores, trained, verdicts, seconds


def verdict_figures(verdicts, labels, start=1000):
    """False positives / spam missed / unsure at the system's own verdicts after the first ``start`` messages."""
    import numpy as np

    v = np.asarray(verdicts[start:])
    y = np.asarray(labels[start:], dtype=bool)
    n_ham, n_spam = int((~y).sum()), int(y.sum())
    fp = int(((v == "S") & ~y).sum())
    return {"start": start, "n_ham": n_ham, "n_spam": n_spam, "false_positives": fp,
            "fpr": fp / n_ham if n_ham else float("nan"),
            "spam_missed": float(((v != "S") & y).sum() / n_spam) if n_spam else float("nan"),
            "unsure": float((v == "U").mean()) if v.size else float("nan")}


def spamnb_verdicts(result):
    import numpy as np

    s = np.asarray(result.log_odds)
    return np.where(s >= result.spam_cutoffs, "S", np.where(s <= result.ham_cutoffs, "H", "U")).tolist()


def run_spamnb(datas, y, mode, params, auto_margin, word_pairs=None, pair_weight=None):
    """spamnb's online run; ``word_pairs`` None and ``pair_weight`` None: a learned model's
    (its pair weight chosen on the stream's own mail, ``spamnb.estimator.variants.PairMixture``,
    unless ``SPAMNB_PAIR_MIXTURE=0``).  The mode's feedback is
    ``spamnb.evaluation.online.feedback_options``'s, which ``spamnb evaluate --online`` runs
    too (``--train-on-error --auto-learn``: ``auto``)."""
    from spamnb.evaluation.online import feedback_options, run_online
    from spamnb.mail.tokenizer import Tokenizer

    tokenizer = None if word_pairs is None else Tokenizer(word_pairs=word_pairs)
    options = feedback_options(mode, auto_margin)
    if pair_weight is not None:
        params = dict(params, pair_weight=pair_weight)
    elif word_pairs is None:
        from spamnb.model import LEARNED_PAIR_WEIGHT, PairMixture, mixture_setting

        if mixture_setting():   # as spamnb learn and evaluate --online grow a learned model
            options["variants"] = PairMixture(LEARNED_PAIR_WEIGHT)
    return run_online(datas, y, params, tokenizer=tokenizer, **options)


def run_spamnb_average(datas, y, mode, params, auto_margin, window):
    """spamnb without word pairs and with pairs of ``window``, each run as :func:`run_spamnb`
    (full feedback only: in the other modes what one model learns depends on its own verdicts);
    the log-odds and own cutoffs of each message the mean of the two models'."""
    import numpy as np

    from spamnb.evaluation.online import OnlineResult

    if mode != "full":
        raise SystemExit("--average-pairs: full feedback only (--modes full)")
    words = run_spamnb(datas, y, mode, params, auto_margin, 0)
    pairs = run_spamnb(datas, y, mode, params, auto_margin, window, 1.0)
    mean = lambda a, b: (np.asarray(a, dtype=float) + np.asarray(b, dtype=float)) / 2  # noqa: E731
    return OnlineResult(mean(words.log_odds, pairs.log_odds), words.y, words.trained,
                        words.seconds + pairs.seconds, pairs.n_features,
                        mean(words.spam_cutoffs, pairs.spam_cutoffs), mean(words.ham_cutoffs, pairs.ham_cutoffs),
                        None)


def main(argv=None):
    import numpy as np

    from spamnb.evaluation.online import FEEDBACK, OnlineResult, online_figures
    from spamnb.model.autolearn import AUTO_LEARN_MARGIN
    from spamnb.estimator.defaults import LEARNED_PAIR_WEIGHT, LEARNED_WORD_PAIRS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpora", nargs="*", default=list(CORPORA), metavar="CORPUS")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--modes", default=",".join(MODES),
                        help="full (every message learned), error (learned when the verdict was wrong or unsure), "
                             "auto (the system learns its confident verdicts, the user corrects errors and unsure "
                             "mail); default all three")
    parser.add_argument("--limit", type=int, help="about N messages of each stream (every k-th, in order)")
    parser.add_argument("--train-on-error", action="store_true", help="the same as --modes error")
    parser.add_argument("--auto-margin", type=float, default=AUTO_LEARN_MARGIN,
                        help=f"spamnb's auto-learn margin beyond its cutoffs, log-odds (default {AUTO_LEARN_MARGIN:g})")
    parser.add_argument("--spamnb-params", default="", metavar="K=V,...",
                        help="SpamFilter settings for spamnb, e.g. length_norm=5,alpha=0.001")
    parser.add_argument("--word-pairs", type=int, default=None, metavar="W",
                        help="spamnb's tokenizer with word pairs of window W, 0 for words alone (default: a "
                             "learned model's, 2)")
    parser.add_argument("--pair-weight", type=float, default=None, metavar="X",
                        help="spamnb's weight of a word pair when scoring (default: a learned model's, 0.5)")
    parser.add_argument("--average-pairs", type=int, default=0, metavar="W",
                        help="spamnb: two models side by side, words alone and words with pairs of window W; "
                             "a message's log-odds the mean of theirs, its cutoffs the mean of their own "
                             "(a measurement: spamnb does not serve such a pair of models)")
    parser.add_argument("--shuffle", type=int, metavar="SEED",
                        help="a random order of each stream (seeded) instead of the arrival order")
    parser.add_argument("--json", metavar="PATH", help="write the figures as JSON")
    parser.add_argument("--docs", metavar="MARKDOWN",
                        help="write the table into this file, between the lines <!-- bench_online:begin --> "
                             "and <!-- bench_online:end --> (docs/accuracy.md)")
    parser.add_argument("--update-rows", action="store_true",
                        help="with --docs: replace only the table's rows of this run's corpora, feedback and "
                             "systems (the other systems' rows kept as they are), not the whole table")
    parser.add_argument("--merge", nargs="+", metavar="JSON",
                        help="run nothing: merge the --json reports of earlier runs (e.g. one per system, "
                             "each on one core) into one table, printed and written by --docs")
    args = parser.parse_args(argv)
    if args.merge:
        table = format_report(merge_reports(args.merge))
        print(table)
        if args.docs:
            write_docs(args.docs, table, args.update_rows)
        return 0
    systems = [s for s in args.systems.split(",") if s]
    modes = ["error"] if args.train_on_error else [m for m in args.modes.split(",") if m]
    for mode in modes:
        if mode not in MODES:
            parser.error(f"unknown mode {mode!r} (full, error, auto)")
    params = {k: float(v) if k != "counts" and k != "prior" else v
              for k, v in (item.split("=", 1) for item in args.spamnb_params.split(",") if item)}
    report = {"protocol": "online, from empty models", "modes": modes, "auto_margin": args.auto_margin,
              "corpora": {}}
    with tempfile.TemporaryDirectory(prefix="bench-online-") as work:
        for corpus in args.corpora:
            paths, labels, datas, how = stream_of(corpus, args.limit, args.shuffle)
            y = np.asarray(labels, dtype=bool)
            name = os.path.basename(os.path.normpath(corpus))
            print(f"{name}: {len(y)} messages ({int(y.sum())} spam), order: {how}", file=sys.stderr)
            rows = {}
            for mode in modes:
                for system in systems:
                    if system == "spamnb":
                        if args.average_pairs:
                            result = run_spamnb_average(datas, y, mode, params, args.auto_margin, args.average_pairs)
                        else:
                            result = run_spamnb(datas, y, mode, params, args.auto_margin, args.word_pairs,
                                                args.pair_weight)
                        figures = online_figures(result, threshold=0.0)
                        verdicts = spamnb_verdicts(result)
                        if result.auto_learned is not None:
                            figures["n_auto"] = int(result.auto_learned.sum())
                    else:
                        if shutil.which(system) is None:
                            print(f"  {system}: not installed, left out", file=sys.stderr)
                            continue
                        scores, trained, verdicts, seconds = run_tool(system, paths, labels, mode, work)
                        unknown = None in trained
                        result = OnlineResult(np.asarray(scores), y,
                                              np.asarray([bool(t) for t in trained]), seconds, 0)
                        figures = online_figures(result, threshold=0.5)
                        if unknown:
                            figures["n_trained"] = None
                    figures["own_cutoffs"] = verdict_figures(verdicts, labels)
                    label = system
                    if system == "spamnb" and args.word_pairs == 0:
                        label = f"{system}, words alone"
                    elif system == "spamnb" and (args.word_pairs is not None or args.pair_weight is not None):
                        window = LEARNED_WORD_PAIRS if args.word_pairs is None else args.word_pairs
                        weight = LEARNED_PAIR_WEIGHT if args.pair_weight is None else args.pair_weight
                        label = f"{system}, word pairs {window} at weight {weight:g}"
                    if system == "spamnb" and args.average_pairs:
                        label = f"{system}, mean of words and word pairs {args.average_pairs}"
                    rows[f"{mode}/{label}"] = figures
                    print(f"  {FEEDBACK[mode]}, {system}: (1-ROCA) {figures['one_minus_roca_percent']:.4f} %, "
                          f"lam {100 * figures['lam']:.2f} %, {figures['seconds']:.1f} s", file=sys.stderr)
            report["corpora"][name] = {"n": int(y.size), "n_spam": int(y.sum()), "order": how, "systems": rows}
    table = format_report(report)
    print(table)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
            f.write("\n")
    if args.docs:
        write_docs(args.docs, table, args.update_rows)
    return 0


def merge_reports(paths):
    """One report of several (corpora in the order first met; the rows of each, mode by mode)."""
    merged = None
    for path in paths:
        with open(path) as f:
            report = json.load(f)
        if merged is None:
            merged = {**report, "corpora": {}}
        for corpus, entry in report["corpora"].items():
            into = merged["corpora"].setdefault(corpus, {**entry, "systems": {}})
            into["systems"].update(entry["systems"])
    for entry in merged["corpora"].values():
        entry["systems"] = dict(sorted(entry["systems"].items(),
                                       key=lambda kv: (MODES.index(kv[0].split("/")[0]),
                                                       SYSTEMS.index(kv[0].split("/")[1].split(",")[0]),
                                                       kv[0])))
    return merged


BEGIN, END = "<!-- bench_online:begin -->", "<!-- bench_online:end -->"


def _row_key(line):
    """A table row's corpus, feedback and system cells, or None for a line that is not a row of figures."""
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if not line.startswith("| ") or len(cells) < 4 or cells[0] == "corpus":
        return None
    return tuple(cells[:3])


def _update_rows(old, table):
    """``old`` (the block's lines) with the rows of ``table`` put in place of those of the same corpus,
    feedback and system; a row ``old`` lacks goes after the last row of its corpus and feedback."""
    lines = old.strip("\n").split("\n")
    for row in table.split("\n"):
        key = _row_key(row)
        if key is None:
            continue
        at = [i for i, line in enumerate(lines) if _row_key(line) == key]
        if at:
            lines[at[0]] = row
            continue
        same = [i for i, line in enumerate(lines) if (_row_key(line) or ())[:2] == key[:2]]
        lines.insert(same[-1] + 1 if same else len(lines), row)
    return "\n".join(lines)


def write_docs(path, table, update_rows=False):
    """Replace the lines between the two markers of ``path`` by ``table`` (``update_rows``: only the rows
    ``table`` has, :func:`_update_rows`)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{path}: no {BEGIN} ... {END} block to write the table into")
    head, rest = text.split(BEGIN, 1)
    old, tail = rest.split(END, 1)
    if update_rows:
        table = _update_rows(old, table)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(f"{head}{BEGIN}\n{table}\n{END}{tail}")
    os.replace(path + ".tmp", path)


def format_report(report):
    from spamnb.evaluation.online import FEEDBACK

    lines = [f"protocol: {report['protocol']}; spamnb's auto-learn margin {report['auto_margin']:g} log-odds", "",
             "| corpus | feedback | system | (1-ROCA) % | lam % | hm % | sm % | h=.1 % | s=.1 % | learned (auto) "
             "| FP at own cutoffs after 1,000 | spam missed there | seconds |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for corpus, entry in report["corpora"].items():
        for key, f in entry["systems"].items():
            mode, system = key.split("/", 1)
            learned = "(tool's choice)" if f["n_trained"] is None else f"{f['n_trained']}"
            if f.get("n_auto") is not None:
                learned += f" ({f['n_auto']})"
            own = f["own_cutoffs"]
            lines.append(f"| {corpus} ({entry['n']}, {entry['order']}) | {FEEDBACK[mode]} | {system} | "
                         f"{f['one_minus_roca_percent']:.4f} | {100 * f['lam']:.2f} | {100 * f['hm']:.2f} | "
                         f"{100 * f['sm']:.2f} | {100 * f['ham_at_spam_0.001']:.2f} | "
                         f"{100 * f['spam_at_ham_0.001']:.2f} | {learned} | "
                         f"{100 * own['fpr']:.2f} % ({own['false_positives']}/{own['n_ham']}) | "
                         f"{100 * own['spam_missed']:.2f} % | {f['seconds']:.1f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
