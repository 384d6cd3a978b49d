"""Scale figures: ``spamnb train -j 1`` against ``-j 2`` as run (1x and 4x), training and batch scoring at -j 1 / -j 2 (processes and, for
contrast, threads) against bogofilter's bulk mode, a Dask LocalCluster against
-j 2, the fixed costs, the per-message and per-merge costs of the cost model,
and peak memory against corpus size (1x, 4x, 16x the corpus, as mbox files
with varied bytes so that tokens are not all duplicates).

    python scripts/bench/bench_scale.py [--corpus DIR ...] [--scales 1 4 16] [--repeat 3] [--json PATH]

Every timing is the best and the median of ``--repeat`` runs, the systems
interleaved in each round, so a busy machine slows them alike.  Generated
corpora go to a temporary folder that is removed at the end.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from spamnb.estimator import counting

from spamnb.batch import classify as batch

from spamnb.training import pipeline

from spamnb.training import planning

from spamnb.training import workers# noqa: E402
from spamnb.training.corpus import labelled_messages  # noqa: E402
from spamnb.model.spam_filter import SpamFilter  # noqa: E402

DEFAULT_CORPUS = REPO.parent / "shared" / "corpora" / "spamassassin"


# ---------------------------------------------------------------------------- helpers
def timed(function, *args, **kwargs):
    started = time.perf_counter()
    result = function(*args, **kwargs)
    return time.perf_counter() - started, result


def summary(seconds, n):
    best, median = min(seconds), statistics.median(seconds)
    return {"best_s": round(best, 4), "median_s": round(median, 4), "msg_per_s_best": round(n / best),
            "msg_per_s_median": round(n / median), "runs": len(seconds)}


def tree_stats(pid):
    """``(bytes in memory, {pid: CPU seconds})`` of a process and all its
    descendants (from /proc; memory: the sum of their proportional set sizes)."""
    children, cpu = {}, {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(int(fields[1]), []).append(int(entry))
            cpu[int(entry)] = (int(fields[11]) + int(fields[12])) / tick
    total, todo, seen = 0, [pid], {}
    while todo:
        p = todo.pop()
        total += _pss(p)
        if p in cpu:
            seen[p] = cpu[p]
        todo.extend(children.get(p, ()))
    return total, seen


def _pss(pid):
    """A process's proportional set size (its private pages, and its share of
    the pages it shares: workers forked from a parent share its imports), or
    its resident size where /proc has no smaps_rollup."""
    for name, key in (("smaps_rollup", "Pss:"), ("status", "VmRSS:")):
        try:
            with open(f"/proc/{pid}/{name}") as f:
                for line in f:
                    if line.startswith(key):
                        return int(line.split()[1]) * 1024
        except OSError:
            continue
    return 0


def tree_rss(pid):
    """Bytes in memory of a process and all its descendants (the sum of their PSS)."""
    return tree_stats(pid)[0]


def peak_tree_rss(argv, env=None, cwd=None):
    """Run ``argv``; returns (seconds, peak memory (PSS) of its process tree, CPU seconds
    ``{"parent": ..., "workers": ...}`` (the command's own process, and every
    other process of its tree: forkserver and workers; sampled every 50 ms, so
    the last 50 ms of a worker may be missed), stdout)."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd)
    peak, cpu = 0, {}
    while proc.poll() is None:
        rss, seen = tree_stats(proc.pid)
        peak = max(peak, rss)
        cpu.update(seen)
        time.sleep(0.05)
    out, err = proc.communicate()
    elapsed = time.perf_counter() - started
    if proc.returncode:
        raise RuntimeError(f"{argv[:4]}... failed: {err.decode()[-500:]}")
    parent = cpu.pop(proc.pid, 0.0)
    return elapsed, peak, {"parent": round(parent, 2), "workers": round(sum(cpu.values()), 2)}, out.decode()


def labelled_files(corpora):
    """(path, is_spam) of every message of the corpora, as spamnb train reads them."""
    from spamnb.mail.reader import looks_like_mail

    out = []
    for root in corpora:
        for piece in planning.plan_training([root]):
            with open(piece.path, "rb") as f:
                if looks_like_mail(f.read(65536)):
                    out.append((piece.path, piece.is_spam))
    return out


