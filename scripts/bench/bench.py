#!/usr/bin/env python3
"""Side-by-side benchmark: spamnb, scikit-learn, bogofilter and spamprobe.

One command, one run, on one corpus with the project's fixed split (a
message is TEST when md5(relpath) % 5 == 0); the SpamAssassin public corpus
by default, Enron-Spam with ``--corpus``:

    python scripts/bench/bench.py            # full corpus, writes docs/notes/benchmarks-spamassassin.{md,json}
    python scripts/bench/bench.py --corpus ../shared/corpora/enron-spam   # writes docs/notes/benchmarks-enron-spam.{md,json}
    python scripts/bench/bench.py --quick    # every 6th message, for a smoke test

Every system trains on the train part and scores the test part in a child
process of its own, started from a small wrapper, so wall time and peak
memory (the wrapper's ``RUSAGE_CHILDREN`` maxrss) are measured alike for C
programs and Python.  Python systems also report their own in-process times
(fit; the scoring loop), which exclude the interpreter start and imports.

- spamnb: ``SpamFilter().fit(paths, labels)``, then ``SpamFilter.load`` and
  one ``score(path)`` call per test message (it reads the file) in the timed loop.
- sklearn: what a Python user writes by hand: stdlib ``email`` for the text
  parts (and the subject), ``CountVectorizer`` + ``MultinomialNB`` (defaults),
  one ``predict_log_proba`` call per test message.
- bogofilter: ``-s``/``-n`` registration in bulk mode (``-b``, names on
  stdin), scoring with ``-b -TT`` (16-digit scores, timed) and a second,
  untimed ``-b -T`` pass for its own spam/unsure/ham verdicts; fresh database
  directory, ``-C`` (no config files, compiled-in defaults).
- spamprobe: ``spam``/``good`` over the files (``-M``: one message a file),
  then ``score`` over the test files; fresh database directory.

Verdicts: unsure is not a false positive (FPR counts ham called spam only)
and counts as missed for spam (FNR counts spam called ham or unsure); see
``spamnb.bayes.metrics``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pickle
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(REPO, "..", "shared", "corpora", "spamassassin")
SYSTEMS = ("spamnb", "sklearn", "bogofilter", "spamprobe")
if REPO not in sys.path:  # the source tree, with its in-place extensions
    sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "scripts"))   # harness.py: the corpus, the split, the metrics
from harness import CORPUS_NAMES, evaluate, is_test, list_corpus, machine  # noqa: E402,F401

# Runs argv[3:] with stdin from argv[1] ("-": none) and stdout to argv[2];
# prints wall seconds and the peak RSS of the child (KiB) as JSON.
_MEASURE = r"""
import json, resource, subprocess, sys, time
stdin = subprocess.DEVNULL if sys.argv[1] == "-" else open(sys.argv[1], "rb")
with open(sys.argv[2], "wb") as out:
    t0 = time.perf_counter()
    rc = subprocess.call(sys.argv[3:], stdin=stdin, stdout=out)
    seconds = time.perf_counter() - t0
