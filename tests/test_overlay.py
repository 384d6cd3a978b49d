"""A user model that is the site model plus a journal, held as an overlay
(spamnb.server.overlay, issue 34 item 4): the same verdicts and scores, to
1e-9, as the user model loaded whole; a model the overlay cannot stand for is
refused (None: loaded whole)."""

import os
import shutil

import pytest

from tests.conftest import SAMPLE_CORPUS, run_spamnb

from spamnb.model.spam_filter import SpamFilter
from spamnb.server import models, overlay


def _messages():
    return [p.read_bytes() for p in sorted(SAMPLE_CORPUS.glob("*/*")) if p.is_file()][::7]


def _untrained(data):
    cut = data.index(b"\n") + 1 if data.startswith(b"From ") else 0
    return data[:cut] + b"X-Lesson: 1\n" + data[cut:]


def _novel(i, spam):
    words = " ".join(f"zq{i}novel{k}word" for k in range(12))
    return (f"From: someone{i}@example.org\nSubject: note {i} {words}\n\n{words}\n"
            f"{'buy cheap pills now' if spam else 'see you at the meeting'}\n").encode()


@pytest.fixture(scope="module")
def site(tmp_path_factory, sample_model):
    """A folder with the model ``spamnb train -q -m MODEL corpora/`` writes (a copy of the session's)."""
    folder = tmp_path_factory.mktemp("overlay")
    model = folder / "model.spamnb"
    shutil.copyfile(sample_model, model)
    return folder, model


def _user(site, name, lessons):
    folder, model = site
    user = folder / "users" / name / "model.spamnb"
    user.parent.mkdir(parents=True)
    os.link(model, user)
    for data, spam in lessons:
        done = run_spamnb(["learn", "--spam" if spam else "--ham", "-m", user, "-"], stdin=data)
        assert done.returncode == 0, done.stderr
    return user


def _compare(user_overlay, whole, messages):
    for data in messages:
        for evidence in (True, False):
            a, b = user_overlay.classify(data, evidence), whole.classify(data, evidence)
            assert abs(a.log_odds - b.log_odds) <= 1e-9
            assert (a.label, a.tokens, a.known_tokens, a.reason) == (b.label, b.tokens, b.known_tokens, b.reason)
            assert abs(a.probability - b.probability) <= 1e-9
            assert [t for t, _w in a.evidence] == [t for t, _w in b.evidence]
            assert all(abs(x - y) <= 1e-9 for (_t, x), (_u, y) in zip(a.evidence, b.evidence))
            if a.part_max is not None and abs(a.part_max) != float("inf"):
                assert abs(a.part_max - b.part_max) <= 1e-9


def test_an_overlay_scores_as_the_user_model_loaded_whole(site):
    folder, model = site
    # site mail with a header line added: new to the site model's ledger (a message it was trained on would
    # be relabelled: a forget, whose holes a user model held as an overlay cannot have)
    lessons = [(_novel(i, i % 2 == 0), i % 2 == 0) for i in range(6)] + [(_untrained(m), True) for m in _messages()[:3]]
    user = _user(site, "alice", lessons)
    site_filter = models._load_filter(str(model), whole=True)
    held = overlay.build(str(user), site_filter, str(model))
    assert held is not None
    assert len(held.new_hashes) >= 6 * 12 and len(held.changed) > 0
    assert held.held_bytes < os.path.getsize(model) / 10
    whole = SpamFilter.load(user)
    _compare(held, whole, _messages() + [data for data, _spam in lessons] + [_novel(3, True)])
    # the learns moved the user's scores away from the site's: the overlay is no copy of the site
    novel = _novel(2, True)
    assert abs(held.classify(novel).log_odds - site_filter.classify(novel).log_odds) > 1e-6