def write_scaled_mbox(files, scale, folder, vary=True):
    """spam.mbox and ham.mbox holding every message ``scale`` times; with
    ``vary``, copy k > 0 has its digits shifted by k (dates, ids, prices,
    addresses change: new tokens, as a bigger real corpus brings) and a copy
    tag line; without, the copies are exact (the vocabulary stays the same)."""
    folder.mkdir(parents=True, exist_ok=True)
    shift = [bytes.maketrans(b"0123456789", bytes((48 + (d + k) % 10) for d in range(10))) for k in range(10)]
    n = 0
    with open(folder / "spam.mbox", "wb") as spam, open(folder / "ham.mbox", "wb") as ham:
        for k in range(scale):
            for path, is_spam in files:
                data = Path(path).read_bytes()
                if k and vary:
                    data = data.translate(shift[k % 10]) + f"\ncopy-{k}\n".encode()
                out = spam if is_spam else ham
                if not data.startswith(b"From "):
                    out.write(b"From corpus@example.com Mon Nov 23 10:00:00 2026\n")
                out.write(data.rstrip(b"\n") + b"\n\n")
                n += 1
    return n


# ---------------------------------------------------------------------------- sections
def bogofilter_runs(work, files):
    """(train seconds, score seconds) of bogofilter's bulk mode on the files."""
    db = tempfile.mkdtemp(prefix="bogofilter-", dir=work)
    lists = {}
    for name, rows in (("spam", [p for p, s in files if s]), ("ham", [p for p, s in files if not s]),
                       ("all", [p for p, _s in files])):
        lists[name] = os.path.join(work, f"bogo-{name}.txt")
        with open(lists[name], "w") as f:
            f.writelines(p + "\n" for p in rows)
    base = ["bogofilter", "-C", "-d", db]
    started = time.perf_counter()
    for flag, name in (("-s", "spam"), ("-n", "ham")):
        with open(lists[name], "rb") as f:
            subprocess.run(base + [flag, "-b"], stdin=f, check=True, capture_output=True)
    train = time.perf_counter() - started
    started = time.perf_counter()
    with open(lists["all"], "rb") as f:
        subprocess.run(base + ["-b", "-T"], stdin=f, capture_output=True)   # exit code: the last verdict
    score = time.perf_counter() - started
    shutil.rmtree(db, ignore_errors=True)
    return train, score


def count_with_threads(corpora, n_threads, partition_size=planning.DEFAULT_PARTITION_SIZE):
    """Counting partitions on threads (for the GIL figure): the same work as -j N."""
    from concurrent.futures import ThreadPoolExecutor

    spec = counting.counting_spec(SpamFilter())
    parts = list(planning.partitions(planning.plan_training(corpora), partition_size))
    with ThreadPoolExecutor(n_threads) as pool:
        results = list(pool.map(lambda part: planning.count_partition(spec, part), parts))
    return counting.tree_reduce(r[0] for r in results)


def _timed_count(*job):
    """count_partition, with the CPU seconds it took in the worker."""
    started = time.process_time()
    counts, report = planning.count_partition(*job)
    return counts, time.process_time() - started


def cpu_split(corpora, n_jobs, partition_size=planning.DEFAULT_PARTITION_SIZE):
    """CPU seconds of a training run (the steps of pipeline.train): in the
    workers (counting) and in the parent (planning, receiving, merging,
    building the filter).  Under load, wall time says little; CPU time says
    what the second core would have to do."""
    spam_filter = SpamFilter()
    spec = counting.counting_spec(spam_filter)
    parent = time.process_time()
    worker = [0.0]

    def counted():
        parts = planning.partitions(planning.plan_training(corpora), partition_size)
        jobs = ((spec, part) for part in parts)
        for counts, cpu in workers.run_ordered(_timed_count, jobs, n_jobs):
            worker[0] += cpu
            yield counts

    counting.tree_reduce(counted()).to_filter(spam_filter)
    parent = time.process_time() - parent
    if n_jobs == 1:   # the counting ran here: it is in the parent's figure
        parent -= worker[0]
    return {"worker_cpu_s": round(worker[0], 3), "parent_cpu_s": round(parent, 3)}


