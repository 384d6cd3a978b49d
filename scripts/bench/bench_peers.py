#!/usr/bin/env python3
"""Accuracy of SpamAssassin and rspamd on the project's fixed split.

The peers of the README's headline table that are whole filters, not Bayes
programs: each runs its default rules minus every network test, plus a Bayes
trained on the same train part as spamnb, bogofilter and spamprobe
(scripts/bench/bench.py), and scores the same test part:

    python scripts/bench/bench_peers.py --corpus ../shared/corpora/spamassassin --jobs 2
    python scripts/bench/bench_peers.py --corpus ../shared/corpora/enron-spam --peer rspamd

- SpamAssassin: ``sa-learn -L --spam`` / ``--ham`` of the train part into a
  fresh Bayes database (``--dbpath`` in the work directory), then ``spamd -L``
  on 127.0.0.1 (``--jobs`` children) and one ``spamc -R`` per test message
  (``--jobs`` at a time).  Ranking value: SpamAssassin's score; verdict: spam
  when the score reaches its default ``required_score`` 5.0 (no unsure band).
- rspamd: a private ``redis-server`` on 127.0.0.1 as the Bayes backend (the
  Debian package's default backend), ``rspamd`` with the packaged rules and
  workers on 127.0.0.1, ``rspamc learn_spam`` / ``learn_ham`` of the train
  part, then ``rspamc symbols`` per test message.  Ranking value: rspamd's
  score; verdict: its action (reject, rewrite subject, add header: spam;
  greylist, soft reject: unsure; no action: ham).

No network: SpamAssassin runs with ``-L`` (local tests only) and a site
config that also says ``dns_available no``, ``skip_rbl_checks 1``, no Razor
or Pyzor; rspamd's resolver points at a closed loopback port and the modules
whose work is network lookups are disabled (see ``RSPAMD_OFF``); the
modules left on do not reach the network either (their lookups fail).  Every
server's state (Bayes database, redis dir, rspamd's config, db, run and log
dirs) lives in a temporary directory, and every server is stopped when the
script ends, also on an error or Ctrl-C.

The split and labels are scripts/bench/bench.py's (``harness.list_corpus``, ``harness.is_test``),
the figures spamnb.bayes.metrics' (through ``harness.evaluate``): 1-AUC %,
false positives % (ham called spam), spam missed % (unsure counts as
missed), spam caught at 0.1 % false positives.  Results go to
docs/notes/benchmarks-peers-NAME.{md,json} (NAME: the corpus folder's name).

``--latency N``: with each peer's server still up after its scoring, N test
messages are checked one process at a time, the peer's client (``spamc -c``
to spamd, ``rspamc check`` to rspamd) and ``spamc -c`` to ``spamnb serve``
(defaults, the site model trained by ``spamnb train`` on the same train
part) in a shuffled order per message: wall time of each process, p50 and
p99, and the median of the same message's time ratio (docs/serve.md).

Enron-Spam has no headers but a first "Subject:" line, often followed by
the body without a blank line: rspamd then reads most of a message as
header and too few words for its Bayes, and SpamAssassin's missing-header
rules add 5.2 points to every message.  ``--blank-line`` (a diagnostic,
not the protocol of the README's table) gives the peers each such message
with a blank line after its Subject line.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import datetime
import glob
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SCRIPTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(SCRIPTS)
for _folder in (REPO, SCRIPTS):   # this checkout's spamnb; harness.py
    if _folder not in sys.path:
        sys.path.insert(0, _folder)

import harness  # noqa: E402  (the split, labels and metrics of the README's other columns: scripts/bench/bench.py's)
from harness import (SA_NO_NETWORK, SA_SITE_CONFIG, Servers, free_port, spamassassin_site, start_spamd,  # noqa: E402,F401
                     tail, wait_until)

PEERS = ("spamassassin", "rspamd")
RSPAMD_CONFIG = "/etc/rspamd/rspamd.conf"  # the packaged rules and defaults
SA_REQUIRED_SCORE = 5.0
# rspamd modules off: each one's work is network lookups (DNS lists and URL
# lists, SPF, DKIM/ARC/DMARC keys and policies, ASN, the rspamd.com fuzzy
# storage, HELO/hostname/MX resolution), or it acts on their results
# (whitelist: SPF/DKIM/DMARC), or it signs outgoing mail.  Still on, with
# the resolver pointed nowhere: phishing and once_received (local checks
# that also look names up), mid, mime_types and multimap (their maps are
# downloaded from maps.rspamd.com, so those maps stay empty).
RSPAMD_OFF = ("rbl", "spf", "dkim", "dkim_signing", "arc", "dmarc", "asn", "fuzzy_check", "whitelist", "hfilter")
RSPAMD_SPAM_ACTIONS = {"reject", "rewrite subject", "add header"}
RSPAMD_UNSURE_ACTIONS = {"greylist", "soft reject"}


def run(argv, **kwargs):
    """Run a command; raise with its command line and stderr when it fails."""
    proc = subprocess.run(argv, capture_output=True, **kwargs)
    if proc.returncode != 0:
        raise RuntimeError(f"`{' '.join(argv[:6])} ...` exited with {proc.returncode}: "
                           f"{proc.stderr.decode(errors='replace')[-1500:]}")
    return proc


def first_line(argv):
    try:
        out = subprocess.run(argv, capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = (out.stdout + out.stderr).decode(errors="replace").strip().splitlines()
    return lines[0].strip() if lines else None


def parallel(fn, items, jobs):
    """[fn(item)] in order, ``jobs`` at a time (threads running child processes)."""
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=jobs)
    try:
        return list(pool.map(fn, items))
    finally:  # on an error or Ctrl-C: start no more messages
        pool.shutdown(wait=True, cancel_futures=True)


# ------------------------------------------------------------------ SpamAssassin
def run_spamassassin(work, train, test, jobs, servers):
    base = os.path.join(work, "spamassassin")
    site, bayes_dir, home = (os.path.join(base, d) for d in ("site", "bayes", "home"))
    for d in (bayes_dir, home):
        os.makedirs(d)
    bayes_path = os.path.join(bayes_dir, "bayes")
    settings = [
        "use_bayes 1",
        "bayes_auto_learn 0        # the test part must not train it",
        "bayes_auto_expire 0       # keep every token learned from the train part",
        f"bayes_path {bayes_path}",
        "bayes_file_mode 0666",
        *SA_NO_NETWORK,
    ]
    spamassassin_site(site, settings)
    common = ["-L", f"--siteconfigpath={site}"]
    env = dict(os.environ, HOME=home)

    # training: sa-learn, spam then ham, one process each (the database is single-writer), then --sync
    learned = {}
    t0 = time.perf_counter()
    for label, flag, rows in (("spam", "--spam", [r for r in train if r[2]]),
                              ("ham", "--ham", [r for r in train if not r[2]])):
        list_path = os.path.join(base, f"train-{label}.txt")
        with open(list_path, "w") as f:
            f.writelines(r[1] + "\n" for r in rows)
        print(f"  sa-learn {flag}: {len(rows)} messages ...", file=sys.stderr)
        proc = run(["sa-learn", *common, f"--dbpath={bayes_path}", "--no-sync", flag, "-f", list_path], env=env)
        learned[label] = proc.stdout.decode(errors="replace").strip().splitlines()[-1:]
    run(["sa-learn", *common, f"--dbpath={bayes_path}", "--sync"], env=env)
    train_seconds = time.perf_counter() - t0
    magic = run(["sa-learn", *common, f"--dbpath={bayes_path}", "--dump", "magic"], env=env).stdout.decode()
    bayes = {}
    for line in magic.splitlines():
        parts = line.split()
        if len(parts) == 7 and parts[4:6] == ["non-token", "data:"] and parts[6] in ("nspam", "nham", "ntokens"):
            bayes[parts[6]] = int(parts[2])   # "0.000  0  248  0  non-token data: nspam"
    print(f"  Bayes database: {bayes}", file=sys.stderr)
    if bayes.get("nspam", 0) < 200 or bayes.get("nham", 0) < 200:
        raise RuntimeError(f"sa-learn learned too little for SpamAssassin to use its Bayes: {bayes}")

    # scoring: spamd on loopback, one spamc -R per test message, `jobs` at a time
    client, ready = start_spamd(base, site, home, jobs, servers, env)
    spamc = client + ["-x", "-t", "600"]
    print(f"  spamd ready after {ready:.1f} s; scoring {len(test)} messages, {jobs} at a time ...", file=sys.stderr)
    max_size = max(os.path.getsize(r[1]) for r in test) + 1024
    score_argv = spamc + ["-R", "-s", str(max(max_size, 512 * 1024))]

    def score(row):
        for attempt in range(3):
            with open(row[1], "rb") as stdin:
                out = subprocess.run(score_argv, stdin=stdin, capture_output=True)
            text = out.stdout.decode(errors="replace")
            head = text.split("\n", 1)[0].strip()
            if out.returncode in (0, 1) and "/" in head:
                value, required = head.split("/", 1)
                rules = {}  # the report's "pts rule name description" lines
                for line in text.splitlines()[1:]:
                    parts = line.split()
                    if len(parts) >= 2 and parts[1].replace("_", "").isalnum() and parts[1].isupper():
                        try:
                            rules[parts[1]] = float(parts[0])
                        except ValueError:
                            pass
                return float(value), float(required), rules
            time.sleep(1 + attempt)
        raise RuntimeError(f"`{' '.join(score_argv)} < {row[1]}` exited with {out.returncode}: "
                           f"{out.stderr.decode(errors='replace')[-500:]} {text[:200]}")

    t0 = time.perf_counter()
    results = parallel(score, test, jobs)
    score_seconds = time.perf_counter() - t0
    required = sorted({r[1] for r in results})
    if required != [SA_REQUIRED_SCORE]:
        raise RuntimeError(f"spamd reported required scores {required}, expected {SA_REQUIRED_SCORE}")
    scores = [r[0] for r in results]
    bayes_rules = collections.Counter(rule for r in results for rule in r[2] if rule.startswith("BAYES_"))
    return {
        "scores": scores,
        "verdicts": ["spam" if s >= SA_REQUIRED_SCORE else "ham" for s in scores],
        "train_seconds": train_seconds, "score_seconds": score_seconds,
        "client": client + ["-c"],
        "extra": {
            "version": first_line(["spamassassin", "--version"]),
            "rules": "the installed default rules (" + ", ".join(rules_dirs()) + "), site config "
                     + SA_SITE_CONFIG + " (plugins as packaged) + " + "; ".join(s.split("  ")[0] for s in settings
                                                                            if not s.startswith("bayes_path")),
            "network": "spamd -L, sa-learn -L (local tests only); dns_available no; no Razor, Pyzor, DCC",
            "bayes": f"DBM store (default), {bayes}",
            "sa_learn": {label: " ".join(lines) for label, lines in learned.items()},
            "bayes_counts_note": None if (bayes.get("nspam"), bayes.get("nham")) == (
                sum(r[2] for r in train), sum(not r[2] for r in train)) else (
                "nspam/nham differ from the train part's spam/ham: SpamAssassin learns a message once per "
                "Message-ID, generated from To:, Date: and the body when there is none, and a ham learned "
                "under the Message-ID of a spam replaces it (un-learns the spam)"),
            "cutoff": f"score >= required_score {SA_REQUIRED_SCORE} (default): spam; no unsure band",
            "score_resolution": "0.1 (spamc -R prints one decimal; ties count 1/2 in 1-AUC)",
            "bayes_rules_hit": dict(sorted(bayes_rules.items())),
            "test_messages_without_bayes_rule": sum(1 for r in results if not any(k.startswith("BAYES_") for k in r[2])),
            "rules_on_test_ham": top_rules(test, results),
            "spamd": f"127.0.0.1, {jobs} children; spamc -R, {jobs} at a time",
        },
    }


def top_rules(test, results, n=8):
    """The rules (symbols) that add most to the test ham's scores: "NAME
    mean points x messages", the largest sums first."""
    total, count = collections.Counter(), collections.Counter()
    for row, result in zip(test, results):
        if row[2]:
            continue
        for name, value in result[2].items():
            total[name] += value
            count[name] += 1
    return [f"{name} {total[name] / count[name]:+.2f} x {count[name]}" for name, _ in total.most_common(n)]


