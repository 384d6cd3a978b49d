"""spamnb.bayes.arithmetic: the naive Bayes arithmetic written once.

A scan of the sources (as tests/test_private_names.py scans for private
names): log theta, log(N_ci + alpha), log(N_c + alpha V), the class prior's
log-odds and a token's log-odds weight are written in ``spamnb/bayes/arithmetic.py``
alone; every other module calls it.  The compiled kernels (``.pyx``) compute
the same expressions for one message's tokens and are not scanned.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from spamnb.bayes import arithmetic

PACKAGE = Path(__file__).resolve().parents[1] / "spamnb"
HOME = PACKAGE / "bayes" / "arithmetic.py"

# What the arithmetic looks like written out (a pattern each: what it catches).
FORMULAS = {
    "log(count + alpha)": re.compile(r"\blog1?p?\([^()\n]*\+\s*(?:self\.|\w+\.)?alpha\b"),
    "N_c + alpha V": re.compile(r"\+\s*(?:self\.|\w+\.)?alpha\s*\*\s*\(?\s*(?:self\.)?n\w*"),
    "counts += alpha": re.compile(r"\+=\s*(?:self\.)?alpha\b"),
    "log P(spam) - log P(ham)": re.compile(r"\blog\(\s*n_spam\s*\)\s*-\s*(?:math\.|np\.)?log\(\s*n_ham\s*\)"),
    "log theta_1 - log theta_0 from the norms": re.compile(r"log_norm\[\s*1\s*\]\s*-\s*log_norm\[\s*0\s*\]"),
}
# (path, line) that look like it and are not it (none today).
ALLOWED = set()


def code_lines(path):
    """``{line number: the line}`` of a Python file with its strings (docstrings say
    what the formulas are) and comments blanked out."""
    import tokenize

    with open(path, "rb") as f:
        tokens = list(tokenize.tokenize(f.readline))
    lines = [list(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for tok in tokens:
        if tok.type not in (tokenize.STRING, tokenize.COMMENT):
            continue
        (row, col), (end_row, end_col) = tok.start, tok.end
        for r in range(row, end_row + 1):
            line = lines[r - 1]
            for c in range(col if r == row else 0, end_col if r == end_row else len(line)):
                line[c] = " "
    return {n: "".join(line) for n, line in enumerate(lines, 1)}


def formula_lines(path):
    """``(line number, formula name, code)`` of each line of ``path`` that writes the arithmetic out."""
    out = []
    for n, code in sorted(code_lines(path).items()):
        for name, pattern in FORMULAS.items():
            if pattern.search(code):
                out.append((n, name, code))
    return out


@pytest.mark.slow   # over 6 s in the default run: CI runs it in the slow step
def test_the_arithmetic_is_written_in_one_module():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == HOME:
            continue
        rel = path.relative_to(PACKAGE.parent).as_posix()
        found += [f"{rel}:{n}: {name}: {line}" for n, name, line in formula_lines(path)
                  if (rel, n) not in ALLOWED]
    assert not found, ("the naive Bayes arithmetic written outside spamnb/bayes/arithmetic.py "
                       "(call it instead):\n" + "\n".join(found))


@pytest.mark.parametrize("snippet", [
    "log_norm = np.log(fc.sum(axis=1) + alpha * n_features)",
    "weight = (np.log(fc[1] + alpha) - np.log(fc[0] + alpha)) - (log_norm[1] - log_norm[0])",
    "log_theta = np.log(counts + alpha) - np.log(counts.sum(axis=1) + alpha * n)[:, None]",
    "    fc += alpha",
    "    return math.log(n_spam) - math.log(n_ham)",
    "log_norm_ham = math.log(self._total[0] + a * n_features) if False else math.log(t + self.alpha * n)",
    "diff = np.log(fc[1, uniq] + self.alpha) - np.log(fc[0, uniq] + self.alpha)",
])
def test_the_scan_sees_the_formulas_as_they_were_written(tmp_path, snippet):
    """The formulas as the modules wrote them before they called arithmetic (calibrate,
    lifecycle, the online filter): each is caught."""
    source = tmp_path / "m.py"
    source.write_text(snippet + "\n")
    assert formula_lines(source)


def test_the_scan_sees_the_home_module():
    """The patterns are not dead: arithmetic.py itself is full of them."""
    names = {name for _, name, _ in formula_lines(HOME)}
    assert {"log(count + alpha)", "N_c + alpha V", "log P(spam) - log P(ham)"} <= names


def test_log_theta_is_log_count_minus_log_norm():
    fc = np.array([[3.0, 0.0, 1.0], [0.0, 2.0, 5.0]])
    alpha = 0.5
    log_count, norm = arithmetic.smoothed_logs(fc, alpha)
    expected = np.log((fc + alpha) / (fc.sum(axis=1) + alpha * 3)[:, None])
    np.testing.assert_allclose(arithmetic.log_theta(fc, alpha), expected, rtol=1e-14)
    np.testing.assert_allclose(log_count - norm[:, None], expected, rtol=1e-14)
    np.testing.assert_allclose(arithmetic.log_odds_weights(log_count[0], log_count[1], norm),
                               expected[1] - expected[0], rtol=1e-14)
    assert arithmetic.log_norms(fc.sum(axis=1).tolist(), alpha, 3) == tuple(norm.tolist())
    # V without tokens that have no counts (a forget's holes)
    assert arithmetic.smoothed_logs(fc, alpha, 2)[1].tolist() == np.log(fc.sum(axis=1) + alpha * 2).tolist()


def test_the_priors():
    from spamnb.bayes.priors import log_prior

    for method in ("mle", "map", "uniform"):
        for counts in ([3.0, 5.0], [0.0, 4.0], [0.0, 0.0]):
            plain = arithmetic.plain_log_prior(method, counts)
            alpha = np.ones(2) if method == "map" else None
            assert plain == pytest.approx(tuple(log_prior(method, np.array(counts), alpha)), rel=1e-15)
            ratio = arithmetic.prior_log_odds(method, *counts)
            if all(map(math.isfinite, plain)):
                assert ratio == pytest.approx(plain[1] - plain[0], rel=1e-12, abs=1e-15)
            elif counts != [0.0, 0.0]:
                assert ratio == (plain[1] - plain[0])


def test_the_compiled_exp_log_isfinite_are_math_s():
    """``token_kernels.exp``, ``log``, ``isfinite`` (compiled into _score: a cold classify loads no math
    module) give math's results bit for bit, and its errors."""
    import random
    import struct

    from spamnb.bayes import token_kernels

    rng = random.Random(5)
    values = [0.0, -0.0, 1.0, -1.0, 2, True, 10 ** 20, math.inf, -math.inf, math.nan, 709.78, 709.79, -745.2,
              -746.0, 5e-324, 1e-320, *(rng.uniform(-800, 800) for _ in range(3000)),
              *(rng.lognormvariate(0, 5) for _ in range(3000))]

    def outcome(f, v):
        try:
            r = f(v)
        except (ValueError, OverflowError) as exc:
            return type(exc), str(exc)
        return struct.pack("<d", r) if isinstance(r, float) else r

    for ours, theirs in ((token_kernels.exp, math.exp), (token_kernels.log, math.log),
                         (token_kernels.isfinite, math.isfinite)):
        assert [outcome(ours, v) for v in values] == [outcome(theirs, v) for v in values], theirs.__name__
    assert token_kernels.INF == math.inf