def throughput(corpora, work, repeat, jobs):
    files = labelled_files(corpora)
    n = len(files)
    model = os.path.join(work, "model.spamnb")
    pipeline.train(corpora, n_jobs=1)[0].save(model)
    rows = {f"train -j {j}": [] for j in jobs}
    rows.update({f"train+cutoffs -j {j}": [] for j in jobs})
    rows.update({f"train threads {j}": [] for j in jobs if j > 1})
    rows.update({f"score -j {j}": [] for j in jobs})
    rows.update({"bogofilter train": [], "bogofilter score": []})
    for _round in range(repeat):
        for j in jobs:
            rows[f"train -j {j}"].append(timed(pipeline.train, corpora, n_jobs=j)[0])
            rows[f"train+cutoffs -j {j}"].append(
                timed(pipeline.train, corpora, n_jobs=j, calibration={"target_fpr": 0.001})[0])
            if j > 1:
                rows[f"train threads {j}"].append(timed(count_with_threads, corpora, j)[0])
            paths = [p for p, _s in files]
            rows[f"score -j {j}"].append(
                timed(batch.classify_batch, model, paths, n_jobs=j, out=io.StringIO(), err=io.StringIO())[0])
        if shutil.which("bogofilter"):
            train, score = bogofilter_runs(work, files)
            rows["bogofilter train"].append(train)
            rows["bogofilter score"].append(score)
    out = {name: summary(seconds, n) for name, seconds in rows.items() if seconds}
    for j in jobs:
        splits = [cpu_split(corpora, j) for _round in range(repeat)]
        out[f"cpu -j {j}"] = min(splits, key=lambda x: x["worker_cpu_s"] + x["parent_cpu_s"])
    one = out[f"cpu -j {jobs[0]}"]
    for j in jobs[1:]:
        split = out[f"cpu -j {j}"]
        total = split["worker_cpu_s"] + split["parent_cpu_s"]
        # on j idle cores: the parent's part runs beside the workers (it merges while they count)
        ideal = max(split["worker_cpu_s"] / j, split["parent_cpu_s"])
        out[f"cpu -j {j}"]["total_over_j1"] = round(total / (one["worker_cpu_s"] + one["parent_cpu_s"]), 3)
        out[f"cpu -j {j}"]["speedup_bound_idle_cores"] = round((one["worker_cpu_s"] + one["parent_cpu_s"]) / ideal, 2)
    return n, out


def unit_costs(corpora, partition_size=planning.DEFAULT_PARTITION_SIZE):
    """Per-message counting cost (one process), per-partition counts size, and merge costs."""
    spec = counting.counting_spec(SpamFilter())
    parts = list(planning.partitions(planning.plan_training(corpora), partition_size))
    started = time.process_time()
    counted = [planning.count_partition(spec, part)[0] for part in parts]
    count_cpu = time.process_time() - started
    n = sum(int(c.class_count.sum()) for c in counted)
    sizes = [c.nbytes for c in counted]
    started = time.process_time()
    pair = counting.merge_counts(counted[:2])
    merge2 = time.process_time() - started
    started = time.process_time()
    total = counting.tree_reduce(iter(counted))
    reduce_cpu = time.process_time() - started
    started = time.process_time()
    counting.merge_counts([total, total])
    merge_full = time.process_time() - started
    import pickle

    started = time.process_time()
    blob = pickle.dumps(total, protocol=5)
    pickle.loads(blob)
    pickle_cpu = time.process_time() - started
    return {"messages": n, "partitions": len(parts), "count_us_per_msg": round(1e6 * count_cpu / n, 2),
            "partition_counts_bytes_mean": round(statistics.mean(sizes)),
            "partition_vocabulary_mean": round(statistics.mean(c.n_features for c in counted)),
            "merge_two_partitions_ms": round(1e3 * merge2, 2), "pair_vocabulary": pair.n_features,
            "tree_reduce_all_ms": round(1e3 * reduce_cpu, 1), "vocabulary": total.n_features,
            "merge_full_with_full_ms": round(1e3 * merge_full, 1),
            "merge_ns_per_token": round(1e9 * merge_full / (2 * total.n_features), 1),
            "full_counts_bytes": total.nbytes, "pickle_roundtrip_full_ms": round(1e3 * pickle_cpu, 1)}


