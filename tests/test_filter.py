"""SpamFilter: training, scoring, learn/forget, save/load."""

import email
import math
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import spamnb
from spamnb.training.corpus import labelled_messages
from spamnb.model.spam_filter import SpamFilter
from spamnb.estimator.messages import message_bytes
from spamnb.persistence.store import ModelError
from spamnb.mail.tokenizer import Tokenizer

from conftest import REPO


HAM = [b"From: alice@example.org\nSubject: lunch on friday\n\nShall we meet for lunch on friday at noon?\n",
       b"From: bob@example.org\nSubject: minutes\n\nThe minutes of the meeting are attached below.\n"]
SPAM = [b"From: win@prizes.example\nSubject: You WIN money\n\nClaim your free money now, click here!\n",
        b"From: deals@cheap.example\nSubject: cheap pills\n\nCheap pills, free shipping, click now!\n"]


@pytest.fixture(scope="module")
def sample():
    return labelled_messages([REPO / "corpora"])


@pytest.fixture(scope="module")
def trained(sample):
    return SpamFilter().fit([m.data for m in sample], [m.is_spam for m in sample])


@pytest.mark.parametrize("counts", ["raw", "binary", "log"])
@pytest.mark.parametrize("prior", ["mle", "map", "uniform"])
def test_score_matches_a_hand_computed_multinomial(counts, prior):
    alpha = 0.5
    spam_filter = SpamFilter(alpha=alpha, counts=counts, prior=prior, length_norm=0).fit(HAM + SPAM,
                                                                                       [False, False, True, True])
    tokenizer = Tokenizer()
    transform = {"raw": lambda c: c, "binary": lambda c: 1.0, "log": math.log1p}[counts]
    docs = [Counter(tokenizer.tokens(m)) for m in HAM + SPAM]
    vocab = sorted(set().union(*docs))
    totals = [Counter(), Counter()]
    for doc, is_spam in zip(docs, [0, 0, 1, 1]):
        for token, count in doc.items():
            totals[is_spam][token] += transform(count)
    n_class = [sum(t.values()) for t in totals]
    log_prior = {"mle": [math.log(0.5)] * 2, "map": [math.log(3 / 6)] * 2, "uniform": [math.log(0.5)] * 2}[prior]
    message = b"From: carol@example.org\nSubject: free lunch\n\nclick here for a free lunch, unknownword\n"
    counts_here = Counter(t for t in tokenizer.tokens(message) if t in set(vocab))
    jll = []
    for c in (0, 1):
        jll.append(log_prior[c] + sum(transform(n) * (math.log(totals[c][t] + alpha)
                                                      - math.log(n_class[c] + alpha * len(vocab)))
                                      for t, n in counts_here.items()))
    score = spam_filter.score(message)
    assert score.log_odds == pytest.approx(jll[1] - jll[0], rel=1e-10, abs=1e-10)
    assert score.probability == pytest.approx(1 / (1 + math.exp(-(jll[1] - jll[0]))), rel=1e-12)


def test_single_and_batch_scoring_agree(trained, sample):
    data = [m.data for m in sample[::7]]
    single = np.array([trained.score(d).log_odds for d in data])
    batch = trained.score_many(data)
    np.testing.assert_allclose(single, batch, rtol=1e-9, atol=1e-9)
    jll = trained.model_.predict_joint_log_proba(trained.transform(data))
    np.testing.assert_allclose(single, jll[:, 1] - jll[:, 0], rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("length_norm", [0.0, 5.0])
@pytest.mark.parametrize("counts", ["raw", "binary", "log"])
def test_fit_counts_equal_multinomial_nb_over_the_rows(sample, counts, length_norm):
    from spamnb.bayes.multinomial import MultinomialNB

    data = [m.data for m in sample]
    labels = [m.is_spam for m in sample]
    spam_filter = SpamFilter(counts=counts, length_norm=length_norm).fit(data, labels)
    reference = MultinomialNB(alpha=spam_filter.alpha).partial_fit(spam_filter.transform(data), labels,
                                                                     classes=[False, True])
    if length_norm:   # each message scaled when added and in its row: the same to rounding
        np.testing.assert_allclose(spam_filter.model_.feature_count_, reference.feature_count_, rtol=1e-12)
    else:             # bit for bit
        np.testing.assert_array_equal(spam_filter.model_.feature_count_, reference.feature_count_)
    np.testing.assert_array_equal(spam_filter.model_.class_count_, reference.class_count_)
    with pytest.raises(ValueError, match="messages but"):
        SpamFilter().fit(data[:3], labels[:2])
    with pytest.raises(ValueError, match="messages but"):
        SpamFilter().fit(iter(data[:2]), labels[:3])


def test_plain_fit_needs_neither_numpy_nor_scipy(tmp_path):
    code = ("import sys; from spamnb.model.spam_filter import SpamFilter; "
            "f = SpamFilter().fit([b'Subject: cheap pills\\n\\nbuy now', b'Subject: lunch\\n\\nat noon'], [True, False], "
            "tune=False); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'scipy')))")
    env = dict(os.environ, PYTHONPATH=str(Path(spamnb.__file__).resolve().parents[1]))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True, cwd=tmp_path, env=env)
    assert out.stdout.decode().strip() == "[]"


