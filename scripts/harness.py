"""What the scripts in scripts/bench, scripts/check and scripts/tune share.

A script finds this module by putting its parent folder (scripts/) on
``sys.path``::

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import harness

Nothing here imports spamnb at module level, so a script can still choose
which checkout's spamnb it measures before it imports the package.

- where things are: ``REPO`` (this checkout), ``SPAMASSASSIN`` and
  ``ENRON_SPAM`` (the shared corpora beside it), ``CORPUS_NAMES``;
- the corpus: ``labelled_files`` (as ``spamnb train DIR`` reads a tree),
  ``list_corpus`` and ``is_test`` (the fixed split: a message is TEST when
  md5(relpath) % 5 == 0), ``corpus_split`` (the same split over paths);
- whole processes: ``run``, ``run_steps``, ``check``, ``time_rss``,
  ``floor_kib``;
- servers: ``free_port``, ``wait_port``, ``Servers`` (started in process
  groups, stopped on exit), ``wait_until``, ``tail``, ``world_readable``;
- SpamAssassin's spamd: ``SA_SITE_CONFIG``, ``SA_NO_NETWORK``,
  ``spamassassin_site``, ``start_spamd`` (scripts/bench/bench_peers.py,
  bench_readme.py);
- one process per message: ``per_process``, ``quantiles``,
  ``paired_ratio``; clients in threads: ``concurrently``
  (scripts/bench/bench_serve.py, bench_readme.py);
- a cold process in callgrind's instructions: ``launcher_code``, ``launcher_args`` (the
  Python line a venv's ``bin/spamnb`` runs), ``callgrind_instructions``
  (scripts/bench/bench_cold_instructions.py, bench_cold_imports.py);
- reports: ``machine``, ``evaluate`` (spamnb.bayes.metrics over a test part);
- matrices for the tuning scripts: ``transformed_matrix``;
- auto-learn steering (scripts/check/steer_autolearn.py,
  autolearn_rules.py): ``arrival_stream`` (a corpus in ``spamnb evaluate
  --online``'s order), ``text_windows`` (a message's text parts and windows
  of them, the segments the parts rule scores), ``token_mask`` and
  ``MaskedStream`` (the token-wise rule: which tokens a learn counts).
"""

from __future__ import annotations

import glob
import hashlib
import os
import platform
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_CORPORA = REPO.parent / "shared" / "corpora"
SPAMASSASSIN = SHARED_CORPORA / "spamassassin"
ENRON_SPAM = SHARED_CORPORA / "enron-spam"
CORPUS_NAMES = {"spamassassin": "SpamAssassin public corpus", "enron-spam": "Enron-Spam parts 1-3 (headerless)"}

# the false-positive rates at which "spam caught" is reported
FPR_POINTS = (0.001, 0.01)


# ---------------------------------------------------------------------------- the corpus
_SPAM_PREFIXES = ("spam", "junk")
_SKIPPED_FOLDERS = ("trash", "deleted messages", "deleted items")


_LETTERS = str.maketrans("0123456789", "ghijklmnop")


def random_message(rng, n_words=80):
    """A message of ``n_words`` random 10-letter words, whose tokens never occur in
    mail: what grows a model's vocabulary (``bench_learn_scale.py``,
    ``bench_pipe.py --scale``; the tokenizer reads the first few hundred
    characters of a line of text: short messages, many of them)."""
    words = (format(rng.getrandbits(40), "010x").translate(_LETTERS) for _ in range(n_words))
    return ("Subject: filler\n\n" + " ".join(words) + "\n").encode()


def _folder_name(name):
    return name.lstrip(".").rsplit(".", 1)[-1].lower() if name.startswith(".") else name.lower()


def _looks_like_mail(path):
    with open(path, "rb") as f:
        head = f.read(65536)
    from spamnb.mail.reader import looks_like_mail

    return bool(head.strip()) and looks_like_mail(head)


