"""A learned model's pair weight chosen on its own mail, shipped (spamnb.estimator.variants.PairMixture):
kept in the model file (schema 8), journaled per learn, applied by every scorer."""

import math
import os
import random
from pathlib import Path

import pytest

from conftest import SAMPLE_CORPUS, run_spamnb
from spamnb.estimator.defaults import LEARNED_PAIR_WEIGHT
from spamnb.estimator.variants import (PAIR_MIXTURE_SIZE, SHIPPED_ETA, PairMixture, PairWeightMixture,
                                       gets_mixture)
from spamnb.model import SpamFilter
from spamnb.estimator.ledger import Tally
from spamnb.model.learning import learned_model, session
from spamnb.persistence import schema


def _stream(n=1500, seed=1):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        spam = rng.random() < 0.4
        sign = 1.0 if spam else -1.0
        out.append((spam, rng.gauss(8 * sign, 15), rng.gauss(4 * sign, 10)))
    return out


def test_the_shipped_mixture_is_the_harness_s_rescaled_ranking_mixture():
    """PairMixture (pure Python) moves as PairWeightMixture(loss="rank", eta=3, rescale=True) does,
    take-backs (a relabel) included; its prior is the centre exactly, scale 1."""
    shipped, harness = PairMixture(), PairWeightMixture(eta=SHIPPED_ETA, loss="rank", rescale=True)
    assert shipped.weight == LEARNED_PAIR_WEIGHT and shipped.scale == 1.0
    for i, (spam, words, pairs) in enumerate(_stream()):
        shipped.add(words, pairs, spam)
        harness.add(words, pairs, spam)
        if i % 11 == 5:
            shipped.add(words, pairs, spam, -1.0)
            harness.add(words, pairs, spam, -1.0)
            shipped.add(words, pairs, not spam)
            harness.add(words, pairs, not spam)
        assert shipped.weight == pytest.approx(harness.weight, abs=1e-12)
        assert shipped.scale == pytest.approx(harness.scale, rel=1e-12)
    assert shipped.weight != LEARNED_PAIR_WEIGHT and shipped.scale != 1.0
    shipped.add(float("nan"), 1.0, True)     # no score: nothing counted
    assert shipped.n == harness.n


def test_the_compiled_count_of_a_process_that_counts_many_is_the_pure_python_one_to_the_bit():
    """After its first message a mixture counts through bayes/_mixture (a replay, the online protocol);
    each step equals the pure-Python count of the same state (a mixture made from it counts its first
    message in Python), take-backs and halved histograms (heavy weights) included."""
    rng = random.Random(7)
    running = PairMixture()
    running.add(3.0, 1.0, True)
    halved = 0
    for i, (spam, words, pairs) in enumerate(_stream(600, seed=3)):
        weight = 400.0 if i % 7 == 0 else (-1.0 if i % 13 == 4 else 1.0)
        if i == 300:
            words = float("inf") if spam else float("-inf")    # beyond the bins: the end bins
        before = running.to_array()
        fresh = PairMixture(running.centre, before)
        assert fresh.to_array() == before
        fresh.add(words, pairs, spam, weight)            # its first: pure Python
        running.add(words, pairs, spam, weight)          # compiled
        assert running.to_array() == fresh.to_array(), i
        assert (running.weight, running.scale, running.n) == (fresh.weight, fresh.scale, fresh.n)
        halved += sum(before[1 + 2 * 9:]) - sum(running.to_array()[1 + 2 * 9:]) > 1000   # not a take-back's 9
    assert halved > 0 and running.weight != LEARNED_PAIR_WEIGHT


def test_its_state_round_trips_and_a_stored_one_reads_its_state_only_when_it_learns():
    mixture = PairMixture()
    for spam, words, pairs in _stream(400):
        mixture.add(words, pairs, spam)
    state = mixture.to_array()
    assert len(state) == PAIR_MIXTURE_SIZE
    reads = []
    stored = PairMixture.stored(mixture.centre, mixture.weight, mixture.scale, mixture.n,
                                lambda: reads.append(1) or state)
    follower = mixture.copy()
    for spam, words, pairs in _stream(30, seed=2):     # a journal's records: their weight taken, not recounted
        follower.add(words, pairs, spam)
        stored.note(words, pairs, spam, follower.weight, follower.scale)
    assert not reads and (stored.weight, stored.scale) == (follower.weight, follower.scale)
    assert stored.to_array() == follower.to_array() and reads == [1]
    bad = state[:]
    bad[5] = -1.0
    with pytest.raises(ValueError):
        PairMixture(state=bad)
    with pytest.raises(ValueError):
        PairMixture(state=state[:-1])


