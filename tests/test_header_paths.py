"""One header edit on every path that writes one (spamnb/mail/headers.py):
the same 200 messages (190 of corpora/ and ten made to be hard: CRLF, LF,
no blank line after the header, no header, an empty header, a 1 MB header,
folded fields, an mbox ``From `` line, the sender's own X-Spam-* fields and
two Subjects) through ``classify -p``, SPAMD PROCESS and HEADERS, the milter
and ``spamnb imap scan --add-header``; the fields each writes are the same
bytes.

The default suite drives the servers with the tests' own clients (a SPAMD
request written out, tests/raw_milter.py for the milter, the MTA's edits
applied here); ``-m slow`` runs the real spamc, a real Postfix in front of
the milter and a real Dovecot under ``imap scan``.  What an MTA hands the
milter is not the message as sent (Postfix adds its Received field, drops
an mbox line, cuts a header over its limit): the milter's fields are held
to PROCESS on the bytes the milter was handed.

A last test scans the package for a search of a header's end outside
spamnb/mail/headers.py."""

import io
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO
from mailchain import Tap, serving  # noqa: F401  (serving: the Postfix test's server)
from postfix_private import pf_root, postfixes, skip_reason, work  # noqa: F401  (its private Postfix)
from test_serve import _env, _free_port

import spamnb

PACKAGE = Path(spamnb.__file__).resolve().parent
SPAMC = "/usr/bin/spamc" if os.path.exists("/usr/bin/spamc") else None
SERVE_OPTIONS = ("--report", "--subject-tag", "[SPAM]")       # classify -p's: the settings file in home


# ---------------------------------------------------------------------------- the 200 messages
def corpus_messages(n=190):
    """``n`` messages of corpora/, spread over its folders (sorted: the same ones every run)."""
    paths = sorted(p for p in (REPO / "corpora").glob("*/*") if p.is_file())
    step = len(paths) / n
    return [(f"{p.parent.name}/{p.name}", p.read_bytes()) for p in (paths[int(i * step)] for i in range(n))]


def hard_messages(spam, ham):
    """The ten messages made to be hard, from a corpus spam and ham (LF, their mbox line dropped)."""
    spam = spam.split(b"\n", 1)[1] if spam.startswith(b"From ") else spam
    ham = ham.split(b"\n", 1)[1] if ham.startswith(b"From ") else ham
    spam_head, _, spam_body = spam.partition(b"\n\n")
    ham_head, _, ham_body = ham.partition(b"\n\n")
    filler = b"".join(b"X-Filler-%05d: %s\n" % (i, b"padding " * 11) for i in range(11_000))     # 1 MB
    folded = (b"Subject: cheap pills\n\tand more cheap pills,\n  folded twice\n"
              b"X-Spam-Status: No, score=-5.0\n\tforged=yes\nX-Spam-Flag: NO\n")
    return [
        ("crlf spam", spam.replace(b"\n", b"\r\n")),
        ("lf ham", ham),
        ("no blank line after the header", b"Message-ID: <noblank@test.example>\nSubject: hello\n"
                                           b"this line is the body\nX-Spam-Flag: YES\n\n" + ham_body),
        ("no header", b"cheap pills viagra free money, click here now\nto order\n\n" + spam_body),
        ("empty header", b"\n" + spam_body),
        ("1 MB header", spam_head + b"\n" + filler + b"\n" + spam_body),
        ("folded fields", re.sub(rb"(?im)^subject:.*\n(?:[ \t].*\n)*", b"", spam_head + b"\n") + folded + b"\n"
                          + spam_body),
        ("mbox From line", b"From sender@client.example Sat Jan  3 01:05:34 2026\n" + ham),
        ("own fields, two Subjects", b"X-Spam-Flag: YES\nX-Spam-Score: 99.0\n" + spam_head
                                     + b"\nSubject: second subject\nX-Spam-Level: ***\n\n" + spam_body),
        ("crlf, no header", (b"cheap pills viagra free money\n\n" + spam_body).replace(b"\n", b"\r\n")),
    ]