def labelled_files(root):
    """``(path, is_spam)`` of every message file below ``root``, by the rules of
    ``spamnb train DIR`` (a message is spam when a folder on its way below
    ``root`` starts with "spam" or "junk"; hidden files, empty files and files
    whose first line is no header field are skipped), sorted as it walks."""
    root = os.path.abspath(root)
    root_is_spam = _folder_name(os.path.basename(root)).startswith(_SPAM_PREFIXES)
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        if {"cur", "new"} <= set(dirnames):
            raise SystemExit(f"{dirpath}: a Maildir; this benchmark reads folders of message files only")
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".")
                             and _folder_name(d) not in _SKIPPED_FOLDERS
                             and not os.path.islink(os.path.join(dirpath, d)))
        rel = os.path.relpath(dirpath, root)
        folders = [] if rel == "." else rel.split(os.sep)
        is_spam = any(_folder_name(f).startswith(_SPAM_PREFIXES) for f in folders) if folders else root_is_spam
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            if name.startswith(".") or not os.path.isfile(path):
                continue
            if _looks_like_mail(path):
                out.append((path, is_spam))
    return out


def is_test(relpath):
    """The fixed split: a message is TEST when md5(relpath) % 5 == 0."""
    return int(hashlib.md5(relpath.encode("utf-8", "surrogateescape")).hexdigest(), 16) % 5 == 0


def list_corpus(root, quick=False):
    """[(relpath, abspath, is_spam)] of every message file in the folders below
    ``root`` (any depth; spam when a folder on the way is named spam*), sorted
    by relpath; ``quick``: every 6th."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        rel_dir = os.path.relpath(dirpath, root).replace(os.sep, "/")
        if rel_dir == ".":
            continue          # files at the top (README.md) are not messages
        is_spam = any(part.lower().startswith("spam") for part in rel_dir.split("/"))
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            if name.startswith(".") or not os.path.isfile(path):
                continue
            out.append((f"{rel_dir}/{name}", path, is_spam))
    out.sort()
    if quick:
        out = out[::6]
    return out


def corpus_split(root):
    """(train, test) lists of (path, is_spam) by the fixed split: the message
    files in the folders below ``root`` at any depth (Enron-Spam's
    enronN/spam too), spam when a folder on the way is named spam*."""
    root = Path(root)
    train, test = [], []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.parent != root
                       and not p.name.startswith(".")):
        relative = path.relative_to(root)
        item = (path, any(part.startswith("spam") for part in relative.parts[:-1]))
        (test if is_test(str(relative)) else train).append(item)
    return train, test


# ---------------------------------------------------------------------------- whole processes
class Run:
    __slots__ = ("wall", "cpu", "rss", "rc")

    def __init__(self, wall, cpu, rss, rc):
        self.wall, self.cpu, self.rss, self.rc = wall, cpu, rss, rc


def run(argv, stdin=None, stdout=None, stderr=None, env=None):
    """One process: wall seconds, CPU seconds (user + system, its waited-for
    children included), peak RSS in KiB (ru_maxrss), exit code."""
    stdin_f = open(stdin, "rb") if isinstance(stdin, str) else subprocess.DEVNULL
    stdout_f = open(stdout, "wb") if stdout else subprocess.DEVNULL
    stderr_f = open(stderr, "wb") if stderr else subprocess.DEVNULL
    try:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, stdin=stdin_f, stdout=stdout_f, stderr=stderr_f, env=env)
        _pid, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)   # reaped here: Popen must not wait again
    finally:
        for f in (stdin_f, stdout_f, stderr_f):
            if hasattr(f, "close"):
                f.close()
    return Run(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss, proc.returncode)


def run_steps(steps, env=None):
    """Processes one after the other, as one step: wall from the first start to
    the last end, CPU summed, the largest peak RSS; the first non-zero exit code."""
    started = time.perf_counter()
    runs = [run(argv, stdin=stdin, env=env) for argv, stdin in steps]
    wall = time.perf_counter() - started
    return Run(wall, sum(r.cpu for r in runs), max(r.rss for r in runs), next((r.rc for r in runs if r.rc), 0))


def check(result, what, ok=(0,)):
    """``result`` when its exit code is in ``ok``; else exit with one line."""
    if result.rc not in ok:
        raise SystemExit(f"{what}: exit code {result.rc}")
    return result


def floor_kib():
    """The least ru_maxrss a child of this script can show: this script's own
    high-water mark (the pages it was forked from count until exec)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def time_rss(argv, stdin=None, env=None, ok=(0, 1, 2)):
    """Peak RSS (KiB) of one untimed run under /usr/bin/time -f %M."""
    with tempfile.NamedTemporaryFile(prefix="bench-rss-") as out:
        result = run(["/usr/bin/time", "-f", "%M", "-o", out.name, *argv], stdin=stdin, env=env)
        check(result, " ".join(argv[:3]), ok)
        return int(open(out.name).read().split()[-1])