def test_the_setting_gives_only_models_that_grow_by_learning_the_mixture(monkeypatch):
    monkeypatch.setenv("SPAMNB_PAIR_MIXTURE", "0")
    assert learned_model().pair_mixture_ is None
    monkeypatch.setenv("SPAMNB_PAIR_MIXTURE", "1")
    grown = learned_model()
    assert grown.pair_mixture_ is not None and grown.pair_scoring() == (LEARNED_PAIR_WEIGHT, 1.0)
    assert not gets_mixture(SpamFilter())   # a model `train` makes keeps its own weight


def _sample_order(n=None):
    """The shipped sample's messages, shuffled (seed 0): [(path, is_spam)]."""
    root = Path(SAMPLE_CORPUS)
    items = [(p, part.startswith("spam")) for part in ("spam", "spam_2", "easy_ham", "hard_ham", "easy_ham_2")
             for p in sorted((root / part).iterdir()) if p.is_file()]
    random.Random(0).shuffle(items)
    return items[:n]


def _learn_by_cli(model, items, home, batch):
    """``spamnb learn`` of ``items`` a batch at a time (its spam, then its ham): the order learned."""
    order = []
    for at in range(0, len(items), batch):
        chunk = items[at:at + batch]
        for spam in (True, False):
            files = [p for p, s in chunk if s == spam]
            if files:
                proc = run_spamnb(["learn", "-q", "--spam" if spam else "--ham", "-m", model, *files], home=home)
                assert proc.returncode == 0, proc.stderr.decode(errors="replace")
                order += [(p, spam) for p in files]
    return order


def _close(a, b):
    return abs(a - b) <= 1e-12 * max(1.0, abs(a), abs(b))


@pytest.mark.slow
def test_after_learns_every_form_scores_as_the_harness_s_mixture(tmp_path, monkeypatch):
    """Learned through ``spamnb learn`` (a site model, then a user's hard link of it and its own
    journal): the model whole, mapped (its journal scored, not replayed), following, scoring-only, the
    server's overlay and the batch kernel give each message one score, to 1e-12, which is the online
    harness's with ``PairWeightMixture(loss="rank", eta=3, rescale=True)`` after the same learns."""
    from spamnb.evaluation.online import OnlineModel
    from spamnb.server import overlay

    monkeypatch.setenv("SPAMNB_PAIR_MIXTURE", "1")
    items = _sample_order()
    learn, probes = items[:260], [p for p, _s in items[260:]]
    site, user = tmp_path / "site.spamnb", tmp_path / "user.spamnb"
    order = _learn_by_cli(site, learn[:252], tmp_path, 21)
    grown = SpamFilter.load(site)           # the journal folded in: the site model whole
    grown.save(site)
    if os.path.exists(str(site) + ".journal"):
        os.unlink(str(site) + ".journal")
    os.link(site, user)
    order += _learn_by_cli(user, learn[252:], tmp_path, 4)   # the user's learns: a journal of its own
    assert os.path.getsize(str(user) + ".journal") > 0 and os.path.samefile(site, user)   # not compacted

    harness = OnlineModel(variants=PairWeightMixture(eta=SHIPPED_ETA, loss="rank", rescale=True))
    for path, spam in order:
        stream = harness.stream(path.read_bytes())
        harness.learn(stream, spam, harness.log_odds(stream))
    whole = SpamFilter.load(user)
    weight, scale = whole.pair_scoring()
    assert whole.pair_mixture_.n == harness.variants.n > 0
    assert weight != LEARNED_PAIR_WEIGHT and scale != 1.0
    assert _close(weight, harness.variants.weight) and _close(scale, harness.variants.scale)

    site_follower = SpamFilter.load(site, form="following")
    forms = {"whole": whole, "mapped": SpamFilter.load(user, mapped=True),
             "following": SpamFilter.load(user, form="following"), "scoring": SpamFilter.load(user, form="scoring"),
             "overlay": overlay.build(str(user), site_follower, str(site))}
    assert forms["overlay"] is not None and forms["mapped"].pair_scoring() == (weight, scale)
    data = [p.read_bytes() for p in probes]
    batch = whole.score_many(data)
    for i, message in enumerate(data):
        expected = harness.log_odds(harness.stream(message))
        scores = {name: form.score_stream(form.tokens(message), 0, parts=False).log_odds
                  for name, form in forms.items()}
        scores["classify"] = whole.classify(message).log_odds
        scores["batch"] = float(batch[i])
        for name, score in scores.items():
            assert _close(score, expected), (name, score, expected)

    proc = run_spamnb(["info", "-m", user, "--tokens", "0"], home=tmp_path, text=True)
    assert f"pair weight:    {weight:.4f}, chosen on the model's own mail" in proc.stdout


