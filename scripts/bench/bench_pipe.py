#!/usr/bin/env python3
"""One message, a fresh process: the pipe's commands against bogofilter and the interpreter.

What procmail, maildrop, a sieve ``pipe`` or a shell script run for each
message, timed as whole processes, interleaved in one run (each round runs
every command once, in the same order, on the next sample message):

- ``spamnb classify -m MODEL < MSG`` against ``bogofilter -C -d DB -T < MSG``;
- ``spamnb classify -p -m MODEL < MSG`` against ``bogofilter -C -d DB -p -e < MSG``
  (the message out with its header: what a delivery filter runs);
- ``spamnb learn --spam -q -m MODEL < FILE`` against ``bogofilter -C -d DB -s < MSG``,
  three times: row ``learn --spam``, a user's first learn after ``spamnb
  train`` (the journal ``train`` left beside the model, one without records,
  put back beside its copy before each run, untimed: the learn appends its
  record and fsyncs the file; a spamnb whose ``train`` leaves no journal
  starts one); row ``learn --spam, appending`` (another copy's journal put
  back, untimed, as it was after one message was learned: the learn appends
  its record and fsyncs the file, as a user's second and later learns do);
  and row ``learn --spam, journal deleted`` (the journal removed before each
  run: the learn starts one, a new file written, renamed into place, it and
  its folder fsynced, as after a careless admin removed it); FILE is MSG
  with a last line of its own, written before each run (the model was
  trained on the corpus, and its ledger makes a learn of a message it knows
  a no-op); and the median of the per-round ratios of each learn to the
  ``classify`` of the same round (wall and CPU);
- with ``--scale N``: a model of the SpamAssassin corpus (``--scale-corpus``)
  whose vocabulary is N times as large (the trained model, plus messages of
  random words learned as ham until its vocabulary has grown so far, as
  ``bench_learn_scale.py`` grows one; saved whole), its ``classify`` and
  ``learn --spam`` in the same rounds, and the median of the per-round
  ratios of its learn to the corpus model's (does a learn cost the model's
  vocabulary?);
- with ``--journal N``: ``spamnb classify -m MODEL < MSG`` of a copy of the
  model into whose journal N messages of the corpus were learned first
  (one ``spamnb learn`` process each, untimed; the journal's size is in the
  row's name): what a classify costs once mail has been learned and not yet
  compacted;
- with ``--compare PROGRAM`` (repeatable): ``PROGRAM classify -m MODEL <
  MSG`` and ``PROGRAM learn --spam`` (a first learn after its own whole
  save: on a copy of its own that ``PROGRAM prune --expire-at 0`` saved
  whole once, untimed, the journal that left beside it, or none, put back
  before each run) in the same rounds, e.g. pip's console script written beside the launcher,
  or another venv's ``spamnb`` (the tree before a change), and the median
  of the per-round ratios of this venv's ``classify`` and ``learn`` to its; with
  ``--journal N`` its classify of a copy into which it learned the same N
  messages itself (a journal in its own format: one of another version
  is not applied);
- ``python -c pass`` of the same interpreter (the ``spamnb`` script's own
  ``#!``), and the interpreter's ceilings ``python -S -c pass`` (no ``site``)
  and ``python -I -c pass`` (isolated).

For each corpus (``--corpus DIR``, repeatable; default the two shared
corpora beside the repository) the models are trained once, in ``--work``:
``spamnb train DIR -m MODEL`` and bogofilter's bulk training (``-s -b`` on
the spam files, ``-n -b`` on the ham, the rules of ``spamnb train DIR``
deciding which is which: ``scripts/bench/bench_commands.py``).  ``--model FILE``
adds a model classified alone (no bogofilter peer): the 10x model, against
the corpora's in the same rounds.

Wall and CPU time (user + system) are medians of ``--runs`` rounds
(``os.wait4`` of the process); peak memory is ``/usr/bin/time -f %M`` of
one more run of each (untimed).  The ratios are medians of the per-round
ratios to ``python -c pass`` of that round (wall, and CPU: on a loaded
machine the CPU ratio is the steadier).  Run it from outside the repository, e.g.::

    cd /tmp && python /path/to/spamnb/scripts/bench/bench_pipe.py --runs 21

``--json PATH`` also writes every command's runs, peaks and the floors
(scripts/bench/bench_readme.py reads them).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))   # harness.py

from harness import check, labelled_files, random_message, run, time_rss  # noqa: E402

COMPILED_FLOOR = "python -S -c 'import spamnb.mail._mail, spamnb.bayes._score'"   # site-packages on sys.path
CORPORA = [REPO.parent / "shared" / "corpora" / "spamassassin", REPO.parent / "shared" / "corpora" / "enron-spam"]


def spamnb_command():
    """The ``spamnb`` script beside this interpreter (as a user types it), and that interpreter."""
    script = Path(sys.executable).parent / "spamnb"
    if not script.exists():
        raise SystemExit(f"{script}: no spamnb script beside {sys.executable} (pip install the package)")
    return str(script)


def train(corpus, work, spamnb):
    """(spamnb model, bogofilter database folder) of ``corpus``, trained once in ``work``."""
    name = corpus.name
    model = work / f"{name}.spamnb"
    bogo = work / f"{name}.bogofilter"
    if not model.exists():
        check(run([spamnb, "train", str(corpus), "-m", str(model), "-q"]), f"spamnb train {corpus}")
    if not bogo.exists():
        bogo.mkdir()
        files = labelled_files(corpus)
        for label, flag in (("spam", "-s"), ("ham", "-n")):
            listing = work / f"{name}.{label}.list"
            listing.write_text("".join(f"{path}\n" for path, is_spam in files if is_spam == (label == "spam")))
            check(run(["bogofilter", "-C", "-d", str(bogo), flag, "-b"], stdin=str(listing)), "bogofilter training")
    return model, bogo


def sample_messages(corpus, n=5):
    """``n`` messages of the corpus near its median size, spam and ham."""
    files = labelled_files(corpus)
    files.sort(key=lambda item: os.path.getsize(item[0]))
    middle = len(files) // 2
    return [path for path, _ in files[middle - n // 2:middle - n // 2 + n]]


def learned(corpus, model, work, spamnb, n, tag=""):
    """A copy of ``model`` with ``n`` messages of ``corpus`` learned into its
    journal (``spamnb learn --spam|--ham -q`` of each, a process each, spam
    and ham in turn), and the journal's size in bytes.  Each message gets a
    last line of its own ("bench learn N"): the model was trained on the
    corpus, and its ledger makes a learn of a message it knows a no-op.
    ``tag``: in the copy's name (a copy of its own for each ``--compare``)."""
    copy = work / f"{corpus.name}.journal-{n}{tag}.spamnb"
    journal = Path(str(copy) + ".journal")
    if not copy.exists() or not journal.exists():
        shutil.copyfile(model, copy)
        journal.unlink(missing_ok=True)
        files = labelled_files(corpus)
        spam = [path for path, is_spam in files if is_spam][-n:]
        ham = [path for path, is_spam in files if not is_spam][-n:]
        order = [item for pair in zip(spam, ham) for item in pair][:n]
        spam_set = set(spam)
        message = work / "learned.eml"
        for i, path in enumerate(order):
            label = "--spam" if path in spam_set else "--ham"
            message.write_bytes(Path(path).read_bytes().rstrip(b"\n") + f"\n\nbench learn {i}\n".encode())
            check(run([spamnb, "learn", label, "-q", "-m", str(copy)], stdin=str(message)), f"spamnb learn {label}")
    return copy, journal.stat().st_size if journal.exists() else 0


