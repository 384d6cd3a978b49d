#!/usr/bin/env python3
"""Reference log-odds of the online (TREC) protocol, to keep ``spamnb evaluate --online`` where it is.

For each shared corpus (``../shared/corpora/{spamassassin,enron-spam}`` beside
the repository) and each feedback mode (``spamnb.evaluation.online.FEEDBACK``:
full, error, auto), runs ``spamnb.evaluation.online.run_online`` over the first
``--n`` messages in arrival order (``order_messages``, "auto", as ``spamnb
evaluate --online`` orders them) and records, per message, the log-odds given
before it was learned, the model's own cutoffs when it arrived and whether it
was learned.  ``--write`` stores them (float64, zlib, base64 in JSON: a few
tens of KB); ``--check`` compares a run of this tree with a stored file and
exits 1 when a log-odds or cutoff differs by more than ``--tolerance``
(1e-9) or a message learned differs::

    python scripts/check/online_reference.py --write tests/data/online_reference.json   # on the old tree
    python scripts/check/online_reference.py --check tests/data/online_reference.json   # on the new one

It uses only the public API of ``spamnb.evaluation.online`` and
``spamnb.training.corpus``, so the same script runs on both sides;
``tests/test_online_reference.py`` runs the check (skipped without the corpora).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import zlib

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

CORPORA = {"spamassassin": os.path.join(REPO, "..", "shared", "corpora", "spamassassin"),
           "enron": os.path.join(REPO, "..", "shared", "corpora", "enron-spam")}
MODES = ("full", "error", "auto")
DEFAULT_N = 1000


def stream(corpus, n):
    """(messages as bytes, labels) of the first ``n`` messages of ``corpus`` in arrival order."""
    from spamnb.evaluation.online import order_messages
    from spamnb.training.corpus import labelled_messages

    items = labelled_messages([corpus])
    order, _how = order_messages([m.relpath for m in items], [m.data for m in items], "auto")
    order = order[:n]
    return [items[i].data for i in order], [items[i].is_spam for i in order]


def run(corpus, mode, n):
    """``run_online``'s result on the first ``n`` messages of ``corpus`` in feedback ``mode``."""
    from spamnb.evaluation.online import feedback_options, run_online

    datas, y = stream(corpus, n)
    return run_online(datas, y, **feedback_options(mode))


def _pack(values, dtype):
    import numpy as np

    return base64.b64encode(zlib.compress(np.asarray(values, dtype=dtype).tobytes(), 9)).decode("ascii")


def _unpack(text, dtype):
    import numpy as np

    return np.frombuffer(zlib.decompress(base64.b64decode(text)), dtype=dtype)


def record(result):
    return {"n": int(len(result.y)), "log_odds": _pack(result.log_odds, "<f8"),
            "spam_cutoffs": _pack(result.spam_cutoffs, "<f8"), "ham_cutoffs": _pack(result.ham_cutoffs, "<f8"),
            "trained": _pack(result.trained, "u1")}


def compare(stored, result, tolerance=1e-9):
    """Lines naming what differs between a stored record and a run (empty: the same)."""
    import numpy as np

    problems = []
    if stored["n"] != len(result.y):
        return [f"{stored['n']} messages stored, {len(result.y)} run"]
    for name in ("log_odds", "spam_cutoffs", "ham_cutoffs"):
        want = _unpack(stored[name], "<f8")
        got = np.asarray(getattr(result, name), dtype=np.float64)
        same_inf = (want == got) | (np.isnan(want) & np.isnan(got))
        with np.errstate(invalid="ignore"):
            diff = np.where(same_inf, 0.0, np.abs(want - got))
        diff = np.nan_to_num(diff, nan=np.inf)
        worst = int(np.argmax(diff)) if diff.size else 0
        if diff.size and diff[worst] > tolerance:
            problems.append(f"{name}: message {worst} differs by {diff[worst]:.3g} "
                            f"({want[worst]!r} stored, {got[worst]!r} now; {int((diff > tolerance).sum())} over)")
    trained = _unpack(stored["trained"], "u1").astype(bool)
    if not np.array_equal(trained, np.asarray(result.trained, dtype=bool)):
        problems.append(f"trained: {int((trained != np.asarray(result.trained, dtype=bool)).sum())} messages differ")
    return problems


def max_difference(stored, result):
    import numpy as np

    want = _unpack(stored["log_odds"], "<f8")
    got = np.asarray(result.log_odds, dtype=np.float64)
    finite = np.isfinite(want) & np.isfinite(got)
    return float(np.max(np.abs(want[finite] - got[finite]))) if finite.any() else 0.0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--write", metavar="JSON", help="store this tree's figures")
    what.add_argument("--check", metavar="JSON", help="compare this tree's figures with a stored file")
    parser.add_argument("--n", type=int, default=DEFAULT_N, help=f"messages of each corpus (default {DEFAULT_N})")
    parser.add_argument("--corpora", default=",".join(CORPORA), help="spamassassin,enron")
    parser.add_argument("--modes", default=",".join(MODES), help="full,error,auto")
    parser.add_argument("--tolerance", type=float, default=1e-9)
    args = parser.parse_args(argv)
    corpora, modes = args.corpora.split(","), args.modes.split(",")
    stored = None
    if args.check:
        with open(args.check) as f:
            stored = json.load(f)
    out, bad = {}, 0
    for name in corpora:
        root = CORPORA[name]
        if not os.path.isdir(root):
            print(f"{name}: no corpus at {os.path.normpath(root)}, skipped", file=sys.stderr)
            continue
        for mode in modes:
            n = stored[name][mode]["n"] if stored else args.n
            result = run(root, mode, n)
            if stored is None:
                out.setdefault(name, {})[mode] = record(result)
                print(f"{name} {mode}: {len(result.y)} messages")
                continue
            problems = compare(stored[name][mode], result, args.tolerance)
            bad += bool(problems)
            print(f"{name} {mode}: {n} messages, largest log-odds difference "
                  f"{max_difference(stored[name][mode], result):.3g}" + ("" if not problems else ": DIFFERS"))
            for line in problems:
                print(f"  {line}")
    if stored is None:
        with open(args.write, "w") as f:
            json.dump(out, f, indent=1)
            f.write("\n")
        print(f"wrote {args.write}")
        return 0
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
