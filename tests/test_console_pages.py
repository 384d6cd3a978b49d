"""The console's pages of the model and its cutoffs: the word query (a
token's counts and weight), cutoff fitting (what a pair of cutoffs would do
on the recorded and the corrected mail), accuracy over time from the
corrections; the store's queries first, then the API of a real server.
In chromium: tests/test_console_browser.py."""

from __future__ import annotations

import math
import random
import time

import pytest

from spamnb.console.history import History
from spamnb.model.spam_filter import SpamFilter

pytest.importorskip("h11")

from test_console import Client, ConsoleServer, mail, wait_rows  # noqa: E402
from test_serve import needs_spamc  # noqa: E402


def _rows(history, spec):
    """``spec``: (log-odds, recorded label, learned label or None, user) each; returns their ids."""
    ids = history.add([({"t": time.time(), "label": label, "log_odds": odds, "user": user, "front": "spamd"},
                        b"Subject: s\n", b"") for odds, label, _, user in spec])
    for record, (_, _, learned, _) in zip(ids, spec):
        if learned:
            history.mark(record, f"{learned} by ann")
    return ids


def test_cutoff_effect_counts_the_recorded_and_the_corrected_rows():
    history = History(":memory:")
    _rows(history, [(20.0, "spam", None, "bob"), (10.0, "spam", "ham", "bob"), (3.0, "unsure", "spam", "bob"),
                    (-1.0, "unsure", None, "carol"), (-5.0, "ham", "spam", "carol"), (-30.0, "ham", "ham", "carol")])
    out = history.cutoff_effect(14.0, -4.0)
    assert out["recorded"] == {"spam": 2, "unsure": 2, "ham": 2}
    assert out["would"] == {"spam": 1, "unsure": 3, "ham": 2}
    assert out["corrected"]["spam"] == {"spam": 0, "unsure": 1, "ham": 1, "recorded_right": 0}
    assert out["corrected"]["ham"] == {"spam": 0, "unsure": 1, "ham": 1, "recorded_right": 1}
    out = history.cutoff_effect(2.0, -10.0)       # wider spam side: the false positive comes back
    assert out["corrected"]["ham"]["spam"] == 1 and out["corrected"]["spam"]["spam"] == 1
    assert history.cutoff_effect(14.0, -4.0, user="carol")["would"] == {"spam": 0, "unsure": 1, "ham": 2}
    assert dict(map(tuple, out["histogram"])) == {20: 1, 10: 1, 3: 1, -1: 1, -5: 1, -30: 1}
    _rows(history, [(500.0, "spam", None, "bob")])
    assert dict(map(tuple, history.cutoff_effect(14.0, -4.0)["histogram"]))[60] == 1     # clipped


def test_accuracy_over_time_counts_corrections_per_slice():
    history = History(":memory:")
    now = time.time()
    spec = [(now - 86400 * 9.5, "ham", "spam"), (now - 86400 * 9.4, "spam", None), (now - 86400 * 1.2, "spam", "ham"),
            (now - 86400 * 1.1, "unsure", None), (now - 60, "spam", "spam")]
    ids = history.add([({"t": t, "label": label, "log_odds": 1.0, "user": "bob"}, b"", b"") for t, label, _ in spec])
    for record, (_, _, learned) in zip(ids, spec):
        if learned:
            history.mark(record, f"{learned} by ann")
    out = history.accuracy(now - 10 * 86400, buckets=10)
    rows = {r["b"]: r for r in out["rows"]}
    assert sum(r["checks"] for r in out["rows"]) == 5 and sum(r["learned"] for r in out["rows"]) == 3
    assert rows[0]["missed_spam"] == 1 and rows[0]["checks"] == 2
    assert rows[8]["false_positives"] == 1 and rows[8]["unsure"] == 1
    assert rows[9]["missed_spam"] == rows[9]["false_positives"] == 0      # a confirmation is no error