def two_hundred():
    messages = corpus_messages()
    spam = next(m for name, m in messages if name.startswith("spam/"))
    ham = next(m for name, m in messages if name.startswith("easy_ham/"))
    return messages + hard_messages(spam, ham)


def hard_ones():
    return dict(two_hundred()[-10:])


# ---------------------------------------------------------------------------- what a path wrote
def written(message):
    """The fields spamnb writes or edits (every X-Spam-* and Subject field of
    the header, in order, folds kept), LF line ends: read with a pattern of
    this test, not with the module under test."""
    text = message.replace(b"\r\n", b"\n")
    head = text.split(b"\n\n", 1)[0] + b"\n"
    return re.findall(rb"(?im)^(?:x-spam-[!-9;-~]*|subject)[ \t]*:.*\n(?:[ \t].*\n)*", head)


def classify_p(home, message, tmp, *options):
    """``spamnb classify -p --sa-headers --report`` (in this process: the command's own code, its
    stdout read back) of ``message``."""
    from spamnb.cli.main import main

    path = tmp / "message"
    path.write_bytes(message)
    out = io.BytesIO()
    stdout, before = sys.stdout, os.environ.get("SPAMNB_HOME")
    os.environ["SPAMNB_HOME"] = str(home)
    sys.stdout = wrapper = io.TextIOWrapper(out)
    try:
        code = main(["classify", "-p", *options, "-m", str(home / "model.spamnb"), str(path)])
        wrapper.flush()
        data = out.getvalue()
    finally:
        sys.stdout = stdout
        if before is None:
            os.environ.pop("SPAMNB_HOME", None)
        else:
            os.environ["SPAMNB_HOME"] = before
    assert code == 0
    return data


