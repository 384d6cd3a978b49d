"""The spamnb command, run for real in a subprocess."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import spamnb

from conftest import REPO, run_spamnb, slow_beyond

SPAM_FILE = sorted((REPO / "corpora" / "spam").iterdir())[0]
HAM_FILE = sorted((REPO / "corpora" / "easy_ham").iterdir())[0]
VERDICT_EXIT = {"spam": 0, "ham": 1, "unsure": 2}
# unsure under the shipped cutoffs with the sample corpus's model (checked by the tests that use it)
UNSURE = b"From: offers@example.com\nSubject: your account statement\n\nclick here to see your free offer today\n"


def run(args, home, stdin=b"", check_code=None):
    proc = run_spamnb(args, home, stdin=stdin, cwd=home)
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
    for path, expected in ((SPAM_FILE, "spam"), (HAM_FILE, "ham")):
        proc = run(["classify"], home, stdin=path.read_bytes())
        assert proc.stdout.startswith(f"{expected} ".encode()), proc.stdout
        assert proc.returncode == VERDICT_EXIT[expected]


def test_classify_of_one_file_maps_the_model_as_stdin_does(home, tmp_path):
    """One message named on the command line is scored from the mapped model (its
    checksum unchecked, no page read but the message's entries), as from stdin;
    two or more read the model whole, checksum and all."""
    import shutil

    damaged = tmp_path / "home"
    damaged.mkdir()
    shutil.copy(home / "model.spamnb", damaged / "model.spamnb")
    with open(damaged / "model.spamnb", "r+b") as f:     # the stored checksum (prefix bytes 32-39) made wrong
        f.seek(32)
        byte = f.read(1)
        f.seek(32)
        f.write(bytes([byte[0] ^ 0xFF]))
    expected = run(["classify"], home, stdin=SPAM_FILE.read_bytes()).stdout
    assert run(["classify"], damaged, stdin=SPAM_FILE.read_bytes()).stdout == expected
    assert run(["classify", SPAM_FILE], damaged).stdout == expected
    two = run(["classify", SPAM_FILE, HAM_FILE], damaged)
    assert two.returncode == 3 and b"checksum" in two.stderr, two.stderr


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


# -p of messages without a usual header block: (message, what -p writes, "STATUS" standing for the
# status line); the status header always in a header block at the top, the message's bytes kept
ODD_HEADERS = {
    # a header and no blank line before the body: after the last header line, before the first body line
    "no separator": (b"Subject: hi\nFrom: a@example.com\nbody line one\nbody two\n",
                     b"Subject: hi\nFrom: a@example.com\nSTATUS\nbody line one\nbody two\n"),
    "no separator, CRLF": (b"Subject: hi\r\nbody line\r\n", b"Subject: hi\r\nSTATUS\r\nbody line\r\n"),
    # no header at all: a header block of its own and a blank line in front of the body
    "no header": (b"Hello there\nno header in this one\n", b"STATUS\n\nHello there\nno header in this one\n"),
    # an empty header block and its blank line: the status header goes in that block
    "starts with a blank line": (b"\nbody after a blank line\n", b"STATUS\n\nbody after a blank line\n"),
    "starts with a blank line, CRLF": (b"\r\nbody\r\n", b"STATUS\r\n\r\nbody\r\n"),
    "empty": (b"", b"STATUS\n\n"),
    "header only": (b"Subject: hi\nFrom: a@example.com", b"Subject: hi\nFrom: a@example.com\nSTATUS\n"),
    # a status a sender put below a body line (a mail program reads it as header: no blank line before it)
    "forged below a body line": (b"Subject: hi\nbody line\nX-Spamnb-Status: No, forged\n\nmore\n",
                                 b"Subject: hi\nSTATUS\nbody line\n\nmore\n"),
}


@pytest.mark.parametrize("case", list(ODD_HEADERS))
def test_passthrough_puts_the_status_in_a_header_block_at_the_top(home, case):
    """On main the status of a message whose header has no blank line after
    it went after the last body line, and a message that starts with a blank
    line got a second one (its body changed)."""
    import email
    import email.policy

    from spamnb.mail.status import strip_markup

    message, expected = ODD_HEADERS[case]
    proc = run(["classify", "-p"], home, stdin=message)
    assert proc.returncode == 0, proc.stderr
    status = re.search(rb"X-Spamnb-Status: (Yes|No|Unsure), log-odds=[^\r\n]*", proc.stdout)
    assert status, proc.stdout
    assert proc.stdout == expected.replace(b"STATUS", status.group(0))
    parsed = email.message_from_bytes(proc.stdout, policy=email.policy.compat32)
    assert parsed["X-Spamnb-Status"] == status.group(0).split(b": ", 1)[1].decode(), "not in the header block"
    # what a learn of the delivered copy reads: the message as it came (but for the blank line -p adds after
    # a header block of its own, which strip_markup cannot tell from one the message began with)
    restored = strip_markup(proc.stdout)
    if case == "header only":
        assert restored == message + b"\n"   # its last line got the newline it lacked
    elif case == "forged below a body line":
        assert restored == strip_markup(message) == b"Subject: hi\nbody line\n\nmore\n"
    elif case not in ("no header", "empty"):
        assert restored == message


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
    assert bad.returncode == 3   # refused, and the mail still passes, with the status header saying why
    assert bad.stdout.partition(b"\n\n")[2] == spam.partition(b"\n\n")[2]
    assert b"\nX-Spamnb-Status: Unchecked, reason=error\n" in bad.stdout.partition(b"\n\n")[0] + b"\n"


def test_passthrough_never_loses_mail_when_the_model_is_missing(tmp_path):
    message = SPAM_FILE.read_bytes()
    proc = run(["classify", "-p"], tmp_path, stdin=message)
    assert proc.returncode == 3
    head, _, body = proc.stdout.partition(b"\n\n")
    assert body == message.partition(b"\n\n")[2]
    assert head.endswith(b"\nX-Spamnb-Status: Unchecked, reason=model-unreadable")
    assert len(proc.stderr.decode().strip().splitlines()) == 1


# the empty message and a body without a header: ODD_HEADERS's "empty" and "no header" above, byte for byte
@pytest.mark.parametrize("message", [b"\x00\x01\x02 binary junk \xff" * 100, b"Subject: headers only\n"])
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


@pytest.mark.slow
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
    assert "length norm 5.0" in info and "subject_words True" in info   # today's defaults, shown
    # forgetting restores the same counts and vocabulary (the file may differ only in its table layout)
    from spamnb.model.spam_filter import SpamFilter

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
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from spamnb.cli.main import build_parser; "
            "from spamnb.model.spam_filter import SpamFilter; build_parser('classify').parse_args(['classify', '-v']); "
            "print(sorted(m for m in ('shutil', 'typing', 'numpy', 'scipy', 'email', 'dataclasses', 'inspect') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-S", "-c", code, str(REPO)], capture_output=True, check=True, cwd=tmp_path)
    assert out.stdout.decode().strip() == "[]"


# ---------------------------------------------------------------- mailboxes everywhere
def _mbox(messages):
    """An mbox of the messages (each one's own envelope line replaced, as an mbox writer does)."""
    return b"".join(b"From sender@example.com Mon Nov 23 10:40:20 2026\n"
                    + (m.partition(b"\n")[2] if m.startswith(b"From ") else m).rstrip(b"\n") + b"\n\n"
                    for m in messages)


def test_learn_reads_an_mbox_message_by_message(tmp_path, sample_model):
    shutil.copyfile(sample_model, tmp_path / "model.spamnb")     # what `spamnb train corpora/` writes
    spam = sorted((REPO / "corpora" / "spam").iterdir())[:5]
    (tmp_path / "spam.mbox").write_bytes(_mbox([p.read_bytes() for p in spam]))
    proc = run(["learn", "--spam", tmp_path / "spam.mbox"], tmp_path, check_code=0)
    out = proc.stdout.decode()
    assert "learned 5, already known 0, relabelled 0 (as spam)" in out and "105 spam, 200 ham" in out
    proc = run(["learn", "--ham", "-M"], tmp_path, stdin=_mbox([HAM_FILE.read_bytes()] * 3), check_code=0)
    # the same message three times: learned once (the ledger knows it within a run)
    assert "learned 1, already known 2, relabelled 0 (as ham)" in proc.stdout.decode()
    # without -M, stdin is one message whatever its first line (bogofilter's habit): one learned
    proc = run(["learn", "--spam"], tmp_path, stdin=_mbox([SPAM_FILE.read_bytes()] * 3), check_code=0)
    assert "learned 1, already known 0, relabelled 0 (as spam)" in proc.stdout.decode()
    proc = run(["forget", "-M"], tmp_path, stdin=_mbox([HAM_FILE.read_bytes()]), check_code=0)
    assert "forgot 1 message;" in proc.stdout.decode(), proc.stdout


def test_classify_an_mbox_message_by_message(home, tmp_path):
    box = _mbox([SPAM_FILE.read_bytes(), HAM_FILE.read_bytes(), SPAM_FILE.read_bytes()])
    (tmp_path / "box").write_bytes(box)
    for args, stdin in ((["classify", tmp_path / "box"], b""), (["classify", "-M"], box),
                        (["classify", "-M", "-"], box), (["classify", "--batch", tmp_path / "box"], b"")):
        proc = run(args, home, stdin=stdin, check_code=0)
        rows = [line.split("\t") for line in proc.stdout.decode().splitlines()]
        assert [row[1] for row in rows] == ["spam", "ham", "spam"], args
        assert rows[0][0].endswith("#0") and rows[2][0].endswith("#2")
    # -M: one line even for a single message; one message alone keeps the verdict's exit code
    proc = run(["classify", "-M", SPAM_FILE], home, check_code=0)
    assert proc.stdout.decode().split("\t")[1] == "spam"
    assert run(["classify", HAM_FILE], home).returncode == 1


# The reproducer: a delivered message (its envelope line) whose body has
# an unescaped line "From ADDRESS DATE"; on main plain classify read stdin as
# an mbox, printed two verdicts and exited 0 (spam by bogofilter's codes).
FROM_LINE_HAM = (b"From a@x  Sat Nov 28 04:00:00 2026\nFrom: a@x\nSubject: minutes\n\nHi\n\n"
                 b"From b@x  Sat Nov 28 04:00:00 2026\nmore\n")


def test_stdin_is_one_message_whatever_its_first_line(home, tmp_path):
    proc = run(["classify"], home, stdin=FROM_LINE_HAM)
    assert proc.returncode == 1 and proc.stdout.decode().count("\n") == 1, proc.stdout
    assert proc.stdout.startswith(b"ham "), proc.stdout
    proc = run(["classify", "-p"], home, stdin=FROM_LINE_HAM, check_code=0)
    assert b"X-Spamnb-Status: No," in proc.stdout and proc.stdout.endswith(b"\nmore\n")
    # the same bytes as a regular file on stdin, and named as "-"
    (tmp_path / "m.eml").write_bytes(FROM_LINE_HAM)
    with open(tmp_path / "m.eml", "rb") as f:
        proc = subprocess.run([sys.executable, "-m", "spamnb", "classify", "-"], stdin=f, capture_output=True,
                              env=dict(os.environ, SPAMNB_HOME=str(home)), cwd=REPO)
    assert proc.returncode == 1 and proc.stdout.startswith(b"ham ") and proc.stdout.count(b"\n") == 1
    # -M: stdin is an mbox, one line a message
    proc = run(["classify", "-M"], home, stdin=FROM_LINE_HAM, check_code=0)
    assert len(proc.stdout.splitlines()) == 2


def test_empty_input_gets_one_verdict_both_ways(home):
    """Empty input (an empty pipe, </dev/null) is an empty message: the same
    verdict plain and with -p (on main plain classify refused /dev/null as a
    device while -p scored it)."""
    plain = run(["classify"], home, stdin=b"")
    label = plain.stdout.decode().split()[0]
    assert plain.returncode == VERDICT_EXIT[label] and plain.stdout.count(b"\n") == 1, plain.stderr
    with open(os.devnull, "rb") as null:
        proc = subprocess.run([sys.executable, "-m", "spamnb", "classify"], stdin=null, capture_output=True,
                              env=dict(os.environ, SPAMNB_HOME=str(home)), cwd=REPO)
    assert proc.stdout == plain.stdout and proc.returncode == plain.returncode, proc.stderr
    with open(os.devnull, "rb") as null:
        proc = subprocess.run([sys.executable, "-m", "spamnb", "classify", "-p"], stdin=null, capture_output=True,
                              env=dict(os.environ, SPAMNB_HOME=str(home)), cwd=REPO)
    word = {"spam": "Yes", "ham": "No", "unsure": "Unsure"}[label]
    assert proc.returncode == 0 and proc.stdout.startswith(f"X-Spamnb-Status: {word},".encode()), proc.stdout


@pytest.mark.slow
def test_oversized_stdin_is_passed_on_or_refused_never_held(home, tmp_path):
    """100 MB starting with an envelope line: -p passes it on untouched, plain
    classify refuses it with one line (exit 3); neither holds it whole (on
    main plain classify read it as an mbox: 521 MB)."""
    size = 100_000_000
    script = ("import sys; sys.stdout.buffer.write(b'From a@x  Sat Nov 28 04:00:00 2026\\nSubject: big\\n\\n');"
              f"[sys.stdout.buffer.write(b'x' * 999_999 + b'\\n') for _ in range({size // 1_000_000})]")
    env = dict(os.environ, SPAMNB_HOME=str(home))
    for args in (["classify"], ["classify", "-p"]):
        cmd = (f"{sys.executable} -c \"{script}\" | /usr/bin/time -f 'peak %M' {sys.executable} -m spamnb "
               f"{' '.join(args)} | wc -c")
        proc = subprocess.run(cmd, shell=True, capture_output=True, env=env, cwd=REPO, timeout=120)
        err = proc.stderr.decode()
        peak_kib = int(err.split("peak ")[1].split()[0])
        assert peak_kib <= 100 << 10, err
        if args == ["classify"]:
            assert proc.stdout.strip() == b"0" and "larger than 64 MiB" in err and "not classified" in err, err
            assert "-M reads stdin as an mbox" in err
        else:
            assert int(proc.stdout) == size + 49 and "passed on unchecked" in err, err


def test_classify_a_folder(home):
    proc = run(["classify", REPO / "corpora" / "spam"], home, check_code=0)
    rows = [line.split("\t") for line in proc.stdout.decode().splitlines()]
    n_files = len(list((REPO / "corpora" / "spam").iterdir()))
    assert len(rows) == n_files and sum(row[1] == "spam" for row in rows) >= 0.9 * n_files


def test_batch_reports_a_missing_file_and_goes_on(home, tmp_path):
    missing = tmp_path / "missing"
    proc = run(["classify", "--batch"], home, stdin=f"{SPAM_FILE}\n{missing}\n{HAM_FILE}\n".encode())
    assert proc.returncode == 3
    rows = [line.split("\t") for line in proc.stdout.decode().splitlines()]
    assert [row[1] for row in rows] == ["spam", "error", "ham"]
    assert rows[1][0] == str(missing) and "No such file" in rows[1][2]
    assert "missing" in proc.stderr.decode()


def test_batch_answers_each_path_as_it_arrives(home):
    env = dict(os.environ, SPAMNB_HOME=str(home), PYTHONPATH=str(Path(spamnb.__file__).resolve().parents[1]))
    proc = subprocess.Popen([sys.executable, "-m", "spamnb", "classify", "--batch"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env=env)
    try:
        for path, label in ((SPAM_FILE, "spam"), (HAM_FILE, "ham")):
            proc.stdin.write(f"{path}\n".encode())
            proc.stdin.flush()
            line = proc.stdout.readline().decode()  # stdin still open: the answer must come now
            assert line.split("\t")[:2] == [str(path), label]
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0


# ---------------------------------------------------------------- options and settings
def test_global_options_before_the_command(home, tmp_path):
    model = home / "model.spamnb"
    for args in (["-m", model, "classify", SPAM_FILE], ["classify", "-m", model, SPAM_FILE],
                 ["--model", model, "classify", SPAM_FILE]):
        proc = run(args, tmp_path)
        assert proc.returncode == 0 and proc.stdout.startswith(b"spam "), (args, proc.stderr)


def test_settings_file_cutoffs_and_info(home, tmp_path):
    settings = tmp_path / "settings.toml"
    settings.write_text(f'model = "{home / "model.spamnb"}"\nspam_cutoff = 0.99999999\nham_cutoff = 0.0\n'
                        'header_name = "X-Filtered"\nsubject_tag = "*** SPAM ***"\n')
    proc = run(["--settings", settings, "info", "--tokens", "0"], tmp_path, check_code=0)
    out = proc.stdout.decode()
    assert "P(spam) >= 0.99999999 (log-odds >= +18.421)" in out
    assert "P(spam) <= 0.0 (log-odds <= -inf)" in out
    assert "X-Filtered; subject tag '*** SPAM ***'" in out and str(settings) in out
    assert "{" not in out  # no raw dict
    # the file's cutoffs decide: nothing is ham with a ham cutoff of 0
    verdict = run(["--settings", settings, "classify", HAM_FILE], tmp_path)
    assert verdict.stdout.startswith(b"unsure ")
    # the command line wins over the file
    assert run(["--settings", settings, "classify", "--ham-cutoff", "0.5", HAM_FILE], tmp_path).returncode == 1
    out = run(["--settings", settings, "classify", "-p"], tmp_path, stdin=SPAM_FILE.read_bytes()).stdout
    assert b"\nX-Filtered: Yes, " in out and b"Subject: *** SPAM *** " in out


def test_the_default_settings_file_is_read_from_spamnb_home(tmp_path, sample_model):
    shutil.copyfile(sample_model, tmp_path / "model.spamnb")     # what `spamnb train corpora/` writes
    assert run(["classify", HAM_FILE], tmp_path).returncode == 1
    (tmp_path / "settings.toml").write_text("ham_cutoff = 0.0\n")  # nothing is ham any more
    assert run(["classify", HAM_FILE], tmp_path).returncode == 2


@pytest.mark.parametrize("text, message", [("spam_cutoff = 2.0\n", "probability"), ("colour = 1\n", "unknown"),
                                           ("spam_cutoff = \n", "TOML"), ('header_name = "a b"\n', "header"),
                                           ("spam_cutoff = 0.1\nham_cutoff = 0.2\n", "above")])
def test_bad_settings_are_one_line_errors(home, tmp_path, text, message):
    (tmp_path / "s.toml").write_text(text)
    proc = run(["classify", "--settings", tmp_path / "s.toml", "-m", home / "model.spamnb", SPAM_FILE], tmp_path)
    assert proc.returncode == 3
    err = proc.stderr.decode()
    assert len(err.strip().splitlines()) == 1 and message in err, err


@pytest.mark.slow
def test_train_keeps_the_cutoffs_it_is_given(tmp_path):
    run(["train", "--spam-cutoff", "0.75", "--ham-cutoff", "0.25", REPO / "corpora"], tmp_path, check_code=0)
    out = run(["info", "--tokens", "0"], tmp_path, check_code=0).stdout.decode()
    assert "P(spam) >= 0.75 (" in out and "P(spam) <= 0.25 (" in out
    assert run(["classify", "--spam-cutoff", "1.5", SPAM_FILE], tmp_path).returncode == 64
    # with message features too (SpamFilter.fit trains them: its calibration must not replace them)
    run(["train", "-q", "--feature-weight", "1", "--spam-cutoff", "0.75", "--ham-cutoff", "0.25",
         REPO / "corpora"], tmp_path, check_code=0)
    out = run(["info", "--tokens", "0"], tmp_path, check_code=0).stdout.decode()
    assert "P(spam) >= 0.75 (" in out and "P(spam) <= 0.25 (" in out


def test_help_texts(home):
    top = run(["--help"], home, check_code=0).stdout.decode()
    assert "SPAMNB_HOME" in top and "exit codes" in top
    for code in ("0", "1", "2", "3", "64"):
        assert re.search(rf"^\s+{code}\s+\S", top, re.M), code
    learn = run(["learn", "--help"], home, check_code=0).stdout.decode()
    assert re.search(r"--spam\s+learn the messages as spam", learn)
    assert re.search(r"--ham\s+learn the messages as ham", learn)


def test_man_page_and_bash_completion(home, tmp_path):
    man = run(["--man"], home, check_code=0).stdout.decode()
    assert man.startswith(".TH SPAMNB 1") and ".SS classify" in man and "\\-\\-subject\\-tag" in man
    completion = run(["--completion", "bash"], home, check_code=0).stdout.decode()
    (tmp_path / "c.sh").write_text(completion)
    subprocess.run(["bash", "-n", tmp_path / "c.sh"], check=True)
    script = (f"source {tmp_path / 'c.sh'}; COMP_WORDS=(spamnb classify --sub); COMP_CWORD=2; _spamnb; "
              "echo ${COMPREPLY[@]}")
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["--subject-tag"]


def _run_on_terminal(args, home):
    """``spamnb ARGS`` with its stderr on a pseudo-terminal (progress is shown
    there only): (the finished process, the bytes the terminal got)."""
    import pty

    primary, secondary = pty.openpty()
    env = dict(os.environ, SPAMNB_HOME=str(home), PYTHONPATH=str(Path(spamnb.__file__).resolve().parents[1]))
    proc = subprocess.run([sys.executable, "-m", "spamnb", *args], stderr=secondary, stdout=subprocess.PIPE,
                          env=env, timeout=300)
    os.close(secondary)
    seen = b""
    try:
        while chunk := os.read(primary, 65536):
            seen += chunk
    except OSError:
        pass
    os.close(primary)
    return proc, seen


def test_learn_shows_progress_on_a_terminal(tmp_path, sample_model):
    shutil.copyfile(sample_model, tmp_path / "model.spamnb")     # what `spamnb train corpora/` writes
    proc, seen = _run_on_terminal(["learn", "--ham", REPO / "corpora" / "easy_ham"], tmp_path)
    assert proc.returncode == 0
    assert b" messages " in seen and b"learning" in seen


# ---------------------------------------------------------------- README
def test_readme_sample_output_is_real(home):
    readme = (REPO / "README.md").read_text()
    out = run(["classify", REPO / "corpora" / "spam" / "00017.1a938ecddd047b93cbd7ed92c241e6d1"], home).stdout
    assert f"`{out.decode().strip()}`" in readme


def test_readme_command_table_matches_help(home):
    from spamnb.cli.main import build_parser

    readme = (REPO / "README.md").read_text()
    table = readme[readme.index("| command | options |"):]
    table = table[:table.index("\n\n")]
    rows = {}
    for line in table.splitlines()[2:]:
        command, options = re.split(r"(?<!\\)\|", line)[1:3]  # "\|" inside a cell is not a column
        name = command.strip().strip("`").split()[1]
        rows[name] = set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", options))
    parser = build_parser(full=True)
    sub = next(a for a in parser._actions if a.choices and "classify" in a.choices)
    assert set(rows) == set(sub.choices)
    for name, command_parser in sub.choices.items():
        options = {o for a in command_parser._actions for o in a.option_strings if o.startswith("--")}
        options -= {"--help", "--model", "--settings"}
        documented = {o for o in rows[name] if o.startswith("--")}
        assert documented == options, name


def test_forget_needs_a_label_for_a_message_the_ledger_does_not_know(home, tmp_path):
    model = tmp_path / "model.spamnb"
    model.write_bytes((home / "model.spamnb").read_bytes())
    proc = run(["forget", "-m", model, "-"], tmp_path, stdin=_untrained(SPAM_FILE))
    assert proc.returncode == 3 and "--spam or --ham" in proc.stderr.decode()
    assert run(["learn", "-m", model, "-"], tmp_path).returncode == 64  # learn always needs one


def test_classify_reads_a_named_pipe(home, tmp_path):
    import threading

    for data, label in ((SPAM_FILE.read_bytes(), "spam"), (_mbox([HAM_FILE.read_bytes()] * 2), "ham")):
        fifo = tmp_path / f"fifo-{label}"
        os.mkfifo(fifo)
        writer = threading.Thread(target=fifo.write_bytes, args=(data,))
        writer.start()
        proc = run(["classify", fifo], home)
        writer.join()
        assert proc.stdout.split()[0 if label == "spam" else 1] == label.encode(), proc.stderr


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_train_calibrates_on_the_corpus_it_counted(tmp_path, monkeypatch, sample_corpus, jobs):
    """The calibration scores the token hashes the counting pass spilled: a
    corpus that changes after the counting changes neither the model nor the
    cutoffs (the corpus is read once)."""
    import shutil

    from spamnb.estimator import calibrate

    from spamnb.cli import main as cli

    from spamnb.training import pipeline, planning

    tree = tmp_path / "corpus"
    shutil.copytree(sample_corpus, tree)
    args = ["train", "-q", "-j", jobs, "--partition-size", "50", str(tree)]
    assert cli.main(args + ["-m", str(tmp_path / "before.spamnb")]) == 0
    real, plans, changed = calibrate.held_out_by_fold, [], []
    for module in (pipeline, planning):   # -j 1 plans in the pipeline, -j N in planning
        monkeypatch.setattr(module, "plan_training", lambda *a, _real=planning.plan_training, **k: plans.append(1)
                            or _real(*a, **k))

    def changing(*a, **k):   # after the counting, before the held-out pass: a ham goes, a spam comes
        if not changed:
            ham = sorted(p for p in (tree / "easy_ham").iterdir() if p.is_file())
            (tree / "spam" / "new").write_bytes(ham[0].read_bytes())
            ham[0].unlink()
            changed.append(1)
        return real(*a, **k)

    monkeypatch.setattr(calibrate, "held_out_by_fold", changing)
    assert cli.main(args + ["-m", str(tmp_path / "after.spamnb")]) == 0
    assert len(plans) == 1
    assert (tmp_path / "after.spamnb").read_bytes() == (tmp_path / "before.spamnb").read_bytes()


@pytest.mark.slow
def test_train_word_pairs_option(tmp_path):
    from spamnb.model.spam_filter import SpamFilter

    # auto with enough mail for the cutoffs: both trained, the choice and its figures said
    proc = run(["train", "-j", "1", "--target-fpr", "0.01", REPO / "corpora"], tmp_path, check_code=0)
    line = next(x for x in proc.stdout.decode().splitlines() if x.startswith("word pairs: "))
    assert "held-out spam missed" in line and "% with (1-AUC" in line
    window = SpamFilter.load(tmp_path / "model.spamnb").tokenizer_.word_pairs
    assert line.startswith("word pairs: on (window 2)" if window else "word pairs: off")
    # too little mail for the cutoffs (the default 0.1 %): no choice, no pairs
    proc = run(["train", REPO / "corpora"], tmp_path, check_code=0)
    assert "word pairs" not in proc.stdout.decode()
    assert SpamFilter.load(tmp_path / "model.spamnb").tokenizer_.word_pairs == 0
    # a window given: no choice
    proc = run(["train", "--word-pairs", "3", "--target-fpr", "0.01", REPO / "corpora"], tmp_path, check_code=0)
    assert "word pairs" not in proc.stdout.decode()
    assert SpamFilter.load(tmp_path / "model.spamnb").tokenizer_.word_pairs == 3
    for bad in ("1", "9", "two"):
        proc = run(["train", "--word-pairs", bad, REPO / "corpora"], tmp_path, check_code=64)   # usage
        assert "auto, 0 or a window from 2 to 8" in proc.stderr.decode()


def _maildir(root, folders):
    for folder, message in folders.items():
        for sub in ("cur", "new", "tmp"):
            (root / folder / sub).mkdir(parents=True, exist_ok=True)
        (root / folder / "cur" / "1.mail").write_bytes(message)
    return root


def test_a_nightly_learn_ham_of_the_maildir_does_not_flip_its_junk(home, tmp_path):
    """`learn --ham ~/Maildir` next to `learn --spam ~/Maildir/.Junk`: on main the
    first learned .Junk (and .Junk.2023) as ham, relabelling it every night."""
    model = tmp_path / "m.spamnb"
    model.write_bytes((home / "model.spamnb").read_bytes())
    box = _maildir(tmp_path / "Maildir", {".": _untrained(HAM_FILE), ".Junk": _untrained(SPAM_FILE),
                                          ".Junk.2023": UNSURE, ".Bulk": b"From: n@example.com\nSubject: news\n\nx\n"})
    before = SpamFilter_counts(model)
    for night in range(2):
        proc = run(["learn", "--spam", box / ".Junk", box / ".Junk.2023", "-m", model], home, check_code=0)
        assert "relabelled 0" in proc.stdout.decode(), proc.stdout
        proc = run(["learn", "--ham", box, "-m", model], home, check_code=0)
        out, err = proc.stdout.decode(), proc.stderr.decode()
        assert "relabelled 0" in out and ("learned 1," if night == 0 else "learned 0,") in out, out
        # what was left out is said on stderr, once
        assert "2 spam folder inside a ham path" in err and "1 bulk folder" in err, err
    ham, spam = SpamFilter_counts(model)
    assert (ham, spam) == (before[0] + 1, before[1] + 2)


def _untrained(path):
    """A message of the training corpus with a header line added: not in the ledger of
    the model trained on it (train records every message it counts: issue 46)."""
    data = path.read_bytes()
    cut = data.index(b"\n") + 1 if data.startswith(b"From ") else 0
    return data[:cut] + b"X-Untrained: 1\n" + data[cut:]


def SpamFilter_counts(model):
    from spamnb.model.spam_filter import SpamFilter

    return tuple(SpamFilter.load(model).class_count_)


@pytest.mark.slow   # over 6 s in the default run: CI runs it in the slow step
def test_train_refuses_a_corpus_with_one_class_and_names_the_folders(home, tmp_path):
    """On main: a warning, exit 0, and the model replaced by a one-class model."""
    corpus = tmp_path / "corpus"
    for folder in ("inbox", "archive"):
        (corpus / folder).mkdir(parents=True)
        (corpus / folder / "1").write_bytes(HAM_FILE.read_bytes())
    model = tmp_path / "m.spamnb"
    model.write_bytes((home / "model.spamnb").read_bytes())
    proc = run(["train", corpus, "-m", model], home)
    err = proc.stderr.decode()
    assert proc.returncode == 65 and err.count("\n") == 1, err
    assert "holds no spam" in err and f"{corpus / 'archive'}, {corpus / 'inbox'}" in err, err
    assert model.read_bytes() == (home / "model.spamnb").read_bytes()
    proc = run(["train", "--force", corpus, "-m", model], home, check_code=0)
    assert "warning: the corpus holds no spam" in proc.stderr.decode()
    proc = run(["train", corpus, "--spam", REPO / "corpora" / "spam", "-m", model], home, check_code=0)
    assert (f"read as spam: {REPO / 'corpora' / 'spam'} (50 messages); as ham: {corpus / 'archive'} (1 message), "
            f"{corpus / 'inbox'} (1 message)") in proc.stdout.decode()
    assert "65" in run(["--help"], home).stdout.decode()


def test_file_names_never_forge_lines_and_json_has_no_lone_surrogates(home, tmp_path):
    folder = tmp_path / "box"
    folder.mkdir()
    names = ["plain", "evil\nforged\tspam\t1.0000000\t+99.000", "tab\there",
             os.fsdecode(b"latin1-caf\xe9"), "back\\slash"]
    for name in names:
        (folder / name).write_bytes(HAM_FILE.read_bytes())
    proc = run(["classify", "--batch", folder], home, check_code=0)
    lines = proc.stdout.decode().splitlines()
    assert len(lines) == len(names) and all(len(line.split("\t")) == 4 for line in lines), lines
    shown = {line.split("\t")[0].rpartition("/")[2] for line in lines}
    assert shown == {"plain", "evil\\nforged\\tspam\\t1.0000000\\t+99.000", "tab\\there", "latin1-caf\\xe9",
                     "back\\\\slash"}
    proc = run(["classify", "--batch", "--json", folder], home, check_code=0)
    assert b"\\ud" not in proc.stdout   # no lone surrogate, escaped or not
    rows = [json.loads(line) for line in proc.stdout.decode("utf-8").splitlines()]
    assert {row["message"].rpartition("/")[2] for row in rows} == shown
    # an error line too
    missing = os.fsdecode(b"gone\n\xff")
    proc = run(["classify", "--batch", "--json", os.fsencode(str(folder / missing))], home)
    assert proc.returncode == 3 and b"\\ud" not in proc.stdout and proc.stdout.count(b"\n") == 1, proc.stdout


def test_learn_refuses_what_is_not_mail(home, tmp_path):
    """An ELF binary given to learn: one line, exit 3, the model unchanged (main learned it)."""
    model = tmp_path / "m.spamnb"
    model.write_bytes((home / "model.spamnb").read_bytes())
    proc = run(["learn", "--ham", sys.executable, "-m", model], home)
    err = proc.stderr.decode()
    assert proc.returncode == 3 and err.count("\n") == 1 and "not mail" in err, err
    assert model.read_bytes() == (home / "model.spamnb").read_bytes()
    proc = run(["learn", "--ham", "-m", model], home, stdin=b"\x7fELF\x02\x01\x01\x00" + bytes(200))
    assert proc.returncode == 3 and "not mail" in proc.stderr.decode()
    # with mail beside it, the mail is learned and the binary said on stderr
    (tmp_path / "ham").write_bytes(_untrained(HAM_FILE))
    proc = run(["learn", "--ham", sys.executable, tmp_path / "ham", "-m", model], home, check_code=0)
    assert "learned 1," in proc.stdout.decode() and "not mail" in proc.stderr.decode()


def test_merge_names_only_the_fields_that_differ(home, tmp_path):
    other = tmp_path / "pairs.spamnb"     # other settings, trained on two messages (the settings are the point)
    run(["train", "-q", "--word-pairs", "2", "--alpha", "0.5", "--spam", SPAM_FILE, "--ham", HAM_FILE, "-m", other],
        home, check_code=0)
    proc = run(["merge", home / "model.spamnb", other, "-o", tmp_path / "out.spamnb"], home)
    err = proc.stderr.decode()
    assert proc.returncode == 3 and err.count("\n") == 1, err
    assert "tokenizer word_pairs 0 vs 2" in err and "alpha " in err and "vs 0.5" in err, err
    assert "lowercase" not in err and "fallback_charset" not in err, err   # fields that agree are not printed


def test_prune_help_says_when_min_count_is_refused(home):
    text = " ".join(run(["prune", "--help"], home, check_code=0).stdout.decode().split())
    assert "--min-count N drop tokens seen fewer than N times in all; refused" in text
    assert "--target-size" in text.split("refused", 1)[1]


@pytest.mark.parametrize("jobs", slow_beyond(["1", "2"], keep=["2"]))    # -j 1: with -m slow
def test_train_reports_a_message_file_given_itself_by_its_own_name(home, tmp_path, jobs):
    """`spamnb train msg.eml` said "read as ham: <the folder it is in>" (the
    folder of a message in a tree), naming a folder it never read."""
    ham, spam = tmp_path / "msg.eml", tmp_path / "other.eml"
    ham.write_bytes(HAM_FILE.read_bytes())
    spam.write_bytes(SPAM_FILE.read_bytes())
    model = tmp_path / "m.spamnb"
    proc = run(["train", "-j", jobs, "--force", "-m", model, ham], home)
    assert proc.returncode == 0, proc.stderr.decode()
    assert f"read as ham: {ham});" in proc.stderr.decode()   # the one-class warning
    assert f"read as spam: no folder; as ham: {ham} (1 message)" in proc.stdout.decode()
    proc = run(["train", "-j", jobs, "--spam", spam, "--ham", ham, "-m", model], home)
    assert f"read as spam: {spam} (1 message); as ham: {ham} (1 message)" in proc.stdout.decode(), proc.stdout
    proc = run(["train", "-j", jobs, "-m", model, "msg.eml"], tmp_path)   # a relative path: as given
    assert proc.returncode == 65 and "(read as ham: msg.eml);" in proc.stderr.decode()


@pytest.mark.slow
def test_every_prune_option_the_readme_lists_works_on_the_model_train_builds(home, tmp_path):
    """README's command table offered `prune --min-count N`, which every model
    `spamnb train` builds by default refuses (exit 3: length_norm counts are
    not occurrences); what the table lists without a condition must work on
    such a model (a dry run each: the model stays as it is)."""
    import shutil

    row = next(line for line in (REPO / "README.md").read_text().splitlines() if line.startswith("| `spamnb prune`"))
    offered, _, conditional = row.split("|")[2].partition(";")
    options = re.findall(r"`(-[^`]+)`", offered)
    assert options and "--target-size N" in options and "--min-count N" not in options, row
    assert "`--min-count N` only for a model trained without length normalisation" in conditional, row
    values = {"N": "1000", "DAYS": "365", "SECONDS": "5"}
    model = tmp_path / "model.spamnb"
    shutil.copy(home / "model.spamnb", model)
    before = model.read_bytes()
    for option in options:
        name, _, placeholder = option.partition(" ")
        argv = [name.split("/")[0]] + ([values[placeholder]] if placeholder else [])
        if name in ("-n/--dry-run", "-q/--quiet", "--wait"):   # not a policy: with one
            argv += ["--target-size", "1000"]
        proc = run(["prune", "-n", *argv, "-m", model], home)
        assert proc.returncode == 0, (option, proc.stderr.decode())
    assert model.read_bytes() == before


@pytest.mark.parametrize("jobs", slow_beyond(["1", "2"], keep=["2"]))    # -j 1: with -m slow
def test_train_progress_has_a_total_and_counts_each_message_once(tmp_path, jobs):
    """On main the line had no total (the count alone)."""
    proc, seen = _run_on_terminal(["train", "-j", jobs, "--partition-size", "100", REPO / "corpora"], tmp_path)
    assert proc.returncode == 0
    counts = [(int(a), int(b)) for a, b in re.findall(rb"\] (\d+)/(\d+) messages", seen)]
    assert counts, seen
    # the total: the corpus's 301 files (its README is one, and is not mail); never past the 300 messages
    assert {total for _, total in counts} == {301} and max(done for done, _ in counts) <= 300, counts


def test_the_plot_legend_does_not_cover_the_histogram(tmp_path, monkeypatch):
    """On main the legend sat inside the histogram's axes, over its bars."""
    plt = pytest.importorskip("matplotlib.pyplot")
    import numpy as np

    from spamnb.evaluation import crossval

    figures = []
    monkeypatch.setattr(plt, "close", lambda fig=None: figures.append(fig))
    rng = np.random.default_rng(0)
    y = np.r_[np.zeros(500, dtype=bool), np.ones(200, dtype=bool)]
    crossval.write_plot(tmp_path / "plot.png", y, np.r_[rng.normal(-20, 8, 500), rng.normal(15, 10, 200)],
                        cutoffs=(0.99, 0.01))
    fig = figures[0]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax_hist = fig.axes[1]
    legend = ax_hist.get_legend().get_window_extent(renderer)
    assert not legend.overlaps(ax_hist.get_window_extent(renderer))
    assert (tmp_path / "plot.png").stat().st_size > 0
