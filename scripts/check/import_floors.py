#!/usr/bin/env python3
"""How many floors a package's modules stand on: the longest chain of imports
among them (a module stands one floor above the highest it imports; one that
imports none of its package stands on floor 1), and any circle.

Every import counts, at module level or inside a function (``from
spamnb.estimator.defaults import X``, ``from spamnb.estimator import
defaults``, ``import spamnb.estimator.defaults``), as long as it names a
module of the same package; ``__init__.py`` is left out (a face imports
nothing).  Run from the repository root::

    python3 scripts/check/import_floors.py spamnb/estimator spamnb/persistence spamnb/model
    python3 scripts/check/import_floors.py --max 6 spamnb/estimator   # exit 1 past 6 floors or on a circle

Prints, per package, its floors from the top down, each module with what of
the package it imports.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path


def package_imports(folder):
    """``{module: {module of the same package it imports}}`` for the package in ``folder``."""
    folder = Path(folder)
    dotted = ".".join(folder.parts)
    modules = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
    edges = {}
    for name in sorted(modules):
        found = set()
        for node in ast.walk(ast.parse((folder / f"{name}.py").read_text(), str(folder / f"{name}.py"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module == dotted:
                    found.update(alias.name for alias in node.names if alias.name in modules)
                elif node.module.startswith(dotted + "."):
                    found.add(node.module[len(dotted) + 1:].split(".")[0])
            elif isinstance(node, ast.Import):
                found.update(alias.name[len(dotted) + 1:].split(".")[0] for alias in node.names
                             if alias.name.startswith(dotted + "."))
        edges[name] = found & modules - {name}
    return edges


def floors(edges):
    """``({module: floor}, [circle, ...])``: a module on a circle is given the floor its chain reached."""
    floor, circles = {}, []

    def visit(module, path):
        if module in floor:
            return floor[module]
        if module in path:
            circles.append(path[path.index(module):] + [module])
            return 0
        path.append(module)
        floor[module] = 1 + max((visit(t, path) for t in sorted(edges[module])), default=0)
        path.pop()
        return floor[module]

    for module in sorted(edges):
        visit(module, [])
    return floor, circles


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("packages", nargs="+", metavar="FOLDER", help="a package's folder, as spamnb/estimator")
    parser.add_argument("--max", type=int, metavar="N", help="exit 1 when a package has more than N floors")
    args = parser.parse_args(argv)
    failed = False
    for folder in args.packages:
        edges = package_imports(folder)
        floor, circles = floors(edges)
        top = max(floor.values(), default=0)
        print(f"{folder}: {len(edges)} modules, {top} floors, {len(circles)} circles")
        for module in sorted(floor, key=lambda m: (-floor[m], m)):
            print(f"  floor {floor[module]:2d}  {module}  -> {', '.join(sorted(edges[module])) or '-'}")
        for circle in circles:
            print(f"  circle: {' -> '.join(circle)}")
        failed |= bool(circles) or (args.max is not None and top > args.max)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
