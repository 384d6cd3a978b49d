"""Every form a model takes is one :class:`spamnb.model.Scorer` (issue 48):
the whole filter, the mapped file, the server's journal follower and
scoring-only copy (``SpamFilter.load(form=...)``), a user's overlay and a
cross-validation fold; each scores as the whole filter does, bit for bit,
and classifies through the one path (``spamnb.estimator.forms.classify``)."""

import os

import pytest

from tests.conftest import SAMPLE_CORPUS, run_spamnb

from spamnb.model import FORMS, Kernel, Scorer, SpamFilter
from spamnb.estimator import forms
from spamnb.server import overlay
from tests.test_overlay import site  # noqa: F401 (the fixture: spamnb train of the sample)


def _messages():
    return [p.read_bytes() for p in sorted(SAMPLE_CORPUS.glob("*/*")) if p.is_file()][::9]


def _novel(i, spam):
    words = " ".join(f"zq{i}form{k}word" for k in range(12))
    return (f"From: someone{i}@example.org\nSubject: note {i} {words}\n\n{words}\n"
            f"{'buy cheap pills now' if spam else 'see you at the meeting'}\n").encode()


def _learn(model, data, spam):
    done = run_spamnb(["learn", "--spam" if spam else "--ham", "-m", model, "-"], stdin=data)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def trained(site, tmp_path_factory):
    """The model trained on the sample (test_overlay's), and a hard link of it (a user's) with learns in its journal."""
    _folder, model = site
    user = tmp_path_factory.mktemp("forms") / "model.spamnb"
    os.link(model, user)
    for i in range(4):
        _learn(user, _novel(i, i % 2 == 0), i % 2 == 0)
    return model, user


def _same(a, b):
    """Two verdicts alike to the bit."""
    assert a.log_odds.hex() == b.log_odds.hex()
    assert (a.label, a.reason, a.tokens, a.known_tokens) == (b.label, b.reason, b.tokens, b.known_tokens)
    assert [(t, w.hex()) for t, w in a.evidence] == [(t, w.hex()) for t, w in b.evidence]


@pytest.mark.parametrize("which", ["site", "user"])
def test_each_form_the_owner_loads_is_a_scorer_and_scores_as_the_whole_filter(trained, which):
    path = trained[0] if which == "site" else trained[1]
    whole = SpamFilter.load(path)
    loaded = {form: SpamFilter.load(path, form=form) for form in FORMS}
    messages = _messages() + [_novel(i, True) for i in range(5)]
    for form, model in loaded.items():
        assert isinstance(model, Scorer), form
        assert isinstance(model.kernel(), Kernel), form
        for data in messages:
            _same(model.classify(data), whole.classify(data))
            _same(forms.classify(model, data), whole.classify(data))     # the shared path, as SpamFilter's own
            for parts in (True, False):
                a = model.score_stream(model.tokens(data), 0, parts)
                b = whole.score_stream(whole.tokens(data), 0, parts)
                assert a.log_odds.hex() == b.log_odds.hex() and a.sums == b.sums, (form, parts)
    # the mapped form reads a message's entries from the file: of an unchanged file, or through a journal of learns
    kernel = type(loaded["mapped"].kernel()).__name__
    assert kernel == ("FileScorer" if which == "site" else "JournalView")


def test_a_users_overlay_is_a_scorer_and_classifies_through_the_shared_path(trained):
    model, user = trained
    site = SpamFilter.load(model, form="following")
    held = overlay.build(str(user), site, str(model))
    assert held is not None
    assert isinstance(held, Scorer) and isinstance(held.kernel(), Kernel)
    assert held.follow_journal() is None      # read again when its journal grows
    whole = SpamFilter.load(user)
    for data in _messages() + [_novel(i, i % 2 == 0) for i in range(6)]:
        a, b = held.classify(data), whole.classify(data)
        assert abs(a.log_odds - b.log_odds) <= 1e-9
        assert (a.label, a.reason, a.tokens, a.known_tokens) == (b.label, b.reason, b.tokens, b.known_tokens)
        assert [t for t, _w in a.evidence] == [t for t, _w in b.evidence]


def test_a_cross_validation_fold_is_a_scorer(trained):
    import tempfile

    from spamnb.model import FoldModels
    from spamnb.estimator.counting import count_messages, counting_spec
    from spamnb.training.corpus import labelled_messages

    messages = [(m.data, m.is_spam) for m in labelled_messages([SAMPLE_CORPUS])][::3]
    spec = counting_spec(SpamFilter())
    with tempfile.TemporaryFile() as spilled:
        counts = count_messages(spec, messages, n_folds=5, spill=spilled, group=False)
    dense = counts.to_filter(SpamFilter())
    models = FoldModels.from_counts(dense, counts.class_count[2:].reshape(-1, 2), counts.sparse_folds())
    for k in range(models.n_folds):
        fold = forms.fold_form(models, k, dense.tokenizer_)
        assert isinstance(fold, Scorer) and isinstance(fold.kernel(), Kernel)
        for data, _spam in messages[k::40]:
            stream = fold.tokens(data)
            assert fold.score_stream(stream, 0, parts=False).log_odds.hex() == \
                models.log_odds(k, stream.hashes).hex()
            verdict = fold.classify(data)
            assert verdict.label in ("spam", "ham", "unsure")
            assert all(t.startswith("#") for t, _w in verdict.evidence)


def test_a_form_follows_its_journal_only_when_loaded_to(trained, tmp_path):
    model = tmp_path / "model.spamnb"
    model.write_bytes(trained[0].read_bytes())
    following = SpamFilter.load(model, form="following")
    scoring = SpamFilter.load(model, form="scoring")
    assert following.follow_journal() == 0
    _learn(model, _novel(40, True), True)
    assert following.follow_journal() == 1
    assert following.journal_state()[0] == "ok"
    assert scoring.follow_journal() is None and scoring.journal_state() is None
    fresh = SpamFilter.load(model)
    for data in [_novel(40, True), _novel(41, True)] + _messages()[:5]:
        _same(following.classify(data), fresh.classify(data))


def test_a_form_that_is_not_one_is_refused(trained):
    for form in ("", "Whole", "overlay"):
        with pytest.raises(ValueError, match="form must be one of"):
            SpamFilter.load(trained[0], form=form)
    with pytest.raises(ValueError, match="form must be one of"):
        SpamFilter.load(trained[0], mapped=True, form="whole")