def test_a_model_without_the_mixture_scores_as_before_and_learns_it_from_its_prior(tmp_path, monkeypatch):
    """A learned model saved without a mixture (schema 7, or the setting off) loads, with the setting
    on, with the prior: its scores are those it had, to the bit; its first learns then journal the
    mixture's records, and the model whole and mapped agree on the weight."""
    monkeypatch.setenv("SPAMNB_PAIR_MIXTURE", "0")
    items = _sample_order(180)
    path = tmp_path / "model.spamnb"
    with session(path) as s:
        for p, spam in items[:150]:
            s.learn(p.read_bytes(), spam, Tally())
    header, arrays = schema.read(path)
    assert header["pair_mixture"] is None and len(arrays["pair_mixture"]) == 0
    before = SpamFilter.load(path)
    probes = [p.read_bytes() for p, _s in items[150:160]]
    old = [before.classify(m).log_odds for m in probes]
    monkeypatch.setenv("SPAMNB_PAIR_MIXTURE", "1")
    for form in ({}, {"mapped": True}):
        prior = SpamFilter.load(path, **form)
        assert prior.pair_mixture_ is not None and prior.pair_scoring() == (LEARNED_PAIR_WEIGHT, 1.0)
        assert [prior.classify(m).log_odds for m in probes] == old
    with session(path, mapped=True, light=True) as s:   # the light learn: records appended, the model unread
        for p, spam in items[160:]:
            s.learn(p.read_bytes(), spam, Tally())
    whole, mapped = SpamFilter.load(path), SpamFilter.load(path, mapped=True)
    assert whole.pair_mixture_.n == 20 and whole.pair_scoring() == mapped.pair_scoring()
    whole.save(tmp_path / "folded.spamnb")
    folded = SpamFilter.load(tmp_path / "folded.spamnb")
    assert folded.pair_scoring() == whole.pair_scoring()
    assert folded.pair_mixture_.to_array() == whole.pair_mixture_.to_array()
    for m in probes:
        assert _close(folded.classify(m).log_odds, mapped.classify(m).log_odds)


def test_a_forget_leaves_the_mixture_as_it_was(tmp_path, monkeypatch):
    """A forget (or a relabel) takes the message's counts and held-out score back, not its share of
    the mixture's loss (docs/accuracy.md says why): the replay and the model whole still agree."""
    monkeypatch.setenv("SPAMNB_PAIR_MIXTURE", "1")
    items = _sample_order()
    path = tmp_path / "model.spamnb"
    with session(path) as s:
        for p, spam in items:
            s.learn(p.read_bytes(), spam, Tally())
    learned = SpamFilter.load(path)
    n = learned.pair_mixture_.n
    assert n > 0 and learned.pair_scoring()[0] != LEARNED_PAIR_WEIGHT
    p, spam = items[-1]
    with session(path) as s:
        s.forget(p.read_bytes(), spam, Tally())
    after = SpamFilter.load(path)
    assert after.pair_mixture_.n == n and after.pair_scoring() == learned.pair_scoring()
    assert SpamFilter.load(path, mapped=True).pair_scoring() == after.pair_scoring()
    assert math.isfinite(after.classify(p.read_bytes()).log_odds)