def scaled(model, work, factor, seed=0):
    """A copy of ``model`` whose vocabulary is ``factor`` times as large: the
    same model, plus messages of random words learned as ham (their tokens
    never occur in mail) until its vocabulary has grown so far; saved whole."""
    import random

    from spamnb.model.spam_filter import SpamFilter

    path = work / f"{model.stem}.x{factor}.spamnb"
    if not path.exists():
        sf = SpamFilter.load(model)
        target = factor * sf.vocabulary_.n_features
        rng = random.Random(seed)
        while sf.vocabulary_.n_features < target:
            sf.learn(random_message(rng), False)
        sf.save(path)
    return path


def learn_row(name, model, work, spamnb, append=None, journal_as="train"):
    """``(argv, prepare)`` of ``spamnb learn --spam -q -m COPY < FILE``: COPY a
    copy of ``model`` whose journal ``prepare(MSG)`` puts back as each run
    starts it, FILE the message it writes (MSG with a last line of its own)
    and returns.  The journal, ``journal_as``: "train", the one beside
    ``model`` as ``spamnb train`` left it (without records; none from a
    spamnb whose train leaves none: the learn starts one), a user's first
    learn after train; "saved", the one ``spamnb prune --expire-at 0`` (a
    whole save by that ``spamnb``, once, untimed) left beside the copy: the
    same for another program; "deleted", none (the learn starts one: a new
    file written, renamed into place, it and its folder fsynced); or with
    ``append`` (a message's path) the journal of that message learned
    before, as ham, with a last line of its own (the learn appends its
    record and fsyncs the file: a user's second and later learns)."""
    tag = "-append" if append else "" if journal_as == "train" else f"-{journal_as}"
    learn_model = work / f"{name}.learn{tag}.spamnb"
    journal = Path(str(learn_model) + ".journal")
    fresh = work / f"{name}.learn{tag}.eml"
    base = work / f"{name}.learn{tag}.base-journal"
    if not learn_model.exists():
        shutil.copyfile(model, learn_model)
        journal.unlink(missing_ok=True)
        base.unlink(missing_ok=True)
        if append:   # one message learned first, its journal kept for every run
            fresh.write_bytes(Path(append).read_bytes().rstrip(b"\n") + b"\n\nbench learn base\n")
            check(run([spamnb, "learn", "--ham", "-q", "-m", str(learn_model)], stdin=str(fresh)), "spamnb learn")
            shutil.copyfile(journal, base)
        elif journal_as == "train" and Path(str(model) + ".journal").exists():
            shutil.copyfile(str(model) + ".journal", base)
        elif journal_as == "saved":
            check(run([spamnb, "prune", "--expire-at", "0", "-q", "-m", str(learn_model)]), "spamnb prune")
            if journal.exists():
                shutil.copyfile(journal, base)

    def reset(message):
        if base.exists():
            shutil.copyfile(base, journal)
        else:
            journal.unlink(missing_ok=True)
        reset.n += 1
        fresh.write_bytes(Path(message).read_bytes().rstrip(b"\n") + f"\n\nbench learn run {reset.n}\n".encode())
        return str(fresh)

    reset.n = 0
    return [spamnb, "learn", "--spam", "-q", "-m", str(learn_model)], reset