def rules_dirs():
    """Where SpamAssassin reads its default rules from: an sa-update tree
    under /var/lib/spamassassin when one exists, else /usr/share/spamassassin."""
    updates = sorted(glob.glob("/var/lib/spamassassin/*/updates_spamassassin_org"))
    return updates or ["/usr/share/spamassassin"]


# ------------------------------------------------------------------ rspamd
def run_rspamd(work, train, test, jobs, servers):
    base = os.path.join(work, "rspamd")
    local, dbdir, rundir, logdir, redis_dir = (os.path.join(base, d) for d in ("local", "db", "run", "log", "redis"))
    for d in (os.path.join(local, "local.d"), os.path.join(local, "override.d"), dbdir, rundir, logdir, redis_dir):
        os.makedirs(d)
    redis_port, normal_port, controller_port = free_port(), free_port(), free_port()
    password = secrets.token_hex(12)

    # redis: loopback only, nothing written to disk
    redis_log = os.path.join(base, "redis.log")
    redis = servers.start("redis-server", ["redis-server", "--bind", "127.0.0.1", "--port", str(redis_port),
                                           "--dir", redis_dir, "--save", "", "--appendonly", "no",
                                           "--protected-mode", "yes"], redis_log)
    wait_until(lambda: subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(redis_port), "ping"],
                                      capture_output=True).stdout.strip() == b"PONG", "redis-server", redis, redis_log)

    def write(rel, text):
        with open(os.path.join(local, rel), "w") as f:
            f.write(text)

    write("override.d/worker-normal.inc", f'bind_socket = "127.0.0.1:{normal_port}";\ncount = {jobs};\n')
    write("override.d/worker-controller.inc", f'bind_socket = "127.0.0.1:{controller_port}";\ncount = 1;\n'
                                               f'password = "{password}";\nsecure_ip = "127.0.0.1";\n')
    write("override.d/worker-proxy.inc", "count = 0;\n")
    write("override.d/worker-fuzzy.inc", "count = -1;\n")
    write("override.d/logging.inc", f'type = "file";\nfilename = "{os.path.join(logdir, "rspamd.log")}";\n'
                                     'level = "notice";\n')
    # no network: the resolver asks a closed loopback port; the network modules are off
    write("local.d/options.inc", 'dns {\n  nameserver = ["127.0.0.1:1"];\n  timeout = 0.2s;\n  retransmits = 1;\n}\n')
    for module in RSPAMD_OFF:
        write(f"local.d/{module}.conf", "enabled = false;\n")
    # the Bayes classifier of statistic.conf (backend redis), on our redis; no autolearn
    write("local.d/classifier-bayes.conf", f'backend = "redis";\nservers = "127.0.0.1:{redis_port}";\n'
                                           "autolearn = false;\n")
    variables = [f"--var=LOCAL_CONFDIR={local}", f"--var=DBDIR={dbdir}", f"--var=RUNDIR={rundir}",
                 f"--var=LOGDIR={logdir}"]
    argv = ["rspamd", "-f", "-c", RSPAMD_CONFIG, *variables]
    if os.geteuid() == 0:
        argv.insert(2, "-i")  # run the workers as root (the files are ours, in the work directory)
    log_path = os.path.join(base, "rspamd.out")
    modules = subprocess.run(["rspamadm", *variables, "configdump", "-c", RSPAMD_CONFIG, "-m"],
                             capture_output=True).stdout.decode(errors="replace")
    proc = servers.start("rspamd", argv, log_path)
    controller = ["rspamc", "-h", f"127.0.0.1:{controller_port}", "-P", password, "-t", "120"]
    normal = ["rspamc", "-h", f"127.0.0.1:{normal_port}", "-t", "120"]
    probe = os.path.join(base, "probe.eml")
    with open(probe, "wb") as f:
        f.write(b"From: a@example.org\r\nTo: b@example.org\r\nSubject: probe\r\n\r\nprobe\r\n")
    ready = wait_until(lambda: subprocess.run(normal + ["symbols", probe], capture_output=True).returncode == 0
                       and subprocess.run(controller + ["stat"], capture_output=True).returncode == 0,
                       "rspamd", proc, log_path)
    print(f"  rspamd ready after {ready:.1f} s", file=sys.stderr)

    # training: rspamc learn_spam / learn_ham through the controller, one message at a
    # time in the corpus order (with requests in parallel, which of two copies of a
    # message rspamd learns and which it calls "already learned" changed more from run
    # to run; one at a time, the count still moved by one message between two runs, and
    # the figures with it).  "Learn-Type: bulk": every message is learned (by
    # default rspamd skips one its Bayes already puts 95 % in the class, which would
    # make the model depend on the order of learning)
    learned = {}
    t0 = time.perf_counter()
    for label, command, rows in (("spam", "learn_spam", [r for r in train if r[2]]),
                                 ("ham", "learn_ham", [r for r in train if not r[2]])):
        print(f"  rspamc {command}: {len(rows)} messages ...", file=sys.stderr)
        ok, failed = 0, collections.Counter()
        for k in range(0, len(rows), 500):
            chunk = [r[1] for r in rows[k:k + 500]]
            out = subprocess.run(controller + ["-n", "1", "-j", "--compact", "--header",
                                               "Learn-Type: bulk", command, *chunk], capture_output=True)
            n_ok, fails = parse_learn(out.stdout.decode(errors="replace"))
            if n_ok + sum(fails.values()) != len(chunk):
                raise RuntimeError(f"`rspamc {command}` answered for {n_ok + sum(fails.values())} of {len(chunk)} "
                                   f"messages (rc {out.returncode}): {out.stderr.decode(errors='replace')[-800:]} "
                                   f"{out.stdout.decode(errors='replace')[-800:]}")
            ok += n_ok
            failed.update(fails)
        learned[label] = {"learned": ok, "not learned": dict(failed)}
    train_seconds = time.perf_counter() - t0
    print(f"  learned: {learned}", file=sys.stderr)
    redis_cli = ["redis-cli", "-h", "127.0.0.1", "-p", str(redis_port)]
    backend = {key: subprocess.run(redis_cli + ["hgetall", key], capture_output=True).stdout.decode().split()
               for key in ("RS", "RH")}
    backend["keys"] = subprocess.run(redis_cli + ["dbsize"], capture_output=True).stdout.decode().strip()
    if any(learned[c]["learned"] < 200 for c in learned):
        raise RuntimeError(f"rspamd learned too little to use its Bayes (min_learns 200): {learned}")

    # scoring: one rspamc per test message, `2 jobs` at a time on `jobs` workers
    print(f"  scoring {len(test)} messages ...", file=sys.stderr)

    def score(row):
        for attempt in range(3):
            out = subprocess.run(normal + ["-j", "--compact", "symbols", row[1]], capture_output=True)
            try:
                reply = json.loads(out.stdout.decode(errors="replace").strip().splitlines()[-1])
                if "score" in reply and "action" in reply:
                    symbols = {k: float(v.get("score", 0.0)) for k, v in reply.get("symbols", {}).items()}
                    return float(reply["score"]), reply["action"], symbols
            except (ValueError, IndexError):
                pass
            time.sleep(1 + attempt)
        raise RuntimeError(f"`{' '.join(normal)} -j symbols {row[1]}` exited with {out.returncode}: "
                           f"{out.stderr.decode(errors='replace')[-500:]} {out.stdout.decode(errors='replace')[:300]}")

    t0 = time.perf_counter()
    results = parallel(score, test, 2 * jobs)
    score_seconds = time.perf_counter() - t0
    actions = collections.Counter(r[1] for r in results)
    unknown = set(actions) - RSPAMD_SPAM_ACTIONS - RSPAMD_UNSURE_ACTIONS - {"no action"}
    if unknown:
        raise RuntimeError(f"rspamd answered unknown actions {sorted(unknown)}")
    verdicts = ["spam" if r[1] in RSPAMD_SPAM_ACTIONS else "unsure" if r[1] in RSPAMD_UNSURE_ACTIONS else "ham"
                for r in results]
    dns_log = tail(os.path.join(logdir, "rspamd.log"), 10 ** 9)
    return {
        "scores": [r[0] for r in results], "verdicts": verdicts,
        "train_seconds": train_seconds, "score_seconds": score_seconds,
        "client": ["rspamc", "-h", f"127.0.0.1:{normal_port}", "check"],
        "extra": {
            "version": first_line(["rspamd", "--version"]),
            "rules": f"the installed configuration and rules ({RSPAMD_CONFIG}) with its default actions "
                     "(reject 15, add header 6, greylist 4)",
            "modules_off": ", ".join(RSPAMD_OFF) + " (enabled = false in local.d); without a global redis "
                           "(only the classifier has one): neural, replies, url_redirector, ratelimit, greylist, "
                           "history_redis, reputation off",
            "modules": " ".join(line.strip() for line in modules.splitlines() if line.startswith("Modules ")),
            "network": "dns nameserver 127.0.0.1:1 (nothing listens; every lookup times out after 0.2 s), so "
                       "phishing's and once_received's lookups fail and the maps of mid, mime_types, multimap "
                       "and phishing on https://maps.rspamd.com are never fetched",
            "bayes": "classifier bayes of statistic.conf (osb tokenizer, min_learns 200, min_tokens 11), "
                     "backend redis (redis-server on 127.0.0.1, no persistence), autolearn off; learned with "
                     "rspamc --header 'Learn-Type: bulk', one message at a time",
            "learned": learned, "redis": backend,
            "cutoff": "the action: reject / rewrite subject / add header (score >= 6): spam; greylist "
                      "(score >= 4): unsure; no action: ham",
            "actions": dict(sorted(actions.items())),
            "bayes_symbols_hit": dict(sorted(collections.Counter(s for r in results for s in r[2]
                                                                  if s.startswith("BAYES_")).items())),
            "test_messages_without_bayes_symbol": sum(1 for r in results
                                                      if not any(k.startswith("BAYES_") for k in r[2])),
            "rules_on_test_ham": top_rules(test, results),
            "dns_timeouts_logged": dns_log.count("query timed out"),
            "task_timeouts_logged": dns_log.count("rspamd_task_timeout"),
            "rspamd": f"127.0.0.1, {jobs} normal workers; rspamc, {2 * jobs} at a time",
        },
    }