def test_fit_separates_the_sample(trained, sample):
    # training-set sanity only; held-out accuracy is measured by scripts/bench/bench.py
    labels = [trained.classify(m.data).label for m in sample]
    wrong = sum((label == "spam") != m.is_spam for label, m in zip(labels, sample))
    assert wrong <= 3


def test_labels_as_strings_and_messages_in_every_form(tmp_path):
    path = tmp_path / "m"
    path.write_bytes(SPAM[0])
    as_strings = SpamFilter().fit(HAM + SPAM, ["ham", "ham", "spam", "SPAM"])
    as_bools = SpamFilter().fit(HAM + SPAM, [False, False, True, True])
    assert as_strings.score(SPAM[1]) == as_bools.score(SPAM[1])
    parsed = email.message_from_bytes(SPAM[0])
    assert as_bools.score(path) == as_bools.score(SPAM[0])
    assert as_bools.score(parsed).log_odds == pytest.approx(as_bools.score(SPAM[0]).log_odds)
    with pytest.raises(ValueError):
        SpamFilter().fit(HAM, ["ham", "eggs"])
    with pytest.raises(TypeError):
        message_bytes(12)


@pytest.mark.parametrize("size", [0, 1, 4096, 65536, 65537, 300_000])
def test_message_bytes_reads_whole_files_and_pipes(tmp_path, size):
    import os
    import threading

    data = os.urandom(size)
    path = tmp_path / "message"
    path.write_bytes(data)
    assert message_bytes(path) == data
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=fifo.write_bytes, args=(data,))
    writer.start()
    assert message_bytes(fifo) == data  # no size to go by: read to the end
    writer.join()
    with pytest.raises(OSError):
        message_bytes(tmp_path / "missing")


def test_learn_then_forget_restores_the_model_exactly(trained, sample):
    spam_filter = SpamFilter().fit([m.data for m in sample[:100]], [m.is_spam for m in sample[:100]])
    probe = [m.data for m in sample[100:130]]
    before = [spam_filter.score(d) for d in probe]
    n_features = spam_filter.vocabulary_.n_features
    counts = spam_filter.model_.feature_count_.copy()
    new_message = b"From: x@new.example\nSubject: zyxwvut qwertyuiop\n\nbrand new tokens asdfghjkl\n"
    spam_filter.learn(new_message, spam=True)
    assert spam_filter.vocabulary_.n_features > n_features
    assert [spam_filter.score(d) for d in probe] != before
    spam_filter.forget(new_message, spam=True)
    assert spam_filter.vocabulary_.n_features == n_features
    np.testing.assert_array_equal(spam_filter.model_.feature_count_, counts)
    assert [spam_filter.score(d) for d in probe] == before


def test_forgetting_what_was_not_learned_changes_nothing(trained):
    spam_filter = SpamFilter().fit(HAM + SPAM, [False, False, True, True])
    before = spam_filter.score(HAM[0])
    with pytest.raises(ValueError):
        spam_filter.forget(HAM[0], spam=True)  # learned as ham, not spam
    assert spam_filter.score(HAM[0]) == before


def test_save_load_round_trip(trained, sample, tmp_path):
    path = tmp_path / "model.spamnb"
    trained.save(path)
    loaded = SpamFilter.load(path)
    for m in sample[::10]:
        assert loaded.classify(m.data) == trained.classify(m.data)
    assert loaded.class_count_ == trained.class_count_
    assert loaded.vocabulary_.tokens()[:50] == trained.vocabulary_.tokens()[:50]


def test_a_loaded_model_learns_and_saves_again(trained, sample, tmp_path):
    path = tmp_path / "model.spamnb"
    trained.save(path)
    loaded = SpamFilter.load(path)
    loaded.learn(HAM[0], spam=False)
    loaded.save(path)  # over the file it was mapped from
    again = SpamFilter.load(path)
    assert again.class_count_[0] == trained.class_count_[0] + 1
    assert again.score(HAM[1]) == loaded.score(HAM[1])


