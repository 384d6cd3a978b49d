"""The console's "test a message" (``POST /api/v1/test``): a message pasted
or uploaded, checked with the user's model, its verdict, evidence and
build-up answered, and nothing kept (no history row, no action, no learn);
its body bounded by ``--max-size`` (every other POST by 256 KiB); CSRF and
Origin as every POST."""

from __future__ import annotations

import http.client
import json
import random

import pytest

from spamnb.console.http import MAX_BODY
from test_console import Client, ConsoleServer, mail, wait_rows, words
from test_serve import SPAMC

pytest.importorskip("h11")

MAX_SIZE = 600 * 1024       # the server's --max-size here: above the console's own body bound


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if SPAMC is None:
        pytest.skip("spamc is not installed (Debian package spamc)")
    server = ConsoleServer(tmp_path_factory.mktemp("console-more"), "--max-size", MAX_SIZE)
    yield server
    server.stop()


def post_raw(client, path, data, headers=None, csrf=True, origin=True):
    conn = http.client.HTTPConnection("127.0.0.1", client.server.ui, timeout=60)
    head = {"Content-Type": "application/octet-stream", "Cookie": client.cookie or ""}
    if csrf and client.csrf:
        head["X-CSRF-Token"] = client.csrf
    if origin:
        head["Origin"] = client.server.base
    head.update(headers or {})
    conn.request("POST", path, body=data, headers=head)
    answer = conn.getresponse()
    body = answer.read()
    conn.close()
    try:
        return answer.status, json.loads(body)
    except ValueError:
        return answer.status, body


def test_a_tested_message_is_answered_with_its_evidence_and_nothing_is_kept(server):
    client = Client(server)
    assert client.login("viewer")[0] == 200          # a viewer may test: nothing changes
    rng = random.Random(5)
    spam = mail(rng, True, 7001, subject="tested only xyzzy")
    before = client.request("GET", "/api/v1/history?limit=200")[1]["rows"]
    status, value = post_raw(client, "/api/v1/test", spam)
    assert status == 200, value
    assert value["label"] == "spam" and value["subject"] == "tested only xyzzy" and not value["kept"], value
    assert value["evidence"] and all(len(pair) == 2 for pair in value["evidence"])
    spam_cut, ham_cut = value["cutoffs_log_odds"]
    assert value["log_odds"] > spam_cut > ham_cut, value
    assert value["size"] == len(spam) and value["parts"][0]["text"].strip()
    ham = mail(rng, False, 7002, subject="tested ham")
    status, value = post_raw(client, "/api/v1/test", ham)
    assert status == 200 and value["label"] == "ham", value
    # the same answer spamc gets for it: the same model
    checked = server.spamc("-c", stdin=spam)
    assert checked.returncode == 1, checked
    # nothing kept: the history has the spamc check only, the test left no row and no action
    rows = wait_rows(client, len(before) + 1)
    assert len(rows) == len(before) + 1 and rows[0]["front"] == "spamd", rows[:2]
    kept = client.request("GET", "/api/v1/history?q=tested")[1]["rows"]
    assert [row["subject"] for row in kept] == ["tested only xyzzy"], kept      # spamc's check, not the tests
    admin = Client(server)
    admin.login("admin")
    assert all(action["what"] in ("login",) for action in admin.request("GET", "/api/v1/actions")[1]["actions"])


def test_a_test_needs_a_session_a_csrf_token_and_the_console_s_origin(server):
    data = mail(random.Random(6), True, 7003)
    anonymous = Client(server)
    assert post_raw(anonymous, "/api/v1/test", data)[0] == 401
    client = Client(server)
    client.login("viewer")
    assert post_raw(client, "/api/v1/test", data, csrf=False)[0] == 403
    assert post_raw(client, "/api/v1/test", data, headers={"Origin": "http://evil.example"})[0] == 403
    assert post_raw(client, "/api/v1/test", data, headers={"Sec-Fetch-Site": "cross-site"})[0] == 403
    assert post_raw(client, "/api/v1/test", b"  \n")[0] == 400


def test_a_tested_message_is_bounded_by_max_size(server):
    client = Client(server)
    client.login("trainer")
    rng = random.Random(8)
    big = mail(rng, False, 7004, subject="a large one") + (words(rng, 20, "fill") + "\n").encode() * 4000
    big = big[:MAX_SIZE]
    assert len(big) > MAX_BODY
    status, value = post_raw(client, "/api/v1/test", big)
    assert status == 200 and value["size"] == len(big), value
    assert post_raw(client, "/api/v1/test", big + b"x")[0] == 413
    # every other POST keeps the console's own bound
    assert post_raw(client, "/api/v1/logout", b"{" + b" " * MAX_BODY + b"}")[0] == 413


# ---------------------------------------------------------------------------- learn an upload
def novel(n, prefix):
    rng = random.Random(n)
    return mail(rng, False, n, subject=f"upload novel {n}", user_words=words(rng, 80, prefix))


