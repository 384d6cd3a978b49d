"""The spamnb command, run for real in a subprocess."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import spamnb

REPO = Path(__file__).resolve().parents[1]
SPAM_FILE = sorted((REPO / "corpora" / "spam").iterdir())[0]
HAM_FILE = sorted((REPO / "corpora" / "easy_ham").iterdir())[0]
VERDICT_EXIT = {"spam": 0, "ham": 1, "unsure": 2}
# unsure under the shipped cutoffs with the sample corpus's model (checked by the tests that use it)
UNSURE = b"From: offers@example.com\nSubject: your account statement\n\nclick here to see your free offer today\n"


def run(args, home, stdin=b"", check_code=None):
    env = dict(os.environ, SPAMNB_HOME=str(home), PYTHONPATH=str(Path(spamnb.__file__).resolve().parents[1]))
    env.pop("SPAMNB_DEBUG", None)
    proc = subprocess.run([sys.executable, "-m", "spamnb", *map(str, args)], input=stdin, capture_output=True,
                          env=env, cwd=home, timeout=300)
    if check_code is not None:
        assert proc.returncode == check_code, proc.stderr.decode()
    return proc


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    proc = run(["train", REPO / "corpora"], home, check_code=0)
    assert "300 messages (100 spam, 200 ham)" in proc.stdout.decode()
    assert f"skipped 1 (1 not mail: {REPO / 'corpora' / 'README.md'})" in proc.stdout.decode()
    assert (home / "model.spamnb").is_file()
    return home


def test_classify_stdin_exit_code_follows_the_verdict(home):
    for path in (SPAM_FILE, HAM_FILE):
        proc = run(["classify"], home, stdin=path.read_bytes())
        label = proc.stdout.decode().split()[0]
        assert proc.returncode == VERDICT_EXIT[label]
    assert run(["classify"], home, stdin=SPAM_FILE.read_bytes()).stdout.startswith(b"spam ")
    assert run(["classify"], home, stdin=HAM_FILE.read_bytes()).stdout.startswith(b"ham ")


def test_classify_json(home):
    proc = run(["classify", "--json", SPAM_FILE], home)
    out = json.loads(proc.stdout)
    assert out["verdict"] == "spam" and 0.5 < out["probability"] <= 1.0
    assert out["evidence"] and all(isinstance(t, str) for t, _ in out["evidence"])


def test_passthrough_adds_headers_and_keeps_the_message(home):
    message = HAM_FILE.read_bytes()
    proc = run(["classify", "-p"], home, stdin=message)
    assert proc.returncode == 0  # whatever the verdict: a filter's non-zero exit is a failure to procmail
    out = proc.stdout
    assert b"\nX-Spamnb-Status: No, log-odds=-" in out
    kept = b"".join(line for line in out.splitlines(keepends=True) if not line.startswith(b"X-Spamnb-"))
    assert kept == message
    head, _, _ = out.partition(b"\n\n")
    assert b"X-Spamnb-Status" in head  # in the header block, not the body


@pytest.mark.parametrize("label", ["spam", "ham", "unsure"])
def test_passthrough_exits_0_and_the_header_tells_the_verdict(home, label):
    message = {"spam": SPAM_FILE.read_bytes(), "ham": HAM_FILE.read_bytes(), "unsure": UNSURE}[label]
    verdict = run(["classify"], home, stdin=message).stdout.split()[0].decode()
    assert verdict == label
    proc = run(["classify", "-p"], home, stdin=message)
    assert proc.returncode == 0, proc.stderr
    word = {"spam": b"Yes", "ham": b"No", "unsure": b"Unsure"}[label]
    assert proc.stdout.count(b"\nX-Spamnb-Status: " + word + b", log-odds=") == 1


def test_passthrough_replaces_forged_headers_but_keeps_other_filters(home):
    message = (b"From: x@example.com\nX-Spamnb-Status: No, forged\n  continued\n"
               b"X-Spam-Status: Yes, score=7.1 required=5.0\nX-Spam-Flag: YES\nSubject: hi\n\nbody\n")
    out = run(["classify", "-p"], home, stdin=message).stdout
    assert b"forged" not in out and b"continued" not in out
    assert out.count(b"X-Spamnb-Status:") == 1
    assert b"\nX-Spam-Status: Yes, score=7.1 required=5.0\nX-Spam-Flag: YES\n" in out  # SpamAssassin's stay
    assert out.endswith(b"\n\nbody\n")


def test_header_name_and_subject_tag(home):
    spam = SPAM_FILE.read_bytes()
    out = run(["classify", "-p", "--header-name", "X-Filter", "--subject-tag", "[SPAM]"], home, stdin=spam).stdout
    head = out.partition(b"\n\n")[0]
    assert b"\nX-Filter: Yes, log-odds=+" in head and b"X-Spamnb-Status" not in head
    subjects = [line for line in head.split(b"\n") if line.lower().startswith(b"subject:")]
    assert len(subjects) == 1 and subjects[0].startswith(b"Subject: [SPAM] ")
    again = run(["classify", "-p", "--subject-tag", "[SPAM]"], home, stdin=out).stdout
    assert again.count(b"[SPAM]") == 1  # tagged once
    ham = run(["classify", "-p", "--subject-tag", "[SPAM]"], home, stdin=HAM_FILE.read_bytes()).stdout
    assert b"[SPAM]" not in ham
    bad = run(["classify", "-p", "--header-name", "Bad: name"], home, stdin=spam)
    assert bad.returncode == 3 and bad.stdout == spam  # refused, and the mail still passes


def test_passthrough_never_loses_mail_when_the_model_is_missing(tmp_path):
    message = SPAM_FILE.read_bytes()
    proc = run(["classify", "-p"], tmp_path, stdin=message)
    assert proc.returncode == 3
    assert proc.stdout == message
    assert len(proc.stderr.decode().strip().splitlines()) == 1


@pytest.mark.parametrize("message", [b"", b"\x00\x01\x02 binary junk \xff" * 100, b"Subject: headers only\n",
                                     b"just a body without headers\n"])
def test_degenerate_messages_get_a_verdict(home, message):
    proc = run(["classify", "-p"], home, stdin=message)
    assert proc.returncode == 0, proc.stderr
    assert b"X-Spamnb-Status: " in proc.stdout
    kept = b"".join(line for line in proc.stdout.splitlines(keepends=True) if not line.startswith(b"X-Spamnb-"))
    # headers go at the end of the header block; a message without one gets a blank line after them
    assert kept in (message, b"\n" + message)


def test_batch(home):
    proc = run(["classify", "--batch", SPAM_FILE, HAM_FILE], home, check_code=0)
    lines = [line.split("\t") for line in proc.stdout.decode().splitlines()]
    assert [row[1] for row in lines] == ["spam", "ham"]
    proc = run(["classify", "--batch"], home, stdin=f"{SPAM_FILE}\n{HAM_FILE}\n".encode(), check_code=0)
    assert len(proc.stdout.decode().splitlines()) == 2


def test_errors_are_one_line_with_exit_3(home, tmp_path):
    cases = [
        (["classify", "-m", tmp_path / "missing.spamnb"], b"x"),
        (["classify", "/nonexistent/message"], b""),
        (["info", "-m", tmp_path], b""),
    ]
    (tmp_path / "garbage.spamnb").write_bytes(b"garbage" * 100)
    cases.append((["classify", "-m", tmp_path / "garbage.spamnb"], b"x"))
    for args, stdin in cases:
        proc = run(args, home, stdin=stdin)
        assert proc.returncode == 3, (args, proc.stderr)
        err = proc.stderr.decode()
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def test_usage_errors_exit_64(home):
    for args in (["frobnicate"], ["classify", "--nope"], [], ["learn", "x"], ["train"]):
        proc = run(args, home)
        assert proc.returncode == 64, (args, proc.stderr)
        assert "Traceback" not in proc.stderr.decode()


def test_learn_forget_and_info(tmp_path):
    run(["train", REPO / "corpora"], tmp_path, check_code=0)
    model = tmp_path / "model.spamnb"
    before = model.read_bytes()
    message = b"From: someone@new.example\nSubject: entirely novel words zqxjv\n\nfoo bar zqxjv\n"
    proc = run(["learn", "--spam", "-"], tmp_path, stdin=message, check_code=0)
    assert "101 spam, 200 ham" in proc.stdout.decode()
    run(["forget", "--spam", "-"], tmp_path, stdin=message, check_code=0)
    info = run(["info"], tmp_path, check_code=0).stdout.decode()
    assert "300 (100 spam, 200 ham)" in info
    assert "strongest spam tokens" in info
    # forgetting restores the same counts and vocabulary (the file may differ only in its table layout)
    from spamnb.filter import SpamFilter

    a = SpamFilter.load(model)
    model.with_name("before.spamnb").write_bytes(before)
    b = SpamFilter.load(model.with_name("before.spamnb"))
    assert a.class_count_ == b.class_count_
    assert a.vocabulary_.tokens() == b.vocabulary_.tokens()
    assert a.classify(message) == b.classify(message)
    proc = run(["forget", "--ham", "-"], tmp_path, stdin=message)
    assert proc.returncode == 3 and "unchanged" in proc.stderr.decode()


def test_tokens_command(home):
    proc = run(["tokens", SPAM_FILE], home, check_code=0)
    assert len(proc.stdout.decode().splitlines()) > 10


def test_the_classify_path_imports_nothing_heavy(tmp_path):
    # -S: no site-packages .pth files, which may import these for every Python
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from spamnb.cli import build_parser; "
            "from spamnb.filter import SpamFilter; build_parser('classify').parse_args(['classify', '-v']); "
            "print(sorted(m for m in ('shutil', 'typing', 'numpy', 'scipy', 'email', 'dataclasses', 'inspect') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-S", "-c", code, str(REPO)], capture_output=True, check=True, cwd=tmp_path)
    assert out.stdout.decode().strip() == "[]"
