"""The web console in a real browser: Debian's ``chromium`` driven by
``playwright`` (pinned in the [test] extra; launched with the system
browser's path, no browser download).  The tests click through login,
history, a message, learn, forget, the model and the audit pages; a
learn clicked in the page changes what ``spamc -c`` answers within a
second on two workers; and hostile mail (payloads in every field a sender
writes: Subject, From and its display name, body, MIME part names,
Message-ID), sent through SPAMD (``spamc``) and the milter (the tests' raw
milter client), runs no script, opens no dialog and trips no
Content-Security-Policy violation on any page, while a deliberately
unescaped control page trips the same detector."""

import base64
import os
import random
import shutil
import time

import pytest

from raw_milter import RawMilter
from test_console import ConsoleServer, mail, wait_rows, words, Client

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian package chromium)")]
playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect
# waits are locators (expect), never page.wait_for_function: its string is evaluated in the page, which
# the console's CSP forbids (no 'unsafe-eval')

# hostile strings: markup, event handlers, script URLs, entity and template tricks (>= 30)
PAYLOADS = [
    "<script>alert(1)</script>", "<img src=x onerror=alert(2)>", "<svg onload=alert(3)>",
    "\"><script>alert(4)</script>", "'><img src=x onerror=alert(5)>", "<iframe src=\"javascript:alert(6)\"></iframe>",
    "<body onload=alert(7)>", "<a href=\"javascript:alert(8)\">click</a>", "<details open ontoggle=alert(9)>",
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(10)>", "<input autofocus onfocus=alert(11)>",
    "<video><source onerror=alert(12)></video>", "<audio src=x onerror=alert(13)>",
    "<object data=\"javascript:alert(14)\">", "<embed src=\"javascript:alert(15)\">",
    "<marquee onstart=alert(16)>x</marquee>", "<style>@import 'http://127.0.0.1:9/x.css';</style>",
    "<link rel=stylesheet href=\"http://127.0.0.1:9/y.css\">",
    "<meta http-equiv=\"refresh\" content=\"0;url=javascript:alert(19)\">",
    "<form><button formaction=javascript:alert(20)>x</button></form>", "<img src=\"x\" onerror=\"xssHit(21)\">",
    "</title><script>xssHit(22)</script>", "</textarea><script>xssHit(23)</script>",
    "<scr<script>ipt>alert(24)</scr</script>ipt>", "<svg><script>xssHit(25)</script></svg>",
    "<img src=x onerror=&#97;&#108;&#101;&#114;&#116;(26)>", "<div style=\"background:url(javascript:alert(27))\">",
    "{{constructor.constructor('alert(28)')()}}", "${alert(29)}", "<base href=\"javascript:alert(30)//\">",
    "<img src=x:x onerror=javascript:xssHit(31)>", "<svg><animate onbegin=alert(32) attributeName=x dur=1s>",
    "javascript:alert(33)", "<noscript><p title=\"</noscript><img src=x onerror=alert(34)>\">",
]
assert len(PAYLOADS) >= 30

DETECTOR = """
window.__hits = [];
document.addEventListener('securitypolicyviolation',
    e => window.__hits.push('csp ' + e.violatedDirective + ' ' + e.blockedURI));
"""


def encoded(text):
    """RFC 2047 form of ``text`` (the console decodes it: the payload reaches the page whole)."""
    return "=?utf-8?b?" + base64.b64encode(text.encode()).decode() + "?="


def hostile(n, payload):
    boundary = f"b{n}"
    name = payload.replace('"', "'")
    return (f"From: \"{name}\" <evil{n}@spam.example>\n"
            f"Reply-To: {encoded(payload)} <r{n}@spam.example>\n"
            f"To: {encoded(payload)} <bob@test.example>\n"
            f"Subject: {payload} {encoded(payload)}\n"
            f"Message-ID: <{payload}@x{n}.example>\n"
            f"MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"{boundary}\"\n\n"
            f"--{boundary}\nContent-Type: text/plain; charset=utf-8\n\n{payload}\nbuy now cheap offer\n"
            f"--{boundary}\nContent-Type: text/html; charset=utf-8\n\n<html><body>{payload}</body></html>\n"
            f"--{boundary}\nContent-Type: application/octet-stream; name=\"{name}\"\n"
            f"Content-Disposition: attachment; filename=\"{name}\"\n\naGVsbG8=\n"
            f"--{boundary}--\n").encode()


