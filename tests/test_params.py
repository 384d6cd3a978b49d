"""The model's one parameter record (``defaults.PARAMS``, ``get_params``/``from_params``),
the ``Cutoffs(spam, ham)`` value, and the structure issue 36 asked for: the
per-message kernels behind one checked wrapper, a SpamFilter of at most 300
lines that no other module reaches into."""

import ast
import math
from array import array
from pathlib import Path

import pytest

from spamnb import SpamFilter
from spamnb.bayes import token_kernels
from spamnb.estimator import defaults
from spamnb.persistence import schema
from spamnb.estimator.verdict import Cutoffs
from spamnb.report.scale import ScoreMap

PACKAGE = Path(__file__).resolve().parents[1] / "spamnb"
HAM = b"Subject: lunch\n\nShall we meet for lunch on Friday at noon?\n"
SPAM = b"Subject: WIN MONEY\n\nClick here to claim your free prize money now!!!\n"


def _fitted(**params):
    return SpamFilter(**params).fit([HAM, SPAM] * 3, [False, True] * 3, tune=False)


def test_the_model_file_stores_the_table_and_from_params_reads_it(tmp_path):
    f = _fitted(alpha=0.5, counts="raw", n_evidence=3, length_norm=0.0, spam_cutoff=0.99, ham_cutoff=0.2)
    assert set(f.get_params()) == set(defaults.PARAMS)
    f.save(tmp_path / "m.spamnb")
    header, _arrays = schema.read(tmp_path / "m.spamnb")
    assert header["params"] == f.get_params()
    again = SpamFilter.from_params(header["params"])
    assert again.get_params() == f.get_params()
    assert SpamFilter.load(tmp_path / "m.spamnb").get_params() == f.get_params()


def test_a_file_older_than_a_parameter_gets_the_files_value_not_the_default():
    old = {name: value for name, value in SpamFilter().get_params().items() if name != "length_norm"}
    assert SpamFilter.from_params(old).length_norm == 0.0      # files before length_norm: none
    assert SpamFilter().length_norm == defaults.DEFAULT_LENGTH_NORM
    with pytest.raises(KeyError):
        SpamFilter.from_params({k: v for k, v in old.items() if k != "alpha"})
    assert defaults.are_params(old) and not defaults.are_params(set(old) | {"beta"})


def test_cutoffs_travel_as_spam_then_ham():
    f = SpamFilter(spam_cutoff=0.99, ham_cutoff=0.2)
    assert f.cutoffs == Cutoffs(spam=0.99, ham=0.2) == (0.99, 0.2)
    f.cutoffs = Cutoffs(spam=0.9, ham=0.1)
    assert (f.spam_cutoff, f.ham_cutoff) == (0.9, 0.1)
    score_map = ScoreMap.from_cutoffs(f.cutoffs, 5.0)
    assert score_map.ham_log_odds == pytest.approx(math.log(0.1 / 0.9))
    assert score_map.spam_log_odds == pytest.approx(math.log(0.9 / 0.1))


def test_classify_is_the_rule_on_the_message_score():
    from spamnb.estimator import scoring, verdict

    f = _fitted()
    scored = scoring.score_one(f, SPAM, 0)
    assert isinstance(scored, verdict.MessageScore) and isinstance(scored.sums, verdict.EvidenceSums)
    assert f.classify(SPAM, evidence=False) == verdict.verdict_of(scored, f.cutoffs)
    assert f.evidence(SPAM) == (scored.log_odds, *scored.sums)


def test_the_wrappers_check_what_the_kernels_trust():
    keys, values = array("Q", bytes(8 * 16)), array("i", bytes(4 * 16))
    hashes = array("Q", [11, 22, 33])
    with pytest.raises(ValueError):
        token_kernels.lookup(keys, values, hashes, array("i", [0]))              # out too short
    with pytest.raises(ValueError):
        token_kernels.lookup(array("Q", bytes(8 * 12)), array("i", bytes(4 * 12)), hashes, array("i", [0] * 3))
    with pytest.raises(ValueError):
        token_kernels.insert(keys, values, hashes, array("i", [0] * 3), 0, array("i", [0]))
    assert token_kernels.insert(keys, values, hashes, array("i", [0] * 3), 0, array("i", [0] * 3)) == 3
    with pytest.raises(ValueError):    # feature 2 has no place in a remap of 2 features
        token_kernels.rehash_remap(keys, values, array("i", [0, 1]), array("Q", bytes(8 * 16)),
                                   array("i", bytes(4 * 16)))
    target = array("d", [0.0] * 4)
    with pytest.raises(ValueError):
        token_kernels.add_counts(array("i", [0, 1]), target, token_kernels.COUNTS_RAW, 1.0, math.nan)
    with pytest.raises(ValueError):
        token_kernels.add_counts(array("i", [0, 9]), target, token_kernels.COUNTS_RAW)   # index out of range
    assert list(target) == [0.0] * 4


def _imports(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            yield node.module, [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []


def test_only_the_wrapper_imports_the_per_message_kernels():
    compiled = {"_vocab", "_count", "_score", "_index"}
    # bayes/checks.py wraps the model file's checks, built into _score (_checks.pxi), and a learn's lock, digest and
    # ledger search, the journal's ledger operations and record layouts (_learn.pxi), and imports nothing else of it
    checks = {"Checksum64", "checksum64", "check_range", "class_sums", "check_offsets", "check_utf8", "journal_records",
              "journal_learns", "PrivateMemory", "try_lock", "blake2b", "find_digest", "layout_size", "pack_layout",
              "unpack_layout", "journal_ledger", "journal_scan"}
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "token_kernels.py":
            continue
        for module, names in _imports(path):
            last = module.rsplit(".", 1)[-1]
            if path == PACKAGE / "bayes" / "checks.py" and module == "spamnb.bayes._score" and set(names) <= checks:
                continue
            if last in compiled or (module == "spamnb.bayes" and compiled & set(names)):
                offenders.append(f"{path.relative_to(PACKAGE)}: {module} {names}")
    assert not offenders, offenders


def test_spam_filter_is_at_most_300_lines_and_nothing_sets_its_private_attributes():
    tree = ast.parse((PACKAGE / "model" / "spam_filter.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "SpamFilter")
    assert cls.end_lineno - cls.lineno + 1 <= 300
    for path in [p for package in ("model", "estimator", "persistence") for p in (PACKAGE / package).glob("*.py")]:
        if path.name == "spam_filter.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            targets = node.targets if isinstance(node, ast.Assign) else []
            for target in targets:
                for t in getattr(target, "elts", [target]):
                    assert not (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                                and t.value.id == "spam_filter" and t.attr.startswith("_")), (path.name, t.attr)
