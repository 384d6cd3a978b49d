#!/usr/bin/env python3
"""Show that tests fail when their feature breaks (issue 55).

Reads every ``scripts/check/breakages*.toml``; each ``[[breakage]]`` entry names
an issue item, why, a file, an exact text ``old`` (it must occur exactly once)
and its broken replacement ``new``, and the pytest node ids that must FAIL on
the broken code and PASS on the code as it is.  For each entry the working
tree is copied to a scratch folder (without .git), the replacement applied
there, and the tests run against the copy (PYTHONPATH pointing at it); they
are run against the unbroken tree too.

    python3 scripts/check/break_tests.py               # every entry
    python3 scripts/check/break_tests.py --only 55.4   # the entries of one item
    python3 scripts/check/break_tests.py --list

Prints PASS (the tests failed on the broken copy and pass on the unbroken
tree) or FAIL per entry; exits 0 only when every entry shows its tests failing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
IGNORE = shutil.ignore_patterns(".git", "mutation", "mutants", "__pycache__", "build", "*.egg-info", ".hypothesis")


def entries(repo=REPO):
    """Every entry of every breakages*.toml file, with the file it came from."""
    found = []
    for path in sorted((repo / "scripts" / "check").glob("breakages*.toml")):
        with open(path, "rb") as f:
            for entry in tomllib.load(f).get("breakage", []):
                missing = {"item", "why", "file", "old", "new", "tests"} - set(entry)
                if missing:
                    raise SystemExit(f"{path.name}: an entry lacks {', '.join(sorted(missing))}")
                found.append(dict(entry, source=path.name))
    return found


def _pytest(tree, tests, timeout):
    # SPAMNB_SLOW: a slow test named runs (tests/conftest.py leaves slow tests out of a plain run)
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONDONTWRITEBYTECODE="1", SPAMNB_SLOW="1")
    try:
        proc = subprocess.run(PYTEST + list(tests), cwd=tree, env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "timed out"
    return proc.returncode, (proc.stdout + proc.stderr).strip().splitlines()[-1:] or [""]


def check(entry, timeout, verbose=False):
    """(ok, one line saying why)."""
    with tempfile.TemporaryDirectory(prefix="spamnb-break-") as tmp:
        tree = Path(tmp) / "tree"
        shutil.copytree(REPO, tree, ignore=IGNORE, symlinks=True)
        target = tree / entry["file"]
        try:
            text = target.read_text()
        except OSError as e:
            return False, f"cannot read {entry['file']}: {e.strerror}"
        count = text.count(entry["old"])
        if count != 1:
            return False, f"`old` occurs {count} times in {entry['file']}, not once"
        clean_rc, clean_tail = _pytest(tree, entry["tests"], timeout)      # the copy unbroken yet
        if clean_rc != 0:
            return False, f"the tests fail on the unbroken tree (exit {clean_rc}: {clean_tail})"
        target.write_text(text.replace(entry["old"], entry["new"]))
        for test in entry["tests"]:             # each must fail on its own
            rc, tail = _pytest(tree, [test], timeout)
            if verbose:
                print(f"   {test}: unbroken: exit {clean_rc} {clean_tail}; broken: exit {rc} {tail}")
            if rc == 0:
                return False, f"{test} passes on the broken copy"
            if rc not in (1, None):     # 1: tests failed; None: timed out (hanging on broken code is failing)
                return False, f"pytest exit {rc} on the broken copy (collection or usage error?): {tail}"
    return True, f"the tests fail on the broken copy and pass on the unbroken tree ({clean_tail[0]})"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", metavar="ITEM", help="run the entries of one issue item (e.g. 55.4)")
    parser.add_argument("--list", action="store_true", help="list the entries, run nothing")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per pytest run (default 900)")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    todo = [e for e in entries() if args.only is None or e["item"] == args.only]
    if not todo:
        print(f"no entries{' for item ' + args.only if args.only else ''}")
        return 1
    failed = 0
    for entry in todo:
        head = f"{entry['item']} {entry['file']}: {entry['why']}"
        if args.list:
            print(f"{head}\n   {' '.join(entry['tests'])}")
            continue
        ok, why = check(entry, args.timeout, args.verbose)
        failed += not ok
        print(f"{'PASS' if ok else 'FAIL'} {head}\n   {why}", flush=True)
    if not args.list:
        print(f"{len(todo) - failed} of {len(todo)} breakages caught")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
