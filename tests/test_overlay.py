"""A user model that is the site model plus a journal, held as an overlay
(spamnb.server.overlay, issue 34 item 4): the same verdicts and scores, to
1e-9, as the user model loaded whole; a model the overlay cannot stand for is
refused (None: loaded whole)."""

import os
from pathlib import Path

import pytest

from tests.conftest import SAMPLE_CORPUS, run_spamnb

from spamnb.model.spam_filter import SpamFilter
from spamnb.server import models, overlay


def _messages():
    return [p.read_bytes() for p in sorted(SAMPLE_CORPUS.glob("*/*")) if p.is_file()][::7]


def _novel(i, spam):
    words = " ".join(f"zq{i}novel{k}word" for k in range(12))
    return (f"From: someone{i}@example.org\nSubject: note {i} {words}\n\n{words}\n"
            f"{'buy cheap pills now' if spam else 'see you at the meeting'}\n").encode()


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    folder = tmp_path_factory.mktemp("overlay")
    model = folder / "model.spamnb"
    done = run_spamnb(["train", "-q", "-m", model, SAMPLE_CORPUS], home=folder / "home")
    assert done.returncode == 0, done.stderr
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
    lessons = [(_novel(i, i % 2 == 0), i % 2 == 0) for i in range(6)] + [(m, True) for m in _messages()[:3]]
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
