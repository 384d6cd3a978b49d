import json
import math
import subprocess
import sys

import numpy as np
import pytest

from spamnb.estimator.message_features import (
    DEFAULT_WEIGHT,
    FEATURE_NAMES,
    FeatureModel,
    message_features,
    raw_message_features,
)
from spamnb.bayes.gaussian import GaussianNB
from spamnb.mail.parser import parse

from conftest import REPO

INDEX = {name: i for i, name in enumerate(FEATURE_NAMES)}

PLAIN = (
    b"Received: from a.example.com by b.example.com\n"
    b"Received: from c.example.com by a.example.com\n"
    b"From: someone@example.com\n"
    b"To: a@x.org, b@y.org\n"
    b"Cc: c@z.org\n"
    b"Subject: FREE Money!!\n"
    b"Date: Mon, 2 Sep 2002 18:30:00 +0100\n"
    b"\n"
    b"Hello WORLD http://a.b ok!\n"
)

MULTIPART = (
    b"From: x@example.com\n"
    b"Subject: hi\n"
    b"Date: 3 Sep 2002 6:15 -0000\n"
    b"MIME-Version: 1.0\n"
    b'Content-Type: multipart/alternative; boundary="BB"\n'
    b"\n"
    b"--BB\n"
    b"Content-Type: text/plain; charset=utf-8\n"
    b"\n"
    b"caf\xc3\xa9 https://u.v\n"
    b"--BB\n"
    b"Content-Type: text/html\n"
    b"\n"
    b'<P><A HREF="http://u.v">go</A><IMG src="i.gif"><img src="j.gif"></P>\n'
    b"--BB\n"
    b"Content-Type: application/pdf\n"
    b"Content-Transfer-Encoding: base64\n"
    b"\n"
    b"AAAA\n"
    b"--BB--\n"
)


def features(raw):
    out = raw_message_features(raw)
    return {name: out[i] for name, i in INDEX.items()}


def test_feature_names_match_values():
    assert len(FEATURE_NAMES) == len(set(FEATURE_NAMES)) == len(message_features(parse(PLAIN)))
    assert 8 <= len(FEATURE_NAMES) <= 16


def test_plain_message_by_hand():
    f = features(PLAIN)
    body = "Hello WORLD http://a.b ok!\n"
    assert f["log_bytes"] == pytest.approx(math.log1p(len(PLAIN)), abs=1e-15)
    assert f["log_header_bytes"] == pytest.approx(math.log1p(PLAIN.index(b"\n\n") + 1), abs=1e-15)
    assert f["log_headers"] == pytest.approx(math.log1p(7), abs=1e-15)
    assert f["log_received"] == pytest.approx(math.log1p(2), abs=1e-15)
    assert f["log_recipients"] == pytest.approx(math.log1p(3), abs=1e-15)
    assert f["log_parts"] == pytest.approx(math.log1p(1), abs=1e-15)
    assert f["log_attachments"] == 0.0
    assert f["html_share"] == 0.0
    assert f["log_links_per_kchar"] == pytest.approx(math.log1p(1000.0 / len(body)), abs=1e-15)
    assert f["log_images"] == 0.0
    # letters: Hello WORLD http a b ok = 18, of which H W O R L D are upper case
    assert f["caps_share"] == pytest.approx(6 / 18, abs=1e-15)
    assert f["non_ascii_share"] == 0.0
    assert f["log_exclamations"] == pytest.approx(math.log1p(3), abs=1e-15)  # 1 in the body, 2 in Subject
    assert f["subject_caps_share"] == pytest.approx(5 / 9, abs=1e-15)      # F R E E M of FREEMoney
    angle = 2 * math.pi * 18.5 / 24
    assert f["hour_sin"] == pytest.approx(math.sin(angle), abs=1e-15)
    assert f["hour_cos"] == pytest.approx(math.cos(angle), abs=1e-15)


