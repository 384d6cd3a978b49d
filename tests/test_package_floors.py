"""The filter and its file stay flat (issue 48): ``spamnb/estimator`` and
``spamnb/persistence`` each stand on at most six floors of imports among their
own modules (``spamnb/model`` stood on 15 before the split), and no package of
``spamnb`` has a circle of imports among its modules.  The floors are
``scripts/check/import_floors.py``'s: the longest chain of imports, at module
level or in a function, among a package's modules."""

import importlib.util
import subprocess
import sys

import pytest

from conftest import REPO

SCRIPT = REPO / "scripts" / "check" / "import_floors.py"
MOST = 6


def _floors_module():
    spec = importlib.util.spec_from_file_location("import_floors", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("package", ["estimator", "persistence"])
def test_the_estimator_and_the_persistence_stand_on_at_most_six_floors(package, monkeypatch):
    monkeypatch.chdir(REPO)
    floors = _floors_module()
    floor, circles = floors.floors(floors.package_imports(f"spamnb/{package}"))
    assert circles == []
    assert max(floor.values()) <= MOST, sorted(floor.items(), key=lambda item: -item[1])


def test_no_package_has_a_circle_of_imports(monkeypatch):
    monkeypatch.chdir(REPO)
    floors = _floors_module()
    for folder in sorted(p for p in (REPO / "spamnb").iterdir() if (p / "__init__.py").is_file()):
        _floor, circles = floors.floors(floors.package_imports(f"spamnb/{folder.name}"))
        assert circles == [], (folder.name, circles)


def test_the_count_sees_every_import_of_a_chain_and_a_circle(tmp_path, monkeypatch):
    """Not blind: seven modules each importing the next, one in a function and
    through each form of import, stand on seven floors; a loop is a circle."""
    package = tmp_path / "spamnb" / "fake"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    forms = ["from spamnb.fake.m{n} import x\n", "from spamnb.fake import m{n}\n", "import spamnb.fake.m{n}\n",
             "def f():\n    from spamnb.fake.m{n} import x\n"]
    for i in range(7):
        (package / f"m{i}.py").write_text(forms[i % 4].format(n=i + 1) if i < 6 else "x = 1\n")
    monkeypatch.chdir(tmp_path)
    floors = _floors_module()
    floor, circles = floors.floors(floors.package_imports("spamnb/fake"))
    assert (max(floor.values()), circles) == (7, [])
    (package / "m6.py").write_text("from spamnb.fake import m0\nx = 1\n")
    _floor, circles = floors.floors(floors.package_imports("spamnb/fake"))
    assert circles == [["m0", "m1", "m2", "m3", "m4", "m5", "m6", "m0"]]
    done = subprocess.run([sys.executable, str(SCRIPT), "--max", "6", "spamnb/fake"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "circle: m0 -> m1" in done.stdout, done.stdout