print(json.dumps({"rc": rc, "seconds": seconds,
                  "maxrss_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""


# ------------------------------------------------------------------ corpus
def write_list(path, rows):
    with open(path, "w") as f:
        for relpath, abspath, is_spam in rows:
            f.write(f"{int(is_spam)}\t{relpath}\t{abspath}\n")


def read_list(path):
    rows = []
    with open(path) as f:
        for line in f:
            label, relpath, abspath = line.rstrip("\n").split("\t")
            rows.append((relpath, abspath, label == "1"))
    return rows


# ------------------------------------------------------------------ steps run in child processes
def mail_text(data):
    """Subject and decoded text parts of a raw message (stdlib email, compat32)."""
    import email

    msg = email.message_from_bytes(data)
    parts = []
    try:
        parts.append(str(msg.get("Subject", "")))
    except Exception:
        pass
    for part in msg.walk():
        if part.get_content_maintype() != "text":
            continue
        payload = part.get_payload(decode=True)
        if payload is None:
            continue
        charset = part.get_content_charset() or "latin-1"
        try:
            parts.append(payload.decode(charset, errors="replace"))
        except LookupError:  # unknown charset name
            parts.append(payload.decode("latin-1"))
    return "\n".join(parts)


def step_spamnb_train(work):
    from spamnb import SpamFilter

    rows = read_list(os.path.join(work, "train.tsv"))
    paths = [Path(r[1]) for r in rows]  # a str would be message text
    labels = [r[2] for r in rows]
    # untimed: what `spamnb train` chooses on this train part (the word pairs
    # or none, and the cutoffs: cross-validation inside the training mail,
    # spamnb.training.pipeline.train), so the verdicts below are the ones a user of
    # `spamnb train` gets; the train part as two folders of links
    from spamnb.estimator import calibrate
    from spamnb.estimator import calibrate
    from spamnb.training import pipeline
    from spamnb.training.corpus import CorpusReport

    links = tempfile.mkdtemp(prefix="spamnb-train-", dir=work)
    folders = {True: os.path.join(links, "spam"), False: os.path.join(links, "ham")}
    for folder in folders.values():
        os.mkdir(folder)
    for k, (path, is_spam) in enumerate(zip(paths, labels)):
        os.symlink(os.path.abspath(path), os.path.join(folders[is_spam], f"{k:06d}"))
    chosen, calibration = pipeline.train(spam=[folders[True]], ham=[folders[False]], n_jobs=1,
                                         report=CorpusReport(), calibration={"target_fpr": calibrate.DEFAULT_TARGET_FPR},
                                         word_pairs=calibrate.AUTO_PAIRS)
    tokenizer = chosen.tokenizer_
    del chosen
    shutil.rmtree(links)
    t0 = time.perf_counter()
    spam_filter = SpamFilter(tokenizer=tokenizer).fit(paths, labels, tune=False)  # reads the files itself
    fit_seconds = time.perf_counter() - t0
    calibrate.apply(spam_filter, calibration)
    t0 = time.perf_counter()
    spam_filter.save(os.path.join(work, "spamnb.model"))
    save_seconds = time.perf_counter() - t0
    params = {k: getattr(spam_filter, k) for k in ("alpha", "prior", "counts", "spam_cutoff", "ham_cutoff")}
    return {"seconds": fit_seconds, "save_seconds": save_seconds, "params": params,
            "n_features": spam_filter.vocabulary_.n_features, "word_pairs": calibration.word_pairs,
            "calibration": calibrate.describe(calibration)}


def step_spamnb_score(work):
    from spamnb import SpamFilter

    rows = [(relpath, Path(path), is_spam) for relpath, path, is_spam in read_list(os.path.join(work, "test.tsv"))]
    t0 = time.perf_counter()
    spam_filter = SpamFilter.load(os.path.join(work, "spamnb.model"))
    load_seconds = time.perf_counter() - t0
    log_odds, probability = [], []
    score = spam_filter.score
    t0 = time.perf_counter()
    for _relpath, path, _is_spam in rows:
        s = score(path)  # a path: SpamFilter reads the file (as bogofilter's bulk mode does)
        log_odds.append(s.log_odds)
        probability.append(s.probability)
    seconds = time.perf_counter() - t0
    # untimed: the verdicts by the filter's own rule (spamnb.estimator.verdict: cutoffs and evidence)
    verdicts = [spam_filter.classify(path).label for _relpath, path, _is_spam in rows]
    return {"seconds": seconds, "load_seconds": load_seconds, "scores": log_odds, "verdicts": verdicts,
            "score_kind": "log-odds"}


def step_sklearn_train(work):
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.naive_bayes import MultinomialNB

    rows = read_list(os.path.join(work, "train.tsv"))
    t0 = time.perf_counter()
    texts = []
    for _relpath, path, _is_spam in rows:
        with open(path, "rb") as f:
            texts.append(mail_text(f.read()))
    vectorizer = CountVectorizer()
    X = vectorizer.fit_transform(texts)
    model = MultinomialNB().fit(X, [r[2] for r in rows])
    seconds = time.perf_counter() - t0
    with open(os.path.join(work, "sklearn.pickle"), "wb") as f:
        pickle.dump((vectorizer, model), f, protocol=pickle.HIGHEST_PROTOCOL)
    return {"seconds": seconds, "n_features": len(vectorizer.vocabulary_)}


def step_sklearn_score(work):
    rows = read_list(os.path.join(work, "test.tsv"))
    t0 = time.perf_counter()
    with open(os.path.join(work, "sklearn.pickle"), "rb") as f:
        vectorizer, model = pickle.load(f)
    load_seconds = time.perf_counter() - t0
    spam_column = list(model.classes_).index(True)
    scores, verdicts = [], []
    t0 = time.perf_counter()
    for _relpath, path, _is_spam in rows:
        with open(path, "rb") as f:
            text = mail_text(f.read())
        log_proba = model.predict_log_proba(vectorizer.transform([text]))[0]
        log_odds = float(log_proba[spam_column] - log_proba[1 - spam_column])
        scores.append(log_odds)
        verdicts.append("spam" if log_odds > 0 else "ham")  # predict(): the more probable class
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "load_seconds": load_seconds, "scores": scores, "verdicts": verdicts,
            "score_kind": "log-odds"}


STEPS = {
    "spamnb-train": step_spamnb_train, "spamnb-score": step_spamnb_score,
    "sklearn-train": step_sklearn_train, "sklearn-score": step_sklearn_score,
}

SKLEARN_COLD = r"""
import email, pickle, sys
sys.path.insert(0, sys.argv[2])
from bench import mail_text
with open(sys.argv[1], "rb") as f:
    vectorizer, model = pickle.load(f)
lp = model.predict_log_proba(vectorizer.transform([mail_text(sys.stdin.buffer.read())]))[0]
print("spam" if lp[list(model.classes_).index(True)] > lp[list(model.classes_).index(False)] else "ham")
"""


# ------------------------------------------------------------------ the parent: measuring
def python_env():
    """The environment of the Python systems' processes.  Bytecode caching is on
    (PYTHONDONTWRITEBYTECODE removed), as for a package installed by pip, which
    compiles its .pyc files; a machine that sets PYTHONDONTWRITEBYTECODE would
    otherwise recompile every module of spamnb and scikit-learn on every start."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = REPO + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def measure(argv, work, name, stdin_path=None, env=None):
    """Run argv under the wrapper: (wall seconds, peak RSS in MiB, stdout bytes, rc)."""
    out_path = os.path.join(work, f"{name}.out")
    proc = subprocess.run([sys.executable, "-c", _MEASURE, stdin_path or "-", out_path, *argv],
                          capture_output=True, env=env, cwd=REPO)
    if proc.returncode != 0:
        raise RuntimeError(f"{name}: wrapper failed: {proc.stderr.decode(errors='replace')[-2000:]}")
    report = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    with open(out_path, "rb") as f:
        stdout = f.read()
    if proc.stderr:
        sys.stderr.write(proc.stderr.decode(errors="replace")[-2000:])
    return report["seconds"], report["maxrss_kib"] / 1024.0, stdout, report["rc"]


def run_python_step(step, work):
    argv = [sys.executable, os.path.abspath(__file__), "--step", step, "--workdir", work]
    seconds, rss, stdout, rc = measure(argv, work, step, env=python_env())
    if rc != 0:
        raise RuntimeError(f"{step} exited with {rc}")
    with open(os.path.join(work, f"{step}.json")) as f:
        result = json.load(f)
    result["process_seconds"] = seconds
    result["peak_rss_mib"] = rss
    return result


def run_python_system(name, work, train, test):
    tr = run_python_step(f"{name}-train", work)
    sc = run_python_step(f"{name}-score", work)
    return {
        "train_seconds": tr["seconds"], "train_process_seconds": tr["process_seconds"],
        "train_peak_rss_mib": tr["peak_rss_mib"],
        "score_seconds": sc["seconds"], "score_process_seconds": sc["process_seconds"],
        "score_peak_rss_mib": sc["peak_rss_mib"], "load_seconds": sc.get("load_seconds"),
        "scores": sc["scores"], "verdicts": sc["verdicts"], "score_kind": sc["score_kind"],
        "extra": {k: v for k, v in tr.items() if k not in ("seconds", "process_seconds", "peak_rss_mib")},
    }


def ensure_tool(name):
    """Install bogofilter/spamprobe with apt-get when absent; returns a note or None."""
    if shutil.which(name):
        return None
    apt = shutil.which("apt-get")
    if apt is None:
        return f"{name} not installed and no apt-get"
    subprocess.run([apt, "update", "-qq"], capture_output=True)  # once, only when a tool is missing
    proc = subprocess.run([apt, "install", "-y", "-qq", name], capture_output=True)
    if proc.returncode != 0 or not shutil.which(name):
        return f"{name} could not be installed: {proc.stderr.decode(errors='replace').strip()[-300:]}"
    return None


def tool_version(argv):
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=10)
    except OSError:
        return None
    text = (proc.stdout + proc.stderr).decode(errors="replace").strip().splitlines()
    return text[0] if text else None


def repeated(run, n):
    """Run a system ``n`` times (fresh database / model each time): the fastest
    train and score times, the largest peak memory, all times kept; the
    scores and verdicts of the last run (they are the same every run)."""
    runs = [run() for _ in range(max(1, n))]
    result = runs[-1]
    for key in ("train_seconds", "score_seconds", "train_process_seconds", "score_process_seconds"):
        if key in result:
            result[f"{key}_all"] = [r[key] for r in runs]
            result[key] = min(r[key] for r in runs)
    for key in ("train_peak_rss_mib", "score_peak_rss_mib"):
        result[key] = max(r[key] for r in runs)
    for r in runs[:-1]:
        if r.get("db"):
            shutil.rmtree(r["db"], ignore_errors=True)
        if r["scores"] != result["scores"]:
            result.setdefault("extra", {})["note"] = "scores differed between repeated runs"
    return result


def run_bogofilter(work, train, test):
    db = tempfile.mkdtemp(prefix="bogofilter-", dir=work)
    base = ["bogofilter", "-C", "-d", db]
    spam_list = os.path.join(work, "bogo-spam.txt")
    ham_list = os.path.join(work, "bogo-ham.txt")
    test_list = os.path.join(work, "bogo-test.txt")
    for path, rows in ((spam_list, [r for r in train if r[2]]), (ham_list, [r for r in train if not r[2]]),
                       (test_list, test)):
        with open(path, "w") as f:
            f.writelines(r[1] + "\n" for r in rows)
    s1, m1, _, rc1 = measure(base + ["-s", "-b"], work, "bogofilter-train-spam", spam_list)
    s2, m2, _, rc2 = measure(base + ["-n", "-b"], work, "bogofilter-train-ham", ham_list)
    if rc1 or rc2:
        raise RuntimeError(f"bogofilter registration failed ({rc1}, {rc2})")
    s3, m3, out, _rc = measure(base + ["-b", "-TT"], work, "bogofilter-score", test_list)  # rc: last verdict
    scores = {}
    for line in out.decode(errors="replace").splitlines():
        path, _, value = line.rpartition(" ")
        scores[path] = float(value)
    # untimed second pass for bogofilter's own verdicts (S/H/U)
    _s, _m, out_t, _rc = measure(base + ["-b", "-T"], work, "bogofilter-verdicts", test_list)
    verdict_of = {"S": "spam", "H": "ham", "U": "unsure"}
    verdicts = {}
    for line in out_t.decode(errors="replace").splitlines():
        path, letter, _value = line.rsplit(" ", 2)
        verdicts[path] = verdict_of[letter]
    missing = [r[1] for r in test if r[1] not in scores or r[1] not in verdicts]
    if missing:
        raise RuntimeError(f"bogofilter gave no score for {len(missing)} messages, e.g. {missing[0]}")
    config = subprocess.run(base + ["-Q"], capture_output=True).stdout.decode(errors="replace")
    cutoffs = {k.strip(): v.split("#")[0].strip() for k, _, v in
               (line.partition("=") for line in config.splitlines()) if k.strip() in ("spam_cutoff", "ham_cutoff")}
    return {
        "train_seconds": s1 + s2, "train_peak_rss_mib": max(m1, m2),
        "score_seconds": s3, "score_peak_rss_mib": m3,
        "scores": [scores[r[1]] for r in test], "verdicts": [verdicts[r[1]] for r in test],
        "score_kind": "bogosity (-TT)", "db": db,
        "extra": {"version": tool_version(["bogofilter", "-V"]), "cutoffs": cutoffs,
                  "database_bytes": dir_size(db)},
    }


def run_spamprobe(work, train, test):
    db = tempfile.mkdtemp(prefix="spamprobe-", dir=work)
    base = ["spamprobe", "-c", "-d", db, "-M"]
    s1, m1, _, rc1 = measure(base + ["spam"] + [r[1] for r in train if r[2]], work, "spamprobe-train-spam")
    s2, m2, _, rc2 = measure(base + ["good"] + [r[1] for r in train if not r[2]], work, "spamprobe-train-ham")
    if rc1 or rc2:
        raise RuntimeError(f"spamprobe training failed ({rc1}, {rc2})")
    s3, m3, out, rc3 = measure(base + ["score"] + [r[1] for r in test], work, "spamprobe-score")
    lines = [line.split() for line in out.decode(errors="replace").splitlines() if line.strip()]
    if rc3 or len(lines) != len(test):
        raise RuntimeError(f"spamprobe score printed {len(lines)} lines for {len(test)} messages (rc {rc3})")
    return {
        "train_seconds": s1 + s2, "train_peak_rss_mib": max(m1, m2),
        "score_seconds": s3, "score_peak_rss_mib": m3,
        "scores": [float(parts[1]) for parts in lines],
        "verdicts": ["spam" if parts[0] == "SPAM" else "ham" for parts in lines],
        "score_kind": "spamprobe score", "db": db,
        "extra": {"version": tool_version(["spamprobe", "-V"]), "database_bytes": dir_size(db)},
    }


def dir_size(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def cold_start(argv, stdin_path, runs, env=None):
    """Median wall seconds of ``runs`` fresh processes classifying one message."""
    times = []
    rc = None
    for _ in range(runs):
        with open(stdin_path, "rb") if stdin_path else open(os.devnull, "rb") as stdin:
            t0 = time.perf_counter()
            proc = subprocess.run(argv, stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  env=env, cwd=REPO)
            times.append(time.perf_counter() - t0)
        rc = proc.returncode
        if proc.stderr.strip():
            raise RuntimeError(f"cold start {argv[:3]}: {proc.stderr.decode(errors='replace')[-500:]}")
    return {"median_seconds": statistics.median(times), "min_seconds": min(times), "runs": runs, "rc": rc}


def clean_venv_cold_start(work, model, message, runs):
    """Cold start in a fresh virtual environment (no system site-packages, spamnb
    installed by ``pip install REPO``): its ``python -c pass`` against its
    ``spamnb classify -m MODEL < message``.  The machine's own python3 may run
    start-up hooks from its site-packages (.pth files: an editable install's
    finder, a certificate hook) that add to both; a clean environment has none."""
    venv = os.path.join(work, "venv")
    subprocess.run([sys.executable, "-m", "venv", venv], check=True, capture_output=True)
    python = os.path.join(venv, "bin", "python")
    proc = subprocess.run([python, "-m", "pip", "install", "--quiet", REPO], capture_output=True)
    if proc.returncode != 0:
        raise RuntimeError(f"pip install in a fresh venv failed: {proc.stderr.decode(errors='replace')[-300:]}")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}
    spamnb = os.path.join(venv, "bin", "spamnb")
    cold_start([spamnb, "classify", "-m", model], message, 3, env)   # first runs write nothing; warm the page cache
    return {"python": cold_start([python, "-c", "pass"], None, runs, env),
            "spamnb": cold_start([spamnb, "classify", "-m", model], message, runs, env)}


def run_cross_validation(corpus, work, word_pairs=0):
    """``spamnb evaluate CORPUS --folds 10 --compare`` (``--word-pairs W`` when
    the train part's choice kept them): its text output and JSON summary."""
    json_path = os.path.join(work, "cv.json")
    pairs = ["--word-pairs", str(word_pairs)] if word_pairs else []
    argv = [sys.executable, "-m", "spamnb", "evaluate", corpus, "--folds", "10", "--compare", *pairs,
            "--json", json_path, "--no-progress"]
    proc = subprocess.run(argv, capture_output=True, env=python_env(), cwd=REPO)
    if proc.returncode != 0:
        return {"error": proc.stderr.decode(errors="replace")[-500:], "command": "spamnb evaluate"}
    with open(json_path) as f:
        data = json.load(f)
    return {
        "command": " ".join(["python -m spamnb evaluate", corpus, "--folds 10 --compare", *pairs]),
        "text": "".join(line for line in proc.stdout.decode(errors="replace").splitlines(keepends=True)
                        if not line.startswith("wrote ")),
        "mean": data["mean"], "std": data["std"], "confusion": data["confusion"], "params": data["params"],
        "compare": [{"name": r["name"], "mean": r["mean"], "std": r["std"]} for r in data.get("compare", [])],
    }


# ------------------------------------------------------------------ report
def fmt(value, spec):
    if value is None or value != value:
        return "n/a"
    return format(value, spec)


def write_report(report, md_path, json_path):
    with open(json_path, "w") as f:
        json.dump(report, f, indent=1, sort_keys=True)
        f.write("\n")
    m = report["machine"]
    n_train, n_test = report["n_train"], report["n_test"]
    lines = [
        "# Benchmarks: spamnb next to scikit-learn, bogofilter and spamprobe",
        "",
        f"Measured {report['date']} with `{report['command']}` (raw figures: `{os.path.basename(json_path)}`).",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores (shared with other jobs), Python {m['python']}, {m['platform']}.",
        "",
        f"Data: {report.get('corpus_name', 'SpamAssassin public corpus')}, fixed split (test when md5(relpath) % 5 == 0): "
        f"train {n_train} messages ({report['n_train_spam']} spam), test {n_test} ({report['n_test_spam']} spam)"
        + (" — QUICK run: every 6th message only." if report["quick"] else "."),
        "",
        "| system | train s | train msg/s | score s | score msg/s | 1-AUC % | FPR % | FNR % | unsure % "
        "| caught @0.1% FPR | caught @1% FPR | peak MiB train / score | cold start ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    cold = report["cold_start"]
    for name in SYSTEMS:
        r = report["systems"].get(name)
        if r is None:
            continue
        if "error" in r:
            lines.append(f"| {name} | {r['error']} |" + " |" * 11)
            continue
        e = r["metrics"]
        c = cold.get(name, {})
        lines.append(
            f"| {name} | {fmt(r['train_seconds'], '.2f')} | {fmt(n_train / r['train_seconds'], ',.0f')} "
            f"| {fmt(r['score_seconds'], '.2f')} | {fmt(n_test / r['score_seconds'], ',.0f')} "
            f"| {fmt(e['one_minus_auc_percent'], '.3f')} | {fmt(100 * e['fpr'], '.2f')} | {fmt(100 * e['fnr'], '.2f')} "
            f"| {fmt(100 * e['unsure'], '.2f')} | {fmt(100 * e['tpr_at_fpr_0.001'], '.1f')} % "
            f"| {fmt(100 * e['tpr_at_fpr_0.01'], '.1f')} % "
            f"| {fmt(r['train_peak_rss_mib'], '.0f')} / {fmt(r['score_peak_rss_mib'], '.0f')} "
            f"| {fmt(1000 * c['median_seconds'], '.0f') if 'median_seconds' in c else 'n/a'} |")
    ours, peer = report["systems"].get("spamnb", {}), report["systems"].get("bogofilter", {})
    if "train_seconds" in ours and "train_seconds" in peer:
        lines += ["", f"spamnb against bogofilter: training {peer['train_seconds'] / ours['train_seconds']:.2f}x "
                      f"its speed, scoring {peer['score_seconds'] / ours['score_seconds']:.2f}x "
                      "(the project's target is 3x for both)."]
        if "train_process_seconds" in ours:
            lines += ["", f"Whole processes (fastest run; interpreter start and imports included): spamnb training "
                          f"{ours['train_process_seconds']:.2f} s (`fit`, then `save`), scoring "
                          f"{ours['score_process_seconds']:.2f} s (`load`, then the scoring loop): "
                          f"{peer['train_seconds'] / ours['train_process_seconds']:.2f}x and "
                          f"{peer['score_seconds'] / ours['score_process_seconds']:.2f}x bogofilter's."]
    if "python" in cold:
        lines += ["", f"Cold start baseline: `python3 -c pass` takes {1000 * cold['python']['median_seconds']:.0f} ms "
                      f"(median of {cold['python']['runs']} runs)."]
        if "spamnb" in cold:
            lines[-1] += (f"  spamnb's cold start is {cold['spamnb']['median_seconds'] / cold['python']['median_seconds']:.2f}x "
                          "that (the target is at most 1.5x).")
    venv_cold = cold.get("clean_venv")
    if venv_cold:
        py, ours = venv_cold["python"]["median_seconds"], venv_cold["spamnb"]["median_seconds"]
        lines += ["", f"In a fresh virtual environment (no system site-packages; `pip install` of this repo): "
                      f"`python -c pass` {1000 * py:.0f} ms, `spamnb classify -m MODEL < message` {1000 * ours:.0f} ms "
                      f"({ours / py:.2f}x; medians of {venv_cold['python']['runs']} runs).  The machine's python3 "
                      "above also runs the start-up hooks of its site-packages (.pth files), which add the same "
                      "time to both of its figures."]
    lines += [
        "",
        "## How each figure is measured",
        "",
        f"- **train s / score s**: wall time, the fastest of {report['repeat']} runs (each from scratch: fresh "
        "database or model; all times in the JSON, `*_seconds_all`; after the first run the corpus files are in the "
        "page cache).  bogofilter and spamprobe: the whole program run(s) (spam and ham "
        "registration summed).  spamnb and scikit-learn: measured inside their process, after imports — "
        "spamnb: `SpamFilter().fit(paths, labels)` (it reads the files); scikit-learn: reading, `email` "
        "text extraction, `CountVectorizer.fit_transform`, `MultinomialNB.fit`.  Scoring: one call per test "
        "message (spamnb `SpamFilter.score(path)`, which reads the file; scikit-learn: reading the file and "
        "`predict_log_proba` on one row) inside the timed loop, after loading the model.  The whole process times "
        "(with interpreter start, imports, model load) are in the JSON (`*_process_seconds`).",
        "- **1-AUC %**: 100 (1 - area under the ROC curve) of the systems' scores (spamnb and scikit-learn: "
        "log-odds; bogofilter: `-TT` bogosity, 16 digits; spamprobe: its 7-digit score); ties count 1/2.",
        "- **FPR / FNR / unsure**: each system's own verdicts: spamnb at the cutoffs `spamnb train` chooses "
        "(cross-validation inside the train part for a 0.1 % false-positive rate, spamnb.estimator.calibrate) by its "
        "verdict rule (spamnb.estimator.verdict), the others at their default cutoffs.  FPR = ham called "
        "spam / ham (an unsure ham is not a false positive); FNR = spam called ham or unsure / spam (an unsure "
        "spam is missed).  unsure = share of all test messages.  Only spamnb "
        "and bogofilter (spam_cutoff 0.99, ham_cutoff 0.45) have an unsure band; scikit-learn calls spam "
        "when P(spam) > 0.5 and spamprobe when its score >= its threshold.",
        "- **caught @x FPR**: the largest share of test spam scored at or above a threshold that lets at most "
        "x of the test ham through (a group of tied scores is taken whole).  With "
        f"{report['n_test'] - report['n_test_spam']} test ham, 0.1 % FPR allows "
        f"{int((report['n_test'] - report['n_test_spam']) * 0.001)} false positive(s).",
        "- **peak MiB**: maximum (over the runs) resident set size of the training / scoring process (children's `ru_maxrss` "
        "seen by a wrapper process); for the Python systems that includes the interpreter and numpy/scipy "
        "(and scikit-learn).",
        "- **cold start**: median wall time (bytecode cached, as after `pip install`) of a fresh process classifying one test message "
        f"({cold.get('runs', 'n/a')} runs): spamnb `python -m spamnb classify -m MODEL < msg`, bogofilter "
        "`bogofilter -C -d DB -T < msg`, spamprobe `spamprobe -d DB -M score msg`, scikit-learn "
        "`python -c` that unpickles the pipeline and predicts.",
    ]
    cv = report.get("cross_validation")
    if cv:
        lines += ["", "## Cross-validation of spamnb and baselines", ""]
        if "error" in cv:
            lines.append(f"`spamnb evaluate` failed: {cv['error']}")
        else:
            lines += [f"Stratified 10-fold cross-validation over the whole corpus (every message is tested once, by "
                      f"a filter that did not see it), with `{cv['command']}`; the same run, its output verbatim:",
                      "", "```", cv["text"].rstrip(), "```"]
    notes = report.get("notes") or []
    if notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in notes]
    extras = []
    for name in SYSTEMS:
        r = report["systems"].get(name)
        if r and "extra" in r:
            extras.append(f"- {name}: " + ", ".join(f"{k} = {v}" for k, v in sorted(r["extra"].items())))
    if extras:
        lines += ["", "## Versions and settings", ""] + extras
    with open(md_path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="every 6th message only")
    parser.add_argument("--corpus", default=CORPUS)
    parser.add_argument("--only", default=",".join(SYSTEMS), help="comma-separated systems to run")
    parser.add_argument("--cold-runs", type=int, default=20)
    parser.add_argument("--no-venv", action="store_true",
                        help="skip the cold start in a fresh virtual environment (it pip-installs this repo there)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="train and score each system this many times; report the fastest (default 3)")
    parser.add_argument("--md", help="default docs/notes/benchmarks-NAME.md, NAME the corpus folder's name "
                        "(docs/benchmarks.md is written by hand: where each published figure comes from)")
    parser.add_argument("--json", help="default docs/notes/benchmarks-NAME.json")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--no-cv", action="store_true",
                        help="skip the 10-fold cross-validation section (`spamnb evaluate --folds 10 --compare`)")
    parser.add_argument("--step", choices=sorted(STEPS), help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.step:  # a child process: run one step, write its result
        result = STEPS[args.step](args.workdir)
        with open(os.path.join(args.workdir, f"{args.step}.json"), "w") as f:
            json.dump(result, f)
        return 0

    corpus_name = os.path.basename(os.path.normpath(args.corpus))
    suffix = f"-{corpus_name}"
    args.md = args.md or os.path.join(REPO, "docs", "notes", f"benchmarks{suffix}.md")
    args.json = args.json or os.path.join(REPO, "docs", "notes", f"benchmarks{suffix}.json")
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(only) - set(SYSTEMS)
    if unknown:
        parser.error(f"unknown systems {sorted(unknown)}")
    rows = list_corpus(args.corpus, quick=args.quick)
    train = [r for r in rows if not is_test(r[0])]
    test = [r for r in rows if is_test(r[0])]
    work = tempfile.mkdtemp(prefix="spamnb-bench-")
    write_list(os.path.join(work, "train.tsv"), train)
    write_list(os.path.join(work, "test.tsv"), test)
    command = "python scripts/bench/bench.py" + (" " + " ".join(argv if argv is not None else sys.argv[1:])).rstrip()
    report = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": command.strip(), "machine": machine(), "quick": args.quick, "repeat": args.repeat,
        "corpus_name": CORPUS_NAMES.get(corpus_name, corpus_name), "n_train": len(train), "n_test": len(test),
        "n_train_spam": sum(r[2] for r in train), "n_test_spam": sum(r[2] for r in test),
        "systems": {}, "cold_start": {}, "notes": [],
    }
    print(f"train {len(train)}, test {len(test)}; work dir {work}", file=sys.stderr)
    one_message = test[0][1]
    cold_argv = {}
    for name in only:
        print(f"[{name}] training and scoring ...", file=sys.stderr)
        try:
            if name in ("bogofilter", "spamprobe"):
                note = ensure_tool(name)
                if note:
                    report["notes"].append(f"{name} skipped: {note}")
                    continue
                runner = run_bogofilter if name == "bogofilter" else run_spamprobe
                result = repeated(lambda: runner(work, train, test), args.repeat)
                db = result.pop("db")
                cold_argv[name] = ((["bogofilter", "-C", "-d", db, "-T"], one_message) if name == "bogofilter"
                                   else (["spamprobe", "-d", db, "-M", "score", one_message], None), None)
            else:
                if name == "sklearn":
                    try:
                        import sklearn  # noqa: F401
                    except ImportError:
                        report["notes"].append("sklearn skipped: scikit-learn is not installed")
                        continue
                result = repeated(lambda: run_python_system(name, work, train, test), args.repeat)
                if name == "spamnb":
                    cold_argv[name] = ([sys.executable, "-m", "spamnb", "classify", "-m",
                                        os.path.join(work, "spamnb.model")], one_message), python_env()
                else:
                    cold_argv[name] = ([sys.executable, "-c", SKLEARN_COLD, os.path.join(work, "sklearn.pickle"),
                                        os.path.dirname(os.path.abspath(__file__))], one_message), python_env()
        except Exception as exc:  # one system failing must not lose the others' figures
            report["systems"][name] = {"error": f"failed: {str(exc).splitlines()[0][:200]}"}
            report["notes"].append(f"{name} failed: {exc}")
            print(f"[{name}] FAILED: {exc}", file=sys.stderr)
            continue
        result["metrics"] = evaluate(test, result)
        scores = result.pop("scores")
        verdicts = result.pop("verdicts")
        result["n_unsure"] = sum(v == "unsure" for v in verdicts)
        result["score_range"] = [min(scores), max(scores)]
        report["systems"][name] = result
        e = result["metrics"]
        print(f"[{name}] train {result['train_seconds']:.2f}s, score {result['score_seconds']:.2f}s, "
              f"1-AUC {e['one_minus_auc_percent']:.3f}%, FPR {e['fpr']:.4f}, FNR {e['fnr']:.4f}", file=sys.stderr)
    if args.cold_runs > 0:
        print("cold starts ...", file=sys.stderr)
        report["cold_start"]["runs"] = args.cold_runs
        report["cold_start"]["python"] = cold_start([sys.executable, "-c", "pass"], None, args.cold_runs)
        for name, ((argv_, stdin_path), env) in cold_argv.items():
            try:
                report["cold_start"][name] = cold_start(argv_, stdin_path, args.cold_runs, env)
            except Exception as exc:
                report["notes"].append(f"{name} cold start failed: {exc}")
        if "spamnb" in cold_argv and not args.no_venv:
            print("cold start in a fresh virtual environment ...", file=sys.stderr)
            try:
                report["cold_start"]["clean_venv"] = clean_venv_cold_start(
                    work, os.path.join(work, "spamnb.model"), one_message, args.cold_runs)
            except Exception as exc:
                report["notes"].append(f"clean-venv cold start failed: {exc}")
    if "spamnb" in only and not args.no_cv and not args.quick:
        print("10-fold cross-validation (spamnb evaluate) ...", file=sys.stderr)
        chosen = (report["systems"].get("spamnb", {}).get("extra", {}).get("word_pairs") or [0])[0]
        report["cross_validation"] = run_cross_validation(args.corpus, work, chosen)
    os.makedirs(os.path.dirname(os.path.abspath(args.md)), exist_ok=True)
    write_report(report, args.md, args.json)
    print(f"wrote {args.md} and {args.json}", file=sys.stderr)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
