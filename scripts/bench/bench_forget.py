"""Forget against learn (issue 25, item 4): the time of ``spamnb learn`` then
``spamnb forget`` of N tiny messages (one mbox) and of real messages, into a
copy of a model (or a new one), and of ``SpamFilter.learn``/``forget`` of the
tiny messages in one process.

    python scripts/bench/bench_forget.py REPO [--model M] [--real DIR --n-real 40] [--sizes 1000,2000,4000,8000] [--library]

REPO is the checkout to run (its folder goes on PYTHONPATH); run it from /tmp.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time


def tiny(n):
    return [b"From x@y Mon Jan  1 00:00:00 2024\nSubject: tiny %d\n\nword%d other%d common text\n\n"
            % (i, i, i % 97) for i in range(n)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("repo")
    ap.add_argument("--sizes", default="1000,2000,4000,8000")
    ap.add_argument("--model", help="start from a copy of this model (default: none)")
    ap.add_argument("--real", help="a folder of real messages: learn (as spam) then forget the first --n-real")
    ap.add_argument("--n-real", type=int, default=40)
    ap.add_argument("--library", action="store_true", help="SpamFilter.learn/forget in this process instead")
    a = ap.parse_args()
    sizes = [int(x) for x in a.sizes.split(",") if x]
    if a.library:
        sys.path.insert(0, a.repo)
        from spamnb.model.spam_filter import SpamFilter

        for n in sizes:
            messages = [m.split(b"\n", 1)[1] for m in tiny(n)]
            sf = SpamFilter()
            started = time.perf_counter()
            for m in messages:
                sf.learn(m, True)
            learned = time.perf_counter() - started
            started = time.perf_counter()
            for m in messages:
                sf.forget(m, True)
            print(f"library, {n} tiny messages: learn {learned:.2f} s, forget {time.perf_counter() - started:.2f} s",
                  flush=True)
        return
    env = dict(os.environ, PYTHONPATH=a.repo)

    def run(args, home):
        started = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "spamnb", *args], env=dict(env, SPAMNB_HOME=home),
                              capture_output=True)
        if proc.returncode:
            sys.exit(proc.stderr.decode())
        return time.perf_counter() - started

    def fresh(home):
        if a.model:
            shutil.copyfile(a.model, os.path.join(home, "model.spamnb"))

    if a.real:
        with tempfile.TemporaryDirectory() as home:
            fresh(home)
            files = sorted(os.path.join(a.real, f) for f in os.listdir(a.real))[:a.n_real]
            learned = run(["learn", "--spam", "-q", *files], home)
            forgotten = run(["forget", "-q", *files], home)
            print(f"{len(files)} real messages: learn {learned:.2f} s, forget {forgotten:.2f} s", flush=True)
    for n in sizes:
        with tempfile.TemporaryDirectory() as home:
            fresh(home)
            mbox = os.path.join(home, "m.mbox")
            with open(mbox, "wb") as f:
                f.writelines(tiny(n))
            learned = run(["learn", "--spam", "-q", mbox], home)
            forgotten = run(["forget", "-q", mbox], home)
            print(f"{n} tiny messages: learn {learned:.2f} s, forget {forgotten:.2f} s", flush=True)


if __name__ == "__main__":
    main()
