"""The library's traps: labels of learn/forget, and what a str or a Path message is."""


import pytest

from spamnb import SpamFilter
from spamnb.estimator.messages import message_bytes

from conftest import REPO

SPAM = [p.read_bytes() for p in sorted((REPO / "corpora" / "spam").iterdir())[:20]]
HAM = [p.read_bytes() for p in sorted((REPO / "corpora" / "easy_ham").iterdir())[:20]]
NEW = b"From: a@new.example\nSubject: zqxjv wombat\n\nzqxjv wombat fnord\n"


@pytest.fixture
def trained():
    return SpamFilter().fit(SPAM + HAM, [True] * len(SPAM) + [False] * len(HAM))


@pytest.mark.parametrize("label, spam", [("ham", False), ("HAM", False), (False, False), ("spam", True),
                                         (True, True)])
def test_learn_takes_fits_labels(trained, label, spam):
    ham_before, spam_before = trained.class_count_
    trained.learn(NEW, spam=label)
    ham_after, spam_after = trained.class_count_
    assert (spam_after - spam_before, ham_after - ham_before) == ((1, 0) if spam else (0, 1))
    trained.forget(NEW, label)  # the same label undoes it
    assert trained.class_count_ == (ham_before, spam_before)


def test_learn_and_forget_require_a_label(trained):
    with pytest.raises(TypeError):
        trained.learn(NEW)
    with pytest.raises(TypeError):
        trained.forget(NEW)
    with pytest.raises(ValueError, match="label"):
        trained.learn(NEW, "eggs")


def test_a_str_message_is_text_and_a_path_is_a_path(trained, tmp_path):
    text = NEW.decode()
    assert message_bytes(text) == NEW
    assert trained.score(text) == trained.score(NEW)
    long_text = "Subject: hi\n\n" + "word " * 10000  # once "File name too long"
    assert trained.score(long_text) == trained.score(long_text.encode())
    path = tmp_path / "message"
    path.write_bytes(NEW)
    assert trained.score(path) == trained.score(NEW)
    with pytest.raises(TypeError, match="pathlib.Path"):
        trained.score(str(path))  # a path in a str: refused, not scored as the text of its name
