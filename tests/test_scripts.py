"""scripts/ and docs/ hold together: scripts/README.md indexes every script,
the scripts share helpers through scripts/harness.py and never import one
another, every script starts (``--help``), and every relative link in the
documentation points at a file that exists."""

import ast
import os
import re
import subprocess
import sys

import pytest

from conftest import REPO

SCRIPTS = REPO / "scripts"
GROUPS = ("bench", "check", "tune")


def _scripts(suffixes=(".py", ".sh")):
    return sorted(p for group in GROUPS for p in (SCRIPTS / group).iterdir() if p.suffix in suffixes)


def test_the_index_lists_every_script_and_only_scripts_that_exist():
    index = (SCRIPTS / "README.md").read_text()
    listed = set(re.findall(r"`((?:bench|check|tune)/[a-z_]+\.(?:py|sh))`", index))
    present = {f"{p.parent.name}/{p.name}" for p in _scripts()}
    assert present - listed == set(), "scripts missing from scripts/README.md"
    assert listed - present == set(), "scripts/README.md lists scripts that do not exist"


def test_no_script_imports_another_script():
    """Shared helpers live in scripts/harness.py; a script importing a sibling
    benchmark (``from bench_commands import ...``) is what harness replaced."""
    names = {p.stem for p in _scripts((".py",))}
    offenders = []
    for path in _scripts((".py",)):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            offenders += [f"{path.relative_to(REPO)} imports {m}" for m in modules
                          if m.split(".")[0] in names and m.split(".")[0] != path.stem]
    assert offenders == []


_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_relative_links_in_the_documentation_point_at_files():
    pages = [REPO / "README.md", SCRIPTS / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    broken = []
    for page in pages:
        for target in _LINK.findall(page.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(REPO)}: {target}")
    assert broken == []


@pytest.mark.slow
@pytest.mark.parametrize("script", [p for p in _scripts((".py",)) if p.name != "train_stages.py"],
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_script_starts(script, tmp_path):
    """Each script's imports and paths resolve from its folder: ``--help``
    from another working directory exits 0.  (train_stages.py passes its
    arguments to ``spamnb``: not a script with options of its own.)"""
    env = dict(os.environ, SPAMNB_HOME=str(tmp_path))
    proc = subprocess.run([sys.executable, str(script), "--help"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "usage:" in proc.stdout