def test_a_held_out_score_s_bin_is_math_floor_s():
    """``defaults.held_out_bin`` floors by ``// 1.0`` (a learn loads no math module): the bin
    math.floor gave, for scores on and between the bins' edges, and the two ends."""
    import random

    from spamnb.estimator import defaults

    def by_math(x):
        if not math.isfinite(x):
            return 0 if x < 0 else defaults.HELD_OUT_BINS - 1
        i = math.floor((x - defaults.HELD_OUT_LOW) / defaults.HELD_OUT_BIN_WIDTH)
        return min(max(i, 0), defaults.HELD_OUT_BINS - 1)

    rng = random.Random(3)
    edges = [defaults.HELD_OUT_LOW + k * defaults.HELD_OUT_BIN_WIDTH for k in range(-2, defaults.HELD_OUT_BINS + 2)]
    values = [0.0, -0.0, 1e-300, -1e-300, 1e300, -1e300, math.inf, -math.inf, *edges,
              *(math.nextafter(e, math.inf) for e in edges), *(math.nextafter(e, -math.inf) for e in edges),
              *(rng.uniform(-200, 200) for _ in range(20000))]
    assert [defaults.held_out_bin(x) for x in values] == [by_math(x) for x in values]
    assert defaults.held_out_bin(math.nan) is None
