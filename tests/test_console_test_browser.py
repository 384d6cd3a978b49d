"""The console's "Test a message" page in a real browser (Debian's
``chromium`` driven by ``playwright``, as tests/test_console_browser.py):
a pasted message and an uploaded file, each answered with its verdict and
its evidence built up; hostile text in them runs nothing; nothing kept."""

from __future__ import annotations

import random

import pytest

from test_console import Client, ConsoleServer, mail
from test_console_browser import CHROMIUM, PAYLOADS, Detector, expect, log_in  # noqa: F401
from test_console_browser import browser  # noqa: F401 - the fixture

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian package chromium)")]


def test_a_pasted_and_an_uploaded_message_are_tested_and_nothing_is_kept(tmp_path, browser):  # noqa: F811
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
        assert detector.collect() == []
        page.close()
        admin = Client(server)
        admin.login("admin")
        assert admin.request("GET", "/api/v1/history")[1]["rows"] == []        # nothing kept
    finally:
        server.stop()
