"""Peak memory of ``spamnb train`` on large mbox files, generated from the corpora.

Writes a spam mbox and a ham mbox of about SIZE MB together (the corpora's
messages, repeated with a serial number in the Subject until the size is
reached; each message gets an envelope line), then runs
``spamnb train --spam spam.mbox --ham ham.mbox`` in a subprocess and prints
its peak resident memory (ru_maxrss of the child) and time.  Run it at two
sizes to see that the peak does not grow with the corpus::

    python scripts/bench/mbox_memory.py --size 350
    python scripts/bench/mbox_memory.py --size 50
"""

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_CORPORA = [os.path.join(REPO, "..", "shared", "corpora", name) for name in ("spamassassin", "enron-spam")]

sys.path.insert(0, REPO)
from spamnb.training.corpus import iter_labelled  # noqa: E402


def write_mboxes(corpora, folder, size_mb):
    target = size_mb * 1024 * 1024
    paths = {True: os.path.join(folder, "spam.mbox"), False: os.path.join(folder, "ham.mbox")}
    files = {label: open(path, "wb") for label, path in paths.items()}
    written, serial = 0, 0
    try:
        while written < target:
            for message in iter_labelled(trees=corpora):
                data = message.data
                if data.startswith(b"From "):
                    data = data.partition(b"\n")[2]
                data = data.replace(b"\nFrom ", b"\n>From ")  # mboxo escaping
                data = data.replace(b"Subject: ", f"Subject: [{serial}] ".encode(), 1)
                chunk = b"From generator@example.com Mon Nov 23 10:40:20 2026\n" + data.rstrip(b"\n") + b"\n\n"
                files[message.is_spam].write(chunk)
                written += len(chunk)
                serial += 1
                if written >= target:
                    break
    finally:
        for f in files.values():
            f.close()
    return paths, serial, written


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpora", nargs="*", default=DEFAULT_CORPORA)
    parser.add_argument("--size", type=int, default=350, help="MB of mbox to write (default 350)")
    parser.add_argument("--spamnb", default=REPO, metavar="DIR",
                        help="the source tree whose spamnb trains (default: this one; e.g. an older checkout)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        paths, n, written = write_mboxes(args.corpora, folder, args.size)
        env = dict(os.environ, SPAMNB_HOME=folder, PYTHONPATH=args.spamnb)
        started = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "spamnb", "train", "-q", "--spam", paths[True],
                               "--ham", paths[False]], env=env, capture_output=True, text=True,
                              cwd=folder)  # not this tree's folder: python -m would import its spamnb
        seconds = time.perf_counter() - started
        if proc.returncode != 0:
            sys.exit(f"train failed: {proc.stderr.strip()}")
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        info = subprocess.run([sys.executable, "-m", "spamnb", "info", "--tokens", "0"], env=env,
                              capture_output=True, text=True, cwd=folder).stdout.splitlines()[1]
        print(f"mbox: {written / 1048576:.0f} MiB, {n} messages; train: {seconds:.1f} s, "
              f"peak RSS {peak:.0f} MiB; {info.strip()}")


if __name__ == "__main__":
    main()