@needs_spamc
def test_the_word_cutoff_and_accuracy_api(tmp_path):
    """The word query answers what the model file holds (the strongest
    spam token's counts and weight as SpamFilter reports them; an unknown
    token is unknown); the cutoff page's defaults are the model's own
    cutoffs; a learn clicked makes the row a corrected one; bad arguments are
    400; a viewer may read all three (they change nothing)."""
    server = ConsoleServer(tmp_path)
    try:
        rng = random.Random(11)
        for n in range(6):
            server.spamc(stdin=mail(rng, n % 2 == 0, 500 + n))
        admin = Client(server)
        assert admin.login("admin")[0] == 200
        rows = wait_rows(admin, 6)
        model = SpamFilter.load(server.home / "model.spamnb")
        (token, weight, ham, spam), = model.strongest_tokens(1)[0]
        status, word, _ = admin.request("GET", f"/api/v1/word?w={token}")
        assert status == 200 and word["known"], word
        got = word["tokens"][0]
        assert got["token"] == token and (got["ham"], got["spam"]) == (ham, spam)
        assert math.isclose(got["weight"], weight, rel_tol=1e-9) and got["weight"] > 0
        status, word, _ = admin.request("GET", "/api/v1/word?w=zzqqxxnotaword")
        assert status == 200 and not word["known"] and word["tokens"] == []
        assert admin.request("GET", "/api/v1/word?w=")[0] == 400
        status, cut, _ = admin.request("GET", "/api/v1/cutoffs")
        assert status == 200
        logit = lambda p: math.log(p) - math.log1p(-p)  # noqa: E731
        assert math.isclose(cut["spam"], logit(model.cutoffs.spam)) and math.isclose(cut["ham"], logit(model.cutoffs.ham))
        assert sum(cut["recorded"].values()) == len(rows) == sum(cut["would"].values())
        spam_row = next(r for r in rows if r["label"] == "spam")
        assert admin.request("POST", f"/api/v1/message/{spam_row['id']}/learn", {"label": "ham"})[0] == 200
        status, cut, _ = admin.request("GET", "/api/v1/cutoffs")
        assert cut["corrected"]["ham"]["spam"] == 1 and cut["corrected"]["ham"]["recorded_right"] == 0
        status, cut, _ = admin.request("GET", "/api/v1/cutoffs?spam=1000&ham=-1000")
        assert cut["would"]["unsure"] == len(rows) and cut["corrected"]["ham"]["unsure"] == 1
        for bad in ("spam=x", "spam=1&ham=5", "spam=nan", "spam=inf"):
            assert admin.request("GET", f"/api/v1/cutoffs?{bad}")[0] == 400, bad
        status, acc, _ = admin.request("GET", "/api/v1/accuracy?days=1")
        assert status == 200 and sum(r["false_positives"] for r in acc["rows"]) == 1
        assert sum(r["checks"] for r in acc["rows"]) == len(rows)
        viewer = Client(server)
        viewer.login("viewer")
        for path in ("/api/v1/word?w=x", "/api/v1/cutoffs", "/api/v1/accuracy"):
            assert viewer.request("GET", path)[0] == 200
    finally:
        server.stop()


@needs_spamc
def test_a_messages_words_are_marked_where_they_stand_with_their_weight(tmp_path):
    """A kept message's text comes cut into segments: the pieces put back
    together are the text, each marked piece a word the model knows with its
    own weight (the model file's), at each of its positions (a word twice in
    the text marked twice, evidence or not); the test page marks the same."""
    server = ConsoleServer(tmp_path, keep=10)
    try:
        model = SpamFilter.load(server.home / "model.spamnb")
        (spammy, weight, _, _), = model.strongest_tokens(1)[0]
        rng = random.Random(12)
        raw = mail(rng, True, 700, subject="marks", user_words=f"{spammy} plain {spammy.upper()}")
        server.spamc(stdin=raw)
        admin = Client(server)
        admin.login("admin")
        row, = wait_rows(admin, 1)
        status, value, _ = admin.request("GET", f"/api/v1/message/{row['id']}")
        assert status == 200
        part = value["parts"][0]
        assert "".join(text for text, _ in part["segments"]) == part["text"]
        marks = [(text, w) for text, w in part["segments"] if w is not None]
        assert [w for text, w in marks if text.lower() == spammy] == [round(weight, 3)] * 2, marks[-5:]
        assert all(abs(w) >= 0.5 for _, w in marks) and len(marks) >= 3
        status, tested, _ = admin.request("POST", "/api/v1/test", body=None, headers={})  # no body: refused
        assert status == 400
        conn_headers = {"Content-Type": "application/octet-stream", "X-CSRF-Token": admin.csrf,
                        "Origin": server.base, "Cookie": admin.cookie}
        import http.client

        conn = http.client.HTTPConnection("127.0.0.1", server.ui, timeout=30)
        conn.request("POST", "/api/v1/test", body=raw, headers=conn_headers)
        import json

        tested = json.loads(conn.getresponse().read())
        conn.close()
        assert tested["parts"][0]["segments"] == part["segments"]
    finally:
        server.stop()