LEARN_FIRST, LEARN_APPEND, LEARN_DELETED = "learn --spam", "learn --spam, appending", "learn --spam, journal deleted"


def commands(name, model, bogo, work, spamnb, python, base_message):
    """{row: {column: (argv, prepare or None)}} of one model's rows (a prepare returns the row's stdin, or None);
    ``base_message``: the message the appending learn's journal holds."""
    learn_bogo = work / f"{name}.learn.bogofilter"
    if bogo is not None and not learn_bogo.exists():
        shutil.copytree(bogo, learn_bogo)
    rows = {"classify": {"spamnb": ([spamnb, "classify", "-m", str(model)], None)},
            "classify -p": {"spamnb": ([spamnb, "classify", "-p", "-m", str(model)], None)}}
    rows[LEARN_FIRST] = {"spamnb": learn_row(name, model, work, spamnb)}
    rows[LEARN_APPEND] = {"spamnb": learn_row(name, model, work, spamnb, base_message)}
    rows[LEARN_DELETED] = {"spamnb": learn_row(name, model, work, spamnb, journal_as="deleted")}
    if bogo is not None:
        rows["classify"]["bogofilter"] = (["bogofilter", "-C", "-d", str(bogo), "-T"], None)
        rows["classify -p"]["bogofilter"] = (["bogofilter", "-C", "-d", str(bogo), "-p", "-e"], None)
        rows[LEARN_FIRST]["bogofilter"] = (["bogofilter", "-C", "-d", str(learn_bogo), "-s"], None)
        rows[LEARN_APPEND]["bogofilter"] = rows[LEARN_FIRST]["bogofilter"]   # its database: always appended to
        rows[LEARN_DELETED]["bogofilter"] = rows[LEARN_FIRST]["bogofilter"]
    else:
        del rows["classify -p"]
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", action="append", type=Path, help="a corpus folder (repeatable)")
    parser.add_argument("--model", action="append", type=Path, default=[],
                        help="a model classified alone, against the same rounds (e.g. a 10x model)")
    parser.add_argument("--runs", type=int, default=21, help="rounds (default 21)")
    parser.add_argument("--compare", action="append", default=[], metavar="PROGRAM",
                        help="also time PROGRAM classify -m MODEL in the same rounds (repeatable)")
    parser.add_argument("--journal", type=int, default=0, metavar="N",
                        help="also classify with a copy of each corpus's model that learned N messages into its "
                             "journal (default 0: no such row)")
    parser.add_argument("--scale", type=int, default=0, metavar="N",
                        help="also classify and learn with a copy of the --scale-corpus model whose vocabulary is N "
                             "times as large (default 0: no such rows)")
    parser.add_argument("--scale-corpus", default="spamassassin", metavar="NAME",
                        help="the corpus (folder name) whose model --scale grows (default spamassassin)")
    parser.add_argument("--work", type=Path, help="where the models are trained (default: a new temporary folder)")
    parser.add_argument("--json", type=Path, help="also write every command's runs ([wall, CPU] seconds), peak "
                        "MiB and the floors to this file (scripts/bench/bench_readme.py reads it)")
    args = parser.parse_args()
    if shutil.which("bogofilter") is None:
        raise SystemExit("bogofilter is not installed")
    spamnb, python = spamnb_command(), sys.executable
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-pipe-"))
    work.mkdir(parents=True, exist_ok=True)
    corpora = args.corpus or CORPORA
    messages = []
    tables = {}   # label -> rows
    for corpus in corpora:
        model, bogo = train(corpus, work, spamnb)
        mine = sample_messages(corpus)
        messages += mine
        label = f"{corpus.name} ({os.path.getsize(model) / 2**20:.1f} MiB model)"
        tables[label] = commands(corpus.name, model, bogo, work, spamnb, python, mine[0])
        for k, program in enumerate(args.compare):
            tables[label][f"classify by {program}"] = {"spamnb": ([program, "classify", "-m", str(model)], None)}
            tables[label][f"learn --spam by {program}"] = {"spamnb": learn_row(f"{corpus.name}.compare{k}", model,
                                                                               work, program, journal_as="saved")}
        if args.scale and corpus.name == args.scale_corpus:
            big = scaled(model, work, args.scale)
            scale_label = f"{corpus.name} x{args.scale} ({os.path.getsize(big) / 2**20:.1f} MiB model)"
            scale_pair = (label, scale_label)
        if args.journal:
            copy, size = learned(corpus, model, work, spamnb, args.journal)
            tables[label][f"classify, after {args.journal} learns (journal {size / 1024:.0f} KiB)"] = {
                "spamnb": ([spamnb, "classify", "-m", str(copy)], None)}
            for k, program in enumerate(args.compare):
                own, own_size = learned(corpus, model, work, program, args.journal, f".compare{k}")
                tables[label][f"classify, after {args.journal} learns (journal {own_size / 1024:.0f} KiB), "
                              f"by {program}"] = {"spamnb": ([program, "classify", "-m", str(own)], None)}
    if args.scale:
        if "scale_pair" not in locals():
            raise SystemExit(f"--scale: no corpus named {args.scale_corpus} given")
        tables[scale_pair[1]] = commands(f"{args.scale_corpus}.x{args.scale}", big, None, work, spamnb, python,
                                         messages[0])
    for model in args.model:
        tables[f"{model.name} ({os.path.getsize(model) / 2**20:.1f} MiB model)"] = {
            "classify": {"spamnb": ([spamnb, "classify", "-m", str(model)], None)}}
    floors = {"python -c pass": [python, "-c", "pass"], "python -S -c pass": [python, "-S", "-c", "pass"],
              "python -I -c pass": [python, "-I", "-c", "pass"]}
    # the floor of any classify: the interpreter as the launcher starts it (no site) and the two compiled
    # modules a message cannot be tokenized and scored without, nothing else of spamnb
    where = subprocess.run([python, "-c", "import os, spamnb; print(os.path.dirname(os.path.dirname(spamnb.__file__)))"],
                           capture_output=True, text=True, check=True).stdout.strip()
    # (array loaded as spamnb.cli.main loads it: without the collections package its init would import)
    floors[COMPILED_FLOOR] = [python, "-S", "-c", "import sys, _collections_abc; m = sys.modules; "
                              "m['collections'] = type(sys)('collections'); m['collections.abc'] = _collections_abc; "
                              "import array; del m['collections'], m['collections.abc']; "
                              f"sys.path.append({where!r}); import spamnb.mail._mail, spamnb.bayes._score"]
    every = [(label, row, column, argv, prepare) for label, rows in tables.items() for row, columns in rows.items()
             for column, (argv, prepare) in columns.items()]
    for _label, _row, _column, argv, prepare in every:   # a warm-up of each (page cache, .pyc)
        stdin = (prepare(messages[0]) if prepare else None) or messages[0]
        check(run(argv, stdin=stdin), " ".join(argv[:3]), ok=(0, 1, 2))
    times = {key: [] for key in [*floors, *((label, row, column) for label, row, column, _, _ in every)]}
    ratios = {(label, row, column): [] for label, row, column, _, _ in every}
    cpu_ratios = {(label, row, column): [] for label, row, column, _, _ in every}
    for i in range(args.runs):
        message = messages[i % len(messages)]
        base = run(floors["python -c pass"], stdin=message)
        times["python -c pass"].append(base)
        for name in list(floors)[1:]:
            times[name].append(run(floors[name], stdin=message))
        for label, row, column, argv, prepare in every:
            stdin = (prepare(message) if prepare else None) or message
            result = check(run(argv, stdin=stdin), " ".join(argv[:3]), ok=(0, 1, 2))
            times[label, row, column].append(result)
            ratios[label, row, column].append(result.wall / base.wall)
            cpu_ratios[label, row, column].append(result.cpu / base.cpu if base.cpu else float("nan"))
    peaks = {}
    for label, row, column, argv, prepare in every:
        stdin = (prepare(messages[0]) if prepare else None) or messages[0]
        peaks[label, row, column] = time_rss(argv, stdin=stdin) / 1024
    for name, argv in floors.items():
        peaks[name] = time_rss(argv, stdin=messages[0]) / 1024

    def ms(runs):
        return statistics.median(r.wall for r in runs) * 1000

    def cpu_ms(runs):
        return statistics.median(r.cpu for r in runs) * 1000

    print(f"{args.runs} rounds, {len(messages)} messages in turn; load average at the end "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for name in floors:
        over = statistics.median(a.wall / b.wall for a, b in zip(times[name], times["python -c pass"]))
        print(f"{name}: {ms(times[name]):.1f} ms (CPU {statistics.median(r.cpu for r in times[name]) * 1000:.1f} ms)"
              f", {peaks[name]:.1f} MiB, {over:.2f}x `python -c pass`")
    print()
    print("| one message, a fresh process | spamnb: wall (CPU), peak | x `python -c pass`: wall (CPU) "
          "| bogofilter: wall (CPU), peak |")
    print("|---|---|---|---|")
    for label, rows in tables.items():
        for row, columns in rows.items():
            cells = []
            key = (label, row, "spamnb")
            cells.append(f"{ms(times[key]):.1f} ms ({cpu_ms(times[key]):.1f} ms), {peaks[key]:.1f} MiB")
            cells.append(f"{statistics.median(ratios[key]):.2f}x ({statistics.median(cpu_ratios[key]):.2f}x)")
            key = (label, row, "bogofilter")
            cells.append(f"{ms(times[key]):.1f} ms ({cpu_ms(times[key]):.1f} ms), {peaks[key]:.1f} MiB"
                         if key in times else "")
            print(f"| `{row}`, {label} | " + " | ".join(cells) + " |")
    def per_round(ours, theirs):
        return (statistics.median(a.wall / b.wall for a, b in zip(ours, theirs)),
                statistics.median(a.cpu / b.cpu for a, b in zip(ours, theirs) if b.cpu))

    for label, rows in tables.items():   # a cold learn against a cold classify of the same model, round by round
        for by in [""] + [f" by {program}" for program in args.compare]:
            if "learn --spam" + by in rows:
                wall, cpu = per_round(times[label, "learn --spam" + by, "spamnb"],
                                      times[label, "classify" + by, "spamnb"])
                print(f"`learn --spam` (the first after train) over `classify`{by}, {label}, median of the "
                      f"per-round ratios: wall {wall:.3f}, CPU {cpu:.3f}")
        for row, what in ((LEARN_APPEND, "appending to its journal"), (LEARN_DELETED, "its journal deleted")):
            if row in rows:
                wall, cpu = per_round(times[label, row, "spamnb"], times[label, "classify", "spamnb"])
                print(f"`learn --spam` {what} over `classify`, {label}, median of the per-round "
                      f"ratios: wall {wall:.3f}, CPU {cpu:.3f}")
        for program in args.compare:
            if "learn --spam by " + program in rows:
                wall, cpu = per_round(times[label, "learn --spam", "spamnb"],
                                      times[label, "learn --spam by " + program, "spamnb"])
                print(f"`learn --spam`, {label}: this venv's over {program}'s, median of the per-round ratios: "
                      f"wall {wall:.3f}, CPU {cpu:.3f}")
    if args.scale:   # the learn and classify of the model N times as large against the corpus model's
        small, large = scale_pair
        for row in (LEARN_FIRST, LEARN_APPEND, LEARN_DELETED, "classify"):
            wall, cpu = per_round(times[large, row, "spamnb"], times[small, row, "spamnb"])
            print(f"`{row}`, {large} over {small}, median of the per-round ratios: wall {wall:.3f}, CPU {cpu:.3f}")
    for label, rows in tables.items():   # each --compare program against this venv's classify, round by round
        for program in args.compare:
            if f"classify by {program}" not in rows:
                continue
            ours, theirs = times[label, "classify", "spamnb"], times[label, f"classify by {program}", "spamnb"]
            print(f"`classify`, {label}: this venv's over {program}'s, median of the per-round ratios: wall "
                  f"{statistics.median(a.wall / b.wall for a, b in zip(ours, theirs)):.3f}, CPU "
                  f"{statistics.median(a.cpu / b.cpu for a, b in zip(ours, theirs) if b.cpu):.3f}")
    if args.json:
        record = {"floors": {name: {"runs": [[r.wall, r.cpu] for r in times[name]], "peak_mib": peaks[name]}
                             for name in floors},
                  "rows": [{"corpus": label.split(" (")[0], "model": label, "row": row, "command": column,
                            "runs": [[r.wall, r.cpu] for r in times[label, row, column]],
                            "peak_mib": peaks[label, row, column]}
                           for label, rows in tables.items() for row, columns in rows.items() for column in columns],
                  "rounds": args.runs, "load_end": os.getloadavg()}
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
