"""The model package has a small public face (``spamnb/model/__init__.py``,
issue 48): the server, the command line and the evaluation each import at
most three modules of ``spamnb.model`` (the face counts as one), and the face
imports nothing until a name is asked for (the ``spamnb classify`` cold path)."""

import ast
import subprocess
import sys

import pytest

from conftest import REPO

MODEL = REPO / "spamnb" / "model"
MOST = 3


def _model_modules(package, root=REPO):
    """The modules of spamnb.model that the modules of ``<root>/spamnb/<package>`` import."""
    submodules = {p.stem for p in MODEL.glob("*.py") if p.stem != "__init__"}
    found = set()
    for path in sorted((root / "spamnb" / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module == "spamnb.model":
                    for alias in node.names:
                        found.add(f"spamnb.model.{alias.name}" if alias.name in submodules else "spamnb.model")
                elif node.module.startswith("spamnb.model."):
                    found.add(node.module)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names if alias.name.startswith("spamnb.model"))
    return found


@pytest.mark.parametrize("package", ["server", "cli", "evaluation"])
def test_a_layer_above_imports_at_most_three_modules_of_the_model_package(package):
    modules = _model_modules(package)
    assert len(modules) <= MOST, sorted(modules)


def test_the_count_sees_a_module_imported_past_the_face(tmp_path):
    """The count is not blind: main before issue 48 had server/ import 12 modules of spamnb.model."""
    fake = tmp_path / "spamnb" / "fake"
    fake.mkdir(parents=True)
    (fake / "a.py").write_text("from spamnb.model import journal, SpamFilter\nfrom spamnb.model.store import locked\n"
                               "import spamnb.model.verdict\n")
    assert _model_modules("fake", tmp_path) == {"spamnb.model", "spamnb.model.journal", "spamnb.model.store",
                                      "spamnb.model.verdict"}


def test_every_name_of_the_face_is_there():
    import spamnb.model as face

    for name in face.__all__:
        assert getattr(face, name) is not None, name
    with pytest.raises(AttributeError):
        face.no_such_name   # noqa: B018


def test_the_face_imports_a_module_only_when_a_name_of_it_is_asked_for():
    code = ("import sys, spamnb.model as m\n"
            "before = sorted(k for k in sys.modules if k.startswith('spamnb.model.'))\n"
            "m.logit\n"
            "after = sorted(k for k in sys.modules if k.startswith('spamnb.model.'))\n"
            "print(before, after)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[]", "['spamnb.model.verdict']"], done.stdout