def test_a_pruned_model_keeps_its_pair_weight(tmp_path, monkeypatch):
    """``spamnb prune`` (and the automatic expiry, the same prune) keeps the mixture: the weight a
    model chose on its mail does not go back to 0.5 when its rare tokens go."""
    from spamnb.model.lifecycle import prune

    monkeypatch.setenv("SPAMNB_PAIR_MIXTURE", "1")
    path = tmp_path / "model.spamnb"
    with session(path) as s:
        for p, spam in _sample_order():
            s.learn(p.read_bytes(), spam, Tally())
    learned = SpamFilter.load(path)
    assert learned.pair_mixture_.n > 0 and learned.pair_scoring()[0] != LEARNED_PAIR_WEIGHT
    pruned, dropped = prune(learned, target_size=learned.vocabulary_.n_features // 2)
    assert dropped > 0 and pruned.pair_scoring() == learned.pair_scoring()
    pruned.save(tmp_path / "pruned.spamnb")
    assert SpamFilter.load(tmp_path / "pruned.spamnb").pair_scoring() == learned.pair_scoring()


def test_evaluate_online_grows_the_learned_model_with_its_mixture(tmp_path, monkeypatch):
    """``spamnb evaluate --online`` grows a model as ``spamnb learn`` does: its pair weight chosen on
    the stream (the figures of the harness with PairMixture); SPAMNB_PAIR_MIXTURE=0: the weight 0.5."""
    import json

    from spamnb.evaluation.online import online_figures, order_messages, run_online
    from spamnb.training.corpus import labelled_messages

    figures = {}
    for setting in ("1", "0"):
        monkeypatch.setenv("SPAMNB_PAIR_MIXTURE", setting)
        report = tmp_path / f"{setting}.json"
        proc = run_spamnb(["evaluate", "--online", "--json", report, SAMPLE_CORPUS], text=True)
        assert proc.returncode == 0, proc.stderr
        assert ("pair weight chosen on the stream's own mail" in proc.stdout) == (setting == "1")
        figures[setting] = json.loads(report.read_text())["figures"]
    items = labelled_messages(trees=[str(SAMPLE_CORPUS)])
    order, _used = order_messages([m.relpath for m in items], [m.data for m in items], "auto")
    y = [items[i].is_spam for i in order]
    harness = run_online([items[i].data for i in order], y, variants=PairMixture())
    expected = online_figures(harness)["one_minus_roca_percent"]
    assert figures["1"]["one_minus_roca_percent"] == pytest.approx(expected, rel=1e-12)
    assert figures["1"]["one_minus_roca_percent"] != figures["0"]["one_minus_roca_percent"]


def test_a_damaged_mixture_state_is_a_model_error_when_a_learn_reads_it():
    """The state is read when a learn needs it: numbers no learn writes (a scale out of range, a
    negative count) are a ModelError then, as a damaged model file is, never a score of infinity."""
    from spamnb.errors import ModelError

    mixture = PairMixture()
    for spam, words, pairs in _stream(300):
        mixture.add(words, pairs, spam)
    state = mixture.to_array()
    state[1 + len(mixture.losses) + 4] = 1e300      # the centre weight's spread: the scale explodes
    for bad in (state, state[:-1]):
        stored = PairMixture.stored(mixture.centre, mixture.weight, mixture.scale, mixture.n, lambda: bad)
        with pytest.raises(ModelError, match="pair-weight mixture is damaged"):
            stored.add(1.0, 2.0, True)


def test_a_journal_record_of_pair_scores_out_of_range_stops_the_replay(tmp_path, monkeypatch):
    """A PAIR_SCORES record whose scale is infinite (or weight out of [0, 1]) is a record that does not
    fit: the replay stops there with a warning, the journal view leaves it to the replay, and the model
    scores with the weight it had, never with an infinite scale."""
    from spamnb.errors import JournalWarning
    from spamnb.persistence import deltas

    monkeypatch.setenv("SPAMNB_PAIR_MIXTURE", "1")
    path = tmp_path / "model.spamnb"
    with session(path) as s:
        for p, spam in _sample_order(120):
            s.learn(p.read_bytes(), spam, Tally())
    SpamFilter.load(path).save(path)        # folded: the next records are the journal's only ones
    os.unlink(str(path) + ".journal") if os.path.exists(str(path) + ".journal") else None
    before = SpamFilter.load(path).pair_scoring()
    with session(path) as s:
        s.transactions.append(deltas.encode_pair_scores(1, 1.0, 2.0, 0.5, math.inf))
    for form in ({}, {"mapped": True}):
        with pytest.warns(JournalWarning, match="does not fit"):
            loaded = SpamFilter.load(path, **form)
            assert loaded.pair_scoring() == before
            assert math.isfinite(loaded.classify(b"Subject: hello\n\nhello there").log_odds)


@pytest.mark.parametrize("field, value", [("weight", 1.5), ("weight", -0.1), ("scale", 0.0), ("scale", 1e7),
                                          ("n", -1)])
def test_a_model_file_whose_mixture_header_is_out_of_range_is_refused(tmp_path, field, value):
    from spamnb.errors import ModelError

    model = learned_model().fit([b"Subject: a\n\nhello there friend", b"Subject: b\n\ncheap pills now"],
                                [False, True], tune=False)
    mixture = PairMixture()
    setattr(mixture, field, value)
    model.set_fitted(pair_mixture_=mixture)
    model.save(tmp_path / "model.spamnb")
    with pytest.raises(ModelError, match="pair-weight mixture"):
        SpamFilter.load(tmp_path / "model.spamnb")


def test_one_pass_gives_the_two_held_out_scores_of_two_kernels_to_the_bit(tmp_path, monkeypatch):
    """``pair_sums`` (what ``variants.pair_scores`` reads: one pass) of every kernel form a learn scores
    through (the compiled Scorer of the model whole, the mapped file's FileScorer, a journal view of a
    model read in part) gives the class sums of two scores by kernels at pair weights 0 and 1, bit for
    bit, whatever the kernel's own weight; so do the two held-out scores."""
    from spamnb.estimator import scoring
    from spamnb.estimator.variants import pair_scores
    from spamnb.persistence.journal_view import JournalView

    monkeypatch.setenv("SPAMNB_PAIR_MIXTURE", "1")
    items = _sample_order(130)
    learn, probes = items[:86], [p.read_bytes() for p, _s in items[90:]]
    site, user = tmp_path / "site.spamnb", tmp_path / "user.spamnb"
    _learn_by_cli(site, learn[:80], tmp_path, 40)
    SpamFilter.load(site).save(site)
    if os.path.exists(str(site) + ".journal"):
        os.unlink(str(site) + ".journal")
    os.link(site, user)
    _learn_by_cli(user, learn[80:], tmp_path, 3)   # a journal of its own, not replayed by a mapped load
    assert os.path.getsize(str(user) + ".journal") > 0
    forms = {"whole": SpamFilter.load(user), "file": SpamFilter.load(site, mapped=True),
             "view": SpamFilter.load(user, mapped=True)}
    kinds = set()
    for name, sf in forms.items():
        for message in probes:
            stream = sf.tokenizer_.stream(message)
            assert 0 < stream.pairs_start < len(stream.hashes)
            at = [scoring.kernel(sf, w).score(stream.hashes, 0, stream.pairs_start)[0] for w in (0.0, 1.0)]
            for own in (0.0, 0.5, 1.0):
                kernel = scoring.kernel(sf, own)
                kinds.add(type(kernel).__name__)
                jll_words, jll_all = kernel.pair_sums(stream.hashes, stream.pairs_start)
                assert [list(jll_words), list(jll_all)] == at, (name, own)
            words = at[0][1] - at[0][0]
            assert pair_scores(sf.scorer(), stream.hashes, stream.pairs_start) == (words, at[1][1] - at[1][0] - words)
            no_pairs = scoring.kernel(sf, 0.0).pair_sums(stream.hashes, -1)    # pairs_start -1: all words
            assert list(no_pairs[0]) == list(no_pairs[1]) == scoring.kernel(sf, 1.0).score(stream.hashes, 0, -1)[0]
    assert {"Scorer", "FileScorer", JournalView.__name__} <= kinds, kinds


def test_the_compiled_weight_and_scale_are_the_pure_python_ones_to_the_bit():
    """``token_kernels.mixture_settle`` (math.fsum's algorithm in C) gives the weight and scale a
    mixture made from a state gives in Python, over states far apart (losses up to 1e4, one share
    dominant or all equal, spreads of any size), the centre anywhere on the grid or between."""
    from array import array

    from spamnb.bayes import token_kernels
    from spamnb.estimator.variants import MIXTURE_WEIGHTS, PRIOR_WIDTH

    rng = random.Random(11)
    nw = len(MIXTURE_WEIGHTS)
    for i in range(3000):
        centre = rng.choice([0.0, 0.5, 1.0, rng.random()])
        scale_of = 10.0 ** rng.uniform(-3, 4)
        losses = [0.0 if i % 5 == 0 else rng.random() * scale_of for _ in range(nw)]
        size = 10.0 ** rng.uniform(0, 6)
        spread = [size * rng.uniform(0.2, 5.0) for _ in range(nw)]
        state = array("d", [float(1 + i)] + losses + spread) + array("d", bytes(8 * (PAIR_MIXTURE_SIZE - 1 - 2 * nw)))
        python = PairMixture(centre, state)     # its weight and scale: _settle, pure Python
        log_prior = array("d", [-0.5 * ((w - centre) / PRIOR_WIDTH) ** 2 for w in MIXTURE_WEIGHTS])
        compiled = token_kernels.mixture_settle(array("d", losses), array("d", spread), log_prior,
                                                array("d", MIXTURE_WEIGHTS), SHIPPED_ETA, centre)
        assert compiled == (python.weight, python.scale), i
