#!/usr/bin/env python3
"""The commands a user runs, timed against bogofilter: whole processes, same run.

For each corpus folder (``--corpus DIR``, repeatable) it runs, interleaved
(A B A B ...), and prints a markdown table of medians and ratios:

1. ``spamnb train DIR`` with its defaults (cutoffs chosen by cross-validation,
   word pairs decided; ``-m`` to a fresh model file) against bogofilter's bulk
   training into a fresh database: ``bogofilter -C -d DB -s -b`` fed the spam
   file list, then ``bogofilter -C -d DB -n -b`` fed the ham list, run one after
   the other by this script (no shell): its time is from the start of the
   first to the end of the second (the two wall times plus one fork), its
   CPU the sum of both, its peak RSS the larger of the two;
2. ``spamnb classify --batch`` fed every message's path on stdin (one per
   line, as the command reads them; one output line per message) against
   ``bogofilter -C -d DB -b -v`` fed the same list (``-v``: bogofilter writes
   one line per message too; without it, it writes nothing);
3. one ``spamnb learn --spam < MSG`` against one ``spamnb classify < MSG``
   (the issue's target: a learn within 1.3x a classify) and against
   ``bogofilter -C -d DB -s < MSG``; each run takes another message (spread
   over the corpus) with a last line of its own, so every learn is a new
   message's (learning a message again is a no-op in spamnb's ledger, and
   learning a trained ham as spam a relabel, which saves the model whole);
4. with ``--serve``: ``spamc -L spam < MSG`` (TELL) against ``spamc -c < MSG``
   (CHECK) through one ``spamnb serve --allow-tell`` on a Unix socket
   (per-process wall time of spamc; the server's own figures are
   scripts/bench/bench_serve.py's); ``--baseline PYTHONPATH`` adds a second server
   running another checkout's spamnb (on its own copy of the model), its
   requests interleaved with the first's message by message.

Labels: as ``spamnb train DIR`` reads a tree (spamnb/training/corpus.py): a message
is spam when a folder on its way below DIR has a name starting with "spam"
or "junk" (any case; a Maildir++ ``.A.B`` folder by its last component);
hidden files and folders, empty files and files whose first line is no
header field are skipped (a README at the top of the corpus). The counts
are checked against what ``spamnb train`` says it read. A file is one
message (the SpamAssassin corpus's start with an mbox ``From `` line: a
one-message mbox to spamnb, a message to bogofilter); a folder of mboxes or
a Maildir is refused (the counts would differ).

Each child is started with ``subprocess.Popen`` and reaped with
``os.wait4``: wall time from start to reaping, CPU (user + system of the
child and of the children it waited for: ``spamnb train``'s workers) and
peak RSS (``ru_maxrss``: the largest single process of the tree, not a
sum). Models and databases live in a temporary folder (``SPAMNB_HOME``
there too: no settings file of the user's).

    python scripts/bench/bench_commands.py --corpus corpora/ [--corpus OTHER] [--train-runs 3] [--runs 15] [--serve]

``--train-j1`` also runs ``spamnb train -j 1`` in each training round (the
default ``-j`` chooses the free cores, this process alone on busy ones: it
must never be slower than ``-j 1``); with ``--baseline``, the baseline's
``-j 1`` too (a row of ``-j 1`` against it).  Run it from a folder without a ``spamnb`` package in it:
``python -m`` puts the current folder first on the path, before
``PYTHONPATH`` (a checkout's own folder would shadow ``--baseline``).

``--train-jobs N`` gives the default ``train`` rows (this tree's and the
baseline's) ``-j N``: on a busy machine the default ``-j`` is 1, and this
measures the workers' path it takes on idle cores.

``--json PATH`` also writes each pair's runs (wall and CPU seconds) by
corpus: scripts/bench/bench_readme.py reads them.

``--spamnb "python -m spamnb"`` chooses the spamnb command (default: this
Python's ``-m spamnb``; PYTHONPATH as in the environment).  spamnb's
modules are byte-compiled first (``compileall``) and the children run
without PYTHONDONTWRITEBYTECODE, as an installed package runs: from a
checkout with no bytecode cache every process would compile them again.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness import check, floor_kib, labelled_files, run, run_steps, time_rss  # noqa: E402,F401


def count_lines(path):
    with open(path, "rb") as f:
        return sum(1 for _ in f)


# ---------------------------------------------------------------------------- the table
def _median(runs, field="wall"):
    return statistics.median(getattr(r, field) for r in runs)


def _ms_or_s(seconds):
    return f"{seconds:.2f} s" if seconds >= 1 else f"{seconds * 1000:.1f} ms"


def _spread(runs):
    walls = sorted(r.wall for r in runs)
    return f"{_ms_or_s(statistics.median(walls))} ({_ms_or_s(walls[0])}-{_ms_or_s(walls[-1])})"


def rss(runs, remeasure=None):
    """The largest peak RSS of the runs.  A child's ru_maxrss counts the pages of
    this script it was forked from (Linux keeps the high-water mark across
    exec), so a figure at that floor only says "at most": then, if given,
    ``remeasure()`` (one more run under /usr/bin/time -f %M, a small C parent)
    gives the real one, marked with a dagger."""
    kib = max(r.rss for r in runs)
    if kib > floor_kib() + 1024:
        return f"{kib / 1024:.0f} MiB"
    if remeasure is not None and os.path.exists("/usr/bin/time"):
        return f"{remeasure() / 1024:.1f} MiB†"
    return f"<= {kib / 1024:.0f} MiB"


def row(name, a, b, b_name, faster_is="speed", rss_a=None, rss_b=None):
    """One table row: A against B; ``faster_is`` "speed": B's time / A's (above 1:
    A faster), "time": A's time / B's (how many B's an A costs); ``rss_a``,
    ``rss_b``: how to remeasure a peak RSS at the floor (see :func:`rss`)."""
    ratio = _median(b) / _median(a) if faster_is == "speed" else _median(a) / _median(b)
    what = "speed (peer time / spamnb time)" if faster_is == "speed" else "time ratio (spamnb / other)"
    return (f"| {name} | {_spread(a)} | {_spread(b)} ({b_name}) | **{ratio:.2f}x** {what} | "
            f"{_ms_or_s(_median(a, 'cpu'))} / {_ms_or_s(_median(b, 'cpu'))} | {rss(a, rss_a)} / {rss(b, rss_b)} "
            f"| {len(a)} |")


HEADER = ("| command (A) | A: median wall (min-max) | B: median wall (min-max) | ratio | CPU A / B (median) "
          "| peak RSS A / B (max) | runs |\n|---|---|---|---|---|---|---|")


# ---------------------------------------------------------------------------- one corpus
def bench_corpus(corpus, args, spamnb, say):
    work = tempfile.mkdtemp(prefix="bench-commands-")
    env = dict(os.environ, SPAMNB_HOME=os.path.join(work, "home"))
    try:
        files = labelled_files(corpus)
        spam = [p for p, s in files if s]
        ham = [p for p, s in files if not s]
        lists = {}
        for name, paths in (("spam", spam), ("ham", ham), ("all", [p for p, _ in files])):
            lists[name] = os.path.join(work, f"{name}.list")
            with open(lists[name], "w") as f:
                f.write("".join(p + "\n" for p in paths))
        say(f"\n### {corpus}: {len(files)} messages ({len(spam)} spam, {len(ham)} ham)\n")
        model = os.path.join(work, "model.spamnb")
        bogo = os.path.join(work, "bogo")
        rows = []

        # 1. train: A B A B (with --baseline: A C B A C B, C the baseline's spamnb train)
        train_a, train_b, train_c, train_j1, train_c_j1 = [], [], [], [], []
        jobs = ["-j", str(args.train_jobs)] if args.train_jobs else []   # the default -j: the free cores
        trained_line = None
        for i in range(args.train_runs):
            if args.train_j1:   # spamnb train -j 1 (this process only) in the same rounds
                for path in (model + ".j1", model + ".j1.bak"):
                    if os.path.exists(path):
                        os.unlink(path)
                train_j1.append(check(run([*spamnb, "train", "-j", "1", "-m", model + ".j1", corpus],   # as A: no -q
                                          stdout=os.path.join(work, "train-j1.out"),
                                          stderr=os.path.join(work, "train-j1.err"), env=env), "spamnb train -j 1"))
            if args.baseline and args.train_j1:   # the baseline's -j 1 beside this one's, same rounds
                for path in (model + ".base.j1", model + ".base.j1.bak"):
                    if os.path.exists(path):
                        os.unlink(path)
                train_c_j1.append(check(run([*spamnb, "train", "-q", "-j", "1", "-m", model + ".base.j1", corpus],
                                            env=dict(env, PYTHONPATH=args.baseline)), "spamnb train -j 1 (baseline)"))
            if args.baseline:
                for path in (model + ".base", model + ".base.bak"):
                    if os.path.exists(path):
                        os.unlink(path)
                base_env = dict(env, PYTHONPATH=args.baseline)
                train_c.append(check(run([*spamnb, "train", "-q", *jobs, "-m", model + ".base", corpus], env=base_env),
                                     "spamnb train (baseline)"))
            for path in (model, model + ".bak"):
                if os.path.exists(path):
                    os.unlink(path)
            out = os.path.join(work, "train.out")
            train_a.append(check(run([*spamnb, "train", *jobs, "-m", model, corpus], stdout=out,
                                     stderr=os.path.join(work, "train.err"), env=env), "spamnb train"))
            with open(out) as f:
                text = f.read()
            if trained_line is None:
                trained_line = text.strip().splitlines()
                m = re.search(r"trained on (\d+) messages \((\d+) spam, (\d+) ham\)", text)
                copies = re.search(r"(\d+) near-duplicates of an earlier message", text)   # counted once
                copies = int(copies[1]) if copies else 0
                if not m or int(m[1]) + copies != len(files) or int(m[2]) > len(spam) or int(m[3]) > len(ham):
                    raise SystemExit(f"spamnb train read other messages than this script's split: {text!r}")
            shutil.rmtree(bogo, ignore_errors=True)
            os.mkdir(bogo)
            train_b.append(check(run_steps([(["bogofilter", "-C", "-d", bogo, "-s", "-b"], lists["spam"]),
                                            (["bogofilter", "-C", "-d", bogo, "-n", "-b"], lists["ham"])], env),
                                 "bogofilter training"))
        for line in trained_line:
            say(f"    {line}")
        def bogo_train_rss():
            shutil.rmtree(bogo, ignore_errors=True)
            os.mkdir(bogo)
            return max(time_rss(["bogofilter", "-C", "-d", bogo, flag, "-b"], lists[name], env)
                       for flag, name in (("-s", "spam"), ("-n", "ham")))

        label = f"`spamnb train {' '.join(jobs)} DIR`" if jobs else "`spamnb train DIR`"
        rows.append(row(f"{label} vs `bogofilter -s -b` + `-n -b`", train_a, train_b, "bogofilter",
                        rss_b=bogo_train_rss))
        if args.baseline:
            rows.append(row(f"{label} vs the baseline's", train_a, train_c, "baseline"))
        if args.train_j1:
            rows.append(row(f"{label} vs `spamnb train -j 1 DIR`", train_a, train_j1, "`-j 1`"))
            rows.append(row("`spamnb train -j 1 DIR` vs `bogofilter -s -b` + `-n -b`", train_j1, train_b, "bogofilter"))
            if args.baseline:
                rows.append(row("`spamnb train -j 1 DIR` vs the baseline's `-j 1`", train_j1, train_c_j1, "baseline"))
        if args.train_only:
            say(HEADER)
            for line in rows:
                say(line)
            return

        # 2. classify --batch over every message
        batch_a, batch_b = [], []
        for i in range(args.batch_runs):
            out = os.path.join(work, "batch.out")
            batch_a.append(check(run([*spamnb, "classify", "-m", model, "--batch"], stdin=lists["all"],
                                     stdout=out, env=env), "spamnb classify --batch"))
            if count_lines(out) != len(files):
                raise SystemExit(f"spamnb classify --batch wrote {count_lines(out)} lines for {len(files)} messages")
            batch_b.append(check(run(["bogofilter", "-C", "-d", bogo, "-b", "-v"], stdin=lists["all"], stdout=out,
                                     env=env), "bogofilter -b", ok=(0, 1, 2)))
            if count_lines(out) != len(files):
                raise SystemExit(f"bogofilter -b -v wrote {count_lines(out)} lines for {len(files)} messages")
        rows.append(row("`spamnb classify --batch` (every message)", batch_a, batch_b, "`bogofilter -b -v`",
                        rss_b=lambda: time_rss(["bogofilter", "-C", "-d", bogo, "-b", "-v"], lists["all"], env)))

        # 3. one learn against one classify and one bogofilter -s, a new message each run
        step = max(1, len(files) // args.runs)
        sample = []
        for i, (path, _) in enumerate(files[step // 2::step][:args.runs]):
            # a last line of its own: a message the model has not learned (learning a trained ham --spam
            # would be a relabel, which saves the model whole: another cost than a learn's)
            own = os.path.join(work, f"learn{i}.eml")
            Path(own).write_bytes(Path(path).read_bytes().rstrip(b"\n") + f"\n\nbench learn {i}\n".encode())
            sample.append(own)
        learn, classify, bogo_s = [], [], []
        kinds = [("learn", learn), ("classify", classify), ("bogo", bogo_s)]
        for i, message in enumerate(sample):
            for kind, into in kinds[i % 3:] + kinds[:i % 3]:   # the order rotates with the run
                if kind == "learn":
                    into.append(check(run([*spamnb, "learn", "-q", "--spam", "-m", model], stdin=message, env=env),
                                      "spamnb learn"))
                elif kind == "classify":
                    into.append(check(run([*spamnb, "classify", "-m", model], stdin=message, env=env),
                                      "spamnb classify", ok=(0, 1, 2)))
                else:
                    into.append(check(run(["bogofilter", "-C", "-d", bogo, "-s"], stdin=message, env=env),
                                      "bogofilter -s", ok=(0, 1, 2)))
        size = os.path.getsize(model)
        rows.append(row(f"one `spamnb learn --spam < msg` (model {size / 2**20:.1f} MiB)", learn, classify,
                        "one `spamnb classify < msg`", faster_is="time"))
        rows.append(row("one `spamnb learn --spam < msg`", learn, bogo_s, "one `bogofilter -s < msg`",
                        rss_b=lambda: time_rss(["bogofilter", "-C", "-d", bogo, "-s"], sample[0], env)))

        # 4. TELL against CHECK through spamnb serve
        if args.serve:
            rows.extend(bench_serve_tell(args, spamnb, env, work, model, sample))
        say(HEADER)
        for r in rows:
            say(r)
        return {"messages": len(files), "spam": len(spam), "model_bytes": size,
                "pairs": {name: {"a": [[r.wall, r.cpu] for r in a], "b": [[r.wall, r.cpu] for r in b]}
                          for name, (a, b) in (("train", (train_a, train_b)), ("batch", (batch_a, batch_b)),
                                               ("learn_vs_classify", (learn, classify)),
                                               ("learn_vs_bogofilter", (learn, bogo_s)))}}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def bench_serve_tell(args, spamnb, env, work, model, sample):
    if shutil.which("spamc") is None:
        return ["| spamc TELL vs CHECK | (spamc not installed) | | | | | |"]
    trees = [("", env)]
    if args.baseline:
        trees.append((f" (baseline: PYTHONPATH={args.baseline})", dict(env, PYTHONPATH=args.baseline)))
    servers = []
    try:
        for i, (label, tree_env) in enumerate(trees):
            sock = os.path.join(work, f"serve{i}.sock")
            own = os.path.join(work, f"serve{i}.spamnb")   # a model of its own each: each learns its TELLs
            shutil.copyfile(model, own)
            server = subprocess.Popen([*spamnb, "serve", "-l", sock, "-m", own, "--allow-tell"], env=tree_env,
                                      stdout=subprocess.DEVNULL,
                                      stderr=open(os.path.join(work, f"serve{i}.log"), "wb"))
            servers.append((label, tree_env, sock, server))
            deadline = time.monotonic() + 60
            while True:
                if server.poll() is not None:
                    raise SystemExit("spamnb serve exited")
                try:
                    with socket.socket(socket.AF_UNIX) as s:
                        s.connect(sock)
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise SystemExit("spamnb serve did not start")
                    time.sleep(0.05)
            run(["spamc", "-U", sock, "-c"], stdin=sample[0], env=tree_env)   # the model is loaded at the first request
        times = {label: ([], []) for label, *_ in servers}
        for i, message in enumerate(sample[1:] + sample[:1]):
            for label, tree_env, sock, _server in servers:   # the servers interleaved message by message
                tell, check_ = times[label]
                pair = [("tell", tell), ("check", check_)]
                for kind, into in pair if i % 2 == 0 else pair[::-1]:
                    argv = ["spamc", "-U", sock] + (["-L", "spam"] if kind == "tell" else ["-c"])
                    into.append(check(run(argv, stdin=message, env=tree_env), f"spamc ({kind})",
                                      ok=(0, 1) if kind == "check" else (0,)))
        rows = []
        for label, tree_env, sock, _server in servers:
            tell, check_ = times[label]
            rows.append(row(f"one `spamc -L spam < msg` (TELL) via `spamnb serve --allow-tell`{label}", tell, check_,
                            "one `spamc -c < msg` (CHECK)", faster_is="time",
                            rss_a=lambda sock=sock, e=tree_env: time_rss(["spamc", "-U", sock, "-L", "spam"], sample[0], e),
                            rss_b=lambda sock=sock, e=tree_env: time_rss(["spamc", "-U", sock, "-c"], sample[0], e)))
        return rows
    finally:
        for *_, server in servers:
            server.terminate()
            server.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", action="append", required=True, metavar="DIR", help="corpus folder (repeatable)")
    parser.add_argument("--train-runs", type=int, default=3, metavar="N", help="runs of each training (default 3)")
    parser.add_argument("--batch-runs", type=int, default=5, metavar="N", help="runs of each batch (default 5)")
    parser.add_argument("--runs", type=int, default=15, metavar="N",
                        help="runs of each one-message command, a message each (default 15)")
    parser.add_argument("--serve", action="store_true", help="also spamc TELL against CHECK through spamnb serve")
    parser.add_argument("--baseline", metavar="PYTHONPATH", default=None,
                        help="also spamnb train of the spamnb on this PYTHONPATH (a checkout of main, say), "
                             "interleaved with the others; with --serve: also a server running it, on its own "
                             "copy of the model, interleaved with the first message by message")
    parser.add_argument("--train-only", action="store_true", help="the training rows only")
    parser.add_argument("--train-jobs", type=int, default=0, metavar="N",
                        help="give the default train rows (this tree's and --baseline's) -j N: the workers' path "
                             "the default takes on idle cores, measured on a busy machine (default: no -j)")
    parser.add_argument("--train-j1", action="store_true",
                        help="also time `spamnb train -j 1` in the same rounds (rows against the default and bogofilter)")
    parser.add_argument("--json", metavar="PATH", help="also write each pair's runs ([wall, CPU] seconds of A and "
                        "of B, by corpus) to PATH (scripts/bench/bench_readme.py reads it)")
    parser.add_argument("--spamnb", default=f"{shlex.quote(sys.executable)} -m spamnb", metavar="COMMAND",
                        help="the spamnb command (default: this Python's -m spamnb)")
    args = parser.parse_args()
    if shutil.which("bogofilter") is None:
        raise SystemExit("bogofilter is not installed")
    spamnb = shlex.split(args.spamnb)
    # spamnb's modules compiled once, as an installed package has them: with no
    # bytecode cache (PYTHONDONTWRITEBYTECODE set, a fresh checkout) every spamnb
    # process compiles its modules again (~30 ms of a 50 ms classify)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    where = subprocess.run([*spamnb[:-2], "-c", "import os, spamnb; print(os.path.dirname(spamnb.__file__))"],
                           capture_output=True, text=True) if spamnb[-2:] == ["-m", "spamnb"] else None
    if where is not None and where.returncode == 0:
        subprocess.run([*spamnb[:-2], "-m", "compileall", "-q", where.stdout.strip()], check=True)

    def say(text):
        print(text, flush=True)

    version = subprocess.run(["bogofilter", "-V"], capture_output=True, text=True).stdout.splitlines()[0]
    say(f"spamnb: `{args.spamnb}`; {version}; {os.cpu_count()} cores, load average "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    say("Ratios: speed = the peer's median wall time / spamnb's (above 1: spamnb faster); time ratio = "
        "spamnb's median / the other command's (how many of the other one costs). Peak RSS: ru_maxrss "
        f"from os.wait4; it cannot go below this script's own high-water mark ({floor_kib() / 1024:.0f} MiB now) (Linux keeps the "
        "forking parent's high-water mark across exec): a figure at that floor is remeasured by one more "
        "untimed run under /usr/bin/time -f %M (marked †).")
    record = {}
    for corpus in args.corpus:
        record[corpus] = bench_corpus(corpus, args, spamnb, say)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"corpora": record, "load_end": os.getloadavg()}, f, indent=1)
    say(f"\nload average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