def spamd(port, verb, message):
    """A SPAMD request written out: the answer's message (its Content-length bytes)."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        s.sendall(b"%s SPAMC/1.5\r\nContent-length: %d\r\n\r\n" % (verb.encode(), len(message)) + message)
        s.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := s.recv(1 << 20):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"SPAMD/1.5 0 EX_OK"), head
    length = int(re.search(rb"(?im)^content-length: *(\d+)", head).group(1))
    assert len(body) == length
    return body


def mta_split(message):
    """(fields as [name, value after the colon], body) as an MTA reads a
    message: fields from the top (an mbox line dropped), each with its
    continuation lines, up to the first line that is none; a blank line
    there is the separator."""
    text = message.replace(b"\r\n", b"\n")
    if text.startswith(b"From "):
        text = text.split(b"\n", 1)[1]
    fields, lines = [], text.split(b"\n")
    i = 0
    while i < len(lines) - 1 or (i < len(lines) and lines[i]):
        line = lines[i]
        if line[:1] in (b" ", b"\t") and fields:
            fields[-1][1] += b"\n" + line
        elif re.match(rb"[!-9;-~]+[ \t]*:", line):
            name, _, value = line.partition(b":")
            fields.append([name.decode("ascii"), value])
        else:
            break
        i += 1
    if i < len(lines) and lines[i] == b"":
        i += 1
    return fields, b"\r\n".join(lines[i:])


def held(fields, body):
    """The message as the milter holds it (each field ``Name:value``, the value as the MTA sent it)."""
    return b"".join(name.encode() + b":" + value + b"\r\n" for name, value in fields) + b"\r\n" + body


def mta_applies(fields, body, answers):
    """The message after the MTA applied the milter's edits (``m``: the
    index-th field of that name changed, or removed when empty; ``h``: added at
    the end of the header)."""
    fields = [list(f) for f in fields]
    for answer in answers:
        if answer.kind == "m":
            same = [f for f in fields if f[0].lower() == answer.name.lower()]
            if answer.index <= len(same):
                if answer.value:
                    same[answer.index - 1][1] = answer.value
                else:
                    fields.remove(same[answer.index - 1])
            elif answer.value:
                fields.append([answer.name, answer.value])
        elif answer.kind == "h":
            fields.append([answer.name, answer.value])
    return held(fields, body)


@pytest.fixture(scope="module")
def home(tmp_path_factory, sample_model):
    home = tmp_path_factory.mktemp("header-paths")
    shutil.copyfile(sample_model, home / "model.spamnb")     # what `spamnb train -q corpora/` writes here
    (home / "settings.toml").write_text('subject_tag = "[SPAM]"\n')    # classify -p tags spam as serve does
    return home


@pytest.fixture(scope="module")
def server(home):
    """``spamnb serve`` with a SPAMD and a milter address, --report and --subject-tag [SPAM]."""
    pytest.importorskip("kilter.protocol")
    spamd_port, milter_port = _free_port(), _free_port()
    log = open(home / "serve.log", "wb+")
    proc = subprocess.Popen([sys.executable, "-m", "spamnb", "serve", "-l", f"127.0.0.1:{spamd_port}", "--milter",
                             f"127.0.0.1:{milter_port}", "-m", str(home / "model.spamnb"), "--workers", "1",
                             *SERVE_OPTIONS], env=_env(home), stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.monotonic() + 60
    while b"listening on" not in (home / "serve.log").read_bytes() or not _answers(spamd_port):
        assert proc.poll() is None and time.monotonic() < deadline, (home / "serve.log").read_text()
        time.sleep(0.05)
    yield spamd_port, milter_port
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.close()


def _answers(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


@pytest.mark.slow   # over 6 s in the default run: CI runs it in the slow step
def test_every_path_writes_the_same_fields(home, server, tmp_path):
    """classify -p --sa-headers == PROCESS, byte for byte, for each of the
    200 messages; HEADERS is PROCESS's header; the milter's edits, applied
    as an MTA applies them, give PROCESS's message on the bytes the milter
    held.  Each path is checked to have written something (a spam's
    X-Spam-Flag and tagged Subject are among them)."""
    from raw_milter import RawMilter

    spamd_port, milter_port = server
    milter = RawMilter(("127.0.0.1", milter_port), timeout=60)
    milter.negotiate()
    flagged = 0
    try:
        for name, message in two_hundred():
            process = spamd(spamd_port, "PROCESS", message)
            assert classify_p(home, message, tmp_path, "--sa-headers", "--report") == process, name
            headers = spamd(spamd_port, "HEADERS", message)
            assert written(headers) == written(process) and written(process), name
            assert process.startswith(headers.rstrip(b"\r\n")), name
            # the milter: the MTA's edits on what it held, against PROCESS on the same bytes
            fields, body = mta_split(message)
            milter.start()
            for field, value in fields:
                milter.header(field, value)
            milter.end_of_headers()
            milter.body(body)
            answers = milter.end()
            assert answers[-1].kind == "c", (name, answers[-3:])
            by_mta = mta_applies(fields, body, answers)
            by_process = spamd(spamd_port, "PROCESS", held(fields, body))
            assert by_mta.replace(b"\r\n", b"\n") == by_process.replace(b"\r\n", b"\n"), name
            assert written(by_mta) == written(by_process), name
            flagged += b"X-Spam-Flag: YES\n" in written(process) and any(
                f.startswith(b"Subject: [SPAM]") for f in written(process))
    finally:
        milter.close()
    assert flagged > 50


def test_the_hard_messages_get_their_fields_where_a_mail_program_reads_them(home, server):
    """Where the edit puts the fields on the hard messages (PROCESS): after
    the last field, before a body line that follows the header without a
    blank line; in a header of its own, with the message's line ends, for a
    message with none; the sender's own X-Spam-* fields gone, each Subject
    tagged; the body byte for byte."""
    spamd_port, _ = server
    hard = hard_ones()
    out = {name: spamd(spamd_port, "PROCESS", m) for name, m in hard.items()}
    noblank = out["no blank line after the header"]
    assert noblank.startswith(b"Message-ID: <noblank@test.example>\nSubject: ")
    before, _, after = noblank.partition(b"\nthis line is the body\n")
    assert b"\nX-Spam-Status: " in before and b"\nX-Spam-Checker-Version: spamnb" in before
    assert b"X-Spam-" not in after.split(b"\n\n", 1)[0]     # the line a mail program reads as a field: removed
    for name in ("no header", "crlf, no header"):
        newline = b"\r\n" if name.startswith("crlf") else b"\n"
        assert out[name].startswith(b"X-Spam-") and out[name].endswith(hard[name])
        assert (newline + newline + hard[name]) in out[name] and (name.startswith("crlf") or b"\r" not in out[name])
    assert out["empty header"].endswith(hard["empty header"]) and out["empty header"].startswith(b"X-Spam-")
    crlf = out["crlf spam"]
    assert crlf.split(b"\r\n\r\n", 1)[0].count(b"\n") == crlf.split(b"\r\n\r\n", 1)[0].count(b"\r\n")
    two = written(out["own fields, two Subjects"])
    assert [f for f in two if f.lower().startswith(b"subject")][-1] == b"Subject: [SPAM] second subject\n"
    assert all(f.lower().startswith(b"subject") or b"99.0" not in f for f in two)
    assert out["mbox From line"].startswith(b"From sender@client.example ")


def test_one_function_finds_the_end_of_a_header():
    """No module but spamnb/mail/headers.py searches a message for the blank
    line that ends its header (``\\n\\n``, ``\\r\\n\\r\\n``, ``\\n\\r\\n``);
    the SPAMD request reader and the metrics page read a protocol's head,
    not a message, and are named here."""
    protocol_heads = {"server/request_reader.py", "server/metrics.py"}
    search = re.compile(r"""(?:find|index|rfind|partition|split|search|readuntil)\(\s*[rb]{0,2}["'](?:\\r)?\\n(?:\\r)?\\n"""
                        r"""|(?:pattern|compile)\(\s*[rb]{0,2}["']\\n\\r\?\\n""")   # a search, or a pattern for one
    found = []
    for path in sorted(PACKAGE.rglob("*.py")) + sorted(PACKAGE.rglob("*.pyx")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == "mail/headers.py" or rel in protocol_heads:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if search.search(line):
                found.append(f"{rel}:{number}: {line.strip()}")
    assert found == []
    assert search.search((PACKAGE / "mail" / "headers.py").read_text())      # the pattern finds the one there


# ---------------------------------------------------------------------------- the real clients and servers
@pytest.mark.slow
@pytest.mark.skipif(SPAMC is None, reason="spamc is not installed")
def test_real_spamc_process_and_headers_write_what_classify_p_writes(home, server, tmp_path):
    """The real spamc (PROCESS; ``--headers``: HEADERS, spamc putting the
    body back) against ``spamnb serve``: PROCESS's output is classify -p's,
    byte for byte; HEADERS' fields are the same."""
    spamd_port, _ = server
    for name, message in two_hundred():
        expected = classify_p(home, message, tmp_path, "--sa-headers", "--report")
        base = [SPAMC, "-d", "127.0.0.1", "-p", str(spamd_port), "-s", str(8 << 20), "-t", "120", "-x"]
        process = subprocess.run(base, input=message, capture_output=True, timeout=180)
        assert process.returncode == 0 and process.stdout == expected, (name, process.stderr[-500:])
        headers = subprocess.run(base + ["--headers"], input=message, capture_output=True, timeout=180)
        assert headers.returncode == 0 and written(headers.stdout) == written(expected), name


class MilterTap(Tap):
    """A :class:`mailchain.Tap` between an MTA and the milter at ``port``:
    the bytes the MTA handed the milter."""

    def handed(self):
        """{queue ID: the message as the milter held it} of every end of data seen."""
        out = {}
        for data in self.streams():
            leading_space, message, queue_id, at = False, [], None, 0
            while at + 5 <= len(data):
                size = int.from_bytes(data[at:at + 4], "big")
                if at + 4 + size > len(data):
                    break
                kind, payload = data[at + 4:at + 5], data[at + 5:at + 4 + size]
                at += 4 + size
                if kind == b"O":
                    leading_space = bool(int.from_bytes(payload[8:12], "big") & 0x100000)
                elif kind == b"D":
                    parts = payload[1:].split(b"\0")
                    macros = dict(zip(parts[0::2], parts[1::2]))
                    queue_id = macros.get(b"i", queue_id)
                elif kind == b"L":
                    name, value = payload.split(b"\0")[:2]
                    message.append(name + (b":" if leading_space else b": ") + value + b"\r\n")
                elif kind == b"N":
                    message.append(b"\r\n")
                elif kind == b"B":
                    message.append(payload)
                elif kind == b"E":
                    out[queue_id.decode()] = b"".join(message)
                    message = []
                elif kind == b"A":
                    message = []
        return out

@pytest.mark.slow
@pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason()))
def test_the_milter_through_postfix_writes_what_process_writes(pf_root, work, postfixes, serving):
    """The real Postfix in front of the milter (docs/serve.md's main.cf
    lines, tests/postfix_private.py), the 200 messages sent over SMTP: each
    delivered message's X-Spam-* and Subject fields are PROCESS's on the
    bytes Postfix handed the milter (read off the wire by a relay)."""
    pytest.importorskip("kilter.protocol")
    from mailchain import read_maildir, send
    from postfix_private import milter_main_cf

    milter_port = _free_port()
    serve = serving(work, None, "--milter", f"127.0.0.1:{milter_port}", *SERVE_OPTIONS)
    tap = MilterTap(milter_port)
    try:
        pf = postfixes(milter_main_cf(tap.port) + "header_size_limit = 2000000\n",
                       lambda smtp_port: f"127.0.0.1:{smtp_port} inet n - n - - smtpd\n")
        deadline = time.monotonic() + 900
        messages = two_hundred()
        for name, message in messages:
            answers = send(pf.smtp_port, message, ["alice@test.example"], deadline)
            assert all(code == 250 for code, _ in answers.values()), (name, answers)
        while len(read_maildir(pf.mail / "alice")) < len(messages) and time.monotonic() < deadline:
            pf.flush()
            time.sleep(1)
        delivered = read_maildir(pf.mail / "alice")
        assert len(delivered) == len(messages), pf.log_text()[-3000:]
        handed = tap.handed()
        assert len(handed) == len(messages)
        for message in delivered:
            queue_id = re.search(rb"\bwith E?SMTPS? id ([0-9A-Za-z]+)", message).group(1).decode()
            process = spamd(serve.port, "PROCESS", handed[queue_id])
            assert written(message) == written(process), queue_id
            assert written(message), queue_id
    finally:
        tap.close()


