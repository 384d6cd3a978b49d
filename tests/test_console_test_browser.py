"""The console's "Test a message" page in a real browser (Debian's
``chromium`` driven by ``playwright``, as tests/test_console_browser.py):
a pasted message and an uploaded file, each answered with its verdict and
its evidence built up, nothing kept; an mbox learned by a trainer ("Learn
an upload"), each message's result shown; hostile text runs nothing."""

from __future__ import annotations

import random

import pytest

from test_console import Client, ConsoleServer, mail, words
from test_console_browser import CHROMIUM, PAYLOADS, Detector, expect, log_in  # noqa: F401
from test_console_browser import browser  # noqa: F401 - the fixture

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian package chromium)")]


def test_a_pasted_and_an_uploaded_message_are_tested_and_an_mbox_learned(tmp_path, browser):  # noqa: F811
    server = ConsoleServer(tmp_path, workers=1)
    try:
        rng = random.Random(31)
        hostile = " ".join(PAYLOADS)
        pasted = mail(rng, True, 9900, subject="pasted " + PAYLOADS[0], user_words=hostile).decode()
        page = browser.new_page()
        detector = Detector(page)
        log_in(page, server, "viewer")
        page.click("#nav-test")
        page.wait_for_selector("#test-text")
        page.fill("#test-text", pasted)
        page.click("#test-run")
        expect(page.locator("#test-facts")).to_contain_text("(score")      # hostile words: spam or unsure
        assert "pasted <script>alert(1)</script>" in page.text_content("#test-facts")     # shown as text
        assert page.locator("#buildup circle").count() >= 2 and page.locator("#evidence tr").count() >= 2
        uploaded = tmp_path / "upload.eml"
        uploaded.write_bytes(mail(rng, False, 9901, subject="uploaded ham"))
        page.set_input_files("#test-file", str(uploaded))
        page.click("#test-run")
        expect(page.locator("#test-facts")).to_contain_text("uploaded ham")
        expect(page.locator("#test-facts")).to_contain_text("(score")
        expect(page.locator("#nav-learn")).to_be_hidden()        # a viewer learns nothing
        assert detector.collect() == []
        page.close()
        admin = Client(server)
        admin.login("admin")
        assert admin.request("GET", "/api/v1/history")[1]["rows"] == []        # nothing kept
        # a trainer learns an mbox: each message's result shown
        novel = [mail(rng, False, 9910 + n, subject=f"mbox {n} {PAYLOADS[n]}", user_words=words(rng, 80, "qx"))
                 for n in range(2)]
        assert [server.spamc("-c", stdin=m).returncode for m in novel] == [0, 0]
        box = tmp_path / "upload.mbox"
        box.write_bytes(b"".join(b"From a@example.org Sun Nov 29 09:00:00 2026\n" + m + b"\n" for m in novel))
        page = browser.new_page()
        detector = Detector(page)
        log_in(page, server, "trainer")
        page.click("#nav-learn")
        page.set_input_files("#learn-file", str(box))
        page.select_option("#learn-label", "spam")
        page.click("#learn-run")
        expect(page.locator("#learn-results tr")).to_have_count(3)
        assert page.text_content("#learn-results").count("learned") == 2
        assert "mbox 0 <script>alert(1)</script>" in page.text_content("#learn-results")
        assert [server.spamc("-c", stdin=m).returncode for m in novel] == [1, 1]
        assert detector.collect() == []
        page.close()
    finally:
        server.stop()