def dask_figures(corpora, repeat):
    from dask import delayed
    from distributed import Client, LocalCluster

    from spamnb.training import cluster as spamnb_dask

    n = len(labelled_files(corpora))
    started = time.perf_counter()
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                           dashboard_address=None)
    client = Client(cluster)
    start_s = time.perf_counter() - started
    try:
        pipeline.train(corpora, dask=client.scheduler.address)[0]   # warm the workers (imports)
        address, options = client.scheduler.address, {"target_fpr": 0.001}
        on_dask, local, cut_dask, cut_local = [], [], [], []
        for _round in range(repeat):
            on_dask.append(timed(pipeline.train, corpora, dask=client.scheduler.address)[0])
            local.append(timed(pipeline.train, corpora, n_jobs=2)[0])
            # train with the cutoffs (both passes on the cluster; -j 2 scores spill files)
            cut_dask.append(timed(pipeline.train, corpora, dask=address, calibration=options)[0])
            cut_local.append(timed(pipeline.train, corpora, n_jobs=2, calibration=options)[0])
        noop = delayed(lambda i: i, pure=True)
        n_tasks = 500
        per_task = []
        for _round in range(repeat):
            tasks = [noop(i + 1000 * _round) for i in range(n_tasks)]
            per_task.append(timed(lambda: client.compute(tasks, sync=True))[0] / n_tasks)
    finally:
        client.close()
        cluster.close()
    return {"cluster_start_s": round(start_s, 2), "dask_fit": summary(on_dask, n), "j2_fit": summary(local, n),
            "dask_over_j2_median": round(statistics.median(on_dask) / statistics.median(local), 2),
            "dask_train_cutoffs": summary(cut_dask, n), "j2_train_cutoffs": summary(cut_local, n),
            "cutoffs_dask_over_j2_median": round(statistics.median(cut_dask) / statistics.median(cut_local), 2),
            "task_overhead_ms": round(1e3 * min(per_task), 2)}


def memory(corpora, work, scales, jobs, vary=True, train_args=()):
    files = labelled_files(corpora)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    rows = []
    for scale in scales:
        folder = Path(work) / f"x{scale}"
        n = write_scaled_mbox(files, scale, folder, vary)
        size = (folder / "spam.mbox").stat().st_size + (folder / "ham.mbox").stat().st_size
        row = {"scale": scale, "varied_copies": vary, "messages": n, "mbox_bytes": size,
               "train_options": " ".join(train_args) or "(defaults)"}
        for j in jobs:
            argv = [sys.executable, "-m", "spamnb", "train", "-q", "-j", str(j), "--spam", str(folder / "spam.mbox"),
                    "--ham", str(folder / "ham.mbox"), *train_args, "-m", str(folder / f"model-j{j}.spamnb")]
            seconds, peak, cpu, _out = peak_tree_rss(argv, env, work)
            row[f"j{j}"] = {"seconds": round(seconds, 2), "msg_per_s": round(n / seconds),
                            "peak_tree_pss_mib": round(peak / 2**20, 1), "cpu_s": cpu}
        if shutil.which("bogofilter"):   # its registration of the same two mbox files (-M: one message at a time)
            db = tempfile.mkdtemp(prefix="bogofilter-", dir=work)
            started = time.perf_counter()
            for flag, name in (("-s", "spam.mbox"), ("-n", "ham.mbox")):
                with open(folder / name, "rb") as f:
                    subprocess.run(["bogofilter", "-C", "-d", db, flag, "-M"], stdin=f, check=True, capture_output=True)
            seconds = time.perf_counter() - started
            shutil.rmtree(db, ignore_errors=True)
            row["bogofilter"] = {"seconds": round(seconds, 2), "msg_per_s": round(n / seconds)}
            for j in jobs:
                row[f"j{j}"]["over_bogofilter"] = round(seconds / row[f"j{j}"]["seconds"], 2)
        model = SpamFilter.load(folder / f"model-j{jobs[0]}.spamnb")
        row["vocabulary"] = model.vocabulary_.n_features
        row["model_bytes"] = (folder / f"model-j{jobs[0]}.spamnb").stat().st_size
        if scale <= 4 and vary:   # the corpus held in memory (labelled_messages + fit), for contrast
            code = ("import sys; from spamnb.training.corpus import labelled_messages; from spamnb.model.spam_filter import SpamFilter; "
                    "m = labelled_messages(spam=[sys.argv[1]], ham=[sys.argv[2]]); "
                    "SpamFilter().fit([x.data for x in m], [x.is_spam for x in m], tune=False)")
            seconds, peak, cpu, _out = peak_tree_rss(
                [sys.executable, "-c", code, str(folder / "spam.mbox"), str(folder / "ham.mbox")], env, work)
            row["in_memory_fit"] = {"seconds": round(seconds, 2), "cpu_seconds": cpu["parent"],
                                    "peak_pss_mib": round(peak / 2**20, 1)}
        rows.append(row)
        shutil.rmtree(folder)
    return rows


