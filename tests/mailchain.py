"""Shared parts of the end-to-end mail tests (tests/test_postfix.py,
tests/test_exim.py): a ``spamnb serve`` on a fixed loopback port (so it can be
stopped and started again where the MTA expects it), a site model and
per-user models (one damaged), the 40 test messages with the verdict each
must get, an SMTP client that retries temporary failures as a sending MTA
does, sockets that fill the server's connection limit, and the reading of
delivered Maildirs."""

import os
import re
import shutil
import signal
import smtplib
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import spamnb
from spamnb.model.spam_filter import SpamFilter

from conftest import REPO, child_pids, wait_for_port

PYTHONPATH = str(Path(spamnb.__file__).resolve().parents[1])
SPAMC = "/usr/bin/spamc" if os.path.exists("/usr/bin/spamc") else shutil.which("spamc")
WRAPPER = REPO / "contrib" / "spamnb-pipe"
DOMAIN = "test.example"
WORD = {"spam": "Yes", "ham": "No", "unsure": "Unsure"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env(home):
    e = dict(os.environ, SPAMNB_HOME=str(home), PYTHONPATH=PYTHONPATH)
    e.pop("SPAMNB_DEBUG", None)
    return e


class Work:
    """A folder other users can read (the MTA's delivery agents run as
    unprivileged users): ``home/model.spamnb`` (the site model, trained on the
    sample corpus), ``users/bob/model.spamnb`` (bob's own model, a copy) and
    ``users/carol/model.spamnb`` (damaged: the file cut short)."""

    def __init__(self):
        self.root = Path(tempfile.mkdtemp(prefix="spamnb-chain-"))
        os.chmod(self.root, 0o755)
        self.home = self.root / "home"
        self.home.mkdir()
        os.chmod(self.home, 0o755)
        subprocess.run([sys.executable, "-m", "spamnb", "train", "-q", str(REPO / "corpora")],
                       env=env(self.home), check=True, capture_output=True, timeout=300)
        self.site = self.home / "model.spamnb"
        self.users = self.root / "users"
        for user in ("bob", "carol"):
            (self.users / user).mkdir(parents=True)
        shutil.copy(self.site, self.users / "bob" / "model.spamnb")
        data = self.site.read_bytes()
        (self.users / "carol" / "model.spamnb").write_bytes(data[: len(data) // 3])

    def replace_site_model(self, source=None):
        """A new site model file put in place by an atomic rename, as `spamnb
        train` does (a new inode): a copy of ``source`` (a model file), by
        default of the site model itself (same labels, so the verdicts stay)."""
        fresh = self.home / "model.spamnb.new"
        shutil.copy(self.site if source is None else source, fresh)
        os.replace(fresh, self.site)

    def flipped_model(self):
        """A model trained on the sample corpus's spam and easy_ham with the
        labels the other way round (made once; its path): put in place, the
        verdicts of :func:`messages` change."""
        path = self.root / "flipped.spamnb"
        if not path.exists():
            subprocess.run([sys.executable, "-m", "spamnb", "train", "-q", "-m", str(path),
                            "--spam", str(REPO / "corpora" / "easy_ham"), "--ham", str(REPO / "corpora" / "spam")],
                           env=env(self.home), check=True, capture_output=True, timeout=300)
        return path

    def cleanup(self):
        shutil.rmtree(self.root, ignore_errors=True)


class Serve:
    """``spamnb serve`` on 127.0.0.1:port, log in a file; stop() and start()
    again on the same port."""

    def __init__(self, work, port=None, *extra):
        self.work = work
        self.extra = [str(a) for a in extra]
        self.proc = None
        for attempt in range(5):
            # a port of our choosing: free when looked at, but another process (a mail server's outgoing
            # connection) may take it before the server binds it; then another one
            self.port = port or free_port()
            self.log_path = work.root / f"serve-{self.port}.log"
            try:
                self.start()
                return
            except RuntimeError as exc:
                if port or attempt == 4 or f"cannot listen on 127.0.0.1:{self.port}: Address already in use" not in str(exc):
                    raise

    def start(self):
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "spamnb", "serve", "-l", f"127.0.0.1:{self.port}", "-m", str(self.work.site),
             "--models-dir", str(self.work.users), *self.extra],
            env=env(self.work.home), stderr=log, stdout=subprocess.DEVNULL)
        log.close()
        if not wait_for_port(self.port, gone=lambda: self.proc.poll() is not None):
            raise RuntimeError(f"spamnb serve did not start: {self.log_text()[-2000:]}")

    def reload(self):
        self.proc.send_signal(signal.SIGHUP)

    def workers(self):
        """The server's child processes' pids (its workers, with --workers)."""
        return child_pids(self.proc.pid)

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def log_text(self):
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


class IdleSockets:
    """``n`` connections to the server that send nothing: they fill its
    ``--max-connections`` until closed."""

    def __init__(self, port, n):
        self.sockets = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(n)]
        time.sleep(0.2)          # accepted (and counted) by the server

    def close(self):
        for s in self.sockets:
            s.close()


