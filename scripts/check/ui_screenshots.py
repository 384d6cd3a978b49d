"""The console's screenshots in docs/ (docs/ui.md, README.md): a server
with ``--ui`` trained on the shipped sample corpus, a few of its messages
checked through the real ``spamc``, then Debian's chromium (playwright,
the system browser: no download) logs in and photographs the history page
and one message's page.

    python scripts/check/ui_screenshots.py [--out docs]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from harness import free_port, wait_port  # noqa: E402
from spamnb.console.auth import hash_password  # noqa: E402


def stored(home, n, timeout=60.0):
    """Wait until the recorder has stored ``n`` records in the history under
    ``home`` (it runs on CPU the checks leave: on a busy machine it lags)."""
    import sqlite3

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in home.rglob("history.sqlite"):
            try:
                with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10) as db:
                    if dict(db.execute("SELECT name, value FROM counters")).get("received", 0) >= n:
                        return
            except sqlite3.Error:
                pass
        time.sleep(0.1)
    raise SystemExit(f"the console's history did not get the {n} checks in {timeout:.0f} s")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(REPO / "docs"))
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="ui-shots-"))
    env = dict(os.environ, PYTHONPATH=str(REPO), SPAMNB_HOME=str(home))
    subprocess.run([sys.executable, "-m", "spamnb", "train", str(REPO / "corpora")], env=env, check=True,
                   capture_output=True)
    (home / "users").write_text(f"admin admin {hash_password('admin-pw')}\n")
    port, ui = free_port(), free_port()
    log = open(home / "serve.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "spamnb", "serve", "-l", f"127.0.0.1:{port}", "--ui", str(ui),
                             "--ui-users", str(home / "users"), "--ui-keep-messages", "100", "--allow-tell",
                             "-w", "1"], env=env, stderr=log, stdout=subprocess.DEVNULL)
    try:
        wait_port(port, proc)
        wait_port(ui, proc)
        samples = sorted((REPO / "corpora" / "spam").iterdir())[:6] + sorted((REPO / "corpora" / "easy_ham").iterdir())[:8]
        for n, path in enumerate(samples):
            subprocess.run(["spamc", "-p", str(port), "-u", ("alice", "bob")[n % 2]], input=path.read_bytes(),
                           capture_output=True, check=False)
        stored(home, len(samples))
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium",
                                        args=["--no-sandbox"] if os.geteuid() == 0 else [])
            page = browser.new_page(viewport={"width": 1200, "height": 760})
            page.goto(f"http://127.0.0.1:{ui}/")
            page.fill("#login-user", "admin")
            page.fill("#login-password", "admin-pw")
            page.click("#login-button")
            page.locator("#history tbody tr").nth(len(samples) - 1).wait_for()
            page.screenshot(path=str(Path(args.out) / "ui-history.png"))
            page.locator("#history tbody tr td.spam").first.click()
            page.wait_for_selector("#buildup")
            page.evaluate("window.scrollTo(0, 0)")
            page.screenshot(path=str(Path(args.out) / "ui-message.png"), full_page=False)
            browser.close()
        print(f"wrote {args.out}/ui-history.png and {args.out}/ui-message.png")
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