def test_no_overlay_for_a_model_of_its_own_or_with_holes(site, tmp_path):
    folder, model = site
    site_filter = models._load_filter(str(model), whole=True)
    own = tmp_path / "own.spamnb"
    own.write_bytes(model.read_bytes())   # a copy, not a link: a file of its own
    assert overlay.build(str(own), site_filter, str(model)) is None
    data = _novel(40, True)
    user = _user(site, "bob", [(data, True)])
    done = run_spamnb(["forget", "--spam", "-m", user, "-"], stdin=data)
    assert done.returncode == 0, done.stderr
    assert overlay.build(str(user), site_filter, str(model)) is None   # the forget left holes: loaded whole


@pytest.mark.slow
def test_a_server_holds_each_new_users_model_as_its_overlay(site, tmp_path):
    """60 new users, each taught one message by the real spamc -L and
    checked, with --max-models-bytes out of reach: every user's model stays
    loaded as its overlay, and the worker's resident memory grows by KiBs a
    user, not a model a user (before: about 1.2 MiB a user with this model,
    72 MiB for 60, the byte limit the only bound).  Each user's check gives
    the score of the user's model loaded whole."""
    from spamnb.report.scale import ScoreMap
    from tests.test_serve import MESSAGES, SPAMC, Daemon, unique_message

    if SPAMC is None:
        pytest.skip("spamc is not installed (Debian package spamc)")
    (tmp_path / "model.spamnb").write_bytes(site[1].read_bytes())
    users = tmp_path / "users"
    d = Daemon(tmp_path, "--allow-tell", "--create-user-models", "--models-dir", users,
               "--max-models-bytes", 2**40)

    try:
        message = MESSAGES[0].read_bytes()
        for i in range(3):      # the learner's and the cache's first models, warm
            d.spamc("-L", "spam", "-u", f"warm{i}", stdin=unique_message(f"warm{i}"))
            d.spamc("-c", "-u", f"warm{i}", stdin=message)
        start = d.rss()
        for i in range(60):
            assert d.spamc("-L", "spam", "-u", f"many{i}", stdin=unique_message(f"many{i}")).returncode == 0
            checked = d.spamc("-c", "-u", f"many{i}", stdin=unique_message(f"many{i}"))
            if i % 20 == 0:   # the score spamc got is the whole model's
                whole = SpamFilter.load(users / f"many{i}" / "model.spamnb")
                verdict = whole.classify(unique_message(f"many{i}"))
                expected = ScoreMap.from_cutoffs(whole.cutoffs, 5.0).score(
                    verdict.log_odds, verdict.label)
                assert abs(float(checked.stdout.split(b"/")[0]) - expected) <= 0.051, (checked.stdout, expected)
        grown = d.rss() - start
        assert grown < 8 * 2**20, grown / 2**20
    finally:
        assert d.stop() == 0


def test_the_cache_counts_what_an_overlay_holds_and_its_byte_limit_binds(site):
    """In a server that learns, the cache holds a TELL-made user model as its
    overlay and counts the overlay's bytes (a few KiB), not the file's; its
    byte limit then bounds how many stay loaded."""
    folder, model = site
    users = [_user(site, f"cache{i}", [(_novel(100 + i, True), True)]) for i in range(4)]
    logs = []
    cache = models.ModelCache(1000, logs.append, pinned=str(model), whole=True, max_bytes=None)
    cache.get(str(model), 5.0)
    sizes = []
    for user in users:
        held, _score_map = cache.get(str(user), 5.0)
        assert isinstance(held, overlay.Overlay)
        sizes.append(held.held_bytes)
    assert len(cache) == 5 and cache.loaded_bytes() == sum(sizes) < 4 * 64 * 1024 < os.path.getsize(model), logs
    bounded = models.ModelCache(1000, logs.append, pinned=str(model), whole=True, max_bytes=sum(sizes[-2:]))
    bounded.get(str(model), 5.0)
    for user in users:
        bounded.get(str(user), 5.0)
    assert len(bounded) == 3 and bounded.loaded(str(users[-1])) and not bounded.loaded(str(users[0]))
