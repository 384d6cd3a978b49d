"""Nothing reaches into another module's objects by name (issue 48), checked on
the source (``ast``): a filter's state is read and changed through its
methods (``SpamFilter.replayed``, ``file_layout``, ``follow_journal``,
``set_cutoffs``, ...), never through its ``__dict__``.

The rule, for every module of ``spamnb/``:

1. no ``vars(x)`` and no ``x.__dict__`` but of ``self`` or ``cls`` (an object
   reads its own state);
2. no ``getattr``/``setattr``/``hasattr``/``delattr`` of an object but
   ``self``/``cls`` with a string literal naming a private (``_x``) or fitted
   (trailing underscore, ``x_``) attribute: such a string hides a reach from
   ``tests/test_private_names.py``;
3. no ``.get``/``.pop``/``.setdefault`` of such a name (a private or fitted
   attribute's name as a key: an object's ``__dict__`` under another name);
4. no module but ``model/spam_filter.py`` sets a fitted attribute (``x.name_ =
   ...``, ``del x.name_``) of an object but ``self``/``cls``: the modules of
   ``spamnb.model``, ``.estimator``, ``.persistence`` that fit, count, load, merge, prune or learn a filter give
   it its state through its methods (``SpamFilter.set_fitted``, ``set_cutoffs``,
   ``adopt``, ``replace_ages``, ...), as the layers above do.

``ALLOWED`` names what is the owner's own, each with why.
"""

import ast

from conftest import REPO

ROOT = REPO / "spamnb"

# (module, the call as "function(first argument" or ".method('key'"): why it is the owner's.
ALLOWED = {
    ("spamnb/model/spam_filter.py", "obj.__dict__"):
        "Folded, the descriptor SpamFilter's class holds, keeps the attribute it stands for in its owner's __dict__",
    ("spamnb/model/spam_filter.py", "other.__dict__"):
        "SpamFilter.__copy__: the copy it makes of itself takes its state",
    ("spamnb/mail/charsets.py", "getattr(info, '_is_text_encoding'"):
        "the standard library's codecs.CodecInfo: whether a codec is a text encoding has no public name",
    ("spamnb/server/milter.py", "vars(message"):
        "a kilter (third-party) message: the size of its public fields, nothing of spamnb's",
    ("spamnb/persistence/journal_view.py", ".get('_identity'"):
        "a key of the journal header's JSON, not an attribute",
    ("spamnb/persistence/codec.py", ".get('_identity'"):
        "the same key, for a model without a journal (its load does what the replay does then)",
    ("spamnb/bayes/multinomial.py", ".pop('_log_prob_cache'"):
        "__getstate__ of MultinomialNB: the state it pickles, a copy of its own __dict__",
}

OWN = {"self", "cls"}


def _reaching_name(name):
    return (name.startswith("_") and not name.startswith("__")) or (name.endswith("_") and not name.endswith("__"))


def _own(node):
    if isinstance(node, ast.Name) and node.id in OWN:
        return True
    # self.__dict__ / vars(self) as the receiver of .get/.pop
    if isinstance(node, ast.Attribute) and node.attr == "__dict__":
        return _own(node.value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "vars" and node.args:
        return _own(node.args[0])
    return False


def _findings(path):
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "__dict__" and not _own(node.value):
            yield node.lineno, f"{ast.unparse(node.value)}.__dict__"
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "vars":
            if not node.args or not _own(node.args[0]):
                yield node.lineno, f"vars({ast.unparse(node.args[0]) if node.args else ''}"
        elif isinstance(func, ast.Name) and func.id in ("getattr", "setattr", "hasattr", "delattr"):
            if len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) \
                    and isinstance(node.args[1].value, str) and _reaching_name(node.args[1].value) \
                    and not _own(node.args[0]):
                yield node.lineno, f"{func.id}({ast.unparse(node.args[0])}, {node.args[1].value!r}"
        elif isinstance(func, ast.Attribute) and func.attr in ("get", "pop", "setdefault"):
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str) \
                    and _reaching_name(node.args[0].value) and not _own(func.value):
                yield node.lineno, f".{func.attr}({node.args[0].value!r}"


def _fitted_sets(path):
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else \
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        flat = []
        for target in targets:
            flat.extend(target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target])
        for target in flat:
            if isinstance(target, ast.Attribute) and target.attr.endswith("_") and not target.attr.endswith("__") \
                    and not _own(target.value):
                yield node.lineno, f"{ast.unparse(target.value)}.{target.attr} ="


def test_only_the_filter_sets_its_fitted_attributes():
    found = [f"{path.relative_to(REPO)}:{line}: {what}" for path in sorted(ROOT.rglob("*.py"))
             if path.name != "spam_filter.py" for line, what in _fitted_sets(path)]
    assert found == []


def test_the_scan_finds_a_fitted_attribute_set_from_outside(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("def f(spam_filter, self):\n"
                      "    spam_filter.vocabulary_ = None\n"
                      "    spam_filter.cutoffs, spam_filter.cutoff_source_ = (0.9, 0.1), 'given'\n"
                      "    self.word_counts_ = None\n"
                      "    spam_filter.ages_.max_tokens = 5\n")
    assert [what for _line, what in _fitted_sets(sample)] == ["spam_filter.vocabulary_ =",
                                                              "spam_filter.cutoff_source_ ="]


def _all_findings():
    out = []
    for path in sorted(ROOT.rglob("*.py")):
        module = str(path.relative_to(REPO))
        for line, what in _findings(path):
            if (module, what) not in ALLOWED:
                out.append(f"{module}:{line}: {what}")
    return out


def test_no_module_reaches_into_another_modules_objects_by_name():
    assert _all_findings() == []


def test_every_allowance_is_still_needed():
    found = set()
    for path in sorted(ROOT.rglob("*.py")):
        module = str(path.relative_to(REPO))
        found.update((module, what) for _line, what in _findings(path))
    assert set(ALLOWED) <= found, sorted(set(ALLOWED) - found)


def test_the_scan_finds_each_kind_of_reach(tmp_path):
    """The scan is not blind: each form the rule forbids is found (what main had before issue 48)."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "def f(spam_filter, state, self=None):\n"
        "    mapped = vars(spam_filter).get('mapped_file_')\n"
        "    state.pop('_holes', None)\n"
        "    setattr(spam_filter, 'word_counts_', None)\n"
        "    getattr(spam_filter, '_scorer', None)\n"
        "    spam_filter.__dict__['ages_'] = None\n"
        "    vars(self)['ok_'] = getattr(self, '_mine', None)\n"
        "    return getattr(spam_filter, 'public', None)\n")
    found = sorted(what for _line, what in _findings(sample))
    assert found == sorted([".get('mapped_file_'", "vars(spam_filter", ".pop('_holes'",
                            "setattr(spam_filter, 'word_counts_'", "getattr(spam_filter, '_scorer'",
                            "spam_filter.__dict__"]), found