def cli_train(corpora, work, repeat, jobs, scales=(1, 4)):
    """``spamnb train -j N`` as a user runs it (default options: the counting
    pass, then the cutoffs' cross-validation over the spilled token hashes),
    wall seconds, interleaved: the figure the default of -j is chosen by; then
    one more run each, sampled from /proc, for the CPU seconds of the parent
    and of the workers (what the second core has to do)."""
    files = labelled_files(corpora)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = []
    for scale in scales:
        if scale == 1:
            sources, n = [str(c) for c in corpora], len(files)
        else:
            folder = Path(work) / f"cli-x{scale}"
            n = write_scaled_mbox(files, scale, folder)
            sources = ["--spam", str(folder / "spam.mbox"), "--ham", str(folder / "ham.mbox")]
        for options in ([], ["--target-fpr", "0"]):
            seconds = {j: [] for j in jobs}
            for _round in range(repeat):
                for j in jobs:
                    argv = [sys.executable, "-m", "spamnb", "train", "-q", "-j", str(j), *options, *sources, "-m",
                            os.path.join(work, f"cli-{scale}-{j}.spamnb")]
                    started = time.perf_counter()
                    subprocess.run(argv, check=True, env=env, capture_output=True, cwd=work)   # not a clone's spamnb in the cwd
                    seconds[j].append(time.perf_counter() - started)
            row = {"scale": scale, "messages": n, "options": " ".join(options) or "(defaults)"}
            row.update({f"j{j}": summary(seconds[j], n) for j in jobs})
            for j in jobs:
                argv = [sys.executable, "-m", "spamnb", "train", "-q", "-j", str(j), *options, *sources, "-m",
                        os.path.join(work, f"cli-{scale}-{j}.spamnb")]
                row[f"j{j}"]["cpu_s"] = peak_tree_rss(argv, env, work)[2]
            row["j1_over_j2_median"] = round(statistics.median(seconds[jobs[0]]) / statistics.median(seconds[jobs[-1]]),
                                             2)
            out.append(row)
        if scale != 1:
            shutil.rmtree(folder)
    return out


# ---------------------------------------------------------------------------- ceiling
_CEILING = {}


def _ceiling_work(kind, lo, hi):
    """One process's share of the ceiling figure: counting preloaded messages
    (``kind`` "counting": tokenizing and counting, no file reading, nothing
    sent back), or a tight integer loop with a tiny working set ("loop")."""
    if kind == "loop":
        total = 0
        for i in range(lo, hi):
            total += i * i
        return
    counting.count_messages(_CEILING["spec"], _CEILING["messages"][lo:hi])