class Detector:
    """Counts what a page must never do: run script (``xssHit``), open a
    dialog (alert, confirm, prompt), violate the CSP."""

    def __init__(self, page):
        self.hits = []
        page.expose_function("xssHit", lambda value=None: self.hits.append(f"script {value}"))
        page.on("dialog", lambda dialog: (self.hits.append(f"dialog {dialog.message}"), dialog.dismiss()))
        page.on("console", lambda msg: self.hits.append("console " + msg.text)
                if "Content Security Policy" in msg.text else None)
        page.add_init_script(DETECTOR)
        self.page = page

    def collect(self):
        try:
            self.hits += self.page.evaluate("window.__hits.splice(0)")
        except playwright_api.Error:
            pass
        return self.hits


@pytest.fixture(scope="module")
def browser():
    with playwright_api.sync_playwright() as p:
        args = ["--no-sandbox"] if os.geteuid() == 0 else []
        browser = p.chromium.launch(executable_path=CHROMIUM, args=args)
        yield browser
        browser.close()


def log_in(page, server, name):
    page.goto(server.base + "/")
    page.fill("#login-user", name)
    page.fill("#login-password", name + "-pw")
    page.click("#login-button")
    page.wait_for_selector("#history")


def test_click_through_learn_and_forget_change_what_spamc_answers(tmp_path, browser):
    server = ConsoleServer(tmp_path, workers=2, keep=1000)
    try:
        rng = random.Random(21)
        novel = mail(rng, False, 9600, subject="browser novel words", user_words=words(rng, 80, "zx"))
        assert server.spamc("-c", stdin=novel).returncode == 0
        for n in range(5):
            server.spamc(stdin=mail(rng, n % 2 == 0, 9700 + n))
        wait_rows(_admin(server), 6)
        page = browser.new_page()
        detector = Detector(page)
        log_in(page, server, "trainer")
        assert page.locator("#history tbody tr").count() >= 6
        page.fill("#filter-q", "novel")
        page.click("#filters button")
        expect(page.locator("#history tbody tr")).to_have_count(1)
        page.click("#history tbody tr")
        page.wait_for_selector("#buildup")
        assert page.text_content("#message-subject") == "browser novel words"
        assert page.locator("#buildup circle").count() >= 2 and page.locator("#evidence tr").count() >= 2
        page.click("#learn-spam")
        expect(page.locator("#action-status")).to_contain_text("learned")
        clicked = time.monotonic()
        answers = []
        while time.monotonic() - clicked < 1.0:
            answers.append(server.spamc("-c", stdin=novel).returncode)
        assert answers[-1] == 1 and [server.spamc("-c", stdin=novel).returncode for _ in range(4)] == [1] * 4
        page.click("#forget")
        expect(page.locator("#action-status")).to_contain_text("removed")
        assert server.spamc("-c", stdin=novel).returncode == 0
        page.click("#nav-model")
        page.wait_for_selector("#model-cards")
        page.click("#nav-audit")
        page.wait_for_selector("#audit")
        assert "learn spam" in page.text_content("#actions") and "forget" in page.text_content("#actions")
        page.click("#nav-dashboard")
        page.wait_for_selector("#throughput")
        assert detector.collect() == []
        page.close()
    finally:
        server.stop()


def _admin(server):
    client = Client(server)
    client.login("admin")
    return client


