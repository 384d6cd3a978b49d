#!/usr/bin/env python3
"""What the server's one request entry costs a check, in one process.

An in-process ``spamnb.server.daemon.Server`` (not listening) with the model
``--model`` (default: one trained on the sample corpus, ``corpora/``, into
a temporary folder), then each of ``--messages`` messages of ``--corpus``
checked, the two ways interleaved message by message, ``--rounds`` times:

- ``entry``: what a front end does now: ``run_eagerly(handler.handle(Request(...)))``
  (spamnb.server.handler), a coroutine that ends without waiting;
- ``direct``: the synchronous path the front ends kept before it: the
  user's model path, whether it is loaded, ``handler.check_now``.

Both give the same verdict (checked); the figures are the medians over
rounds of the CPU time per check (``time.thread_time``: on a machine busy
with other jobs the time waiting for a core is left out) and of the wall
time, and the median of the per-round ratios entry / direct.

    python scripts/bench/bench_request_entry.py [--corpus corpora] [--messages 300] [--rounds 21]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from spamnb.server.daemon import Server  # noqa: E402
from spamnb.server.handler import Request, run_eagerly  # noqa: E402


def messages_of(corpus, n):
    files = sorted(p for p in Path(corpus).rglob("*") if p.is_file() and not p.name.startswith(".")
                   and p.parent != Path(corpus))
    step = max(1, len(files) // n)
    return [p.read_bytes() for p in files[::step][:n]]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=str(REPO / "corpora"))
    parser.add_argument("--model", help="a model file (default: trained on --corpus into a temporary folder)")
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=21)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-entry-"))
    model = args.model
    if model is None:
        model = str(work / "model.spamnb")
        subprocess.run([sys.executable, "-m", "spamnb", "train", "-q", "-j", "1", "-m", model, args.corpus],
                       check=True, env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=1800)
    server = Server({"model": model, "listen": [str(work / "unused.sock")]})
    server.load_site_model()
    handler = server.handler
    messages = messages_of(args.corpus, args.messages)

    def direct(message):
        paths = handler.model_path(None)
        assert server.models.loaded(paths[0])
        return handler.check_now(message, None, False, paths)

    def entry(message):
        answered, checked = run_eagerly(handler.handle(Request(message, None, False)))
        assert answered
        return checked

    async def run():
        times = {"entry": [], "direct": []}
        walls = {"entry": [], "direct": []}
        ratios, wall_ratios = [], []
        for round_ in range(args.rounds):
            spent = {"entry": 0.0, "direct": 0.0}
            wall = {"entry": 0.0, "direct": 0.0}
            for i, message in enumerate(messages):
                ways = (("entry", entry), ("direct", direct)) if (i + round_) % 2 == 0 else \
                    (("direct", direct), ("entry", entry))
                verdicts = []
                for name, way in ways:
                    started, cpu = time.perf_counter(), time.thread_time()
                    verdicts.append(way(message).score)
                    spent[name] += time.thread_time() - cpu
                    wall[name] += time.perf_counter() - started
                assert verdicts[0] == verdicts[1]
            for name in spent:
                times[name].append(spent[name] / len(messages) * 1e6)
                walls[name].append(wall[name] / len(messages) * 1e6)
            ratios.append(spent["entry"] / spent["direct"])
            wall_ratios.append(wall["entry"] / wall["direct"])
        return times, walls, ratios, wall_ratios

    times, walls, ratios, wall_ratios = asyncio.run(run())
    server.loader.shutdown()
    server.learners.shutdown()
    print(f"{len(messages)} messages of {args.corpus}, {args.rounds} rounds; load average at the end "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for name, values in times.items():
        print(f"  {name:7s} CPU {statistics.median(values):8.2f} us a check, wall {statistics.median(walls[name]):8.2f} us"
              " (medians of the rounds)")
    print(f"  entry / direct, median of the per-round ratios: CPU {statistics.median(ratios):.4f}, wall "
          f"{statistics.median(wall_ratios):.4f}; the entry's own CPU "
          f"{statistics.median(times['entry']) - statistics.median(times['direct']):+.2f} us a check")


if __name__ == "__main__":
    main()