def mbox(messages):
    out = b""
    for data in messages:
        quoted = b"\n".join(b">" + line if line.startswith(b"From ") else line for line in data.split(b"\n"))
        out += b"From sender@example.org Sun Nov 29 09:00:00 2026\n" + quoted + b"\n"
    return out


def test_an_uploaded_mbox_is_learned_message_by_message_through_tell(server):
    trainer = Client(server)
    trainer.login("trainer")
    messages = [novel(8100 + n, "qv") for n in range(3)]
    assert [server.spamc("-c", stdin=m).returncode for m in messages] == [0, 0, 0]      # not spam yet
    status, value = post_raw(trainer, "/api/v1/learn-upload?label=spam", mbox(messages))
    assert status == 200, value
    assert [(m["n"], m["subject"], m["result"]) for m in value["messages"]] == [
        (n + 1, f"upload novel {8100 + n}", "learned") for n in range(3)], value
    assert [server.spamc("-c", stdin=m).returncode for m in messages] == [1, 1, 1]      # the workers see it
    # an .eml taught the other way: a relabel, as a click's
    status, value = post_raw(trainer, "/api/v1/learn-upload?label=ham", messages[0])
    assert status == 200 and value["messages"][0]["result"] == "learned", value
    # relabelled: not spam now, once the workers read the model again (a relabel folds the journal in: a whole
    # save, read again in the background while the model loaded before serves, as after any compaction)
    deadline = __import__("time").monotonic() + 60
    while server.spamc("-c", stdin=messages[0]).returncode != 0:
        assert __import__("time").monotonic() < deadline, "the relabel is not seen"
        __import__("time").sleep(0.05)
    admin = Client(server)
    admin.login("admin")
    actions = [a for a in admin.request("GET", "/api/v1/actions")[1]["actions"] if a["what"] != "login"]
    assert actions[0]["who"] == "trainer" and actions[0]["what"] == "learn ham (upload, message 1 of 1)", actions[0]
    assert sum(a["what"].startswith("learn spam (upload") for a in actions) == 3


def test_learning_an_upload_is_for_trainers_bounded_and_checked_as_every_post(server):
    from spamnb.console.app import UPLOAD_MESSAGES

    data = novel(8200, "qw")
    for name in ("viewer", "bob"):
        client = Client(server)
        client.login(name)
        assert post_raw(client, "/api/v1/learn-upload?label=spam", data)[0] == 403, name
    trainer = Client(server)
    trainer.login("trainer")
    assert post_raw(trainer, "/api/v1/learn-upload?label=spam", data, csrf=False)[0] == 403
    assert post_raw(trainer, "/api/v1/learn-upload?label=spam", data, headers={"Origin": "http://evil.example"})[0] == 403
    assert post_raw(trainer, "/api/v1/learn-upload?label=maybe", data)[0] == 400
    status, value = post_raw(trainer, "/api/v1/learn-upload?label=spam", mbox([data] * (UPLOAD_MESSAGES + 1)))
    assert status == 400 and "nothing was learned" in value["error"], value
    assert server.spamc("-c", stdin=data).returncode == 0       # not learned
    assert post_raw(trainer, "/api/v1/learn-upload?label=spam", b"x" * (MAX_SIZE + 1))[0] == 413


def test_two_uploads_are_read_at_once_at_most(server):
    from spamnb.console.http import MAX_UPLOADS

    client = Client(server)
    client.login("trainer")
    import socket

    held = []
    try:
        for _ in range(MAX_UPLOADS):        # bodies announced, never sent: each holds an upload's place
            sock = socket.create_connection(("127.0.0.1", server.ui), timeout=30)
            sock.sendall(f"POST /api/v1/test HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {MAX_BODY + 10}\r\n"
                         f"Content-Type: application/octet-stream\r\n\r\n".encode())
            held.append(sock)
        status = None
        for _ in range(100):        # the held ones reach the console first
            status, _ = post_raw(client, "/api/v1/test", b"Subject: x\n\n" + b"y" * MAX_BODY)
            if status == 503:
                break
        assert status == 503
    finally:
        for sock in held:
            sock.close()
    deadline = __import__("time").monotonic() + 30
    while post_raw(client, "/api/v1/test", b"Subject: x\n\n" + b"y" * MAX_BODY)[0] != 200:
        assert __import__("time").monotonic() < deadline, "the places were not given back"


def test_the_console_stays_small_after_uploads_of_max_size(server):
    from pathlib import Path

    client = Client(server)
    client.login("trainer")
    rng = random.Random(9)
    big = (mail(rng, False, 7100, subject="big") + (words(rng, 20, "big") + "\n").encode() * 8000)[:MAX_SIZE]
    for _ in range(3):
        assert post_raw(client, "/api/v1/test", big)[0] == 200
    fields = dict(line.split(":", 1) for line in
                  Path(f"/proc/{server.console_pid()}/status").read_text().splitlines())
    peak = int(fields["VmHWM"].split()[0]) * 1024
    print(f"console peak resident memory after 3 tests of {len(big)} bytes: {peak / 2 ** 20:.1f} MiB")
    assert peak < 60 * 2 ** 20, peak