def test_hostile_mail_through_spamd_and_the_milter_runs_nothing_in_the_page(tmp_path, browser):
    server = ConsoleServer(tmp_path, workers=1, keep=1000)
    try:
        for n, payload in enumerate(PAYLOADS):
            assert server.spamc("-u", "bob", stdin=hostile(n, payload)).returncode == 0
            milter = RawMilter(("127.0.0.1", server.milter))
            try:
                milter.negotiate()
                answers = milter.message(hostile(100 + n, payload), recipients=("bob@test.example",))
                assert answers and answers[-1].kind == "c", answers
            finally:
                milter.close()
        admin = _admin(server)
        rows = wait_rows(admin, 2 * len(PAYLOADS))
        assert {row["front"] for row in rows} == {"spamd", "milter"}
        assert any(row["subject"].startswith(PAYLOADS[0]) for row in rows), [r["subject"] for r in rows][:6]
        page = browser.new_page()
        detector = Detector(page)
        log_in(page, server, "admin")
        page.goto(server.base + "/#/history")
        page.wait_for_selector("#history tbody tr")
        assert PAYLOADS[-1] in page.text_content("#history")           # shown as text
        page.goto(server.base + f"/#/history/{rows[49]['id']}")
        expect(page.locator(f"#history tbody tr[data-id='{rows[50]['id']}']")).to_have_count(1)
        for row in rows:
            page.goto(server.base + f"/#/message/{row['id']}")
            expect(page.locator("#facts")).to_contain_text(row["front"])
            expect(page.locator("#message-subject")).to_have_text(row["subject"] or "(no subject)")
            page.wait_for_selector("h3.part")
        assert PAYLOADS[0] in page.text_content("#view")      # the last one visited: the oldest
        for name in ("model", "audit", "dashboard", "cutoffs", "accuracy"):
            page.click(f"#nav-{name}")
            page.wait_for_load_state()
        page.click("#nav-model")
        for payload in PAYLOADS[:8]:        # the word query echoes what it is given, tokens come from mail
            page.fill("#word-q", payload)
            page.click("#word-button")
            expect(page.locator("#word-result")).to_contain_text(payload if "<" not in payload[:1] else "")
        page.goto(server.base + "/#/cutoffs/spam=%3Cscript%3Ealert(1)%3C%2Fscript%3E&ham=-4")
        expect(page.locator("#view .error")).to_contain_text("numbers")
        page.wait_for_timeout(300)       # a handler that would fire late (onload, ontoggle, animations)
        assert detector.collect() == [], detector.hits[:5]
        # the control: the same payloads put into the page unescaped trip the same detector, with the
        # console's CSP (violations) and without it (script runs, dialogs)
        from spamnb.console.http import CSP

        control = "".join(f"<div>{payload}</div>" for payload in PAYLOADS)
        for headers, what in (({"Content-Security-Policy": CSP}, "csp"), ({}, "script")):
            page.route(server.base + "/control", lambda route: route.fulfill(
                status=200, headers={"Content-Type": "text/html", **headers}, body=control))
            page.goto(server.base + "/control")
            page.wait_for_timeout(500)
            hits = detector.collect()
            assert any(hit.startswith(what) or (what == "script" and hit.startswith("dialog")) for hit in hits), hits
            detector.hits.clear()
            page.unroute(server.base + "/control")
        page.close()
    finally:
        server.stop()


def test_the_word_cutoff_and_accuracy_pages_and_the_dashboards_charts(tmp_path, browser):
    """The word query on the model page shows a token's counts and weight;
    the cutoffs page shows what the model's cutoffs and a pair typed in do
    on the recorded and corrected rows, with its histogram; the accuracy page
    counts a correction clicked in the page; the dashboard draws the unsure
    rate and the latency over time; nothing trips the detector."""
    from spamnb.model.spam_filter import SpamFilter

    server = ConsoleServer(tmp_path, workers=1, keep=100)
    try:
        rng = random.Random(31)
        for n in range(8):
            server.spamc(stdin=mail(rng, n % 2 == 0, 9800 + n))
        rows = wait_rows(_admin(server), 8)
        page = browser.new_page()
        detector = Detector(page)
        log_in(page, server, "trainer")
        (token, weight, _ham, _spam), = SpamFilter.load(server.home / "model.spamnb").strongest_tokens(1)[0]
        page.click("#nav-model")
        page.fill("#word-q", token)
        page.click("#word-button")
        expect(page.locator("#word-table")).to_contain_text(f"{weight:.3f}")
        page.fill("#word-q", "zzqqxxnotaword")
        page.click("#word-button")
        expect(page.locator("#word-unknown")).to_contain_text("not in the model")
        server.spamc(stdin=mail(rng, False, 9900, subject="marked words", user_words=f"{token} x {token}"))
        marked_row, = wait_rows(_admin(server), 1, q="marked")
        page.goto(server.base + f"/#/message/{marked_row['id']}")
        marks = page.locator("pre.marked mark.spamtok")   # the words the model knows, marked where they stand
        expect(marks.filter(has_text=token)).to_have_count(2)
        assert marks.first.get_attribute("title").endswith(f"{weight:.3f}") or marks.count() > 2
        spam_row = next(r for r in rows if r["label"] == "spam")
        page.goto(server.base + f"/#/message/{spam_row['id']}")
        page.click("#learn-ham")
        expect(page.locator("#action-status")).to_contain_text("learned")
        page.click("#nav-cutoffs")
        expect(page.locator("#cutoff-result")).to_contain_text("recorded verdicts")
        expect(page.locator("#cutoff-errors")).to_contain_text("call 1 ham spam")
        assert page.locator("#cutoff-chart rect").count() >= 2
        page.fill("#cut-spam", "1000")
        page.fill("#cut-ham", "-1000")
        page.click("#cut-button")
        expect(page.locator("#cutoff-errors")).to_contain_text("call 0 ham spam")
        page.click("#nav-accuracy")
        expect(page.locator("#accuracy")).to_contain_text("1")
        assert page.locator("#accuracy-chart polyline").count() == 1
        page.click("#nav-dashboard")
        page.wait_for_selector("#unsure-chart")
        assert page.locator("#latency-chart circle").count() >= 1
        assert detector.collect() == []
        page.close()
    finally:
        server.stop()
