#!/usr/bin/env python3
"""The test suite's own cost: wall time, CPU of the whole process tree, per file.

Runs ``python3 -m pytest -q -p no:cacheprovider`` (the README's test command,
the default run without the slow tests; ``-m slow`` or other pytest arguments
after ``--``) in this checkout, with a JUnit XML report, and prints:

- the wall time and the load average before and after (wall time on a shared
  machine swings with the load: compare the CPU figure, or two runs made
  back to back);
- the CPU seconds (user + sys) of pytest and every process it waited for
  (servers the tests start and stop, ``spamnb`` subprocesses), and its peak
  RSS;
- the tests run, and the files that took longest (setup, call and teardown
  of their tests summed; collection is in the wall time, not in these);
- whether PYTHONDONTWRITEBYTECODE was set (tests/conftest.py then compiles
  the package once a session into its __pycache__; the standard library and
  site-packages are read as they are installed).

    python3 scripts/bench/bench_suite.py                    # the default run
    python3 scripts/bench/bench_suite.py --top 30 --json PATH
    python3 scripts/bench/bench_suite.py -- -m slow         # the slow run
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def per_file(junit):
    """{file: [seconds, tests]} from a JUnit XML report (``junit_duration_report=total``)."""
    files = collections.defaultdict(lambda: [0.0, 0])
    counts = collections.Counter()
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("file") or case.get("classname", "").rsplit(".", 1)[-1]
        files[name][0] += float(case.get("time") or 0)
        files[name][1] += 1
        outcome = next((child.tag for child in case if child.tag in ("failure", "error", "skipped")), "passed")
        counts[outcome] += 1
    return files, counts


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=20, help="files listed, slowest first (default 20)")
    parser.add_argument("--json", metavar="PATH", help="write the figures as JSON")
    parser.add_argument("pytest_args", nargs="*", help="after --: more pytest arguments (e.g. -m slow)")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="spamnb-suite-") as tmp:
        junit = Path(tmp) / "junit.xml"
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}",
                   "-o", "junit_duration_report=total", *args.pytest_args]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
        load_before = os.getloadavg()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        proc = subprocess.run(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        load_after = os.getloadavg()
        summary = proc.stdout.decode(errors="replace").rstrip().splitlines()[-1:] or [""]
        files, counts = per_file(junit) if junit.exists() else ({}, collections.Counter())

    report = {
        "command": " ".join(["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", *args.pytest_args]),
        "exit": proc.returncode, "summary": summary[0],
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in load_after],
        "wall_s": round(wall, 1),
        "cpu_user_s": round(after.ru_utime - before.ru_utime, 1),
        "cpu_sys_s": round(after.ru_stime - before.ru_stime, 1),
        "peak_rss_mib": round(after.ru_maxrss / 1024, 1),
        "tests": dict(counts), "tests_s": round(sum(s for s, _n in files.values()), 1),
        "dont_write_bytecode": bool(os.environ.get("PYTHONDONTWRITEBYTECODE")),
        "files": {name: {"s": round(s, 2), "tests": n}
                  for name, (s, n) in sorted(files.items(), key=lambda item: -item[1][0])},
    }
    print(f"{report['command']}: {report['summary']}")
    print(f"wall {report['wall_s']} s; CPU {report['cpu_user_s']} s user + {report['cpu_sys_s']} s sys "
          f"(pytest and the processes it waited for); peak RSS {report['peak_rss_mib']} MiB")
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f} "
          f"({os.cpu_count()} cores); tests {dict(counts)}, their own time {report['tests_s']} s; "
          f"PYTHONDONTWRITEBYTECODE {'set' if report['dont_write_bytecode'] else 'unset'}")
    for name, row in list(report["files"].items())[:args.top]:
        print(f"{row['s']:8.2f} s {row['tests']:5d}  {name}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
