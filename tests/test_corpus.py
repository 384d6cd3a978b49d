"""Reading labelled corpora: trees, Maildirs, mbox files, and what gets skipped."""

import os
import posix
import re
import socket

import pytest

from spamnb.mail.mbox import split_mbox
from spamnb.mail.reader import looks_like_mail
from spamnb.mail.reader import CorpusError, CorpusReport, read_messages
from spamnb.training.corpus import is_test_message, labelled_messages

from conftest import REPO

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
    parts = list(split_mbox(data))
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


# ---------------------------------------------------------------- mbox, as Python's mailbox reads it
def _generated_mbox(path, n=500):
    """An mbox written by Python's mailbox (its body "From " lines escaped as ">From ")."""
    import mailbox

    box = mailbox.mbox(str(path))
    for i in range(n):
        body = f"line one of {i}\n\nFrom the desk of sender {i}: a paragraph\n" + ("x" * (i % 50) + "\n") * (i % 7)
        box.add(f"From: s{i}@example.com\nSubject: message {i}\n\n{body}".encode())
    box.flush()
    box.close()
    return path


def _python_mbox_bodies(path):
    import mailbox

    box = mailbox.mbox(str(path), create=False)
    try:
        return [box.get_bytes(key).rstrip() for key in box.keys()]
    finally:
        box.close()


def _our_bodies(path):
    return [data.partition(b"\n")[2].rstrip() for _, data in read_messages(path)]


def test_mbox_matches_pythons_mailbox(tmp_path):
    path = _generated_mbox(tmp_path / "box")
    ours = _our_bodies(path)
    assert len(ours) == 500
    assert ours == _python_mbox_bodies(path)


def test_mbox_without_blank_lines_before_from_lines(tmp_path):
    path = _generated_mbox(tmp_path / "box")
    data = path.read_bytes()
    squeezed = re.sub(rb"\n+(?=From MAILER-DAEMON)", b"\n", data)
    assert squeezed.count(b"\nFrom MAILER-DAEMON") == 499 and b"\n\nFrom MAILER" not in squeezed
    path.write_bytes(squeezed)
    ours = _our_bodies(path)
    assert len(ours) == 500
    assert ours == _python_mbox_bodies(path)


def test_crlf_mbox(tmp_path):
    path = _generated_mbox(tmp_path / "box")
    expected = _our_bodies(path)
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    ours = [data.partition(b"\r\n")[2].rstrip() for _, data in read_messages(path)]
    assert len(ours) == 500
    assert ours == [body.replace(b"\n", b"\r\n") for body in expected]


def test_mbox_everywhere_in_a_tree(tmp_path):
    (tmp_path / "spam").mkdir()
    (tmp_path / "ham").mkdir()
    _generated_mbox(tmp_path / "spam" / "junk.mbox", 20)
    _generated_mbox(tmp_path / "ham" / "inbox", 30)
    messages = labelled_messages([tmp_path])
    assert sum(m.is_spam for m in messages) == 20 and len(messages) == 50
    assert messages[0].relpath == "ham/inbox#0"


def test_a_large_mbox_is_streamed_and_read_the_same(tmp_path):
    import mailbox

    path = tmp_path / "big"
    box = mailbox.mbox(str(path))
    for i in range(120):
        box.add(f"From: s{i}@example.com\nSubject: {i}\n\n".encode() + b"word " * 10000 + b"\n\nFrom me\n")
    box.close()
    assert path.stat().st_size > 5 << 20  # over the size read whole
    ours = _our_bodies(path)
    assert len(ours) == 120 and ours == _python_mbox_bodies(path)


def test_mbox_reading_streams(tmp_path):
    # a reader that held the file would read it all before the first message
    path = _generated_mbox(tmp_path / "box", 200)
    reads = []

    class Spy:
        def __init__(self, f):
            self.f = f

        def readline(self, n):
            line = self.f.readline(n)
            reads.append(len(line))
            return line

    from spamnb.mail.mbox import iter_mbox

    with open(path, "rb") as f:
        first = next(iter_mbox(Spy(f)))
    assert b"message 0" in first
    assert sum(reads) < 1000 < path.stat().st_size