def parse_learn(text):
    """rspamc -j --compact learn_*: one JSON reply per file, after a
    "Results for file:" line.  (number learned, Counter of the reasons not)."""
    ok, failed = 0, collections.Counter()
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            reply = json.loads(line)
        except ValueError:
            failed["unreadable reply"] += 1
            continue
        if reply.get("success"):
            ok += 1
        else:
            reason = str(reply.get("error", "no success"))
            if "already learned" in reason:  # the same Message-ID learned before (a duplicate in the corpus)
                reason = "already learned"
            elif "less tokens than required" in reason:
                reason = "fewer tokens than min_tokens"
            failed[reason[:80]] += 1
    return ok, failed


# ------------------------------------------------------------------ report
RUNNERS = {"spamassassin": run_spamassassin, "rspamd": run_rspamd}
NAMES = {"spamassassin": "SpamAssassin", "rspamd": "rspamd"}


def readme_cells(e):
    return {
        "ranking error, 1-AUC %": f"{e['one_minus_auc_percent']:.3f}",
        "false positives %": f"{100 * e['fpr']:.2f}",
        "spam missed %": f"{100 * e['fnr']:.2f}",
        "spam caught at 0.1 % false positives": f"{100 * e['tpr_at_fpr_0.001']:.1f} %",
    }


