#!/usr/bin/env python3
"""What each module a cold ``spamnb classify`` imports costs it, in callgrind instructions.

The modules are those ``python -X importtime`` lists for the venv
launcher's Python line (``classify -m MODEL`` of the message on stdin)
beyond the venv's ``python -c pass``, in the order it lists them (a module
after the ones it imports).  For each ``k``, callgrind counts ``python -P
-c 'import gc, os; gc.disable(); import M1; ...; import Mk; os._exit(0)'``
(the collector off and no teardown, as the launcher's short run; with the
launcher's ``-S``, without site, and the venv's site-packages put last on
``sys.path`` as the launcher puts it; ``array`` loaded without
``collections``, as ``spamnb.cli.main`` loads it); a
module's cost is its line's count less the line before's: finding, reading
and running the module, its classes made, a compiled extension loaded and
initialised.  What ``classify`` runs besides its imports (the model's
header and entries read, the message tokenized and scored, the line
printed) is the run's count less the last line's.  Takes a few minutes
(one callgrind run a module).

    python3 scripts/bench/bench_cold_imports.py --venv VENV --model enron-spam.spamnb --message MSG

Prints a table, most costly first, with each module's kind (spamnb's own,
a compiled extension of spamnb, the standard library) and the sums by
kind.  Instruction counts do not move with the machine's load.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # harness.py
from harness import callgrind_instructions as instructions, launcher_args  # noqa: E402


def imported(python, argv, stdin=None):
    """The modules ``python -X importtime`` lists for ``argv``, in its order."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    with open(stdin or os.devnull, "rb") as f, tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run([python, "-X", "importtime", *argv], stdin=f, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, env=env, cwd=tmp, timeout=120)
    names = []
    for line in proc.stderr.decode().splitlines():
        match = re.match(r"import time:\s+\d+ \|\s+\d+ \| (\s*)(\S+)$", line)
        if match and match.group(2) not in names:
            names.append(match.group(2))
    return names


def _import(name):
    """The line that imports ``name`` as a classify does: ``array`` without the
    ``collections`` package (``spamnb.cli.main`` loads it so, before its imports)."""
    if name != "array":
        return f"import {name}\n"
    return ("import _collections_abc; sys.modules['collections'] = type(sys)('collections'); "
            "sys.modules['collections.abc'] = _collections_abc\n"
            "import array\ndel sys.modules['collections'], sys.modules['collections.abc']\n")


def kind(venv, name):
    """spamnb's own module, a compiled extension of spamnb, or the standard library's."""
    if not name.startswith("spamnb"):
        return "stdlib"
    site = next((venv / "lib").glob("python3*/site-packages"))
    base = site.joinpath(*name.split("."))
    return "extension" if list(base.parent.glob(base.name + ".*.so")) else "spamnb"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, required=True, help="a venv with spamnb installed (pip install .)")
    parser.add_argument("--model", type=Path, required=True, help="the model file")
    parser.add_argument("--message", type=Path, required=True, help="the message classified (stdin)")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed")
    venv = Path(os.path.abspath(args.venv))
    python = str(venv / "bin" / "python3")
    launch = launcher_args(venv)
    run = [*launch, "classify", "-m", str(args.model.resolve())]
    site = launch[:launch.index("-P")]   # -S: the launcher runs its Python without site
    # the lines below start as the launcher's does: without site, the site-packages beside the Python put last
    setup = "import gc, os, sys; gc.disable()\n"
    if site:
        setup += f"sys.path.append({str(next((venv / 'lib').glob('python3*/site-packages')))!r})\n"
    floor_modules = set(imported(python, [*site, "-c", "pass"]))
    order = [name for name in imported(python, run, args.message) if name not in floor_modules]
    print(f"callgrind instructions; load average {os.getloadavg()[0]:.2f}; {len(order)} modules beyond "
          f"`python -c pass`'s")
    floor = instructions([python, "-c", "pass"])
    whole = instructions([python, *run], args.message)
    start = instructions([python, *site, "-P", "-c", setup + "os._exit(0)"])
    lines, before = [], start
    for k, name in enumerate(order, 1):
        code = setup + "".join(_import(m) for m in order[:k]) + "os._exit(0)\n"
        now = instructions([python, *site, "-P", "-c", code])
        lines.append((now - before, name, kind(venv, name)))
        before = now
    print()
    print("| module | kind | million instructions |")
    print("|---|---|---|")
    for cost, name, what in sorted(lines, reverse=True):
        print(f"| {name} | {what} | {cost / 1e6:.2f} |")
    print()
    for what in ("spamnb", "extension", "stdlib"):
        mine = [cost for cost, _, k in lines if k == what]
        print(f"{what}: {len(mine)} modules, {sum(mine) / 1e6:.1f} M")
    started = "`python -S`, os imported, " if site else ""
    print(f"`python -c pass`: {floor / 1e6:.1f} M (the launcher's start: {started}without a teardown, os._exit: "
          f"{start / 1e6:.1f} M); "
          f"the classify: {whole / 1e6:.1f} M = that start + its imports {(before - start) / 1e6:.1f} M + the rest "
          f"(the model read, the message tokenized and scored, the line printed) {(whole - before) / 1e6:.1f} M")
    return 0


if __name__ == "__main__":
    sys.exit(main())