def test_scoring_a_loaded_model_does_not_import_numpy(trained, tmp_path):
    path = tmp_path / "model.spamnb"
    trained.save(path)
    code = ("import sys; from spamnb.model.spam_filter import SpamFilter; f = SpamFilter.load(sys.argv[1]); "
            "v = f.classify(sys.stdin.buffer.read()); print(v.label); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'scipy', 'email')))")
    out = subprocess.run([sys.executable, "-c", code, str(path)], input=SPAM[0], capture_output=True, check=True)
    label, modules = out.stdout.decode().splitlines()
    assert label in ("spam", "ham", "unsure")
    assert modules == "[]"


def test_other_tokenizer_settings_are_refused(trained, tmp_path):
    path = tmp_path / "model.spamnb"
    trained.save(path)
    other = dict(Tokenizer().settings)
    other.pop("version")
    other["max_bytes"] = other["max_bytes"] + 1
    with pytest.raises(ModelError, match="tokenizer"):
        SpamFilter.load(path, tokenizer=Tokenizer(**other))


def test_degenerate_messages_get_verdicts(trained):
    for message in [b"", b"\n\n\n", b"Subject: only headers\n", b"\x00\xff" * 500, b"no headers at all, just text",
                    b"Content-Type: text/plain; charset=\"default_charset\"\n\n\xe9t\xe9\n",
                    b"Content-Transfer-Encoding: base64\n\n!!!not base64###\n"]:
        verdict = trained.classify(message)
        assert verdict.label in ("spam", "ham", "unsure")
        assert 0.0 <= verdict.probability <= 1.0


def test_cutoffs_decide_the_label(trained, sample):
    message = sample[0].data
    p = trained.score(message).probability
    for spam_cutoff, ham_cutoff, expected in [(p, 0.0, "spam"), (1.0, p, "ham")]:
        f = SpamFilter(spam_cutoff=spam_cutoff, ham_cutoff=ham_cutoff)
        f.__dict__.update({k: v for k, v in trained.__dict__.items() if k.endswith("_") or k.startswith("_")})
        assert f.classify(message).label == expected


def test_bad_parameters_are_refused():
    for kwargs in [{"alpha": 0}, {"alpha": -1}, {"prior": "nope"}, {"counts": "tf-idf"},
                   {"spam_cutoff": 0.2, "ham_cutoff": 0.5}]:
        with pytest.raises(ValueError):
            SpamFilter(**kwargs)
    with pytest.raises(ValueError, match="learned nothing"):
        SpamFilter().score(HAM[0])


def test_evidence_points_the_right_way(trained):
    verdict = trained.classify(SPAM[1])
    assert len(verdict.evidence) > 0
    weights = [w for _, w in verdict.evidence]
    assert weights == sorted(weights, key=abs, reverse=True)
    assert sum(weights) > 0 or verdict.label != "spam"


def test_message_features_add_their_weighted_log_likelihood_ratio(sample, tmp_path):
    from spamnb.estimator.message_features import FeatureModel
    from spamnb.estimator.scoring import message_features_of

    data = [m.data for m in sample]
    labels = [m.is_spam for m in sample]
    words = SpamFilter().fit(data, labels)
    both = SpamFilter(feature_weight=0.5).fit(data, labels)
    model = FeatureModel().fit([message_features_of(both, d) for d in data], labels)
    for d in data[::25]:
        ll_ham, ll_spam = model.log_likelihood_one(message_features_of(both, d))
        assert both.score(d).log_odds == pytest.approx(words.score(d).log_odds + 0.5 * (ll_spam - ll_ham), rel=1e-9)
    np.testing.assert_allclose(both.score_many(data[::25]), [both.score(d).log_odds for d in data[::25]],
                               rtol=1e-9, atol=1e-9)
    path = tmp_path / "features.spamnb"
    both.save(path)
    loaded = SpamFilter.load(path)
    assert loaded.feature_weight == 0.5
    assert [loaded.score(d) for d in data[::25]] == [both.score(d) for d in data[::25]]
    with pytest.raises(ValueError, match="forget"):
        loaded.forget(data[0], spam=labels[0])
    with pytest.raises(ValueError):
        SpamFilter(feature_weight=-1)


def test_classify_without_evidence_gives_the_same_verdict(trained, sample):
    """``classify(m, evidence=False)`` (what the server answers CHECK with)
    decides as ``classify(m)``, and lists no tokens."""
    for message in sample[::7]:
        full, bare = trained.classify(message.data), trained.classify(message.data, evidence=False)
        assert (bare.label, bare.probability, bare.log_odds, bare.tokens, bare.known_tokens) == \
            (full.label, full.probability, full.log_odds, full.tokens, full.known_tokens)
        assert bare.evidence == () and full.evidence