def write_report(report, md_path, json_path):
    with open(json_path, "w") as f:
        json.dump(report, f, indent=1, sort_keys=True)
        f.write("\n")
    lines = [
        "# Benchmarks: SpamAssassin and rspamd, Bayes trained on the fixed split",
        "",
        f"Measured {report['date']} with `{report['command']}`, {report['elapsed_seconds']:.0f} s in all "
        f"(raw figures: `{os.path.basename(json_path)}`).",
        "",
        f"Machine: {report['machine']['cpu']}, {report['machine']['cores']} cores (shared with other jobs).",
        "",
        f"Data: {report['corpus_name']}, fixed split (test when md5(relpath) % 5 == 0): train {report['n_train']} "
        f"messages ({report['n_train_spam']} spam), test {report['n_test']} ({report['n_test_spam']} spam)"
        + (" — QUICK run: every 6th message only." if report["quick"] else "."),
        "",
    ]
    if report.get("blank_line"):
        lines += [f"A diagnostic run, not the fixed protocol (`--blank-line`): {report['blank_line']['train']} train "
                  f"and {report['blank_line']['test']} test messages that start with a Subject: line followed by "
                  "text were given to the peers with a blank line after the Subject line.", ""]
    lines += [
        "The peers ran with their default rules minus the network tests, plus a Bayes trained on the train "
        "part (the same part spamnb, bogofilter and spamprobe train on in scripts/bench/bench.py).",
        "",
        "| peer | 1-AUC % | false positives % | spam missed % | unsure % | caught @0.1% FPR | caught @1% FPR "
        "| train s | score s (msg/s) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in report["peers"].items():
        if "error" in r:
            lines.append(f"| {NAMES[name]} | failed: {r['error'][:300]} |" + " |" * 7)
            continue
        e = r["metrics"]
        lines.append(f"| {NAMES[name]} | {e['one_minus_auc_percent']:.3f} | {100 * e['fpr']:.2f} "
                     f"| {100 * e['fnr']:.2f} | {100 * e['unsure']:.2f} | {100 * e['tpr_at_fpr_0.001']:.1f} % "
                     f"| {100 * e['tpr_at_fpr_0.01']:.1f} % | {r['train_seconds']:.0f} "
                     f"| {r['score_seconds']:.0f} ({report['n_test'] / r['score_seconds']:.1f}) |")
    timed = {name: r["latency"] for name, r in report["peers"].items() if "latency" in r}
    if timed:
        lines += ["", "## One message at a time (`--latency`)", "",
                  "Wall time of one client process per message (the peer's client, and `spamc -c` to "
                  "`spamnb serve` with its defaults and the model `spamnb train` made of the same train part), "
                  "the two in a shuffled order for each message, the peer's server idle otherwise.", "",
                  "| peer | messages | peer p50 / p99 ms | spamnb p50 / p99 ms | peer's time over spamnb's, "
                  "median of the same message's ratios |", "|---|---:|---:|---:|---:|"]
        clients = {"spamassassin": "`spamc -c` to spamd", "rspamd": "`rspamc check` to rspamd"}
        for name, t in timed.items():
            lines.append(f"| {NAMES[name]} ({clients[name]}) | {t['n']} | {t['peer_ms'][0]:.2f} / {t['peer_ms'][1]:.2f} "
                         f"| {t['spamnb_ms'][0]:.2f} / {t['spamnb_ms'][1]:.2f} | {t['peer_over_spamnb']:.2f}x |")
    lines += ["", "## Settings", ""]
    for name, r in report["peers"].items():
        lines.append(f"- {NAMES[name]}:")
        for key, value in sorted(r.get("extra", {}).items()):
            lines.append(f"  - {key}: {value}")
        if "error" in r:
            lines.append(f"  - error: {r['error']}")
    lines += ["", "## How each figure is measured", "",
              "- 1-AUC %: 100 (1 - area under the ROC curve) of the peer's score (ties count 1/2).",
              "- false positives %: ham called spam / ham; spam missed %: spam called ham or unsure / spam; "
              "unsure %: share of all test messages (spamnb.bayes.metrics, as in scripts/bench/bench.py).",
              "- caught @x FPR: the largest share of test spam scored at or above a threshold that lets at most "
              "x of the test ham through (a group of tied scores is taken whole).",
              "- train s: the learning commands, whole processes, wall time; score s: the wall time of scoring "
              "the test part through the server, with the parallelism above (once; not a speed benchmark)."]
    with open(md_path, "w") as f:
        f.write("\n".join(lines) + "\n")


def with_blank_line(rows, folder):
    """Rows whose message starts "Subject: ...\n" followed by a line that is
    not blank point at a copy with a blank line after the Subject line."""
    out, changed = [], 0
    for relpath, path, is_spam in rows:
        with open(path, "rb") as f:
            data = f.read()
        first, sep, rest = data.partition(b"\n")
        if sep and first.lower().startswith(b"subject:") and rest[:1] not in (b"\n", b"\r", b""):
            path = os.path.join(folder, relpath)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(first + b"\n\n" + rest)
            changed += 1
        out.append((relpath, path, is_spam))
    return out, changed


def start_spamnb(work, train, servers):
    """``spamnb train`` on the train part, then ``spamnb serve`` (its defaults)
    on a loopback port; the client argv (``spamc -c``) for one message."""
    folder = os.path.join(work, "spamnb")
    for relpath, path, is_spam in train:
        target = os.path.join(folder, "corpus", "spam" if is_spam else "ham", relpath.replace("/", "_"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.symlink(path, target)
    model = os.path.join(folder, "model.spamnb")
    env = dict(os.environ, SPAMNB_HOME=folder, PYTHONPATH=REPO)
    run([sys.executable, "-m", "spamnb", "train", "-q", "--follow-links", "-m", model,
         os.path.join(folder, "corpus")], env=env)
    port = free_port()
    log_path = os.path.join(folder, "serve.log")
    proc = servers.start("spamnb serve", [sys.executable, "-m", "spamnb", "serve", "-l", f"127.0.0.1:{port}",
                                          "-m", model], log_path, env=env)
    client = ["spamc", "-d", "127.0.0.1", "-p", str(port), "-c"]
    wait_until(lambda: subprocess.run(client + ["-K"], capture_output=True).returncode == 0,
               "spamnb serve", proc, log_path)
    return client


def latency(peer_client, spamnb_client, rows, n, seed=0):
    """Wall time of one client process per message, the two clients in a
    shuffled order for each of ``n`` test messages: {"peer": [s], "spamnb": [s]}."""
    import random

    rng = random.Random(seed)
    step = max(1, len(rows) // n)
    sample = rows[::step][:n]
    times = {"peer": [], "spamnb": []}
    for _, path, _ in sample:
        order = [("peer", peer_client), ("spamnb", spamnb_client)]
        rng.shuffle(order)
        for name, argv in order:
            with open(path, "rb") as stdin:
                t0 = time.perf_counter()
                subprocess.run(argv, stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                times[name].append(time.perf_counter() - t0)
    return times


def latency_summary(times):
    def q(values, p):
        values = sorted(values)
        return 1000.0 * values[min(len(values) - 1, int(p * len(values)))]

    ratios = sorted(a / b for a, b in zip(times["peer"], times["spamnb"]))
    return {"n": len(times["peer"]),
            "peer_ms": [round(q(times["peer"], 0.5), 2), round(q(times["peer"], 0.99), 2)],
            "spamnb_ms": [round(q(times["spamnb"], 0.5), 2), round(q(times["spamnb"], 0.99), 2)],
            "peer_over_spamnb": round(ratios[len(ratios) // 2], 2)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=str(harness.SPAMASSASSIN))
    parser.add_argument("--peer", action="append", choices=PEERS, help="repeatable; default: both")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="spamd children / rspamd workers, and messages scored at a time (default: cores)")
    parser.add_argument("--quick", action="store_true", help="every 6th message only (a smoke test)")
    parser.add_argument("--md", help="default docs/notes/benchmarks-peers-NAME.md, NAME the corpus folder's name "
                        "(-NAME-blank-line.md with --blank-line)")
    parser.add_argument("--json", help="default docs/notes/benchmarks-peers-NAME.json")
    parser.add_argument("--latency", type=int, metavar="N", default=0,
                        help="also time N messages one process at a time: the peer's client against spamc to "
                             "spamnb serve (default 0: not measured)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (servers still stopped)")
    parser.add_argument("--blank-line", action="store_true",
                        help="a diagnostic, not the fixed protocol: give the peers a copy of each message whose "
                             "first line is a Subject: header and whose second line is not blank (Enron-Spam's "
                             "form) with a blank line inserted after the Subject line, so that they read the rest "
                             "as the body")
    args = parser.parse_args(argv)
    peers = args.peer or list(PEERS)
    jobs = max(1, args.jobs)
    corpus_name = os.path.basename(os.path.normpath(args.corpus))
    name = f"benchmarks-peers-{corpus_name}" + ("-blank-line" if args.blank_line else "")
    md_path = args.md or os.path.join(REPO, "docs", "notes", f"{name}.md")
    json_path = args.json or os.path.join(REPO, "docs", "notes", f"{name}.json")

    rows = harness.list_corpus(args.corpus, quick=args.quick)
    train = [r for r in rows if not harness.is_test(r[0])]
    test = [r for r in rows if harness.is_test(r[0])]
    command = "python scripts/bench/bench_peers.py " + " ".join(argv if argv is not None else sys.argv[1:])
    report = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": command.strip(), "machine": harness.machine(), "quick": args.quick, "jobs": jobs,
        "corpus_name": harness.CORPUS_NAMES.get(corpus_name, corpus_name),
        "n_train": len(train), "n_test": len(test),
        "n_train_spam": sum(r[2] for r in train), "n_test_spam": sum(r[2] for r in test), "peers": {},
    }
    work = tempfile.mkdtemp(prefix="spamnb-peers-")
    print(f"train {len(train)}, test {len(test)}; work dir {work}", file=sys.stderr)
    if args.blank_line:
        train, n_train_fixed = with_blank_line(train, os.path.join(work, "blank-line"))
        test, n_test_fixed = with_blank_line(test, os.path.join(work, "blank-line"))
        report["blank_line"] = {"train": n_train_fixed, "test": n_test_fixed}

    def on_signal(signum, _frame):  # SIGTERM/SIGHUP: unwind, so the servers are stopped
        raise KeyboardInterrupt(f"signal {signum}")

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    started = time.perf_counter()
    own = Servers()
    try:
        spamnb_client = start_spamnb(work, train, own) if args.latency else None
        for name in peers:
            print(f"[{name}] training and scoring ...", file=sys.stderr)
            t0 = time.perf_counter()
            try:
                with Servers() as servers:
                    result = RUNNERS[name](work, train, test, jobs, servers)
                    client = result.pop("client")
                    if args.latency:
                        print(f"[{name}] {args.latency} messages one process at a time ...", file=sys.stderr)
                        result["latency"] = latency_summary(latency(client, spamnb_client, test, args.latency))
            except (Exception, KeyboardInterrupt) as exc:
                if isinstance(exc, KeyboardInterrupt):
                    raise
                report["peers"][name] = {"error": str(exc)}
                print(f"[{name}] FAILED: {exc}", file=sys.stderr)
                continue
            result["metrics"] = harness.evaluate(test, result)
            result["peer_seconds"] = time.perf_counter() - t0
            scores = result.pop("scores")
            result["score_range"] = [min(scores), max(scores)]
            result.pop("verdicts")
            report["peers"][name] = result
            cells = readme_cells(result["metrics"])
            print(f"[{name}] " + "; ".join(f"{k}: {v}" for k, v in cells.items()), file=sys.stderr)
    finally:
        own.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    report["elapsed_seconds"] = time.perf_counter() - started
    os.makedirs(os.path.dirname(os.path.abspath(md_path)), exist_ok=True)
    write_report(report, md_path, json_path)

    print(f"{report['corpus_name']}: test {len(test)} messages ({report['n_test_spam']} spam)"
          + (f"; --blank-line: {report['blank_line']}" if report.get("blank_line") else ""))
    print("| README row | " + " | ".join(NAMES[p] for p in report["peers"]) + " |")
    print("|---|" + "---:|" * len(report["peers"]))
    for row in ("ranking error, 1-AUC %", "false positives %", "spam missed %", "spam caught at 0.1 % false positives"):
        print(f"| {row} | " + " | ".join(readme_cells(r["metrics"])[row] if "metrics" in r else "failed"
                                          for r in report["peers"].values()) + " |")
    print(f"wrote {md_path} and {json_path}", file=sys.stderr)
    return 1 if any("error" in r for r in report["peers"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