def test_multipart_message_by_hand():
    f = features(MULTIPART)
    # the line break before a boundary belongs to the boundary
    plain = "caf\u00e9 https://u.v"
    html = '<P><A HREF="http://u.v">go</A><IMG src="i.gif"><img src="j.gif"></P>'
    n_chars = len(plain) + len(html)
    assert f["log_parts"] == pytest.approx(math.log1p(3), abs=1e-15)
    assert f["log_attachments"] == pytest.approx(math.log1p(1), abs=1e-15)
    assert f["html_share"] == pytest.approx(len(html) / n_chars, abs=1e-15)
    # one "://" in the plain part, one href in the HTML part (its "://" is not counted again)
    assert f["log_links_per_kchar"] == pytest.approx(math.log1p(2000.0 / n_chars), abs=1e-15)
    assert f["log_images"] == pytest.approx(math.log1p(2), abs=1e-15)
    assert f["non_ascii_share"] == pytest.approx(1 / n_chars, abs=1e-15)
    letters = sum(c.isascii() and c.isalpha() for c in plain + html)
    upper = sum(c.isascii() and c.isupper() for c in plain + html)
    assert f["caps_share"] == pytest.approx(upper / letters, abs=1e-15)
    assert f["log_exclamations"] == 0.0
    assert f["subject_caps_share"] == 0.0
    angle = 2 * math.pi * 6.25 / 24  # 6:15 without seconds
    assert f["hour_sin"] == pytest.approx(math.sin(angle), abs=1e-15)
    assert f["hour_cos"] == pytest.approx(math.cos(angle), abs=1e-15)
    assert f["log_recipients"] == 0.0 and f["log_received"] == 0.0


@pytest.mark.parametrize("date, hour", [
    ("Tue, 3 Sep 2002 00:00:00 +0000", 0.0),
    ("Tue, 3 Sep 2002 23:59:59 -0700", 23 + 59 / 60),
    ("Tue, 3 Sep 2002 12:00 GMT", 12.0),
    ("2002-09-03 07:30:00", 7.5),
])
def test_hour_of_date(date, hour):
    f = features(b"Date: " + date.encode() + b"\n\nbody\n")
    assert f["hour_sin"] == pytest.approx(math.sin(2 * math.pi * hour / 24), abs=1e-15)
    assert f["hour_cos"] == pytest.approx(math.cos(2 * math.pi * hour / 24), abs=1e-15)


@pytest.mark.parametrize("raw", [
    b"",
    b"Subject: only headers\nFrom: a@b.c\n",
    b"Subject: no date\n\nsome text\n",
    b"Date: yesterday, around noon\n\ntext\n",
    b"Date: Mon, 2 Sep 2002 25:61:00 +0000\n\ntext\n",
    b"Date: 123:45:678\n\ntext\n",
    b"\x00\xff\xfe garbage \x80\n\n\n",
])
def test_robust_on_odd_messages(raw):
    out = raw_message_features(raw)
    assert len(out) == len(FEATURE_NAMES)
    assert all(isinstance(v, float) and math.isfinite(v) for v in out)
    f = dict(zip(FEATURE_NAMES, out))
    assert f["hour_sin"] == 0.0 and f["hour_cos"] == 0.0     # no readable hour: centre of the circle
    for name in ("html_share", "caps_share", "non_ascii_share", "subject_caps_share"):
        assert 0.0 <= f[name] <= 1.0


def test_empty_message():
    f = features(b"")
    assert f.pop("log_parts") == pytest.approx(math.log1p(1), abs=1e-15)  # one empty text body
    assert all(v == 0.0 for v in f.values())


def test_huge_values_stay_finite():
    to = b", ".join(b"u%d@example.com" % i for i in range(5000))
    raw = b"To: " + to + b"\nSubject: " + b"A" * 5000 + b"\n\n" + (b"BUY NOW!!! http://x.y " * 100_000)
    f = features(raw)
    assert all(math.isfinite(v) for v in f.values())
    assert f["log_bytes"] == pytest.approx(math.log1p(len(raw)), abs=1e-15)  # size before truncation
    assert f["subject_caps_share"] == 1.0
    assert f["caps_share"] == pytest.approx(6 / 12)    # BUYNOW vs httpxy
    assert f["log_recipients"] > math.log1p(100)   # the header value is cut at 16 KiB
    model = FeatureModel(var_smoothing=1e-9).fit(*blobs())
    ll = model.log_likelihood_one([f[name] for name in FEATURE_NAMES])
    assert all(math.isfinite(v) for v in ll)


# ------------------------------------------------------------------ the model
def blobs(n=(50, 70), seed=0):
    rng = np.random.default_rng(seed)
    d = len(FEATURE_NAMES)
    F = np.vstack([rng.normal(0.0, 1.0, (n[0], d)), rng.normal(0.7, 1.5, (n[1], d)) * rng.uniform(0.01, 3, d)])
    y = np.array([False] * n[0] + [True] * n[1])
    return F, y


@pytest.mark.parametrize("var_smoothing", [0.0, 1e-9, 1e-2, 1.0])
def test_log_likelihood_one_matches_gaussian_nb(var_smoothing):
    F, y = blobs()
    model = FeatureModel(var_smoothing=var_smoothing).fit(F, y)
    reference = GaussianNB(var_smoothing=var_smoothing).fit(F, y).log_likelihood(F)
    one = np.array([model.log_likelihood_one(row.tolist()) for row in F])
    np.testing.assert_allclose(one, reference, rtol=0, atol=1e-12 * np.abs(reference).max())
    np.testing.assert_allclose(model.log_likelihood(F), reference, rtol=1e-13, atol=1e-12)
    np.testing.assert_allclose(model.log_likelihood_ratio(F), reference[:, 1] - reference[:, 0], atol=1e-11)