def messages(site_model, n=40):
    """``n`` messages of the sample corpus, half spam, half ham, each with a
    ``Message-ID`` of its own and the verdict the site model gives it, chosen
    with a wide margin (|log-odds| >= 20) so the trace headers the MTA adds
    cannot move them; returns [(test id, bytes, label)]."""
    model = SpamFilter.load(site_model)
    chosen = {"spam": [], "ham": []}
    for folder, label in (("spam", "spam"), ("easy_ham", "ham")):
        for path in sorted((REPO / "corpora" / folder).iterdir()):
            if len(chosen[label]) == n // 2:
                break
            raw = path.read_bytes()
            if raw.startswith(b"From "):
                raw = raw.split(b"\n", 1)[1]
            head, sep, body = raw.partition(b"\n\n")
            if not sep or len(raw) > 100_000:
                continue
            tag = f"chain-{label}-{len(chosen[label])}"
            head = re.sub(rb"(?im)^message-id:.*\n?(?:[ \t].*\n?)*", b"", head + b"\n").rstrip(b"\n")
            message = f"Message-ID: <{tag}@{DOMAIN}>\n".encode() + head + b"\n\n" + body
            verdict = model.classify(message)
            if verdict.label == label and abs(verdict.log_odds) >= 20:
                chosen[label].append((tag, message, label))
    out = [m for pair in zip(chosen["spam"], chosen["ham"]) for m in pair]
    assert len(out) == n, [len(v) for v in chosen.values()]
    return out


# Near the cutoffs: (name, low, high) in log-odds from the spam cutoff (``s``) or the ham cutoff (``h``)
# (unsure-edge: so close to the ham cutoff that its score is below 0.1 before spamnb holds an unsure score at 0.1)
HARD_BANDS = (("spam-near", "s", 0.3, 3.0), ("unsure-high", "s", -3.0, -0.3), ("unsure-mid", "m", -1.0, 1.0),
              ("unsure-low", "h", 0.3, 2.0), ("unsure-edge", "h", 0.02, 0.3), ("ham-near", "h", -2.0, -0.3))


