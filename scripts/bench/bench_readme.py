#!/usr/bin/env python3
"""The README's speed rows, measured side by side in one run (issue 54).

One command measures every speed row of the README's headline table, spamnb
and its peers in the same run, each pair interleaved (A B A B ...), from a
fresh virtual environment into which this checkout is installed as the
README installs it (``python3 -m venv``, then ``pip install .``: no editable
install, no system site-packages)::

    python3 scripts/bench/bench_readme.py            # docs/notes/benchmarks-readme.md and .json
    python3 scripts/bench/bench_readme.py --update   # and the README's rows, docs/notes/readme-sources.md's source rows

The rows, on each corpus (``--corpus``, default the shared SpamAssassin and
Enron-Spam corpora beside the repository), through the existing scripts:

- ``spamnb train DIR`` against bogofilter's bulk training (``-s -b`` on the
  spam, ``-n -b`` on the ham), whole processes, median wall of
  ``--train-runs``; ``spamnb classify --batch`` of every message against
  ``bogofilter -b -v``, median of ``--batch-runs``
  (scripts/bench/bench_commands.py, run with ``--json``);
- one ``spamnb learn --spam < MSG`` against ``bogofilter -s < MSG``: the
  README's row the learn that appends to the model's journal (a user's
  second and later learns: the record appended, the file fsynced), the
  first learn after ``train`` (appending to the journal without records
  ``train`` left) beside it in the same cell; and one
  ``spamnb classify < MSG`` (a fresh process) against ``bogofilter -T <
  MSG``, with the floor ``python -c pass`` of the same venv, median wall of
  ``--runs`` rounds, peak memory of one more run under ``/usr/bin/time``
  (scripts/bench/bench_pipe.py, run with ``--json``);

then on the SpamAssassin corpus's model (``spamnb train`` of the whole
corpus), with ``spamnb serve`` (its defaults: a worker per core) and
SpamAssassin's ``spamd`` on loopback ports:

- one message as an MTA runs it: one ``spamc -c`` process per message to
  ``spamnb serve`` (TCP, and a Unix socket), ``bogofilter -T``, and
  ``spamc -c`` to ``spamd``, ``--processes`` messages, the commands in a
  shuffled order for each message (``harness.per_process``, as
  scripts/bench/bench_serve.py times them): p50 wall of each;
- the SPAMD server under ``--clients`` concurrent clients: each client a
  loop running one ``spamc -c`` process per message, the same loop for
  both servers, for ``--seconds`` seconds a round, the servers' rounds
  interleaved (``--rounds`` each): messages/s, median of the rounds, and
  what bounds it: the CPU the server's processes, the spamc processes (and
  this script, which starts them) and every other process of the machine
  used during the round (/proc).  When the machine's cores were busy more
  than 90 % of the round, the bound is the largest of those consumers;
  otherwise no CPU bound (the machine idle part of the round).

SpamAssassin: 4.0.1 as Debian packages it (``spamd`` is its own package
there), ``spamd -L -x`` (local tests only, no user config),
``--spamd-children`` children (default 5, spamd's own default maximum, all
started before the run), the packaged rules and site config plus no DNS,
no RBL, Razor, Pyzor or DCC, Bayes on with an empty database of its own
(untrained, auto-learn off: it stays empty).  Without ``spamd`` on the PATH
its cells are skipped with a message and left blank; without ``spamc`` the
two server rows are.

``--only pipe`` measures the one-message rows alone (``learn`` and a fresh
process's ``classify``, bench_pipe.py's), and with ``--update`` rewrites
only those rows (the others and their source rows are kept).
``--journal N`` (default 200) adds bench_pipe.py's row of a classify after N
learns into the model's journal (docs/benchmarks-readme.md; not a README row).

The load average (``uptime``) is taken before and after the run and written
beside the figures: on a busy machine the absolute figures move, the ratios
of a pair much less.  The whole run takes about 10 minutes with the
defaults (the venv's build included).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "scripts"))   # harness.py

import harness  # noqa: E402

CORPORA = [harness.SPAMASSASSIN, harness.ENRON_SPAM]
CORPUS_TITLES = {"spamassassin": "SpamAssassin", "enron-spam": "Enron-Spam"}

# the README's row labels (its first cells): the test matches them with docs/notes/readme-sources.md's source rows
TRAIN = "`spamnb train` of the whole corpus, s (bogofilter: `-s -b`, `-n -b`)"
BATCH = "`classify --batch` of every message, s (bogofilter: `-b -v`)"
LEARN = "one `learn` of a message, ms (bogofilter: `-s`)"
FRESH = "one message, a fresh process, ms; peak MiB"
MTA = "one message as an MTA runs it, ms (SpamAssassin)"


def spamd_label(clients):
    return f"SPAMD server, {clients} clients, messages/s (SpamAssassin)"


# the README's columns after the row label
COLUMNS = ("spamnb", "bogofilter", "spamprobe", "SpamAssassin", "rspamd")
SOURCE_BEGIN = "<!-- scripts/bench/bench_readme.py: source rows begin -->"
SOURCE_END = "<!-- scripts/bench/bench_readme.py: source rows end -->"
SOURCE_HEADER = ["| README row | figures | command | date (UTC), load |", "|---|---|---|---|"]
MAX_MESSAGE = 256 * 1024   # the server rows' messages: well under spamc's default limit (500 KB)


# ---------------------------------------------------------------------------- the venv
def make_venv(venv, reuse):
    """A venv at ``venv`` with this checkout installed as the README says (``pip install .``)."""
    if reuse and (venv / "bin" / "spamnb").exists():
        return "reused"
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_USER")}
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(REPO)], check=True, env=env, cwd=venv)
    return "new"


# ---------------------------------------------------------------------------- CPU accounting
TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[1]), fields   # ppid, the fields after the name (state is fields[0])


def tree_cpu(root):
    """CPU seconds of the process ``root`` and every descendant alive now
    (user + system), plus the children they have reaped."""
    parents = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                parents[int(name)] = _stat(name)
            except (OSError, IndexError):
                pass
    tree, frontier = set(), {root}
    while frontier:
        tree |= frontier
        frontier = {pid for pid, (ppid, _) in parents.items() if ppid in frontier} - tree
    total = 0
    for pid in tree:
        if pid in parents:
            fields = parents[pid][1]
            total += sum(int(fields[i]) for i in (11, 12, 13, 14))   # utime stime cutime cstime
    return total / TICK


def machine_cpu():
    """(busy, total) CPU seconds of the whole machine since boot (/proc/stat)."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + values[4]
    return (sum(values) - idle) / TICK, sum(values) / TICK