def test_log_likelihood_closed_form():
    # ham: 0, 2 -> mean 1, variance 1; spam: 4, 4, 7 -> mean 5, variance 2 (MLE); no smoothing
    model = FeatureModel(var_smoothing=0.0, names=("x",)).fit([[0.0], [2.0], [4.0], [4.0], [7.0]],
                                                               ["ham", "ham", "spam", "spam", "spam"])
    ll_ham, ll_spam = model.log_likelihood_one([3.0])
    assert ll_ham == pytest.approx(-0.5 * math.log(2 * math.pi) - 2.0, abs=1e-14)
    assert ll_spam == pytest.approx(-0.5 * math.log(4 * math.pi) - 1.0, abs=1e-14)
    assert model.class_count_ == [2.0, 3.0]
    assert model.means_ == [[1.0], [5.0]]
    assert model.var_ == [[1.0], [2.0]]


def test_labels_accept_strings_and_booleans():
    F, y = blobs()
    a = FeatureModel().fit(F, y)
    b = FeatureModel().fit(F, np.where(y, "spam", "ham"))
    assert a.to_dict() == b.to_dict()
    with pytest.raises(ValueError):
        FeatureModel().fit(F, np.where(y, "spam", "eggs"))


def test_to_dict_from_dict_round_trip():
    F, y = blobs()
    model = FeatureModel(var_smoothing=1e-3).fit(F, y)
    stored = json.loads(json.dumps(model.to_dict()))
    loaded = FeatureModel.from_dict(stored)
    assert loaded.to_dict() == model.to_dict()
    assert loaded.names_ == list(FEATURE_NAMES)
    for row in F[:10].tolist():
        assert loaded.log_likelihood_one(row) == model.log_likelihood_one(row)
    np.testing.assert_array_equal(loaded.log_likelihood(F), model.log_likelihood(F))


def test_learning_continues_after_from_dict():
    F, y = blobs()
    loaded = FeatureModel.from_dict(FeatureModel(var_smoothing=1e-2).fit(F[::2], y[::2]).to_dict())
    loaded.partial_fit(F[1::2], y[1::2])
    whole = FeatureModel(var_smoothing=1e-2).fit(F, y)
    np.testing.assert_allclose(loaded.means_, whole.means_, rtol=1e-12)
    np.testing.assert_allclose(loaded.var_, whole.var_, rtol=1e-12)
    assert loaded.class_count_ == whole.class_count_


@pytest.mark.parametrize("damage", [
    lambda d: d.pop("means"),
    lambda d: d["variances"][0].__setitem__(0, -1.0),
    lambda d: d["variances"][1].__setitem__(0, float("nan")),
    lambda d: d["means"][0].pop(),
    lambda d: d["scatter"].pop(),
    lambda d: d.__setitem__("class_count", [1.0]),
    lambda d: d.__setitem__("classes", ["spam", "ham"]),
    lambda d: d["means"][1].__setitem__(2, "x"),
])
def test_from_dict_rejects_damaged_models(damage):
    F, y = blobs()
    data = FeatureModel().fit(F, y).to_dict()
    damage(data)
    with pytest.raises(ValueError):
        FeatureModel.from_dict(data)


def test_errors():
    with pytest.raises(ValueError, match="not fitted"):
        FeatureModel().log_likelihood_one([0.0] * len(FEATURE_NAMES))
    F, y = blobs()
    model = FeatureModel().fit(F, y)
    with pytest.raises(ValueError):
        model.log_likelihood_one([0.0] * (len(FEATURE_NAMES) - 1))
    with pytest.raises(ValueError):
        model.log_likelihood(F[:, :3])


def test_features_are_off_by_default():
    assert DEFAULT_WEIGHT == 0.0   # off: the measurement in docs/features.md


def test_cold_path_imports_no_numpy():
    F, y = blobs()
    stored = json.dumps(FeatureModel().fit(F, y).to_dict())
    code = (
        "import json, sys\n"
        "from spamnb.estimator.message_features import FeatureModel, raw_message_features\n"
        f"model = FeatureModel.from_dict(json.loads({stored!r}))\n"
        f"ll = model.log_likelihood_one(raw_message_features({PLAIN!r}))\n"
        "assert len(ll) == 2\n"
        "print('numpy' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