def hard_messages(site_model, per_band=1, trace=b""):
    """Messages the site model finds close to a cutoff, ``per_band`` for each
    of :data:`HARD_BANDS`: just over and just under the spam cutoff,
    half-way between the cutoffs, just over and just under the ham cutoff;
    scored as ``trace`` (the fields the MTA puts before the message it
    hands spamnb: :func:`trace_field`) and the message.

    The sample corpus has none of its own (the site model is trained on all
    of it: every message scores beyond +50 or -50), so they are made from
    it: a short header, the words of a corpus ham's body, then the first k
    words of a corpus spam's body; for each (ham, spam) pair in folder
    order, the first k whose log-odds falls in a band still wanted.  The same
    corpus and code give the same messages every run.  Their answer key
    is not the corpus label (they have none) nor the site model's verdict
    here: it is :func:`answer_key` on the bytes as the MTA handed them
    (the trace fields an MTA adds move a score by up to about 2 log-odds;
    the messages carry Date, so Postfix's cleanup adds none).
    Returns [(test id, bytes, band)]."""
    import math

    model = SpamFilter.load(site_model)
    low, high = (math.log(p / (1 - p)) for p in (model.ham_cutoff, model.spam_cutoff))
    centre = {"s": high, "h": low, "m": (low + high) / 2}
    want = {name: per_band for name, *_ in HARD_BANDS}
    out = []

    def words(path):
        body = path.read_bytes().partition(b"\n\n")[2]
        return re.findall(rb"[A-Za-z][A-Za-z']{2,}", body)

    hams = [words(p)[:40] for p in sorted((REPO / "corpora" / "easy_ham").iterdir())[:12]]
    spams = [words(p)[:100] for p in sorted((REPO / "corpora" / "spam").iterdir())[:12]]
    for i, ham in enumerate(hams):
        for j, spam in enumerate(spams):
            for k in range(len(spam) + 1):
                tag = f"chain-hard-{len(out)}"
                message = (f"Message-ID: <{tag}@{DOMAIN}>\nFrom: sender@client.example\nTo: alice@{DOMAIN}\n"
                           f"Subject: a note {i}.{j}.{k}\nDate: Sun, 29 Nov 2026 08:00:00 +0000\n\n").encode() + b" ".join(ham) + b"\n" + b" ".join(spam[:k]) + b"\n"
                odds = model.classify(trace + message).log_odds
                band = next((name for name, at, a, b in HARD_BANDS if want[name] and a <= odds - centre[at] <= b), None)
                if band is not None:
                    want[band] -= 1
                    out.append((tag, message, band))
                    if not any(want.values()):
                        return out
                    break           # the next pair: one message of each
    assert not any(want.values()), want
    return out


class Tap:
    """A relay on loopback between a client and the server at ``port``,
    keeping what the client sent on each connection (:meth:`streams`).
    ``port``: where the client is pointed instead."""

    def __init__(self, port):
        import threading

        self.target = port
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.sent = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        import threading

        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._relay, args=(conn,), daemon=True).start()

    def _relay(self, conn):
        import threading

        sent = bytearray()
        with self.lock:
            self.sent.append(sent)
        try:
            up = socket.create_connection(("127.0.0.1", self.target), timeout=120)
        except OSError:
            conn.close()
            return

        def answers():
            try:
                while chunk := up.recv(65536):
                    conn.sendall(chunk)
                conn.shutdown(socket.SHUT_WR)
            except OSError:
                pass

        back = threading.Thread(target=answers, daemon=True)
        back.start()
        try:
            while chunk := conn.recv(65536):
                with self.lock:
                    sent += chunk
                up.sendall(chunk)
            up.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        back.join(120)
        conn.close()
        up.close()

    def streams(self):
        """What the client sent on each connection so far, bytes."""
        with self.lock:
            return [bytes(s) for s in self.sent]

    def close(self):
        self.sock.close()


class SpamdTap(Tap):
    """A :class:`Tap` between an MTA's SPAMD client (spamc, Exim's ``spam =``)
    and the server at ``port``, keeping a copy of every request as the client
    sent it: the bytes the MTA handed spamnb, on which the answer key of the
    messages near a cutoff is computed (:func:`answer_key`)."""

    def handed(self):
        """{test id: the message of each request whole (Content-length long)}."""
        out = {}
        for request in self.streams():
            head, _, body = request.partition(b"\r\n\r\n")
            length = re.search(rb"(?im)^content-length:[ \t]*(\d+)", head)
            body = body[:int(length.group(1))] if length else body
            if length and len(body) == int(length.group(1)):
                out.setdefault(message_tag(body), []).append(body)
        return out


def trace_field(delivered):
    """The Received field the receiving MTA put on a delivered message (the
    one naming the test's SMTP client), with its line end: what the MTA
    handed spamnb was this field and the message as sent."""
    head = delivered.replace(b"\r\n", b"\n").partition(b"\n\n")[0] + b"\n"
    fields = re.findall(rb"(?im)^received:.*\n(?:[ \t].*\n)*", head)
    ours = [f for f in fields if b"client.example" in f]
    assert len(ours) == 1, fields
    return ours[0]


