"""Training has two public entries: ``SpamFilter.fit`` (messages in memory)
and ``spamnb train``, whose library function is
``spamnb.training.pipeline.train`` (its arguments choose the executor: in
this process, worker processes, Dask).  Checked on the source (``ast``), so
that a third entry cannot come back unseen: every public function of
``estimator/fitting.py`` and ``training/*.py`` whose name says it fits or trains
(``fit``, ``fit_counts``, ``train_one``, ...) is one of the known names, and
the two helpers of the entries that other modules must call by a public name
are called from their one entry's module only.
"""

import ast
import re

from conftest import REPO

SPAMNB = REPO / "spamnb"

# (module, function): why it is public
ALLOWED = {
    ("training/pipeline.py", "train"): "the CLI's train: the one library entry over a corpus",
    ("estimator/fitting.py", "fit"): "the body of SpamFilter.fit (called from model/spam_filter.py only)",
    ("estimator/fitting.py", "train_variants_here"): "pipeline.train's in-process executor (called from pipeline only)",
    ("training/planning.py", "train_on_workers"): "pipeline.train's worker-process executor (called from pipeline only)",
}
# a public helper of an entry: the only modules of spamnb/ that may name it
CALLERS = {
    ("estimator/fitting.py", "fit"): {"model/spam_filter.py"},
    ("estimator/fitting.py", "train_variants_here"): {"training/pipeline.py"},
    ("training/planning.py", "train_on_workers"): {"training/pipeline.py"},
}
TRAINING = re.compile(r"(^|_)(fit|train)(_|$)")   # plan_training plans: it counts nothing


def _modules():
    yield SPAMNB / "estimator" / "fitting.py"
    yield from sorted((SPAMNB / "training").glob("*.py"))


def _public_training_names(path):
    """The public names of the module at ``path`` (top-level functions and
    ``__all__``) that fit or train."""
    tree = ast.parse(path.read_text(), str(path))
    names = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
             and not node.name.startswith("_")}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            names |= {elt.value for elt in node.value.elts if isinstance(elt, ast.Constant)}
    return {name for name in names if TRAINING.search(name)}


def test_training_has_at_most_two_public_entries():
    found = {}
    for path in _modules():
        module = path.relative_to(SPAMNB).as_posix()
        for name in _public_training_names(path):
            found[(module, name)] = ALLOWED.get((module, name))
    extra = sorted(f"{module}: {name}" for (module, name), why in found.items() if why is None)
    assert not extra, (f"public training functions beyond SpamFilter.fit and pipeline.train: {extra}; "
                       "make them private (_name) or choose the executor by an argument of pipeline.train")
    assert ("training/pipeline.py", "train") in found


def test_the_entries_helpers_are_called_from_their_entry_only():
    for (module, name), allowed in CALLERS.items():
        stem = module[:-3].replace("/", ".")
        pattern = re.compile(rf"(\bspamnb\.{re.escape(stem)}\.{name}\b|\b{stem.split('.')[-1]}\.{name}\(|"
                             rf"from spamnb\.{re.escape(stem)} import[^\n]*\b{name}\b|"
                             rf"from spamnb\.{re.escape(stem)} import \([^)]*\b{name}\b)")
        users = set()
        for path in SPAMNB.rglob("*.py"):
            rel = path.relative_to(SPAMNB).as_posix()
            if rel == module:
                continue
            text = path.read_text()
            # docstrings may name it; a call or an import is a use
            code = re.sub(r'"""(?:.|\n)*?"""', "", text)
            if pattern.search(code):
                users.add(rel)
        assert users <= allowed, f"{module}:{name} is used by {sorted(users - allowed)}: only {sorted(allowed)} may"
        assert users, f"{module}:{name} has no caller: it should go"


def test_the_check_sees_a_third_entry():
    """The scan finds what it is meant to: the entries main had before they
    became one (pipeline.fit, fit_counts, train_one, train_variants;
    fitting.fit_tuned, fit_plain; cluster.fit, fit_corpus)."""
    import tempfile
    from pathlib import Path

    source = ('__all__ = ["fit_counts", "train_one", "AUTO_PAIRS"]\n'
              "def fit(trees=()): pass\n"
              "def fit_corpus(trees=()): pass\n"
              "def _train_variants(filters): pass\n"
              "def count_partition(spec): pass\n")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "pipeline.py"
        path.write_text(source)
        assert _public_training_names(path) == {"fit_counts", "train_one", "fit", "fit_corpus"}
