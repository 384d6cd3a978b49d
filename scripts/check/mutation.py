#!/usr/bin/env python3
"""Mutation testing of the learning and sharing modules with cosmic-ray (issue 55).

For each module named (all of them by default), one at a time: the working tree
is copied to a scratch folder (without .git; the compiled extensions come
along), cosmic-ray makes every mutant of the module there (mutants outside the
listed functions are skipped, for a module checked only in part), runs the
test files that cover the module against each (``pytest -x``, a timeout per
mutant), and the killed share and every survivor (line, operator, diff) are
printed.  The sessions stay in ``OUT`` (default ``mutation/``, git-ignored) for
``cr-report``.

    python3 scripts/check/mutation.py                   # every module, one at a time
    python3 scripts/check/mutation.py ledger journal    # some of them
    python3 scripts/check/mutation.py --sample 80 journal   # 80 mutants drawn at random (seed 55)
    python3 scripts/check/mutation.py --list

Needs cosmic-ray (the ``[test]`` extra pins it).  Slow: each mutant runs the
module's test files (seconds each); the whole run takes about an hour on two
cores.  Exit 0 when every module run reached ``--min`` percent killed.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shlex
import shutil
import random
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PYTEST = "python3 -m pytest -x -q -p no:cacheprovider"

# name: (module, functions to mutate (None: all of it), test files that cover it)
MODULES = {
    "ledger": ("spamnb/estimator/ledger.py", None, ["tests/test_ledger.py", "tests/test_ledger_digest.py",
                                                "tests/test_autolearn.py"]),
    "journal": ("spamnb/persistence/journal.py", None, ["tests/test_journal.py"]),
    "autolearn": ("spamnb/model/autolearn.py", None, ["tests/test_autolearn.py"]),
    "serve-autolearn": ("spamnb/server/autolearn.py", None, ["tests/test_serve_autolearn.py"]),
    "tell": ("spamnb/server/tell.py", None, ["tests/test_serve.py", "-k", "tell or learn or hooks",
                                             "tests/test_serve_autolearn.py", "tests/test_serve_paths.py"]),
    "lessons": ("spamnb/shared/lessons.py", None, ["tests/test_shared.py"]),
    "follower": ("spamnb/shared/host.py", ["Follower"], ["tests/test_shared.py"]),
    "milter-edits": ("spamnb/server/milter.py", ["MilterConnection._edits"], ["tests/test_milter.py"]),
    "headers": ("spamnb/mail/headers.py", None, ["tests/test_headers.py", "tests/test_header_paths.py", "tests/test_milter.py", "-k",
                                                 "subject or fields or paths or header", "tests/test_cli.py",
                                                 "tests/test_ledger.py"]),
}


def _spans(source, names):
    """The (first, last) line spans of the named functions or classes (``Class.method``)."""
    tree = ast.parse(source)
    spans = []
    for name in names:
        scope, node = tree.body, None
        for part in name.split("."):
            node = next(n for n in scope if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                        and n.name == part)
            scope = node.body
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        spans.append((first, node.end_lineno))
    return spans


def _cr(*args, cwd, env, check=True):
    exe = shutil.which("cosmic-ray") or str(Path.home() / ".local" / "bin" / "cosmic-ray")
    return subprocess.run([exe, *args], cwd=cwd, env=env, check=check, capture_output=True, text=True)


def run(name, out, timeout, sample=0, again=None):
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    module, functions, tests = MODULES[name]
    out.mkdir(parents=True, exist_ok=True)
    session = (out / f"{name}.sqlite").resolve()
    session.unlink(missing_ok=True)
    if again is not None:       # the survivors of an earlier session run again (after tests were added)
        import sqlite3

        shutil.copyfile(again / f"{name}.sqlite", session)
        with sqlite3.connect(session) as db:
            db.execute("DELETE FROM work_results WHERE worker_outcome = 'NORMAL' AND test_outcome = 'SURVIVED'")
    with tempfile.TemporaryDirectory(prefix=f"spamnb-mut-{name}-") as tmp:
        tree = Path(tmp) / "tree"
        shutil.copytree(REPO, tree, ignore=shutil.ignore_patterns(".git", "mutation", "mutants", "__pycache__",
                                                                   "build", "*.egg-info"))
        command = f"{PYTEST} {shlex.join(tests)}"
        config = Path(tmp) / "config.toml"
        config.write_text(
            "[cosmic-ray]\n"
            f'module-path = "{module}"\n'
            f"timeout = {timeout}\n"
            "excluded-modules = []\n"
            f"test-command = {json.dumps(command)}\n"
            "[cosmic-ray.distributor]\n"
            'name = "local"\n')
        env = dict(os.environ, PYTHONPATH=str(tree), PYTHONDONTWRITEBYTECODE="1")
        env.pop("SPAMNB_SLOW", None)
        if again is None:
            _cr("init", str(config), str(session), cwd=tree, env=env)
        spans = _spans((tree / module).read_text(), functions) if functions else None
        with use_db(str(session), WorkDB.Mode.open) as db:
            items = sorted(db.work_items, key=lambda item: item.job_id)
            inside = [item.job_id for item in items
                      if not spans or any(a <= m.start_pos[0] <= b for m in item.mutations for a, b in spans)]
            chosen = set(random.Random(55).sample(inside, sample) if 0 < sample < len(inside) else inside)
            skipped = [item.job_id for item in items if item.job_id not in chosen]
            if skipped and again is None:
                db.set_multiple_results(skipped, WorkResult(worker_outcome=WorkerOutcome.SKIPPED))
        base = subprocess.run(command, shell=True, cwd=tree, env=env, capture_output=True,
                              text=True)
        if base.returncode != 0:
            print(f"{name}: the tests fail without a mutant:\n{base.stdout[-2000:]}")
            return None
        _cr("exec", str(config), str(session), cwd=tree, env=env)
    return report(name, session)


def report(name, session):
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome

    killed = survived = broken = 0
    survivors = []
    with use_db(str(session), WorkDB.Mode.open) as db:
        items = {item.job_id: item for item in db.work_items}
        for job_id, result in db.results:
            if result.worker_outcome == WorkerOutcome.SKIPPED:
                continue
            if result.worker_outcome == WorkerOutcome.NORMAL and result.test_outcome == TestOutcome.SURVIVED:
                survived += 1
                mutation = items[job_id].mutations[0]
                survivors.append((mutation.start_pos[0], mutation.operator_name, result.diff))
            elif result.test_outcome == TestOutcome.KILLED:
                killed += 1         # a failing test or a timeout
            else:
                broken += 1         # cosmic-ray could not make or run the mutant: not counted
    total = killed + survived
    share = 100.0 * killed / total if total else 100.0
    print(f"== {name}: {killed} of {total} mutants killed ({share:.1f} %), {survived} survived"
          + (f"; {broken} not run (cosmic-ray's own error)" if broken else ""))
    for line, operator, diff in sorted(survivors):
        print(f"-- survivor: line {line}, {operator}")
        print("\n".join(l for l in (diff or "").splitlines() if l.startswith(("+", "-")) and not
                        l.startswith(("+++", "---"))))
    return share


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", help=f"of: {', '.join(MODULES)} (default: all)")
    parser.add_argument("--out", type=Path, default=REPO / "mutation", help="where the sessions are kept")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per mutant's test run")
    parser.add_argument("--min", type=float, default=85.0, help="the killed share (percent) each module needs")
    parser.add_argument("--sample", type=int, default=0, metavar="N",
                        help="run N mutants of each module, drawn at random (seed 55), not all of them")
    parser.add_argument("--again", type=Path, metavar="DIR",
                        help="run again only the survivors of the sessions kept in DIR (after tests were added)")
    parser.add_argument("--list", action="store_true", help="the modules and their test files")
    parser.add_argument("--report", action="store_true", help="report the kept sessions, run nothing")
    args = parser.parse_args(argv)
    if args.list:
        for name, (module, functions, tests) in MODULES.items():
            print(f"{name}: {module}{' ' + ','.join(functions) if functions else ''} <- {' '.join(tests)}")
        return 0
    unknown = [m for m in args.modules if m not in MODULES]
    if unknown:
        parser.error(f"unknown module {', '.join(unknown)}")
    ok = True
    for name in args.modules or MODULES:
        if args.report:
            share = report(name, args.out / f"{name}.sqlite")
        else:
            share = run(name, args.out, args.timeout, args.sample, args.again)
        ok = ok and share is not None and share >= args.min
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