def answer_key(site_model, handed):
    """The verdicts of ``spamnb classify --json`` (the command line: not the
    server's SPAMD or milter path under test) with the site model, on each
    message of ``handed`` ({key: bytes as the MTA handed them to spamnb,
    without spamnb's own fields}): {key: (label, log-odds)}."""
    import json

    keys = list(handed)
    with tempfile.TemporaryDirectory(prefix="spamnb-key-") as tmp:
        paths = []
        for i, key in enumerate(keys):
            paths.append(Path(tmp) / f"{i:04d}")
            paths[-1].write_bytes(handed[key])
        proc = subprocess.run([sys.executable, "-m", "spamnb", "classify", "--json", "-m", str(site_model),
                               *map(str, paths)], env=env(Path(tmp)), capture_output=True, timeout=300)
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert proc.returncode in (0, 1, 2) and len(lines) == len(keys), (proc.returncode, proc.stderr[-2000:])
    by_path = {line["message"]: (line["verdict"], line["log_odds"]) for line in lines}
    return {key: by_path[str(path)] for key, path in zip(keys, paths)}


def check_hard(site_model, key, bands=True):
    """The answer key of the hard messages covers what they are for: every
    verdict (spam, unsure, ham) and, with ``bands``, a message within 3
    log-odds on each side of the spam cutoff and within 2 on each side of
    the ham cutoff (so a chain that moved them all away fails here rather
    than passing on easy mail)."""
    import math

    model = SpamFilter.load(site_model)
    low, high = (math.log(p / (1 - p)) for p in (model.ham_cutoff, model.spam_cutoff))
    labels = {label for label, _ in key.values()}
    assert labels == {"spam", "unsure", "ham"}, key
    if bands:
        odds = [o for _, o in key.values()]
        for a, b in ((high, high + 3), (high - 3, high), (low, low + 2), (low - 2, low)):
            assert any(a <= o <= b for o in odds), (a, b, sorted(odds))


def send(port, message, recipients, deadline, sender="sender@client.example"):
    """Send as an MTA does: one SMTP transaction to ``127.0.0.1:port``;
    recipients or the message refused with a 4xx code are sent again (a new
    transaction, after a second) until accepted or ``deadline``.  Returns
    {recipient: (code, reply)} of the final answers: 250 accepted, 5xx
    refused for good."""
    pending = list(recipients)
    final = {}
    while pending:
        retry = []
        try:
            with smtplib.SMTP("127.0.0.1", port, timeout=300) as smtp:
                smtp.ehlo("client.example")
                code, reply = smtp.mail(sender)
                assert code == 250, (code, reply)
                accepted = []
                for rcpt in pending:
                    code, reply = smtp.rcpt(rcpt)
                    if code == 250:
                        accepted.append(rcpt)
                    elif 400 <= code < 500:
                        retry.append(rcpt)
                    else:
                        final[rcpt] = (code, reply)
                if accepted:
                    code, reply = smtp.data(message)
                    if 400 <= code < 500:
                        retry += accepted
                    else:
                        final.update({rcpt: (code, reply) for rcpt in accepted})
        except (smtplib.SMTPServerDisconnected, ConnectionError):
            retry = [r for r in pending if r not in final]
        pending = retry
        if pending:
            assert time.monotonic() < deadline, f"still refused for now: {pending}"
            time.sleep(1)
    return final


def read_maildir(folder):
    """Messages delivered into a Maildir (new/ and cur/)."""
    out = []
    for sub in ("new", "cur"):
        if (folder / sub).is_dir():
            out += [p.read_bytes() for p in sorted((folder / sub).iterdir())]
    return out


def header(message, name):
    """Every value of header field ``name`` in the message's header block, unfolded."""
    head = message.replace(b"\r\n", b"\n").partition(b"\n\n")[0].decode(errors="replace")
    return [" ".join(v.split()) for v in
            re.findall(rf"^{re.escape(name)}:[ \t]*(.*(?:\n[ \t].*)*)", head, re.M | re.I)]


def message_tag(message):
    ids = header(message, "Message-ID")
    assert len(ids) == 1, ids
    return ids[0].strip("<>").split("@")[0]


@pytest.fixture
def serving():
    """``serving(work, port, *options)`` starts a :class:`Serve`; every one
    started is stopped at the end of the test, whatever happened."""
    started = []

    def start(*args):
        serve = Serve(*args)
        started.append(serve)
        return serve

    yield start
    for serve in started:
        serve.stop()