# ---------------------------------------------------------------------------- servers
def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, seconds=60):
    """Return once 127.0.0.1:``port`` accepts a connection; RuntimeError when
    ``proc`` exits first or ``seconds`` pass."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("server exited")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("server did not start")


class Servers:
    """The servers this script started: each in a process group of its own,
    stopped (SIGTERM to the group, SIGKILL after 15 s) in reverse order.
    ``new_session``: each in a session of its own too (the default); False:
    in this script's session, so that Linux's scheduler autogroups (one per
    session) put a server and the clients this script starts in one group,
    and a server does not get a share of the machine of its own when other
    jobs load it (scripts/bench/bench_readme.py)."""

    def __init__(self, new_session=True):
        self.procs = []
        self.new_session = new_session

    def start(self, name, argv, log_path, **kwargs):
        log = open(log_path, "ab")
        group = {"start_new_session": True} if self.new_session else {"process_group": 0}
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                **group, **kwargs)
        log.close()
        self.procs.append((name, proc))
        print(f"  started {name} (pid {proc.pid}): {' '.join(argv)}", file=sys.stderr)
        return proc

    def stop(self):
        while self.procs:
            name, proc = self.procs.pop()
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    try:
                        os.killpg(proc.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    proc.wait()
            else:  # the leader died; children of its group may remain
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            print(f"  stopped {name} (pid {proc.pid})", file=sys.stderr)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


def wait_until(check, what, proc, log_path, timeout=300):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}: {tail(log_path)}")
        if check():
            return time.monotonic() - t0
        time.sleep(0.5)
    raise RuntimeError(f"{what} not ready after {timeout} s: {tail(log_path)}")


def tail(path, n=1500):
    try:
        with open(path, "rb") as f:
            return f.read().decode(errors="replace")[-n:]
    except OSError:
        return ""


def world_readable(path):
    """spamd drops root to ``nobody``: its files must be readable (and the
    Bayes lock writable) by that user."""
    for dirpath, dirnames, filenames in os.walk(path):
        os.chmod(dirpath, 0o777)
        for name in filenames:
            os.chmod(os.path.join(dirpath, name), 0o666)


# ---------------------------------------------------------------------------- SpamAssassin's spamd
SA_SITE_CONFIG = "/etc/spamassassin"      # the packaged site config: plugin .pre files, local.cf
# no network: with -L on spamd and sa-learn, the settings every site config here ends with
SA_NO_NETWORK = [
    "dns_available no          # no DNS (spamd and sa-learn also run with -L)",
    "skip_rbl_checks 1",
    "use_razor2 0",
    "use_pyzor 0",
    "use_dcc 0",
]


def spamassassin_site(site, settings):
    """``site`` made a site config folder: a copy of the packaged one (which
    plugins load; local.cf), then ``settings`` in a file of ours, read last."""
    os.makedirs(site, exist_ok=True)
    for path in sorted(glob.glob(os.path.join(SA_SITE_CONFIG, "*.pre")) + glob.glob(os.path.join(SA_SITE_CONFIG, "*.cf"))):
        shutil.copy(path, site)
    with open(os.path.join(site, "zz_bench_peers.cf"), "w") as f:
        f.write("# scripts/bench/bench_peers.py: Bayes in a temporary directory, no network\n")
        f.write("\n".join(settings) + "\n")
    return site


def start_spamd(base, site, home, children, servers, env, min_spare=None):
    """``spamd -L -x`` with the site config ``site`` on a free loopback port, ``children``
    children started at once (as ``nobody`` when run as root: ``base`` made readable to it),
    its log in ``base``; returns (spamc argv without its mode, seconds until it answered)."""
    tmp = os.path.join(base, "tmp")   # spamd's temporary files (as nobody: /tmp may not be writable to it)
    os.makedirs(tmp, exist_ok=True)
    env = dict(env, TMPDIR=tmp)
    if os.geteuid() == 0:
        world_readable(base)
        os.chmod(os.path.dirname(base), 0o755)
    port = free_port()
    log_path = os.path.join(base, "spamd.log")
    argv = ["spamd", "-L", f"--siteconfigpath={site}", "-x", f"--listen=127.0.0.1:{port}",
            "--allowed-ips=127.0.0.1", f"--max-children={children}", f"--min-children={children}",
            f"--min-spare={min(children, 1) if min_spare is None else min_spare}",
            f"--max-spare={children}", f"--pidfile={os.path.join(base, 'spamd.pid')}", "--syslog=stderr",
            f"--helper-home-dir={home}"]
    if os.geteuid() == 0:
        argv.append("--username=nobody")
    proc = servers.start("spamd", argv, log_path, env=env)
    spamc = ["spamc", "-d", "127.0.0.1", "-p", str(port)]
    ready = wait_until(lambda: subprocess.run(spamc + ["-K"], capture_output=True).returncode == 0,
                       "spamd", proc, log_path)
    return spamc, ready


# ---------------------------------------------------------------------------- one process per message
def quantiles(seconds):
    """(p50, p99) of ``seconds``, in milliseconds."""
    values = sorted(seconds)

    def q(p):
        return values[min(len(values) - 1, int(p * len(values)))] * 1000.0
    return q(0.5), q(0.99)


def per_process(commands, messages, seed=0):
    """Wall time of one process per message for each command, interleaved:
    for every message each command runs once, in a shuffled order, so a
    change of the machine's load hits all of them alike (the ratios of the
    same message's times are paired).  ``commands``: {name: function of a
    message path -> (argv, stdin path or None)}.  Returns {name: [seconds]}."""
    import random

    rng = random.Random(seed)
    times = {name: [] for name in commands}
    for path in messages:
        order = list(commands.items())
        rng.shuffle(order)
        for name, make in order:
            argv, stdin_path = make(path)
            with open(stdin_path, "rb") if stdin_path else open(os.devnull, "rb") as stdin:
                started = time.perf_counter()
                subprocess.run(argv, stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                times[name].append(time.perf_counter() - started)
    return times


def concurrently(target, n):
    """``target(i)`` for i in range(n), each in a thread of its own, all at once: wall seconds until the last ends."""
    import threading

    threads = [threading.Thread(target=target, args=(i,)) for i in range(n)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - started


def paired_ratio(numerator, denominator):
    """Median over messages of one command's time over another's (same message, same moment)."""
    import statistics

    return statistics.median(a / b for a, b in zip(numerator, denominator))


# ---------------------------------------------------------------------------- reports
def machine():
    """CPU model, cores, Python and platform, for a report's header."""
    cpu = None
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cpu": cpu or platform.processor(), "cores": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform()}


