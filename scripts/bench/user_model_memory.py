#!/usr/bin/env python3
"""What a user model that is the site model plus a journal costs a process that loads it.

The script makes N user models as ``spamnb serve --create-user-models`` does
(each a hard link of the site model's file, then one message learned by
``spamnb learn``, which appends it to the user's own journal), then, in a
fresh process for each way of loading, loads the site model and the N user
models and classifies one message with each, and prints the process's
resident memory (``/proc/self/status``: VmRSS, and its anonymous and
file-backed parts) before and after, per user.  The ways:

``whole``   ``SpamFilter.load(path)``: the file read into memory, the journal
            replayed there (what a TELL server's model cache holds today);
``mapped``  ``SpamFilter.load(path, mapped=True)``: the file mapped privately,
            the journal replayed over copies of the pages it writes.

    python scripts/bench/user_model_memory.py SITE_MODEL MESSAGE [-n 20]

Issue 34 (item 4) asks that a user model cost its journal, not a copy of
the site model: these figures say where each way stands (docs/serve.md).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

_LOADER = r"""
import sys
from spamnb.model.spam_filter import SpamFilter

def status():
    fields = {}
    with open("/proc/self/status") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name in ("VmRSS", "RssAnon", "RssFile"):
                fields[name] = int(rest.split()[0])
    return fields

mapped = sys.argv[1] == "mapped"
message = open(sys.argv[2], "rb").read()
site = SpamFilter.load(sys.argv[3], mapped=mapped)
site.classify(message)
before = status()
kept = []
for path in sys.argv[4:]:
    user = SpamFilter.load(path, mapped=mapped)
    user.classify(message)
    kept.append(user)
after = status()
print(" ".join(f"{k}={before[k]},{after[k]}" for k in ("VmRSS", "RssAnon", "RssFile")))
"""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("site_model")
    ap.add_argument("message")
    ap.add_argument("-n", type=int, default=20, help="user models (default 20)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="spamnb-users-") as work:
        site = os.path.join(work, "model.spamnb")
        os.link(os.path.abspath(args.site_model), site) if _same_fs(args.site_model, work) else \
            subprocess.run(["cp", args.site_model, site], check=True)
        data = open(args.message, "rb").read()
        users = []
        for i in range(args.n):
            folder = os.path.join(work, f"user{i}")
            os.mkdir(folder)
            path = os.path.join(folder, "model.spamnb")
            os.link(site, path)
            subprocess.run([sys.executable, "-m", "spamnb", "learn", "--spam", "-m", path, "-"],
                           input=data + f"\nuser {i} note w{i}x\n".encode(), check=True,
                           stdout=subprocess.DEVNULL)
            users.append(path)
        journal = os.path.getsize(users[0] + ".journal")
        print(f"site model {os.path.getsize(site) / 2**20:.1f} MiB; {args.n} user models, "
              f"each a hard link and a journal of {journal} bytes")
        print(f"{'load':>7} {'VmRSS KiB/user':>15} {'anonymous':>10} {'file-backed':>12}")
        for way in ("whole", "mapped"):
            out = subprocess.run([sys.executable, "-c", _LOADER, way, args.message, site, *users],
                                 check=True, capture_output=True, text=True).stdout.split()
            figures = {k: tuple(map(int, v.split(","))) for k, v in (f.split("=") for f in out)}
            per = {k: (b - a) / args.n for k, (a, b) in figures.items()}
            print(f"{way:>7} {per['VmRSS']:>15.0f} {per['RssAnon']:>10.0f} {per['RssFile']:>12.0f}")
    return 0


def _same_fs(path, folder):
    return os.stat(path).st_dev == os.stat(folder).st_dev


if __name__ == "__main__":
    sys.exit(main())
