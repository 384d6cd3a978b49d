#!/usr/bin/env python3
"""What each module a cold ``spamnb classify`` imports costs it, in callgrind instructions.

The modules are those ``python -X importtime`` lists for the venv
launcher's Python line (``classify -m MODEL`` of the message on stdin)
beyond the venv's ``python -c pass``, in the order it lists them (a module
after the ones it imports).  For each ``k``, callgrind counts ``python -P
-c 'import gc, os; gc.disable(); import M1; ...; import Mk; os._exit(0)'``
(the collector off and no teardown, as the launcher's short run); a
module's cost is its line's count less the line before's (the package
``spamnb`` comes first, as in the classify: its ``__init__`` loads ``array``
without ``collections``, so ``array``'s own line is about nothing and
``spamnb``'s holds it): finding, reading
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
from harness import callgrind_instructions as instructions, launcher_code  # noqa: E402


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
    run = ["-P", "-c", launcher_code(venv), "classify", "-m", str(args.model.resolve())]
    floor_modules = set(imported(python, ["-c", "pass"]))
    order = [name for name in imported(python, run, args.message) if name not in floor_modules]
    if "spamnb" in order:   # its __init__ first: it loads array its own way (without collections), as a classify does
        order.remove("spamnb")
        order.insert(0, "spamnb")
    print(f"callgrind instructions; load average {os.getloadavg()[0]:.2f}; {len(order)} modules beyond "
          f"`python -c pass`'s")
    floor = instructions([python, "-c", "pass"])
    whole = instructions([python, *run], args.message)
    start = instructions([python, "-P", "-c", "import gc, os; gc.disable(); os._exit(0)"])
    lines, before = [], start
    for k, name in enumerate(order, 1):
        code = "import gc, os; gc.disable()\n" + "".join(f"import {m}\n" for m in order[:k]) + "os._exit(0)\n"
        now = instructions([python, "-P", "-c", code])
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
    print(f"`python -c pass`: {floor / 1e6:.1f} M (without its teardown, os._exit: {start / 1e6:.1f} M); "
          f"the classify: {whole / 1e6:.1f} M = that start + its imports {(before - start) / 1e6:.1f} M + the rest "
          f"(the model read, the message tokenized and scored, the line printed) {(whole - before) / 1e6:.1f} M")
    return 0


if __name__ == "__main__":
    sys.exit(main())