def evaluate(test, result):
    """spamnb.bayes.metrics' summary of ``result`` ({"verdicts", "scores"}) on
    ``test`` (rows of ``list_corpus``), with the false-negative rate."""
    from spamnb.bayes import metrics

    y = [r[2] for r in test]
    out = metrics.summary(y, result["verdicts"], result["scores"], FPR_POINTS)
    out["fnr"] = metrics.false_negative_rate(y, result["verdicts"])
    return out


# ---------------------------------------------------------------------------- matrices (scripts/tune)
# --matrix variants' alpha when none is given (fixed: the figures in docs/accuracy.md
# do not move with the filter's default)
MATRIX_ALPHA = 0.01


def transformed_matrix(X_raw, spec, pair_columns=None, idf_rows=None):
    """(matrix, alpha, min_df, renormalise) of a ``--matrix`` variant of
    scripts/tune/tune_accuracy.py; ``pair_columns`` (bool per column) the
    word-pair columns that ``pw=W`` weighs before the length is taken;
    ``idf``: each column times log(n / df) over the rows ``idf_rows`` (Rennie et
    al.'s inverse document frequency, before the length is taken)."""
    import numpy as np
    from scipy import sparse

    from spamnb.mail.tokenizer import DEFAULTS

    X = X_raw.tocsr().astype(np.float64)
    alpha, min_df, counts, scale, renormalise = MATRIX_ALPHA, 1, "log", None, None
    for item in filter(None, spec.split(",")):
        key, _, value = item.partition("=")
        if key in DEFAULTS:
            continue   # a tokenizer setting: in the matrix already
        if key in ("log", "binary", "raw"):
            counts = key
        elif key in ("dir", "beta", "boost", "bmargin", "pairs", "pair_scope", "pair_limit", "pw", "palpha", "idf"):
            continue   # per-token soft counts, row weights: _soft_variant
        elif key in ("l2", "l2k"):
            scale = float(value)
            renormalise = scale if key == "l2k" else None
        elif key == "alpha":
            alpha = float(value)
        elif key == "min_df":
            min_df = int(value)
        elif key != "default":
            raise ValueError(f"unknown variant {item!r}")
    X = X.copy()
    if counts == "log":
        X.data = np.log1p(X.data)
    elif counts == "binary":
        X.data[:] = 1.0
    pw = [float(v) for k, _, v in (p.partition("=") for p in spec.split(",")) if k == "pw"]
    if pw and pair_columns is not None:
        X = X @ sparse.diags(np.where(pair_columns, pw[0], 1.0))
    idf = [float(v or 1) for k, _, v in (p.partition("=") for p in spec.split(",")) if k == "idf"]
    if idf:   # idf=P: log(n / df) ** P
        rows = X_raw.tocsr()[idf_rows]
        df = np.bincount(rows.indices, minlength=X.shape[1]).astype(np.float64)
        weight = np.log((rows.shape[0] + 1.0) / (df + 1.0)) ** idf[0]
        X = X @ sparse.diags(weight)
    if scale is not None:
        norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
        inv = np.divide(scale, norms, out=np.zeros_like(norms), where=norms > 0)
        X = sparse.diags(inv) @ X
    return X.tocsr(), alpha, min_df, renormalise


