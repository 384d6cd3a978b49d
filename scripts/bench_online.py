#!/usr/bin/env python3
"""Online evaluation (TREC Spam Track protocol) of spamnb, bogofilter and spamprobe, side by side.

Each corpus is one stream, in the order ``spamnb evaluate --online`` uses
(``spamnb.evaluation.online.order_messages``: by Date: header when most messages have
one, else by folder and the number a file name starts with).  Every system
starts empty; each message is scored, then learned with its true label
(full feedback):

- spamnb: ``spamnb.evaluation.online.run_online`` (in this process; classify + learn);
- bogofilter: ``bogofilter -C -d DB -TT -I FILE`` (its 16-digit bogosity; an
  empty database scores 0.5), then ``bogofilter -C -d DB -s|-n -I FILE``;
- spamprobe: ``spamprobe -c -d DB -M score FILE`` (its score), then
  ``spamprobe -c -d DB -M spam|good FILE``.

Train on error (``--train-on-error``) learns a message only when the system's
binary decision was wrong (spamnb: log-odds >= 0 is spam; bogofilter and
spamprobe: score >= 0.5; these thresholds also give hm/sm/lam).

    python scripts/bench_online.py                       # both shared corpora, all systems
    python scripts/bench_online.py --systems spamnb,bogofilter --limit 2000

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

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)
CORPORA = (os.path.join(REPO, "..", "shared", "corpora", "spamassassin"),
           os.path.join(REPO, "..", "shared", "corpora", "enron-spam"))
SYSTEMS = ("spamnb", "bogofilter", "spamprobe")


def stream_of(corpus, limit=None):
    """(paths, labels, order name) of a corpus in arrival order."""
    from spamnb.training.corpus import labelled_messages
    from spamnb.evaluation.online import order_messages

    items = labelled_messages([corpus])
    order, how = order_messages([m.relpath for m in items], [m.data for m in items], "auto")
    if limit:  # every k-th message of the stream, in order (the first N may be one class)
        order = order[::max(1, len(order) // limit)][:limit]
    return ([os.path.join(corpus, items[i].relpath) for i in order], [items[i].is_spam for i in order],
            [items[i].data for i in order], how)


def run_tool(name, paths, labels, train_on_error, work):
    """Scores given before learning each message; which were learned; seconds."""
    db = tempfile.mkdtemp(prefix=f"{name}-", dir=work)
    if name == "bogofilter":
        score_cmd = ["bogofilter", "-C", "-d", db, "-TT", "-I"]
        learn_cmd = {True: ["bogofilter", "-C", "-d", db, "-s", "-I"],
                     False: ["bogofilter", "-C", "-d", db, "-n", "-I"]}
    else:
        score_cmd = ["spamprobe", "-c", "-d", db, "-M", "score"]
        learn_cmd = {True: ["spamprobe", "-c", "-d", db, "-M", "spam"],
                     False: ["spamprobe", "-c", "-d", db, "-M", "good"]}
    scores, trained = [], []
    started = time.perf_counter()
    for n, (path, is_spam) in enumerate(zip(paths, labels)):
        out = subprocess.run(score_cmd + [path], capture_output=True, text=True)
        fields = out.stdout.split()
        if name == "bogofilter":
            score = float(fields[-1]) if fields else 0.5    # an empty database: no score (rc 3)
        else:  # "SPAM 0.9999999 file" / "GOOD 0.0000001 file"
            score = float(fields[1]) if len(fields) >= 2 else 0.5
        scores.append(score)
        learn = not train_on_error or (score >= 0.5) != is_spam
        if learn:
            rc = subprocess.run(learn_cmd[is_spam] + [path], capture_output=True).returncode
            if rc not in (0, 1, 2):
                raise RuntimeError(f"{name}: learning {path} failed (exit {rc})")
        trained.append(learn)
        if n % 1000 == 999:
            print(f"  {name}: {n + 1}/{len(paths)} ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    seconds = time.perf_counter() - started
    shutil.rmtree(db, ignore_errors=True)
    return scores, trained, seconds


def main(argv=None):
    import numpy as np

    from spamnb.evaluation.online import OnlineResult, online_figures, run_online

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpora", nargs="*", default=list(CORPORA), metavar="CORPUS")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--limit", type=int, help="about N messages of each stream (every k-th, in order)")
    parser.add_argument("--train-on-error", action="store_true")
    parser.add_argument("--spamnb-params", default="", metavar="K=V,...",
                        help="SpamFilter settings for spamnb, e.g. length_norm=5,alpha=0.001")
    parser.add_argument("--json", metavar="PATH", help="write the figures as JSON")
    args = parser.parse_args(argv)
    systems = [s for s in args.systems.split(",") if s]
    report = {"protocol": "online, " + ("train on error" if args.train_on_error else "full feedback"),
              "corpora": {}}
    with tempfile.TemporaryDirectory(prefix="bench-online-") as work:
        for corpus in args.corpora:
            paths, labels, datas, how = stream_of(corpus, args.limit)
            y = np.asarray(labels, dtype=bool)
            name = os.path.basename(os.path.normpath(corpus))
            print(f"{name}: {len(y)} messages ({int(y.sum())} spam), order: {how}", file=sys.stderr)
            rows = {}
            for system in systems:
                if system == "spamnb":
                    params = {k: float(v) if k != "counts" and k != "prior" else v
                              for k, v in (item.split("=", 1) for item in args.spamnb_params.split(",") if item)}
                    result = run_online(datas, y, params, train_on_error=args.train_on_error)
                    figures = online_figures(result, threshold=0.0)
                else:
                    if shutil.which(system) is None:
                        print(f"  {system}: not installed, left out", file=sys.stderr)
                        continue
                    scores, trained, seconds = run_tool(system, paths, labels, args.train_on_error, work)
                    result = OnlineResult(np.asarray(scores), y, np.asarray(trained), seconds, 0)
                    figures = online_figures(result, threshold=0.5)
                rows[system] = figures
                print(f"  {system}: (1-ROCA) {figures['one_minus_roca_percent']:.4f} %, "
                      f"lam {100 * figures['lam']:.2f} %, {figures['seconds']:.1f} s", file=sys.stderr)
            report["corpora"][name] = {"n": int(y.size), "n_spam": int(y.sum()), "order": how, "systems": rows}
    print(format_report(report))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
            f.write("\n")
    return 0


def format_report(report):
    lines = [f"protocol: {report['protocol']}, from empty models", "",
             "| corpus | system | (1-ROCA) % | lam % | hm % | sm % | h=.1 % | s=.1 % | learned | seconds |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for corpus, entry in report["corpora"].items():
        for system, f in entry["systems"].items():
            lines.append(f"| {corpus} ({entry['n']}, {entry['order']}) | {system} | "
                         f"{f['one_minus_roca_percent']:.4f} | {100 * f['lam']:.2f} | {100 * f['hm']:.2f} | "
                         f"{100 * f['sm']:.2f} | {100 * f['ham_at_spam_0.001']:.2f} | "
                         f"{100 * f['spam_at_ham_0.001']:.2f} | {f['n_trained']} | {f['seconds']:.1f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
