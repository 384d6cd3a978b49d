#!/usr/bin/env python3
"""Cold-start cost of reading a model: private read (what ``store.read_model``
does) against a memory map, each followed by the checksum that both need.

    python scripts/bench/bench_model_read.py [MODEL] [--repeat 30]
    python scripts/bench/bench_model_read.py MODEL --fresh 9

``--fresh N``: the memory a model is read into, each way timed in N fresh
processes in turn (as a cold start meets it: pages not yet faulted in):
a zero-filled bytearray, an anonymous mapping with small pages, and one with
huge pages advised (``store._private_memory``, what ``read_model`` uses for
files from ``store._HUGE_PAGES_FROM`` bytes); the read alone, no checksum.

Without MODEL, trains one on the whole corpus (default ../shared/corpora/spamassassin).
Both variants run in this process, alternately, on a file in the page cache.
"""

import argparse
import mmap
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from spamnb.persistence import store  # noqa: E402


def mapped(path):
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    view = memoryview(m)
    fields = store._PREFIX.unpack_from(view)
    store._checksum(fields[:5], view[store._PREFIX.size:])


def read(path):
    view, _ = store._read_whole(path)
    fields = store._PREFIX.unpack_from(view)
    store._checksum(fields[:5], view[store._PREFIX.size:])


_FRESH = """
import sys, time
from spamnb.persistence import store
way = sys.argv[2]
if way == "bytearray":
    store._private_memory = lambda size: memoryview(bytearray(size))
elif way == "anonymous, small pages":
    store._HUGE_PAGES_FROM = 1 << 62
started = time.perf_counter()
store._read_whole(sys.argv[1])
print(time.perf_counter() - started)
"""
WAYS = ("bytearray", "anonymous, small pages", "anonymous, huge pages")


def fresh(path, runs):
    import subprocess

    env = dict(os.environ, PYTHONPATH=str(REPO))
    times = {way: [] for way in WAYS}
    for _ in range(runs):
        for way in WAYS:
            out = subprocess.run([sys.executable, "-c", _FRESH, path, way], env=env, check=True,
                                 capture_output=True, text=True).stdout
            times[way].append(float(out))
    print(f"model {os.path.getsize(path) / 2**20:.1f} MiB, read in {runs} fresh processes each way, median (min, max):")
    for way, values in times.items():
        print(f"  {way}: {statistics.median(values) * 1e3:.1f} ms ({min(values) * 1e3:.1f}, {max(values) * 1e3:.1f})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?")
    parser.add_argument("--corpus", default=str(REPO.parent / "shared" / "corpora" / "spamassassin"))
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--fresh", type=int, metavar="N", help="the read's memory, N fresh processes each way")
    args = parser.parse_args()
    path = args.model
    if args.fresh:
        if path is None:
            parser.error("--fresh needs a MODEL")
        return fresh(path, args.fresh)
    if path is None:
        from spamnb import SpamFilter

        files = [p for p in Path(args.corpus).rglob("*") if p.is_file() and p.name.lower() != "readme.md"]
        labels = [any(part.startswith("spam") for part in p.relative_to(args.corpus).parts[:-1]) for p in files]
        path = os.path.join(tempfile.mkdtemp(), "model.spamnb")
        SpamFilter().fit(files, labels, tune=False).save(path)
    times = {"mmap + checksum": [], "read + checksum": []}
    for _ in range(args.repeat):
        for name, fn in (("mmap + checksum", mapped), ("read + checksum", read)):
            started = time.perf_counter()
            fn(path)
            times[name].append(time.perf_counter() - started)
    print(f"model {os.path.getsize(path) / 1e6:.1f} MB, {args.repeat} runs each, median (min):")
    for name, values in times.items():
        print(f"  {name}: {statistics.median(values) * 1e3:.2f} ms ({min(values) * 1e3:.2f} ms)")


if __name__ == "__main__":
    main()