def arrival_stream(corpus):
    """``[(data, is_spam)]`` of a corpus in ``spamnb evaluate --online``'s order, and the order's name."""
    from spamnb.evaluation.online import order_messages
    from spamnb.training.corpus import labelled_messages

    items = labelled_messages([str(corpus)])
    order, how = order_messages([m.relpath for m in items], [m.data for m in items], "auto")
    return [(items[i].data, items[i].is_spam) for i in order], how


def text_windows(regions, sizes):
    """``(start, end)`` token ranges of a message's text parts (``regions``, a token
    stream's): each part whole for size 0, else windows of ``size`` tokens half a
    window apart, the last one ending at the part's end (a part no longer than the
    window: the part)."""
    for start, end in regions:
        for size in sizes:
            if size <= 0 or end - start <= size:
                yield start, end
                continue
            step = max(1, size // 2)
            at = start
            while True:
                yield at, min(at + size, end)
                if at + size >= end:
                    break
                at += step


class MaskedStream:
    """Some of a message's tokens (``keep``: positions in its token ``stream``),
    standing for the stream in ``SpamFilter.learn`` (``Vocabulary.add`` reads
    ``hashes`` and ``write_tokens``).  Their counts are scaled to the filter's
    length as a message's are (the kept tokens weigh more than in the whole
    message); :meth:`scaled` gives the length that keeps their values."""

    def __init__(self, stream, keep):
        from array import array

        self.stream, self.keep = stream, array("i", keep)
        hashes = stream.hashes
        self.hashes = array("Q", [hashes[j] for j in self.keep])
        self.pairs_start, self.regions, self.truncated, self.length = -1, [], False, None

    def write_tokens(self, positions, count, blob, offsets):
        from array import array

        self.stream.write_tokens(array("i", [self.keep[positions[k]] for k in range(count)]), count, blob, offsets)

    def scaled(self, length):
        """Set :attr:`length`: the length (the filter's is ``length``) at which the kept
        tokens' counts are what they are in the whole message."""
        def norm(hashes):
            import numpy as np

            _tokens, counts = np.unique(np.frombuffer(memoryview(hashes).cast("B"), dtype=np.uint64),
                                        return_counts=True)
            return float(np.sqrt((np.log1p(counts) ** 2).sum())) or 1.0

        self.length = length * norm(self.hashes) / norm(self.stream.hashes)
        return self


def token_mask(spam_filter, stream, spam, margin, unknown=False, lean=False):
    """The token-wise auto-learn rule (scripts/check/autolearn_rules.py ``tokens``,
    steer_autolearn.py ``--tokens``): the positions of ``stream``'s tokens that a
    learn as ``spam`` counts.  A known token leaning the other way by more than
    ``margin`` is left out: its weight in the message's score as the filter's
    scorer weighs it (the message's counts scaled to its length), or with
    ``lean`` the token's own log-odds (that weight divided by the token's
    scaled count); an unknown token is counted when ``unknown``."""
    hashes = stream.hashes
    if not spam_filter.is_fitted:
        return list(range(len(hashes))) if unknown else []
    evidence = dict(spam_filter.scorer().score(hashes, len(hashes), stream.pairs_start)[1])
    idx = spam_filter.vocabulary_.lookup(hashes)
    if lean:
        import numpy as np

        known = np.frombuffer(memoryview(idx).cast("B"), dtype=np.int32)
        tokens, counts = np.unique(known[known >= 0], return_counts=True)
        if tokens.size:
            x = np.log1p(counts)
            x *= float(spam_filter.length_norm) / np.sqrt((x * x).sum())
            evidence = {int(i): evidence.get(int(i), 0.0) / xi for i, xi in zip(tokens, x)}
    sign = -1.0 if spam else 1.0
    return [j for j, i in enumerate(idx) if (unknown if i < 0 else sign * evidence.get(i, 0.0) <= margin)]


# ---------------------------------------------------------------------------- a cold process in instructions
_LAUNCH_LINE = re.compile(r"""exec "\$python" (?:\$site )?-P -c '(.*?)' "\$@"\s*$""", re.S)


def launcher_code(venv):
    """The ``-c`` code of ``VENV/bin/spamnb`` (the shell launcher setup.py installs)."""
    text = (venv / "bin" / "spamnb").read_text()
    match = _LAUNCH_LINE.search(text)
    if match is None:
        raise SystemExit(f"{venv}/bin/spamnb: not the shell launcher (no exec of python -P -c)")
    return match.group(1)


def launcher_args(venv):
    """The arguments ``VENV/bin/spamnb`` gives the Python beside it: ``-S`` when it
    runs it without site (``site=-S``), then ``-P`` and either the byte-compiled
    file it runs as the script (spamnb/_launcher's, when the launcher chooses it:
    asked of the launcher itself, run by ``sh -x`` with ``--version``) or ``-c
    CODE`` (:func:`launcher_code`)."""
    program = venv / "bin" / "spamnb"
    traced = subprocess.run(["sh", "-x", str(program), "--version"], capture_output=True, text=True, timeout=120,
                            stdin=subprocess.DEVNULL)
    for line in traced.stderr.splitlines():
        if line.startswith("+ exec ") and line.endswith(".pyc --version"):
            return shlex.split(line)[3:-1]   # + exec PYTHON -S -P FILE.pyc --version
    text = program.read_text()
    site = ["-S"] if re.search(r"^site=-S$", text, re.M) else []
    return [*site, "-P", "-c", launcher_code(venv)]


def callgrind_instructions(argv, stdin=None):
    """Instructions callgrind counted running ``argv`` (its output discarded)."""
    with tempfile.TemporaryDirectory(prefix="bench-cold-") as tmp:
        out = Path(tmp) / "callgrind.out"
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        with open(stdin or os.devnull, "rb") as f:
            proc = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *argv], stdin=f,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=tmp, timeout=600)
        found = re.search(rb"Collected : (\d+)", proc.stderr)
        if found is None:
            raise SystemExit(f"{' '.join(argv[:3])}: no count from callgrind:\n{proc.stderr.decode()[-2000:]}")
        return int(found.group(1))