# ---------------------------------------------------------------------------- the server rows
def spamc_loops(client, messages, clients, seconds):
    """``clients`` threads, each a loop of ``client + [-c]`` processes, one message
    each (the clients start at different messages), for ``seconds``: the
    answered messages, wall seconds, CPU of the spamc processes, of this
    script, exit codes other than 0 and 1."""
    stop = time.monotonic() + seconds
    counts, cpus, errors = [0] * clients, [0.0] * clients, []

    def loop(i):
        j = i * len(messages) // clients
        while time.monotonic() < stop:
            result = harness.run(client, stdin=str(messages[j % len(messages)]))
            j += 1
            cpus[i] += result.cpu
            if result.rc in (0, 1):
                counts[i] += 1
            else:
                errors.append(result.rc)

    own = resource.getrusage(resource.RUSAGE_SELF)
    wall = harness.concurrently(loop, clients)
    after = resource.getrusage(resource.RUSAGE_SELF)
    script = (after.ru_utime + after.ru_stime) - (own.ru_utime + own.ru_stime)
    return sum(counts), wall, sum(cpus), script, errors


def throughput_round(name, client, server_pid, messages, clients, seconds):
    server0, (busy0, total0) = tree_cpu(server_pid), machine_cpu()
    n, wall, spamc_cpu, script_cpu, errors = spamc_loops(client, messages, clients, seconds)
    server1, (busy1, total1) = tree_cpu(server_pid), machine_cpu()
    if errors:
        raise SystemExit(f"{name}: {len(errors)} spamc processes failed (exit codes {sorted(set(errors))})")
    cores = os.cpu_count()
    busy = (busy1 - busy0) / (total1 - total0) if total1 > total0 else float("nan")
    server = server1 - server0
    clients_cpu = spamc_cpu + script_cpu
    others = max(0.0, (busy1 - busy0) - server - clients_cpu)
    return {"messages": n, "wall": wall, "rate": n / wall, "machine_busy": busy,
            "cores": {"server": server / wall, "clients": clients_cpu / wall, "spamc": spamc_cpu / wall,
                      "script": script_cpu / wall, "others": others / wall}}