def _split_run(kind, n, n_procs):
    """Wall seconds of ``n`` units of ``kind`` cut into ``n_procs`` forked processes."""
    import multiprocessing

    if n_procs == 1:
        return timed(_ceiling_work, kind, 0, n)[0]
    context = multiprocessing.get_context("fork")
    bounds = [n * k // n_procs for k in range(n_procs + 1)]
    started = time.perf_counter()
    procs = [context.Process(target=_ceiling_work, args=(kind, bounds[k], bounds[k + 1])) for k in range(n_procs)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
    return time.perf_counter() - started


def ceiling(corpora, repeat, jobs, copies=3):
    """What a second process gives on this machine when nothing is shared: the
    corpus read into memory first (``copies`` times over, so a run lasts a
    few seconds), then counted by one process, or cut in halves counted by
    two forked processes that send nothing back (no planning, no file reading,
    no merge); and the same for a tight integer loop whose working set fits
    in the first-level cache.  The counting ratio bounds what ``-j 2`` can
    reach here; the loop's says what the cores give code that shares nothing."""
    spec = counting.counting_spec(SpamFilter())
    messages = [(m.data, m.is_spam) for m in labelled_messages(corpora)]
    _CEILING.update(spec=spec, messages=messages * copies)
    n_messages, n_loop = len(_CEILING["messages"]), 20_000_000
    _ceiling_work("counting", 0, min(500, n_messages))   # warm the tokenizer's tables
    rows = {f"{kind} -j {j}": [] for kind in ("counting", "loop") for j in jobs}
    try:
        for _round in range(repeat):
            for kind, n in (("counting", n_messages), ("loop", n_loop)):
                for j in jobs:
                    rows[f"{kind} -j {j}"].append(_split_run(kind, n, j))
    finally:
        _CEILING.clear()
    out = {"messages": n_messages, "loop_iterations": n_loop}
    out.update({name: {"best_s": round(min(s), 4), "median_s": round(statistics.median(s), 4), "runs": s}
                for name, s in rows.items()})
    for kind in ("counting", "loop"):
        one = rows[f"{kind} -j {jobs[0]}"]
        for j in jobs[1:]:
            other = rows[f"{kind} -j {j}"]
            out[f"{kind} speedup -j {j}"] = {
                "best": round(min(one) / min(other), 2), "median": round(statistics.median(one) / statistics.median(other), 2),
                "per_round": [round(a / b, 2) for a, b in zip(one, other)]}
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", action="append", help=f"corpus folder (repeatable; default {DEFAULT_CORPUS})")
    parser.add_argument("--scales", type=int, nargs="*", default=[1, 4, 16])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--jobs", type=int, nargs="*", default=[1, 2])
    parser.add_argument("--skip", nargs="*", default=[], choices=["ceiling", "cli", "throughput", "costs", "dask", "memory"])
    parser.add_argument("--exact-copies", action="store_true",
                        help="memory: copies without varied bytes (the vocabulary stays that of 1x)")
    parser.add_argument("--train-option", action="append", default=[], metavar="OPTION",
                        help="memory: an option for spamnb train (repeatable; e.g. --train-option=--target-fpr=0)")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(argv)
    corpora = [os.path.abspath(c) for c in (args.corpus or [DEFAULT_CORPUS])]
    report = {"command": "python scripts/bench/bench_scale.py " + " ".join(argv if argv is not None else sys.argv[1:]),
              "cores": workers.available_cores(), "load_average_start": os.getloadavg()}
    work = tempfile.mkdtemp(prefix="spamnb-scale-")
    try:
        if "ceiling" not in args.skip:
            report["ceiling"] = ceiling(corpora, args.repeat, args.jobs)
            print(json.dumps(report["ceiling"], indent=1), flush=True)
        if "cli" not in args.skip:
            report["cli_train"] = cli_train(corpora, work, args.repeat, args.jobs)
            print(json.dumps(report["cli_train"], indent=1), flush=True)
        if "throughput" not in args.skip:
            n, rows = throughput(corpora, work, args.repeat, args.jobs)
            report["throughput"] = {"messages": n, **rows}
            print(json.dumps(report["throughput"], indent=1), flush=True)
        if "costs" not in args.skip:
            report["costs"] = unit_costs(corpora)
            print(json.dumps(report["costs"], indent=1), flush=True)
        if "dask" not in args.skip:
            report["dask"] = dask_figures(corpora, args.repeat)
            print(json.dumps(report["dask"], indent=1), flush=True)
        if "memory" not in args.skip:
            report["memory"] = memory(corpora, work, args.scales, args.jobs, vary=not args.exact_copies,
                                      train_args=args.train_option)
            print(json.dumps(report["memory"], indent=1), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report["load_average_end"] = os.getloadavg()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
