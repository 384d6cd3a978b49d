#!/usr/bin/env python
"""A burst of IMAP MOVEs into Junk through Dovecot's learn-on-move (contrib/dovecot/).

    python scripts/bench/bench_learn_on_move.py [--moves 500] [--model MODEL]

Trains a model on the sample corpus (or copies MODEL), starts ``spamnb serve
--allow-tell --create-user-models`` on a loopback port, and a private Dovecot
(the installed dovecot-imapd and dovecot-sieve, its folders in a temporary
folder, tests/dovecot_private.py) with contrib/dovecot/ installed on the
spamc route; appends N distinct messages to the INBOX with imaplib, then
moves them into Junk one ``UID MOVE`` each, as a user sorting mail does, and
prints the wall time of the moves and how many the user's model learned.
Run as root, Dovecot's mail processes (and spamc) run as ``nobody``.
"""

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

import dovecot_private  # noqa: E402
from test_dovecot import LearnOnMove, burst, counts, USER  # noqa: E402
from test_serve import SPAMC, Daemon  # noqa: E402

from conftest import run_spamnb  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--moves", type=int, default=500)
    parser.add_argument("--model", help="a model to copy (default: train one on corpora/)")
    args = parser.parse_args()
    for reason in (dovecot_private.missing(), dovecot_private.missing_sieve()):
        if reason:
            sys.exit(reason)
    with tempfile.TemporaryDirectory(prefix="learn-on-move-") as tmp:
        home = Path(tmp) / "serve"
        home.mkdir()
        if args.model:
            shutil.copy(args.model, home / "model.spamnb")
        else:
            proc = run_spamnb(["train", "-q", REPO / "corpora"], home=home)
            if proc.returncode:
                sys.exit(proc.stderr.decode(errors="replace"))
        daemon = Daemon(home, "--allow-tell", "--create-user-models", "--models-dir", home / "users")
        base = dovecot_private.base_folder(Path(tmp) / "dovecot")
        base.mkdir(exist_ok=True)
        site = LearnOnMove(base, f'ROUTE=spamc\nSPAMC={SPAMC}\nSPAMC_OPTIONS="-d 127.0.0.1 -p {daemon.port}"\n'
                                 "PER_USER=yes\nTIMEOUT=5\n")
        try:
            before = counts(home / "model.spamnb")
            took = burst(site, args.moves)
            after = counts(home / "users" / USER / "model.spamnb")
            print(f"dovecot {dovecot_private.version()}: {args.moves} single-message MOVEs into Junk "
                  f"in {took:.2f} s ({took / args.moves * 1000:.1f} ms a move); "
                  f"learned as spam: {after[1] - before[1]}; failures logged: "
                  f"{len(site.learn_log.read_text().splitlines())}")
        finally:
            site.stop()
            daemon.stop()
            if os.getuid() == 0:
                shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
