"""The model package has a small public face (``spamnb/model/__init__.py``,
issue 48): the server, the command line and the evaluation each import at
most three modules of ``spamnb.model``, ``spamnb.estimator`` and
``spamnb.persistence`` together (the face counts as one), and the face
imports nothing until a name is asked for (the ``spamnb classify`` cold path)."""

import ast
import subprocess
import sys

import pytest

from conftest import REPO

PACKAGES = ("spamnb.model", "spamnb.estimator", "spamnb.persistence")   # the filter and its file
MOST = 3


def _model_modules(package, root=REPO):
    """The modules of the filter's packages (PACKAGES) that the modules of ``<root>/spamnb/<package>`` import."""
    submodules = {f"{name}.{p.stem}" for name in PACKAGES
                  for p in (REPO.joinpath(*name.split("."))).glob("*.py") if p.stem != "__init__"}
    found = set()
    for path in sorted((root / "spamnb" / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module in PACKAGES:
                    for alias in node.names:
                        name = f"{node.module}.{alias.name}"
                        found.add(name if name in submodules else node.module)
                elif node.module.startswith(tuple(p + "." for p in PACKAGES)):
                    found.add(node.module)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names if alias.name.startswith(PACKAGES))
    return found


@pytest.mark.parametrize("package", ["server", "cli", "evaluation"])
def test_a_layer_above_imports_at_most_three_modules_of_the_model_package(package):
    modules = _model_modules(package)
    assert len(modules) <= MOST, sorted(modules)


def test_the_count_sees_a_module_imported_past_the_face(tmp_path):
    """The count is not blind: main before issue 48 had server/ import 12 modules of spamnb.model."""
    fake = tmp_path / "spamnb" / "fake"
    fake.mkdir(parents=True)
    (fake / "a.py").write_text("from spamnb.model import learning, SpamFilter\nfrom spamnb.persistence.store import locked\n"
                               "import spamnb.estimator.verdict\nfrom spamnb.persistence import journal\n")
    assert _model_modules("fake", tmp_path) == {"spamnb.model", "spamnb.model.learning", "spamnb.persistence.store",
                                                "spamnb.estimator.verdict", "spamnb.persistence.journal"}


def test_every_name_of_the_face_is_there():
    import spamnb.model as face

    for name in face.__all__:
        assert getattr(face, name) is not None, name
    with pytest.raises(AttributeError):
        face.no_such_name   # noqa: B018


def test_the_face_imports_a_module_only_when_a_name_of_it_is_asked_for():
    code = ("import sys, spamnb.model as m\n"
            "pre = ('spamnb.model.', 'spamnb.estimator.', 'spamnb.persistence.')\n"
            "before = sorted(k for k in sys.modules if k.startswith(pre))\n"
            "m.logit\n"
            "after = sorted(k for k in sys.modules if k.startswith(pre))\n"
            "print(before, after)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[]", "['spamnb.estimator.verdict']"], done.stdout