def test_messages_of_reads_a_small_file_once_and_as_the_streamed_reader(tmp_path, monkeypatch):
    """``spamnb classify --batch`` reads each path with ``reader.messages_of``: a
    file up to ``_SMALL`` bytes (a message, or an mbox) is opened and read once,
    and gives the names and bytes the streamed reader (an mbox mapped, a
    message read after a look at its start) gives."""
    from spamnb.mail import reader as sources

    paths = [_generated_mbox(tmp_path / "box", 30), _generated_mbox(tmp_path / "one", 1),
             tmp_path / "plain", tmp_path / "empty", tmp_path / "blank-from"]
    paths[2].write_bytes(b"From: a@example.com\nSubject: hi\n\nbody\n")
    paths[3].write_bytes(b"")
    paths[4].write_bytes(b"From x Mon Nov 23 10:40:20 2026\n\n")   # an envelope line alone: no message
    small = {p: list(sources.messages_of(str(p))) for p in paths}
    assert [len(small[p]) for p in paths] == [30, 1, 1, 1, 0]
    assert small[paths[0]][29][0] == f"{paths[0]}#29" and small[paths[1]][0][0] == str(paths[1])
    opened = []
    real_open = os.open
    for module in (os, posix):   # spamnb.mail.checked opens through posix (os's own open, without os.py)
        monkeypatch.setattr(module, "open", lambda *a, **k: opened.append(a[0]) or real_open(*a, **k))
    list(sources.messages_of(str(paths[0])))
    assert opened == [str(paths[0])]
    for module in (os, posix):
        monkeypatch.setattr(module, "open", real_open)
    monkeypatch.setattr(sources, "_SMALL", 0)   # every file the streamed way
    assert {p: list(sources.messages_of(str(p))) for p in paths} == small