@pytest.mark.slow
def test_imap_scan_add_header_writes_what_classify_p_writes(home, tmp_path, request):
    """``spamnb imap scan --add-header`` against a real Dovecot: each message
    re-appended is classify -p's output on the message as Dovecot gave it
    (the status header, the Subject of spam tagged), byte for byte."""
    import dovecot_private

    if dovecot_private.missing() is not None:
        pytest.skip(str(dovecot_private.missing()))
    from test_imap import Account

    server = request.getfixturevalue("server_imap")
    account = Account(server, "user7", tmp_path / "home", home / "model.spamnb")
    settings = account.home / "settings.toml"
    settings.write_text('subject_tag = "[SPAM]"\n' + settings.read_text())
    client = account.imap()
    try:
        for _, message in two_hundred():
            assert client.append("INBOX", None, None, message)[0] == "OK"
        before = _all_messages(client, ("INBOX",))
    finally:
        client.logout()
    assert len(before) == 200
    proc = account.spamnb("imap", "scan", "--add-header")
    assert proc.returncode == 0, proc.stderr
    client = account.imap()
    try:
        after = _all_messages(client, ("INBOX", "Junk"))
    finally:
        client.logout()
    expected = sorted(classify_p(account.home, m, tmp_path) for m in before)
    assert sorted(after) == expected


def _all_messages(client, folders):
    out = []
    for folder in folders:
        if client.select(folder, readonly=True)[0] != "OK":
            continue
        typ, data = client.uid("FETCH", "1:*", "(BODY.PEEK[])")
        out += [item[1] for item in data if isinstance(item, tuple)]
    return out


@pytest.fixture(scope="module")
def server_imap(tmp_path_factory):
    """A private Dovecot over IMAPS (tests/test_imap.py's)."""
    from test_imap import imaps_dovecot

    yield from imaps_dovecot(tmp_path_factory)
