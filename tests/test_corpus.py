"""Reading labelled corpora: trees, Maildirs, mbox files, and what gets skipped."""

import os
import socket
from pathlib import Path

import pytest

from spamnb.corpus import (CorpusError, CorpusReport, is_test_message, labelled_messages, looks_like_mail,
                           read_messages, split_mbox)

REPO = Path(__file__).resolve().parents[1]
MAIL = b"From: a@example.com\nSubject: hi\n\nbody\n"


def _tree(root):
    for folder, n in (("spam", 2), ("spam_2", 1), ("easy_ham", 3), ("hard_ham/deeper", 1)):
        (root / folder).mkdir(parents=True)
        for i in range(n):
            (root / folder / f"{i:05d}").write_bytes(MAIL.replace(b"hi", f"{folder} {i}".encode()))
    (root / "README.md").write_text("# A corpus\n\nNot a message.\n")
    return root


def test_tree_labels_follow_folder_names(tmp_path):
    messages = labelled_messages([_tree(tmp_path)])
    labels = {m.relpath: m.is_spam for m in messages}
    assert labels == {"easy_ham/00000": False, "easy_ham/00001": False, "easy_ham/00002": False,
                      "hard_ham/deeper/00000": False, "spam/00000": True, "spam/00001": True,
                      "spam_2/00000": True}


def test_readme_and_junk_are_skipped_and_counted(tmp_path):
    root = _tree(tmp_path)
    (root / "easy_ham" / "empty").write_bytes(b"")
    (root / "easy_ham" / ".hidden").write_bytes(MAIL)
    (root / "easy_ham" / "loop").symlink_to(root / "easy_ham" / "loop")
    (root / "easy_ham" / "dangling").symlink_to(root / "nowhere")
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(root / "easy_ham" / "sock"))
        report = CorpusReport()
        messages = labelled_messages([root], report=report)
    finally:
        sock.close()
    assert len(messages) == 7
    assert report.read == 7
    assert report.skipped == {"not mail": 1, "empty": 1, "hidden file": 1, "broken link": 2, "not a regular file": 1}
    assert "skipped 6" in report.summary()


def test_strict_fails_on_the_first_skipped_file(tmp_path):
    with pytest.raises(CorpusError, match="not mail"):
        labelled_messages([_tree(tmp_path)], strict=True)


def test_a_tree_named_spam_is_all_spam(tmp_path):
    root = _tree(tmp_path)
    assert all(m.is_spam for m in labelled_messages([root / "spam"]))


def test_the_root_name_does_not_label_its_subfolders(tmp_path):
    root = _tree(tmp_path / "spamassassin")
    labels = {m.relpath: m.is_spam for m in labelled_messages([root])}
    assert labels["easy_ham/00000"] is False and labels["spam/00000"] is True


def test_explicit_labels_for_folders_maildirs_and_mboxes(tmp_path):
    maildir = tmp_path / "Maildir"
    for sub in ("cur", "new", "tmp"):
        (maildir / sub).mkdir(parents=True)
    (maildir / "cur" / "1:2,S").write_bytes(MAIL)
    (maildir / "new" / "2").write_bytes(MAIL)
    (maildir / "tmp" / "3").write_bytes(MAIL)  # still being delivered: not read
    mbox = tmp_path / "spam.mbox"
    mbox.write_bytes(b"From x Mon Jan 1 00:00:00 2001\n" + MAIL + b"\nFrom y Mon Jan 1 00:00:00 2001\n" + MAIL)
    messages = labelled_messages(spam=[mbox], ham=[maildir])
    assert [(m.relpath, m.is_spam) for m in messages] == [
        ("spam.mbox#0", True), ("spam.mbox#1", True), ("cur/1:2,S", False), ("new/2", False)]
    assert messages[1].data.startswith(b"From y")


def test_split_mbox_keeps_from_lines_inside_paragraphs():
    data = b"From a\nSubject: 1\n\nline\nFrom here on, text\n\nFrom b\nSubject: 2\n\nx\n"
    parts = split_mbox(data)
    assert len(parts) == 2 and b"From here on" in parts[0]


def test_looks_like_mail():
    assert looks_like_mail(MAIL)
    assert looks_like_mail(b"From someone Mon Jan 1\nReceived: x\n\n")
    assert not looks_like_mail(b"# heading\n")
    assert not looks_like_mail(b"")


def test_missing_path_is_an_error(tmp_path):
    with pytest.raises(CorpusError, match="no such"):
        list(read_messages(tmp_path / "nope"))


def test_fixed_split_is_md5_mod_5():
    import hashlib

    names = [f"spam/{i:05d}.x" for i in range(200)]
    chosen = [n for n in names if is_test_message(n)]
    assert chosen == [n for n in names if int(hashlib.md5(n.encode()).hexdigest(), 16) % 5 == 0]
    assert 20 < len(chosen) < 60


def test_shipped_sample_corpus_reads_cleanly():
    report = CorpusReport()
    messages = labelled_messages([REPO / "corpora"], report=report)
    assert len(messages) == 300
    assert sum(m.is_spam for m in messages) == 100
    assert report.skipped == {"not mail": 1}  # its README