# ---------------------------------------------------------------- Maildir++
def _maildir(root, messages=(), folders=()):
    for sub in ("cur", "new", "tmp"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    for i, text in enumerate(messages):
        (root / "cur" / f"{i}.host:2,S").write_bytes(MAIL.replace(b"hi", text.encode()))
    for name, texts in folders:
        _maildir(root / name, texts)
        (root / name / "maildirfolder").write_bytes(b"")
    (root / "dovecot-uidlist").write_bytes(b"3 V1 N2\n")
    return root


def test_maildir_plus_plus_tree(tmp_path):
    root = _maildir(tmp_path / "Maildir", ["inbox"], [(".Junk", ["junk"]), (".Spam", ["spam"]),
                                                      (".Archive", ["archived"]), (".INBOX.Junk E-mail", ["j2"]),
                                                      (".Trash", ["deleted"])])
    report = CorpusReport()
    labels = {m.relpath: m.is_spam for m in labelled_messages([root], report=report, strict=False)}
    assert labels == {"cur/0.host:2,S": False, ".Archive/cur/0.host:2,S": False,
                      ".Junk/cur/0.host:2,S": True, ".Spam/cur/0.host:2,S": True,
                      ".INBOX.Junk E-mail/cur/0.host:2,S": True}
    assert report.skipped == {"trash folder": 1}
    assert ".Trash" in report.summary()


def test_maildirfolder_marker_is_not_mail_even_when_strict(tmp_path):
    root = _maildir(tmp_path / "Maildir", ["inbox"], [(".Archive", ["a"])])
    assert len(labelled_messages([root], strict=True)) == 2


def test_spam_folders_inside_a_ham_path_are_not_ham(tmp_path):
    root = _maildir(tmp_path / "Maildir", ["inbox"], [(".Junk", ["junk"]), (".Spam", ["spam"])])
    report = CorpusReport()
    messages = labelled_messages(spam=[root / ".Junk"], ham=[root], report=report)
    assert [(m.relpath, m.is_spam) for m in messages] == [("cur/0.host:2,S", True), ("cur/0.host:2,S", False)]
    assert report.skipped == {"spam folder inside a ham path": 2}


def test_the_summary_names_what_was_skipped(tmp_path):
    root = _tree(tmp_path)
    report = CorpusReport()
    labelled_messages([root], report=report)
    assert report.summary() == f"skipped 1 (1 not mail: {root / 'README.md'})"


def _maildir_plus(root, folders):
    """A Maildir with a message in its INBOX and in each Maildir++ folder of ``folders``."""
    for folder in ("", *folders):
        for sub in ("cur", "new", "tmp"):
            (root / folder / sub).mkdir(parents=True, exist_ok=True)
        (root / folder / "cur" / "1.mail").write_bytes(MAIL.replace(b"hi", f"in {folder or 'INBOX'}".encode()))
    return root


def test_maildir_plus_folders_with_a_spam_part_anywhere_are_spam(tmp_path):
    """`.Junk.2023` and `.Spam.Archive` hold spam (main: ham, only the last part
    was looked at); a bulk folder is neither, left out and said so."""
    box = _maildir_plus(tmp_path / "Maildir", [".Junk.2023", ".Spam.Archive", ".INBOX.Junk", ".Archive.2023", ".Bulk",
                                          ".Not-Spam"])
    report = CorpusReport()
    labels = {m.relpath.split("/")[0]: m.is_spam for m in labelled_messages([box], report=report)}
    assert labels == {"cur": False, ".Junk.2023": True, ".Spam.Archive": True, ".INBOX.Junk": True,
                      ".Archive.2023": False, ".Not-Spam": False}
    assert report.skipped == {"bulk folder, neither spam nor ham (give it with --spam or --ham)": 1}
    # a --ham path leaves out its spam and bulk folders; a --spam path reads everything as spam
    report = CorpusReport()
    ham = labelled_messages(ham=[box], report=report)
    assert sorted(m.relpath.split("/")[0] for m in ham) == [".Archive.2023", ".Not-Spam", "cur"]
    assert report.skipped["spam folder inside a ham path"] == 3
    assert len(labelled_messages(spam=[box])) == 7
    # which folders were read as which label
    summary = report.folders_summary()
    assert summary.startswith("read as spam: no folder; as ham: ") and f"{box}/.Archive.2023 (1 message)" in summary


@pytest.mark.slow
def test_links_to_files_outside_the_tree_are_skipped_unless_followed(tmp_path):
    """On main a link in a corpus to any file (/etc/shadow) was read and trained."""
    root = _tree(tmp_path / "corpus")
    outside = tmp_path / "private.eml"
    outside.write_bytes(b"From: me@example.com\nSubject: secret\n\nqwertysecret\n")
    (root / "easy_ham" / "link").symlink_to(outside)
    (root / "easy_ham" / "inside").symlink_to(root / "easy_ham" / "00000")   # inside the tree: read
    report = CorpusReport()
    names = {m.relpath for m in labelled_messages([root], report=report)}
    assert "easy_ham/link" not in names and "easy_ham/inside" in names
    assert report.skipped["link to a file outside the tree (--follow-links reads it)"] == 1
    assert "easy_ham/link" in {m.relpath for m in labelled_messages([root], follow_links=True)}
    # the CLI: its tokens are not in the model, unless --follow-links
    from conftest import run_spamnb

    for options, expected in (([], 0), (["--follow-links"], 1)):
        model = tmp_path / f"m{len(options)}.spamnb"
        proc = run_spamnb(["train", "-q", *options, root, "-m", model], tmp_path, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        dump = run_spamnb(["dump", "-m", model], tmp_path, cwd=tmp_path).stdout
        assert dump.count(b"qwertysecret") == expected
        proc = run_spamnb(["learn", "--ham", *options, root / "easy_ham", "-m", model], tmp_path, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        dump = run_spamnb(["dump", "-m", model], tmp_path, cwd=tmp_path).stdout
        assert dump.count(b"qwertysecret") == expected


def test_a_message_file_with_an_envelope_line_reads_as_its_mbox_cut(tmp_path, monkeypatch):
    """reader.file_messages: a file that starts with an envelope line and
    holds one message (mbox.one_message) is read whole, without cutting
    it, and gives what cutting it as an mbox gives (the message's bytes
    and name, the skips): a blank last line, CRLF, a body line starting
    "From" after text, an envelope line alone or with a blank line only,
    and a file of two messages (cut as before)."""
    from spamnb.mail import mbox, reader

    envelope = b"From sender@example.com Mon Jan  1 00:00:00 2024\n"
    message = b"Subject: hi\nFrom: a@example.com\n\nhello there\n"
    cases = {
        "plain": envelope + message,
        "blank-end": envelope + message + b"\n",
        "crlf": (envelope + message + b"\n").replace(b"\n", b"\r\n"),
        "body-from": envelope + message + b"\nFrom the desk of a friend\n",
        "envelope-only": envelope,
        "envelope-blank": envelope + b"\n",
        "envelope-header": envelope + b"X: y",
        "two": envelope + message + b"\n" + envelope + message,
        "not-mail": envelope + b"just some words\n",
    }
    seen_one = set()
    for label, data in cases.items():
        path = tmp_path / label
        path.write_bytes(data)
        fast_report, slow_report = CorpusReport(), CorpusReport()
        fast = list(reader.file_messages(str(path), label, fast_report, False))
        with monkeypatch.context() as m:   # the general way: the file cut as an mbox
            m.setattr(mbox, "one_message", lambda data: False)   # reader calls it through the module
            slow = list(reader.file_messages(str(path), label, slow_report, False))
        assert fast == slow, label
        assert (fast_report.read, fast_report.summary()) == (slow_report.read, slow_report.summary()), label
        if mbox.one_message(data):
            seen_one.add(label)
    assert {"plain", "blank-end", "crlf", "envelope-header"} <= seen_one
    assert not {"envelope-only", "envelope-blank", "two", "body-from"} & seen_one