def bound(rounds):
    """What bounds the rate: the rule of the module's docstring, over the median round."""
    median = sorted(rounds, key=lambda r: r["rate"])[len(rounds) // 2]
    c = median["cores"]
    shares = (f"server {c['server']:.2f}, spamc clients {c['clients']:.2f} (this script's share "
              f"{c['script']:.2f}), other processes {c['others']:.2f} of {os.cpu_count()} cores; the machine "
              f"{median['machine_busy'] * 100:.0f} % busy")
    if median["machine_busy"] < 0.9:
        return "not CPU (the machine partly idle)", shares
    largest = max(("server", c["server"]), ("clients", c["clients"]), ("others", c["others"]), key=lambda x: x[1])
    what = {"server": "the server", "clients": "the spamc clients", "others": "other jobs on the machine"}[largest[0]]
    return what, shares


def server_rows(args, corpus, model, bogo, work, say):
    """The MTA row's per-process figures and the SPAMD rows' throughput (None for a server not run)."""
    spamnb = str(Path(sys.executable).parent / "spamnb")
    files = [Path(p) for p, _ in harness.labelled_files(corpus) if os.path.getsize(p) <= MAX_MESSAGE]
    step = max(1, len(files) // args.processes)
    sample = files[step // 2::step][:args.processes]
    out = {"messages": len(sample), "corpus": corpus.name}
    with harness.Servers(new_session=False) as servers:   # the servers and the clients: one autogroup
        port, sock = harness.free_port(), work / "spamnb.sock"
        log = work / "serve.log"
        proc = servers.start("spamnb serve", [spamnb, "serve", "-l", f"127.0.0.1:{port}", "-l", str(sock),
                                              "-m", str(model)], str(log))
        spamnb_client = ["spamc", "-d", "127.0.0.1", "-p", str(port), "-c"]
        harness.wait_until(lambda: subprocess.run(spamnb_client[:-1] + ["-K"], capture_output=True)
                               .returncode == 0, "spamnb serve", proc, str(log))
        pids = {"spamnb": proc.pid}
        clients = {"spamnb": spamnb_client}
        spamd = shutil.which("spamd")
        if spamd is None:
            say("spamd is not installed (Debian: apt-get install spamd): SpamAssassin's cells are skipped")
            out["spamd"] = None
        else:
            base = work / "spamassassin"
            site, home = base / "site", base / "home"
            home.mkdir(parents=True)
            settings = ["use_bayes 1", f"bayes_path {base / 'bayes' / 'bayes'}", "bayes_file_mode 0666",
                        "bayes_auto_learn 0        # it stays untrained", *harness.SA_NO_NETWORK]
            (base / "bayes").mkdir()
            harness.spamassassin_site(str(site), settings)
            env = dict(os.environ, HOME=str(home))
            spamc, ready = harness.start_spamd(str(base), str(site), str(home), args.spamd_children,
                                                   servers, env, min_spare=args.spamd_children)
            pid = int((base / "spamd.pid").read_text().split()[0])
            clients["spamd"] = spamc + ["-c"]
            pids["spamd"] = pid
            version = subprocess.run(["spamd", "--version"], capture_output=True, text=True).stdout.splitlines()
            out["spamd"] = {"version": version[0] if version else "?",
                            "children": args.spamd_children, "ready_seconds": round(ready, 1),
                            "settings": [s.split("  ")[0] for s in settings if not s.startswith("bayes_path")],
                            "argv": "spamd -L -x --siteconfigpath=SITE --listen=127.0.0.1:PORT "
                                    f"--max-children={args.spamd_children} --min-children={args.spamd_children} "
                                    f"--min-spare={args.spamd_children} --max-spare={args.spamd_children}"
                                    + (" --username=nobody" if os.geteuid() == 0 else "")}
            say(f"spamd ready after {ready:.1f} s")
        for client in clients.values():   # models and rules loaded, every child warm
            for message in sample[:2 * args.clients]:
                harness.run(client, stdin=str(message))

        # one message as an MTA runs it: a process per message, the commands shuffled per message
        commands = {"spamnb": lambda p: (spamnb_client, p),
                    "spamnb unix": lambda p: (["spamc", "-U", str(sock), "-c"], p),
                    "bogofilter": lambda p: (["bogofilter", "-C", "-d", str(bogo), "-T"], p)}
        if "spamd" in clients:
            commands["spamd"] = lambda p: (clients["spamd"], p)
        say(f"one message as an MTA runs it: {len(sample)} messages, {len(commands)} commands each ...")
        times = harness.per_process(commands, sample)
        out["per_process"] = {name: {"p50_ms": harness.quantiles(v)[0], "p99_ms": harness.quantiles(v)[1]}
                              for name, v in times.items()}
        out["per_process_ratio_to_bogofilter"] = {
            name: harness.paired_ratio(times[name], times["bogofilter"]) for name in times if name != "bogofilter"}

        # the SPAMD server under load: the same spamc loop for both, rounds interleaved
        say(f"SPAMD servers, {args.clients} spamc loops, {args.rounds} rounds of {args.seconds:g} s each ...")
        for name, client in clients.items():   # a short warm-up round, not counted
            spamc_loops(client, sample, args.clients, min(2.0, args.seconds))
        rounds = {name: [] for name in clients}
        for i in range(args.rounds):
            for name in (list(clients) if i % 2 == 0 else list(clients)[::-1]):
                result = throughput_round(name, clients[name], pids[name], sample, args.clients, args.seconds)
                rounds[name].append(result)
                say(f"  {name}: {result['rate']:.1f} messages/s, CPU cores: "
                    + ", ".join(f"{k} {v:.2f}" for k, v in result["cores"].items())
                    + f"; machine {result['machine_busy'] * 100:.0f} % busy")
        out["throughput"] = {}
        for name, rs in rounds.items():
            what, shares = bound(rs)
            out["throughput"][name] = {"rate": statistics.median(r["rate"] for r in rs), "rounds": rs,
                                       "bound": what, "cpu": shares}
    return out


# ---------------------------------------------------------------------------- the table
def med(runs, field="wall"):
    return statistics.median(getattr(r, field) for r in runs)


def bold_if(cell, better):
    return f"**{cell}**" if better else cell


def readme_rows(r, clients):
    """{label: [cell per COLUMNS]} of every row measured."""
    names = list(r["corpora"])
    rows = {}
    for label, key in ((TRAIN, "train"), (BATCH, "batch")):
        if not all(key in r["corpora"][n] for n in names):   # --only pipe
            continue
        a = [r["corpora"][n][key]["spamnb"] for n in names]
        b = [r["corpora"][n][key]["bogofilter"] for n in names]
        rows[label] = [bold_if(" / ".join(f"{x:.2f}" for x in a), all(x < y for x, y in zip(a, b))),
                       bold_if(" / ".join(f"{y:.2f}" for y in b), all(y < x for x, y in zip(a, b))), "", "", ""]
    pipe = r["pipe"]
    # a learn appending to its journal (a user's second and later learns), the first after train beside
    a = [pipe[n]["learn append"]["spamnb_ms"] for n in names]
    b = [pipe[n]["learn append"]["bogofilter_ms"] for n in names]
    first = [pipe[n]["learn"]["spamnb_ms"] for n in names]
    rows[LEARN] = [bold_if(" / ".join(f"{x:.0f}" for x in a), all(x < y for x, y in zip(a, b)))
                   + " appending to its journal (the first after train: "
                   + " / ".join(f"{x:.0f}" for x in first) + ")",
                   bold_if(" / ".join(f"{y:.0f}" for y in b), all(y < x for x, y in zip(a, b))), "", "", ""]
    a = [pipe[n]["classify"]["spamnb_ms"] for n in names]
    b = [pipe[n]["classify"]["bogofilter_ms"] for n in names]
    am = [pipe[n]["classify"]["spamnb_mib"] for n in names]
    bm = [pipe[n]["classify"]["bogofilter_mib"] for n in names]
    floor = r["floor"]["python -c pass"]["ms"]
    rows[FRESH] = [bold_if(" / ".join(f"{x:.0f}" for x in a) + "; " + " / ".join(f"{x:.0f}" for x in am),
                           all(x < y for x, y in zip(a, b)))
                   + f" (the venv's `python -c pass`: {floor:.0f})",
                   bold_if(" / ".join(f"{y:.0f}" for y in b) + "; " + " / ".join(f"{y:.0f}" for y in bm),
                           all(y < x for x, y in zip(a, b))), "", "", ""]
    serve = r.get("serve")
    if serve:
        pp = serve["per_process"]
        s, u, bogo = pp["spamnb"]["p50_ms"], pp["spamnb unix"]["p50_ms"], pp["bogofilter"]["p50_ms"]
        sa = f"{pp['spamd']['p50_ms']:.1f} (`spamc` to `spamd`)" if "spamd" in pp else ""
        best = min(s, bogo)
        rows[MTA] = [f"{bold_if(f'{s:.2f}', s == best)} (`spamc`; {bold_if(f'{u:.2f}', u < bogo)} over a Unix socket)",
                     f"{bold_if(f'{bogo:.2f}', bogo < s)} (`bogofilter -T`)", "", sa, ""]
        tp = serve["throughput"]
        rate = tp["spamnb"]["rate"]
        cell_a = f"**{rate:,.0f}** (bound: {tp['spamnb']['bound']})"
        cell_sa = ""
        if "spamd" in tp:
            sd = serve["spamd"]
            cell_sa = (f"{tp['spamd']['rate']:,.1f} (`spamd`, {sd['children']} children, Bayes untrained; "
                       f"bound: {tp['spamd']['bound']})")
        rows[spamd_label(clients)] = [cell_a, "", "", cell_sa, ""]
    return rows


def table_line(label, cells):
    """A row of the README's table: an empty cell as "| |", as the README writes it."""
    return "|" + "|".join(f" {cell} " if cell else " " for cell in (label, *cells)) + "|"


def source_rows(rows, command, when):
    """The source rows (docs/notes/readme-sources.md): | README row | figures | command | date |."""
    out = []
    for label, cells in rows.items():
        figures = "; ".join(f"{name} {cell}" for name, cell in zip(COLUMNS, cells) if cell).replace("**", "")
        out.append(f"| {label} | {figures} | `{command}` | {when} |")
    return out


def update_file(path, replace):
    text = path.read_text()
    new = replace(text)
    if new != text:
        path.write_text(new)


README_RUN = re.compile(r"(The speed rows are one run of `scripts/bench/bench_readme\.py`) \([^)]*\)")


PIPE_RUN = re.compile(r"; the `learn` and fresh-process rows a later run of `--only pipe`[^;)]*")


def update_readme(rows, run, pipe_run=None):
    """The README's speed rows, and the load of the run in the sentence after
    the table; ``pipe_run`` (a run of ``--only pipe``, ``run`` None): the
    sentence keeps the whole run's load and says that of the pipe rows'."""
    def replace(text):
        if run is not None:
            text = README_RUN.sub(lambda m: f"{m[1]} ({run})", text)
        else:
            text = PIPE_RUN.sub("", text)
            text = text.replace("; the date and command of each row in docs/notes/readme-sources.md",
                                f"; the `learn` and fresh-process rows a later run of `--only pipe`, {pipe_run}"
                                "; the date and command of each row in docs/notes/readme-sources.md", 1)
        for label, cells in rows.items():
            line = table_line(label, cells)
            pattern = re.compile(r"^\| " + re.escape(label) + r" \|.*$", re.M)
            if not pattern.search(text):
                raise SystemExit(f"README.md has no row {label!r}: add it to the table first")
            text = pattern.sub(lambda _m: line, text)
        return text
    update_file(REPO / "README.md", replace)


def update_sources(lines):
    """docs/notes/readme-sources.md's source rows: this run's, and the rows of README
    rows it did not measure (``--only pipe``) as they were, in their order."""
    def replace(text):
        begin, end = text.find(SOURCE_BEGIN), text.find(SOURCE_END)
        if begin < 0 or end < begin:
            raise SystemExit(f"docs/notes/readme-sources.md has no {SOURCE_BEGIN} ... {SOURCE_END} block")
        new = {line.split(" | ", 1)[0]: line for line in lines}
        kept = [line for line in text[begin + len(SOURCE_BEGIN):end].strip().splitlines()
                if line.startswith("| ") and line not in SOURCE_HEADER]
        merged = [new.pop(line.split(" | ", 1)[0], line) for line in kept] + list(new.values())
        return text[:begin + len(SOURCE_BEGIN)] + "\n" + "\n".join([*SOURCE_HEADER, *merged]) + "\n" + text[end:]
    update_file(REPO / "docs" / "notes" / "readme-sources.md", replace)


# ---------------------------------------------------------------------------- the run
def uptime():
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def script(name, argv, say):
    """Run scripts/bench/NAME with this (the venv's) Python, its output to the terminal."""
    say(f"$ python {name} " + " ".join(argv))
    # from outside the checkout (as a user runs spamnb): `python -c pass` puts its folder on sys.path
    subprocess.run([sys.executable, str(HERE / name), *argv], check=True, cwd=tempfile.gettempdir())


def walls(runs):
    return statistics.median(wall for wall, _ in runs)


def cpus(runs):
    return statistics.median(cpu for _, cpu in runs)


def measure(args, say):
    spamnb = str(Path(sys.executable).parent / "spamnb")
    work = Path(tempfile.mkdtemp(prefix="bench-readme-"))
    os.environ["SPAMNB_HOME"] = str(work / "home")
    corpora = [Path(c).resolve() for c in (args.corpus or CORPORA)]
    r = {"corpora": {corpus.name: {} for corpus in corpora}, "pipe": {}}
    try:
        if args.only != "pipe":
            commands_rows(args, corpora, spamnb, work, r, say)
        # one message, a fresh process: scripts/bench/bench_pipe.py, its models kept for the servers
        pipe_work = work / "pipe"
        script("bench_pipe.py", [*(f"--corpus={c}" for c in corpora), f"--runs={args.runs}", f"--work={pipe_work}",
                                 f"--journal={args.journal}", f"--json={work / 'pipe.json'}"], say)
        pipe = json.loads((work / "pipe.json").read_text())
        keys = {"classify": "classify", "learn --spam": "learn", "learn --spam, appending": "learn append",
                "learn --spam, journal deleted": "learn deleted", "classify -p": "classify -p"}
        for row in pipe["rows"]:
            key = keys.get(row["row"]) or "journal"   # "classify, after N learns (journal ...)" (no --compare)
            entry = r["pipe"].setdefault(row["corpus"], {"model": row["model"]}).setdefault(key, {})
            if key == "journal":
                entry["row"] = row["row"]
            entry[f"{row['command']}_ms"] = walls(row["runs"]) * 1000
            entry[f"{row['command']}_cpu_ms"] = cpus(row["runs"]) * 1000
            entry[f"{row['command']}_mib"] = row["peak_mib"]
        r["floor"] = {name: {"ms": walls(f["runs"]) * 1000, "cpu_ms": cpus(f["runs"]) * 1000, "mib": f["peak_mib"]}
                      for name, f in pipe["floors"].items()}
        floor = r["floor"]["python -c pass"]["ms"]
        for rows in r["pipe"].values():
            for key in ("classify", "learn", "learn append", "learn deleted", "classify -p", "journal"):
                if key in rows:
                    rows[key]["spamnb_over_floor"] = rows[key]["spamnb_ms"] / floor
        serve_corpus = next((c for c in corpora if c.name == "spamassassin"), corpora[0])
        if args.only == "pipe":
            pass
        elif shutil.which("spamc") is None:
            say("spamc is not installed: the two server rows are skipped")
        else:
            r["serve"] = server_rows(args, serve_corpus, pipe_work / f"{serve_corpus.name}.spamnb",
                                     pipe_work / f"{serve_corpus.name}.bogofilter", work, say)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return r


def commands_rows(args, corpora, spamnb, work, r, say):
    """The train and ``classify --batch`` rows: scripts/bench/bench_commands.py, both corpora."""
    script("bench_commands.py", [*(f"--corpus={c}" for c in corpora), f"--train-runs={args.train_runs}",
                                 f"--batch-runs={args.batch_runs}", f"--runs={args.learn_runs}",
                                 f"--spamnb={spamnb}", f"--json={work / 'commands.json'}"], say)
    commands = json.loads((work / "commands.json").read_text())["corpora"]
    for corpus in corpora:
        c = commands[str(corpus)]
        r["corpora"][corpus.name] = {"messages": c["messages"]}
        for key in ("train", "batch"):
            pair = c["pairs"][key]
            r["corpora"][corpus.name][key] = {
                "spamnb": walls(pair["a"]), "bogofilter": walls(pair["b"]), "spamnb_cpu": cpus(pair["a"]),
                "bogofilter_cpu": cpus(pair["b"]), "runs": len(pair["a"]),
                "spamnb_all": [w for w, _ in pair["a"]], "bogofilter_all": [w for w, _ in pair["b"]]}


def write_markdown(path, r, rows, sources, args):
    names = list(r["corpora"])
    titles = " / ".join(CORPUS_TITLES.get(n, n) for n in names)
    lines = [
        "# The README's speed rows: one run",
        "",
        f"Written by `scripts/bench/bench_readme.py` (`{r['command']}`); the README's rows and "
        "the source rows below (docs/notes/readme-sources.md) are this run's.  Every pair was measured interleaved, "
        "whole processes, spamnb as installed by `pip install .` into a fresh venv.",
        "",
        f"- when: {r['when']}",
        f"- load: before `{r['uptime_before']}`; after `{r['uptime_after']}`",
        f"- machine: {r['machine']['cpu']}, {r['machine']['cores']} cores; the venv's Python {r['python']}; "
        f"spamnb {r['spamnb_version']} (commit {r['commit']}); {r['bogofilter']}",
        "- spamnb: " + ("installed by `pip install .` into a venv made for this run" if r["venv"] == "new" else
                        "a venv made before (`--reuse-venv`), spamnb installed in it by `pip install .`"),
        "- corpora: " + ", ".join(f"{n} ({r['corpora'][n]['messages']:,} messages)" if "messages" in r["corpora"][n]
                                  else n for n in names),
        "",
        f"## The README's rows ({titles})",
        "",
        "| row | " + " | ".join(COLUMNS) + " |",
        "|---|" + "---:|" * len(COLUMNS),
        *(table_line(label, cells) for label, cells in rows.items()),
        "",
        "## The source rows (docs/notes/readme-sources.md)",
        "",
        *SOURCE_HEADER,
        *sources,
        "",
        "## Each pair",
        "",
        "| pair | corpus | spamnb: wall (CPU) | peer: wall (CPU) | peer / spamnb | runs |",
        "|---|---|---|---|---|---|",
    ]
    for n in names:
        c = r["corpora"][n]
        for key, what in (("train", "`spamnb train DIR` / bogofilter `-s -b` + `-n -b`"),
                          ("batch", "`spamnb classify --batch` / `bogofilter -b -v`")):
            if key not in c:   # --only pipe
                continue
            x = c[key]
            lines.append(f"| {what} | {n} | {x['spamnb']:.2f} s ({x['spamnb_cpu']:.2f}) | {x['bogofilter']:.2f} s "
                         f"({x['bogofilter_cpu']:.2f}) | {x['bogofilter'] / x['spamnb']:.2f}x | {x['runs']} |")
    for n in names:
        for key, what in (("learn append", "one `spamnb learn --spam` appending to its journal / `bogofilter -s`"),
                          ("learn", "one `spamnb learn --spam`, the first after train / `bogofilter -s`"),
                          ("learn deleted", "one `spamnb learn --spam`, its journal deleted (it starts one) / "
                                            "`bogofilter -s`"),
                          ("classify", "one `spamnb classify` / `bogofilter -T`"),
                          ("classify -p", "one `spamnb classify -p` / `bogofilter -p -e`")):
            if key not in r["pipe"][n]:   # a run of before the row
                continue
            x = r["pipe"][n][key]
            lines.append(f"| {what} | {r['pipe'][n]['model']} | {x['spamnb_ms']:.1f} ms ({x['spamnb_cpu_ms']:.1f}), "
                         f"{x['spamnb_mib']:.1f} MiB, {x['spamnb_over_floor']:.2f}x `python -c pass` | "
                         f"{x['bogofilter_ms']:.1f} ms ({x['bogofilter_cpu_ms']:.1f}), {x['bogofilter_mib']:.1f} MiB | "
                         f"{x['bogofilter_ms'] / x['spamnb_ms']:.3f}x | {args.runs} |")
    journal = [(n, r["pipe"][n]["journal"]) for n in names if "journal" in r["pipe"][n]]
    if journal:
        lines += ["", "Once mail was learned (not a README row): the same rounds, a copy of the model that "
                  f"learned {args.journal} messages into its journal, one `spamnb learn` each:", "",
                  "| command | corpus | spamnb: wall (CPU), peak | x `python -c pass` |", "|---|---|---|---|"]
        for n, x in journal:
            lines.append(f"| `{x['row']}` | {n} | {x['spamnb_ms']:.1f} ms ({x['spamnb_cpu_ms']:.1f}), "
                         f"{x['spamnb_mib']:.1f} MiB | {x['spamnb_over_floor']:.2f}x |")
    lines += ["", "The venv's interpreter in the same rounds: " + "; ".join(
        f"`{name}` {f['ms']:.1f} ms (CPU {f['cpu_ms']:.1f}), {f['mib']:.1f} MiB" for name, f in r["floor"].items())
        + "."]
    serve = r.get("serve")
    if serve:
        lines += ["", f"## The servers ({serve['corpus']}, {serve['messages']} messages)", "",
                  "`spamnb serve -l 127.0.0.1:PORT -l SOCKET -m MODEL` (its defaults otherwise: a worker per core), "
                  "MODEL `spamnb train` of the whole corpus."]
        if serve.get("spamd"):
            sd = serve["spamd"]
            lines += [f"SpamAssassin: {sd['version']}, `{sd['argv']}`, ready after {sd['ready_seconds']} s; site "
                      "config: the packaged one plus " + "; ".join(f"`{s}`" for s in sd["settings"])
                      + " (Bayes on, its database empty)."]
        else:
            lines += ["SpamAssassin: spamd not installed; its cells are blank."]
        lines += ["", "One process per message, the commands in a shuffled order for each message, wall ms:", "",
                  "| command | p50 | p99 | the same message's time / bogofilter's, median |", "|---|---|---|---|"]
        names_pp = {"spamnb": "`spamc -d 127.0.0.1 -c` to `spamnb serve`",
                    "spamnb unix": "`spamc -U SOCKET -c` to `spamnb serve`",
                    "bogofilter": "`bogofilter -T`", "spamd": "`spamc -d 127.0.0.1 -c` to `spamd`"}
        for name, q in serve["per_process"].items():
            ratio = serve["per_process_ratio_to_bogofilter"].get(name)
            lines.append(f"| {names_pp[name]} | {q['p50_ms']:.2f} | {q['p99_ms']:.2f} | "
                         + (f"{ratio:.3f}" if ratio is not None else "1") + " |")
        lines += ["", f"{args.clients} concurrent clients, each a loop of one `spamc -c` process per message, "
                  f"{args.seconds:g} s a round, the servers' rounds interleaved; CPU in cores (CPU seconds / "
                  "wall seconds of the round):", "",
                  "| server | messages/s per round | median | CPU of the median round | bound |", "|---|---|---|---|---|"]
        for name, t in serve["throughput"].items():
            lines.append(f"| {name} | " + ", ".join(f"{x['rate']:.1f}" for x in t["rounds"])
                         + f" | {t['rate']:.1f} | {t['cpu']} | {t['bound']} |")
        if "spamd" in serve["throughput"]:
            lines += ["", f"spamnb serve / spamd: {serve['throughput']['spamnb']['rate'] / serve['throughput']['spamd']['rate']:.1f}x "
                      "the messages per second with the same clients."]
    path.write_text("\n".join(lines) + "\n")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", action="append", help="a corpus folder (repeatable; default the shared "
                        "SpamAssassin and Enron-Spam corpora)")
    parser.add_argument("--train-runs", type=int, default=5, help="runs of each training (default 5)")
    parser.add_argument("--batch-runs", type=int, default=7, help="runs of each batch (default 7)")
    parser.add_argument("--runs", type=int, default=41, help="rounds of the one-message commands (default 41)")
    parser.add_argument("--learn-runs", type=int, default=15, help="bench_commands.py's learn runs (not in the "
                        "README; default 15)")
    parser.add_argument("--processes", type=int, default=200, help="messages of the server rows (default 200)")
    parser.add_argument("--clients", type=int, default=8, help="concurrent spamc loops (default 8)")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of a throughput round (default 10)")
    parser.add_argument("--rounds", type=int, default=3, help="throughput rounds of each server (default 3)")
    parser.add_argument("--spamd-children", type=int, default=5, help="spamd's children (default 5, its own "
                        "default maximum)")
    parser.add_argument("--venv", type=Path, default=Path(tempfile.gettempdir()) / "spamnb-bench-readme-venv",
                        help="where the fresh venv is made (default: TMPDIR/spamnb-bench-readme-venv, made anew)")
    parser.add_argument("--reuse-venv", action="store_true", help="use --venv as it is if spamnb is installed in it")
    parser.add_argument("--md", type=Path, default=REPO / "docs" / "notes" / "benchmarks-readme.md")
    parser.add_argument("--json", type=Path, default=REPO / "docs" / "notes" / "benchmarks-readme.json")
    parser.add_argument("--update", action="store_true", help="also rewrite the README's speed rows and "
                        "docs/notes/readme-sources.md's source rows with this run's")
    parser.add_argument("--only", choices=("all", "pipe"), default="all",
                        help="pipe: only the one-message rows (learn, a fresh process's classify); --update then "
                             "rewrites only those (default all)")
    parser.add_argument("--journal", type=int, default=200, metavar="N",
                        help="bench_pipe.py's classify after N learns into the journal (default 200; 0: none)")
    parser.add_argument("--inside-venv", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    shown, skip = [], False
    for a in argv:   # the command as recorded: no local paths (where the venv and the outputs went)
        if skip or a in ("--inside-venv", "--reuse-venv"):
            skip = False
            continue
        if a in ("--venv", "--md", "--json"):
            skip = True
            continue
        if not a.startswith(("--venv=", "--md=", "--json=")):
            shown.append(a)
    command = " ".join(["python3 scripts/bench/bench_readme.py", *shown])
    if not args.inside_venv:
        for tool in ("bogofilter",):
            if shutil.which(tool) is None:
                raise SystemExit(f"{tool} is not installed")
        print(f"making a fresh venv in {args.venv} (pip install {REPO}) ...", flush=True)
        state = make_venv(args.venv.resolve(), args.reuse_venv)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}
        env["BENCH_README_VENV"] = state
        return subprocess.run([str(args.venv.resolve() / "bin" / "python"), __file__, *argv, "--inside-venv"],
                              env=env).returncode

    def say(text):
        print(text, flush=True)

    started = datetime.datetime.now(datetime.timezone.utc)
    before = uptime()
    say(f"uptime before: {before}")
    r = measure(args, say)
    after = uptime()
    ended = datetime.datetime.now(datetime.timezone.utc)
    say(f"uptime after: {after}")
    load = lambda text: text.rsplit("load average:", 1)[-1].strip()   # noqa: E731
    r.update({
        "command": command,
        "when": f"{started:%Y-%m-%d %H:%M}-{ended:%H:%M} UTC",
        "uptime_before": before, "uptime_after": after,
        "machine": harness.machine(), "python": sys.version.split()[0],
        "venv": os.environ.get("BENCH_README_VENV", "?"),
        "spamnb_version": subprocess.run([sys.executable, "-c", "import spamnb; print(spamnb.__version__)"],
                                         capture_output=True, text=True).stdout.strip(),
        "commit": subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                                 text=True).stdout.strip() or "?",
        "bogofilter": subprocess.run(["bogofilter", "-V"], capture_output=True, text=True).stdout.splitlines()[0],
        "settings": {k: getattr(args, k) for k in ("train_runs", "batch_runs", "runs", "processes", "clients",
                                                    "seconds", "rounds", "spamd_children")},
    })
    rows = readme_rows(r, args.clients)
    when = f"{r['when']}, load average {load(before)} before, {load(after)} after"
    sources = source_rows(rows, command.replace(" --update", ""), when)
    r["readme_rows"] = rows
    args.json.write_text(json.dumps(r, indent=1, default=str) + "\n")
    write_markdown(args.md, r, rows, sources, args)
    say("\n".join(table_line(label, cells) for label, cells in rows.items()))
    if args.update:
        one = [float(load(x).split(",")[0]) for x in (before, after)]   # "after" counts the run's own processes
        busy = ": other jobs running" if one[0] > 1.0 else ""
        # no date in the README (its source rows in docs/notes/readme-sources.md carry it)
        if args.only == "pipe":
            update_readme(rows, None, f"load average {one[0]:.1f} before{busy}, {one[1]:.1f} after")
        else:
            update_readme(rows, f"load average {one[0]:.1f} before{busy}, {one[1]:.1f} after "
                                "with the run's own processes; the date and command of each row in docs/notes/readme-sources.md")
        update_sources(sources)
        say("README.md's rows and docs/notes/readme-sources.md's source rows rewritten")
    say(f"wrote {args.md} and {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
