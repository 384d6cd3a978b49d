"""The console's routes: the page (static files shipped with the package),
its JSON API under ``/api/v1/`` (docs/ui.md lists it), the checks every
request passes (Host, session, role, and for every POST the CSRF token and
the Origin / Sec-Fetch-Site of a same-origin request).

Mail text is data here, never markup: the API returns it as JSON strings,
the page puts it in the document with ``textContent`` only, and the
Content-Security-Policy forbids any script but the console's own file."""

from __future__ import annotations

import asyncio
import hmac
import json
import math
import re
import time
from concurrent.futures import ThreadPoolExecutor
from importlib import resources

from spamnb.console.auth import ROLES, LoginLimiter, Sessions
from spamnb.console.http import STYLE, Response

__all__ = ["Console", "STATIC", "boot_block", "history_table"]

STATIC = {"/": ("index.html", "text/html; charset=utf-8"),
          "/static/app.js": ("app.js", "text/javascript; charset=utf-8"),
          "/static/app.css": ("app.css", "text/css; charset=utf-8")}
COOKIE = "spamnb_session"
TEXT_CHARS = 64 * 1024      # the text of a message part shown, at most
PARTS = 50                  # message parts listed, at most
LEDGERS = 8                 # models whose ledger is kept read


def _json(status, value, headers=()):
    return Response(status, json.dumps(value, separators=(",", ":"), allow_nan=False).encode(),
                    headers=list(headers))


def _error(status, text):
    return _json(status, {"error": text})


def _logit(p):
    if p is None:
        return None
    p = min(max(float(p), 1e-300), 1 - 1e-16)
    return math.log(p) - math.log1p(-p)


class Console:
    """The console's application: ``history`` (spamnb.console.history.History),
    ``users`` (spamnb.console.auth.Users), ``server`` (the spamnb.server.daemon.Server
    the console was forked with: its settings, models and TELL), ``log``."""

    def __init__(self, history, users, server, log, hosts=(), origin=None):
        self.history, self.users, self.server, self.log = history, users, server, log
        self.sessions = Sessions()
        self.limiter = LoginLimiter()
        self.hosts = {h.lower() for h in hosts}
        self.origin = origin
        self.hasher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="spamnb-ui-login")
        self.static = {}
        self.ledgers = {}
        self.weights = {}           # the model's token weights, for the marks of a message's text (one model kept)
        folder = resources.files("spamnb.console") / "static"
        for path, (name, kind) in STATIC.items():
            self.static[path] = ((folder / name).read_bytes(), kind)
        # the script and style sheet named by their content's digest in the page: a browser keeps them
        # (immutable) and a navigation costs the page and its API calls only; a new version has a new name
        import hashlib

        page = self.static["/"][0]
        for path in ("/static/app.js", "/static/app.css"):
            digest = hashlib.sha256(self.static[path][0]).hexdigest()[:16]
            page = page.replace(f'"{path}"'.encode(), f'"{path}?v={digest}"'.encode())
        # the style sheet inline (the CSP allows its text by its hash): nothing for the first paint to wait for
        page = re.sub(rb'<link rel="stylesheet" href="/static/app\.css[^"]*">',
                      lambda _: b"<style>" + STYLE.encode() + b"</style>", page, count=1)
        self.static["/"] = (page, self.static["/"][1])

    def reload_users(self):
        """SIGHUP: read ``--ui-users`` again; a file that cannot be used keeps
        the users as they were (one log line).  A session whose user is gone
        or has another role now ends."""
        from spamnb.console.auth import Users
        from spamnb.errors import SettingsError

        path = self.server.settings.ui_users
        try:
            users = Users(path)
        except SettingsError as exc:
            self.log(f"console: SIGHUP: users not reloaded (the old ones kept): {exc}")
            return
        self.users = users
        ended = self.sessions.keep(lambda user, role: users.role(user) == role)
        self.log(f"console: SIGHUP: {len(users.users)} user(s) read from {path}; {ended} session(s) ended")

    # ------------------------------------------------------------------ checks
    def _host_ok(self, request):
        host = request.headers.get("host", "")
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        return not self.hosts or name.lower() in self.hosts

    def _same_origin(self, request):
        """A POST from the console's own page: its Origin is the console's (or
        absent, and Sec-Fetch-Site says same-origin or is absent: an old client)."""
        origin = request.headers.get("origin")
        site = request.headers.get("sec-fetch-site")
        if site is not None and site not in ("same-origin", "none"):
            return False
        if origin is None:
            return True
        scheme = "https" if request.tls else "http"
        own = self.origin or f"{scheme}://{request.headers.get('host', '')}"
        return origin == own

    def _session(self, request):
        return self.sessions.get(request.cookie(COOKIE))

    # ------------------------------------------------------------------ dispatch
    async def __call__(self, request):
        if not self._host_ok(request):
            return _error(400, "unknown host")
        if request.method == "GET" and request.path == "/":
            return self.front_page(request)
        if request.method == "GET" and request.path in self.static:
            body, kind = self.static[request.path]
            versioned = request.path != "/" and request.arg("v")
            return Response(200, body, kind, [("Cache-Control", "public, max-age=31536000, immutable" if versioned
                                               else "no-cache")])
        if not request.path.startswith("/api/v1/"):
            return _error(404, "not found")
        route = request.path[len("/api/v1/"):].strip("/").split("/")
        if request.method == "POST":
            if not self._same_origin(request):
                self.log(f"console: refused a POST from origin {request.headers.get('origin', '-')[:100]!r} "
                         f"from {request.peer}")
                return _error(403, "cross-origin request refused")
            if route == ["login"]:
                return await self.login(request)
        elif request.method != "GET":
            return _error(405, "method not allowed")
        session = self._session(request)
        if session is None:
            return _error(401, "log in first")
        user, role, csrf, _ = session
        if request.method == "POST" and not hmac.compare_digest(
                request.headers.get("x-csrf-token", "").encode("latin-1"), csrf.encode()):
            return _error(403, "CSRF token missing or wrong")
        rights = ROLES[role]
        own = None if "read_all" in rights else user
        key = (request.method, route[0] if route else "")
        if key == ("GET", "session"):
            return _json(200, {"user": user, "role": role, "csrf": csrf})
        if key == ("POST", "logout"):
            self.sessions.close(request.cookie(COOKIE))
            return _json(200, {"ok": True}, [("Set-Cookie", self._cookie("", request, 0))])
        if key == ("GET", "history"):
            return self.page(request, own)
        if key == ("GET", "message") and len(route) == 2:
            return self.message(route[1], own)
        if key == ("POST", "message") and len(route) == 3 and route[2] in ("learn", "forget"):
            if "learn" not in rights:
                return _error(403, "your role cannot teach the model")
            return await self.teach(request, route[1], route[2], own, user)
        if key == ("POST", "learn-upload") and len(route) == 1:
            if "learn" not in rights or "read_all" not in rights:
                return _error(403, "trainers and admins only")
            return await self.learn_upload(request, user)
        if key == ("POST", "test") and len(route) == 1:
            return await self.test(request, own)
        if key == ("GET", "model"):
            return self.model()
        if key == ("GET", "word"):
            return self.word(request, own)
        if key == ("GET", "cutoffs"):
            return self.cutoffs(request, own)
        if key == ("GET", "accuracy"):
            return self.accuracy(request, own)
        if key == ("GET", "audit"):
            return self.audit(own)
        if key == ("GET", "actions"):
            if "admin" not in rights:
                return _error(403, "admins only")
            return _json(200, {"actions": self.history.actions()})
        if key == ("GET", "stats"):
            return self.stats(request, own)
        return _error(404, "not found")

    # ------------------------------------------------------------------ the page
    def front_page(self, request):
        """The page; for a logged-in browser with the session and the first
        history page in it (:func:`boot_block`), so the rows are shown
        without a request more: a data block, never run (the CSP holds), its
        JSON unable to end the block; never stored by a cache (``no-store``:
        it holds the session's CSRF token)."""
        page, kind = self.static["/"]
        session = self._session(request)
        if session is None:
            return Response(200, page, kind, [("Cache-Control", "no-cache")])
        user, role, csrf, _ = session
        own = None if "read_all" in ROLES[role] else user
        rows = self.history.page(user=own, limit=50)
        boot = {"session": {"user": user, "role": role, "csrf": csrf},
                "history": {"path": "history?limit=50", "rows": rows, "next": rows[-1]["id"] if rows else None,
                            "dropped": self.history.counters().get("dropped", 0)}}
        page = page.replace(b'<section id="view"></section>', b'<section id="view">' + history_table(rows) + b"</section>", 1)
        # the data block before the script's tag (async: it may run as soon as it is read, the block there)
        return Response(200, page.replace(b"</main>", b"</main>\n" + boot_block(boot), 1), kind,
                        [("Cache-Control", "no-store")])

    # ------------------------------------------------------------------ login
    def _cookie(self, token, request, age=None):
        secure = request.tls or (self.origin or "").startswith("https:")
        return (f"{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict" + ("; Secure" if secure else "")
                + (f"; Max-Age={age}" if age is not None else ""))

    async def login(self, request):
        peer = request.peer
        if self.limiter.blocked(peer):
            self.log(f"console: login refused from {peer}: too many failed logins")
            return _error(429, "too many failed logins: wait a minute")
        try:
            given = json.loads(request.body or b"{}")
            name, password = str(given["user"])[:64], str(given["password"])[:1024]
        except (ValueError, KeyError, TypeError):
            return _error(400, "expected {\"user\": ..., \"password\": ...}")
        role = await asyncio.get_running_loop().run_in_executor(self.hasher, self.users.check, name, password)
        if role is None:
            self.limiter.failed(peer)
            shown = "".join(c if c.isalnum() or c in "._@+-" else "?" for c in name)
            self.log(f"console: login failed for user={shown} from {peer}")
            return _error(401, "wrong user name or password")
        token, csrf = self.sessions.open(name, role)
        self.history.action(name, "login", None, "ok")
        return _json(200, {"user": name, "role": role, "csrf": csrf}, [("Set-Cookie", self._cookie(token, request))])

    # ------------------------------------------------------------------ reading
    def page(self, request, own):
        try:
            rows = self.history.page(user=own, label=request.arg("label") or None, front=request.arg("front") or None,
                                     query=(request.arg("q") or "")[:200] or None, before=request.arg("before"),
                                     limit=int(request.arg("limit", 50)))
        except ValueError:
            return _error(400, "bad filter")
        # the checks not recorded (the record queues were full: the machine was overloaded): the page says so
        dropped = self.history.counters().get("dropped", 0)
        return _json(200, {"rows": rows, "next": rows[-1]["id"] if rows else None, "dropped": dropped})

    def _row(self, record, own):
        try:
            row = self.history.get(int(record))
        except ValueError:
            return None
        if row is None or (own is not None and row["user"] != own):
            return None     # another user's row is as absent as a missing one
        return row

    def message(self, record, own):
        row = self._row(record, own)
        if row is None:
            return _error(404, "no such record")
        header = row.pop("header")
        cutoffs = row["cutoffs"] or [None, None]
        row["cutoffs_log_odds"] = [_logit(cutoffs[0]), _logit(cutoffs[1])]
        # the header block is stored with a kept message only (--ui-keep-messages); else the fields recorded
        row["headers"] = _headers(header) if header else [
            [name, row[key]] for name, key in (("From", "sender"), ("To", "recipients"), ("Subject", "subject"),
                                               ("Message-ID", "message_id")) if row.get(key)]
        data = self.history.message(row["id"])
        row["kept"] = data is not None
        row["parts"] = _parts(data) if data is not None else []
        if row["parts"]:
            self._mark_parts(row["parts"], row["user"])
        row["ledger"] = self._ledger_state(data, row["user"]) if data is not None else None
        row["evidence_from"] = "check" if row["evidence"] else None
        if not row["evidence"] and data is not None:
            # a CHECK (spamc -c) is answered without its tokens: the kept message checked again, now
            row["evidence"], row["evidence_from"] = self._recheck(data, row["user"]), "re-check"
        return _json(200, row)

    def _recheck(self, data, user):
        """The strongest tokens of ``data`` for ``user``'s model as it is now."""
        from spamnb.console.records import EVIDENCE
        from spamnb.server.models import classify

        try:
            verdict = classify(self._filter_for(user), data, True)
        except Exception:  # noqa: BLE001 - no usable model: no evidence
            return []
        return [[str(token), round(float(weight), 4)] for token, weight in list(verdict.evidence)[:EVIDENCE]]

    def _filter_for(self, user):
        settings = self.server.settings
        path = self.server.handler.model_path(user or None)[0]
        return self.server.models.get(path, settings.required_score)[0]

    def _mark_parts(self, parts, user):
        """Each text part's words at their positions with their weight in
        ``user``'s model (:func:`segments`)."""
        try:
            spam_filter = self._filter_for(user)
        except Exception:  # noqa: BLE001 - no usable model: the parts unmarked
            return
        mark_parts(parts, spam_filter, self.weights)

    def _ledger(self, user):
        """The ledger of ``user``'s model as its file and journal are now (the
        models the server checks with are loaded without it), cached per model
        until the file or its journal changes; at most :data:`LEDGERS` kept."""
        import os

        from spamnb.estimator.ledger_table import ledger_of
        from spamnb.model.spam_filter import SpamFilter
        from spamnb.server.models import journal_signature

        path = self.server.handler.model_path(user or None)[0]
        st = os.stat(path)
        key = (st.st_ino, st.st_size, st.st_mtime_ns, journal_signature(path))
        cached = self.ledgers.get(path)
        if cached is None or cached[0] != key:
            while len(self.ledgers) >= LEDGERS:
                self.ledgers.pop(next(iter(self.ledgers)))
            cached = self.ledgers[path] = (key, ledger_of(SpamFilter.load(path, mapped=True)))
        return cached[1]

    def _ledger_state(self, data, user):
        from spamnb.estimator.ledger import canonical, known_digest

        try:
            ledger = self._ledger(user)
        except Exception:  # noqa: BLE001 - no model: no ledger state
            return None
        digest = known_digest(ledger, canonical(data, subject_tag=self.server.settings.subject_tag))
        label = ledger.label(digest)
        if label is None:
            return "not learned"
        return ("auto-learned " if ledger.is_auto(digest) else "learned ") + ("spam" if label else "ham")

    def model(self):
        spam_filter = self._filter_for(None)
        ham, spam = spam_filter.class_count_
        cutoffs = spam_filter.cutoffs
        spammy, hammy = spam_filter.strongest_tokens(20)
        return _json(200, {
            "model": str(self.server.settings.model), "messages": {"spam": float(spam), "ham": float(ham)},
            "ledger": len(self._ledger(None)), "vocabulary": int(spam_filter.vocabulary_.n_features),
            "cutoffs": {"spam": float(cutoffs.spam), "ham": float(cutoffs.ham),
                        "spam_log_odds": _logit(cutoffs.spam), "ham_log_odds": _logit(cutoffs.ham)},
            "spam_tokens": [[str(t), float(w), float(h), float(s)] for t, w, h, s in spammy],
            "ham_tokens": [[str(t), float(w), float(h), float(s)] for t, w, h, s in hammy]})

    def word(self, request, own):
        """``GET word?w=TOKEN``: the token's counts in each class and its
        weight (log theta_spam - log theta_ham, as the model page's strongest
        tokens) in the model the user's mail is checked with; the token as
        given and in lower case (the tokenizer folds most words)."""
        from spamnb.mail.tokenizer import hash_token

        given = (request.arg("w") or "").strip()[:WORD_CHARS]
        if not given:
            return _error(400, "expected ?w=TOKEN")
        spam_filter = self._filter_for(own)
        candidates = list(dict.fromkeys((given, given.lower())))
        import array

        indices = spam_filter.vocabulary_.lookup(array.array("Q", [hash_token(t) for t in candidates]))
        found = [(token, int(i)) for token, i in zip(candidates, indices) if i >= 0]
        out = {"token": given, "known": bool(found), "tokens": []}
        if found:
            import numpy as np

            counts = spam_filter.sized_counts()
            fc = counts.matrix()
            log_count, log_norm, _ = counts.derived()
            log_count = np.frombuffer(log_count, dtype=np.float64).reshape(fc.shape)
            for token, i in found:
                weight = float((log_count[1, i] - log_norm[1]) - (log_count[0, i] - log_norm[0]))
                out["tokens"].append({"token": token, "ham": float(fc[0, i]), "spam": float(fc[1, i]),
                                      "weight": weight})
        ham, spam = spam_filter.class_count_
        out["messages"] = {"ham": float(ham), "spam": float(spam)}
        return _json(200, out)

    def cutoffs(self, request, own):
        """``GET cutoffs?spam=&ham=`` (log-odds; the model's own when not
        given): what those cutoffs would do on the recorded mail (each row's
        log-odds as checked) and on the corrected mail (the rows learned from
        the console: their label is known), against what the recorded
        verdicts did; and a histogram of the recorded log-odds."""
        spam_filter = self._filter_for(own)
        current = spam_filter.cutoffs
        now = [_logit(current.spam), _logit(current.ham)]
        try:
            spam_cut = float(request.arg("spam", now[0]))
            ham_cut = float(request.arg("ham", now[1]))
        except ValueError:
            return _error(400, "cutoffs are numbers (log-odds)")
        if not (math.isfinite(spam_cut) and math.isfinite(ham_cut)) or ham_cut > spam_cut:
            return _error(400, "expected finite log-odds with ham <= spam")
        out = self.history.cutoff_effect(spam_cut, ham_cut, own)
        out.update(current=now, spam=spam_cut, ham=ham_cut)
        return _json(200, out)

    def accuracy(self, request, own):
        """``GET accuracy?days=``: per time slice, the checks and the ones a
        user corrected in the console (learned as the other label: missed
        spam, false positives), from the history."""
        try:
            days = max(1.0, min(float(request.arg("days", 30)), 3650.0))
        except ValueError:
            return _error(400, "bad days")
        return _json(200, self.history.accuracy(time.time() - days * 86400.0, own))

    def audit(self, own):
        """The kept messages of the latest rows and what the ledger says of them
        (auto-learned first), with the console's own actions."""
        rows = self.history.page(user=own, limit=200)
        out = []
        for row in rows:
            data = self.history.message(row["id"])
            if data is None:
                continue
            state = self._ledger_state(data, row["user"])
            if state and state != "not learned":
                out.append({**row, "ledger": state})
        out.sort(key=lambda r: not r["ledger"].startswith("auto"))
        return _json(200, {"rows": out, "actions": self.history.actions(50) if own is None else []})

    def stats(self, request, own):
        try:
            minutes = max(1, min(int(request.arg("minutes", 60)), 7 * 24 * 60))
        except ValueError:
            return _error(400, "bad minutes")
        out = self.history.stats(time.time() - minutes * 60, own)
        counters = self.history.counters()
        out["received"], out["dropped"] = counters.get("received", 0), counters.get("dropped", 0)
        out["spooled"] = counters.get("spooled", 0)     # of the received, read from the workers' spools
        return _json(200, out)

    # ------------------------------------------------------------------ testing a message
    def upload_limit(self, path):
        """The largest body a POST to ``path`` may have (spamnb.console.http):
        a message tested or learned may be as large as a check's
        (``--max-size``); None for every other path (the default bound)."""
        return self.server.settings.max_size if path in UPLOADS else None

    async def test(self, request, own):
        """``POST test``: the message in the body (raw, as pasted or
        uploaded) checked with the model the user's mail is checked with (the
        user role's own model, else the site model), and nothing kept: no
        history row, no record, no verdict hook (auto-learn never sees it).
        The answer has the message page's fields."""
        from spamnb.errors import ModelUnavailable

        data = request.body
        if not data.strip():
            return _error(400, "no message: paste one, or choose a file")
        handler = self.server.handler
        paths = handler.model_path(own or None)
        try:
            await self.server.models.first_load(paths[0], self.server.settings.required_score)
            spam_filter, score_map, note = handler.verdict_model(paths)
            verdict = classify_message(spam_filter, data)
        except ModelUnavailable as exc:
            return _error(409, f"no usable model: {exc.text}")
        return _json(200, verdict_view(data, verdict, spam_filter, score_map, own or "", note.strip(), self.weights))

    # ------------------------------------------------------------------ teaching
    async def learn_upload(self, request, who):
        """``POST learn-upload?label=spam|ham``: the body an .eml or an mbox;
        each message learned into the site model through TELL, as a click on
        a row is (its ledger and journal entries, a relabel when the ledger
        had the other label), and audited; at most :data:`UPLOAD_MESSAGES`
        (more: refused before any is learned).  The answer has each
        message's subject and result."""
        from spamnb.server.protocol import ProtocolError
        from spamnb.server.tell import Lesson

        label = request.arg("label")
        if label not in ("spam", "ham"):
            return _error(400, "expected ?label=spam or ?label=ham")
        messages = split_upload(request.body, UPLOAD_MESSAGES + 1)
        if not messages:
            return _error(400, "no message: choose an .eml or an mbox file")
        if len(messages) > UPLOAD_MESSAGES:
            return _error(400, f"more than {UPLOAD_MESSAGES} messages: split the mbox (nothing was learned)")
        from spamnb.console.history import fields_of
        from spamnb.console.records import header_block

        out = []
        for number, data in enumerate(messages, 1):
            subject = fields_of(header_block(data))[2]
            try:
                told = await self.server.handler.tell(Lesson(data, None, label == "spam", True, False))
                result = (("learned" if told.learned else "") + (" removed" if told.removed else "")
                          or told.note or "no change").strip()
            except ProtocolError as exc:
                result = f"refused: {exc.text}"
            self.history.action(who, f"learn {label} (upload, message {number} of {len(messages)})", None,
                                f"{result}: {subject[:200]}")
            out.append({"n": number, "subject": subject, "size": len(data), "result": result})
        return _json(200, {"label": label, "messages": out})

    async def teach(self, request, record, verb, own, who):
        from spamnb.server.protocol import ProtocolError
        from spamnb.server.tell import Lesson

        row = self._row(record, own)
        if row is None:
            return _error(404, "no such record")
        data = self.history.message(row["id"])
        if data is None:
            return _error(409, "the message was not kept (spamnb serve --ui-keep-messages): nothing to learn from")
        if verb == "learn":
            try:
                label = json.loads(request.body or b"{}").get("label")
            except (ValueError, AttributeError):
                label = None
            if label not in ("spam", "ham"):
                return _error(400, "expected {\"label\": \"spam\" or \"ham\"}")
            lesson = Lesson(data, row["user"] or None, label == "spam", True, False)
        else:
            label = None
            lesson = Lesson(data, row["user"] or None, None, False, True)
        try:
            told = await self.server.handler.tell(lesson)
        except ProtocolError as exc:
            self.history.action(who, f"{verb} {label or ''}".strip(), row["id"], f"refused: {exc.text}")
            return _error(403 if exc.code in (77,) else 409, exc.text)
        result = ("learned" if told.learned else "") + (" removed" if told.removed else "") or told.note or "no change"
        self.history.action(who, f"{verb} {label or ''}".strip(), row["id"], result.strip())
        self.history.mark(row["id"], f"{label} by {who}" if verb == "learn" else f"forgotten by {who}")
        return _json(200, {"result": result.strip(), "ledger": self._ledger_state(data, row["user"])})


WORD_CHARS = 200            # a word query's token, at most
UPLOADS = frozenset(("/api/v1/test", "/api/v1/learn-upload"))
UPLOAD_MESSAGES = 200       # messages of an uploaded mbox learned, at most (more: refused whole)     # the paths a message is posted to whole (upload_limit)


HISTORY_COLUMNS = ("time", "verdict", "score", "user", "from", "subject", "front end", "action", "ms")


def history_table(rows):
    """The first history page as the page's script draws it (app.js,
    ``history``), in HTML: shown as soon as the page is parsed, before the
    script runs (which draws it again, with its links and filters).  Every
    text escaped (``html.escape``: ``<``, ``>``, ``&`` and both quotes): mail
    is text here too."""
    from html import escape

    out = ['<h1>History</h1><table id="history"><thead><tr>',
           *(f"<th>{name}</th>" for name in HISTORY_COLUMNS), "</tr></thead><tbody>"]
    for n, row in enumerate(rows):
        label = escape(str(row.get("label") or ""))
        cells = (time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(float(row.get("t") or 0))),
                 _fixed(row.get("score"), 1), row.get("user"), row.get("sender"))
        last = ' elementtiming="history-rows"' if n == len(rows) - 1 else ""
        out.append(f'<tr class="row" data-id="{int(row["id"])}"><td{last}>{escape(cells[0])}</td>'
                   f'<td class="{label}">{label}{" *" if row.get("learned") else ""}</td>'
                   + "".join(f"<td>{escape(str(value or ''))}</td>" for value in cells[1:])
                   + f'<td class="subject">{escape(str(row.get("subject") or ""))}</td>'
                   + "".join(f"<td>{escape(str(row.get(key) or ''))}</td>" for key in ("front", "action"))
                   + f"<td>{_fixed(row.get('ms'), 2)}</td></tr>")
    out.append("</tbody></table>")
    return "".join(out).encode()


def _fixed(value, digits):
    return "" if value is None else f"{float(value):.{digits}f}"


def boot_block(value):
    """``value`` as a JSON data block for the page (``<script
    type="application/json" id="boot">``: data, never run): ``<``, ``>``
    and ``&`` written as JSON escapes, so no text of a mail can end the
    block or open a comment in it."""
    text = json.dumps(value, separators=(",", ":"), allow_nan=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return b'<script type="application/json" id="boot">' + text.encode() + b"</script>"


def split_upload(data, limit):
    """The messages of an upload: an mbox (it starts with a ``From `` line:
    split at each ``From `` line that follows an empty line or starts the
    file, that line dropped, ``>From `` unquoted as mboxrd writes it), else
    one message (an .eml); at most ``limit`` (the caller refuses more)."""
    import re

    data = data.lstrip(b"\r\n")
    if not data.strip():
        return []
    if not data.startswith(b"From "):
        return [data]
    out = []
    for chunk in re.split(rb"(?:^|\r?\n\r?\n)From [^\n]*\n", data):
        if len(out) >= limit:
            break
        if chunk.strip():
            out.append(re.sub(rb"(?m)^>(>*From )", rb"\1", chunk) + b"\n")
    return out


def classify_message(spam_filter, data):
    from spamnb.server.models import classify

    return classify(spam_filter, data, True)


def verdict_view(data, verdict, spam_filter, score_map, user, note="", weights=None):
    """A message checked now, in the fields of the message page (``GET
    message/ID``): its verdict, evidence, cutoffs, header fields and parts
    (marked: :func:`mark_parts`; ``weights``, its cache of the model's weights)."""
    from spamnb.console.history import fields_of
    from spamnb.console.records import EVIDENCE, header_block

    header = header_block(data)
    sender, recipients, subject, message_id = fields_of(header)
    cutoffs = getattr(spam_filter, "cutoffs", None)
    pair = [float(cutoffs.spam), float(cutoffs.ham)] if cutoffs is not None else [None, None]
    return {"label": verdict.label, "score": round(float(score_map.score(verdict.log_odds, verdict.label)), 3),
            "required": score_map.required, "log_odds": float(verdict.log_odds), "p": float(verdict.probability),
            "user": user, "size": len(data), "tokens": int(verdict.tokens or 0), "reason": verdict.reason or note,
            "sender": sender, "recipients": recipients, "subject": subject, "message_id": message_id,
            "evidence": [[str(t), round(float(w), 4)] for t, w in list(verdict.evidence)[:EVIDENCE]],
            "cutoffs": pair, "cutoffs_log_odds": [_logit(pair[0]), _logit(pair[1])],
            "headers": _headers(header), "parts": mark_parts(_parts(data), spam_filter, {} if weights is None else weights),
            "kept": False}


MARKS = 5000           # words marked in one message's text, at most (the rest shown plain)
MARK_WEIGHT = 0.5       # a word is marked when its weight is at least this far from 0
_WORD = None


def token_weights(spam_filter, cache):
    """Every token's weight (log theta_spam - log theta_ham) of ``spam_filter``,
    as a numpy array by feature index; ``cache`` (a dict) keeps one model's."""
    import numpy as np

    if cache.get("model") is not spam_filter:
        counts = spam_filter.sized_counts()
        fc = counts.matrix()
        log_count, log_norm, _ = counts.derived()
        log_count = np.frombuffer(log_count, dtype=np.float64).reshape(fc.shape)
        cache.clear()
        cache.update(model=spam_filter, weights=(log_count[1] - log_norm[1]) - (log_count[0] - log_norm[0]))
    return cache["weights"]


def mark_parts(parts, spam_filter, cache):
    """Per-position marks of each text part (in place; returns ``parts``):
    ``part["segments"]``, the text cut into pieces, each ``[text, weight]``
    where a word of it is in the model with a weight at least
    :data:`MARK_WEIGHT` from 0, ``[text, None]`` between them; at most
    :data:`MARKS` words marked a message.  The words are looked up as the
    tokenizer's body words are (lower case; its hash), so a word is marked
    where it stands, with its own weight, not only where it is evidence."""
    import array
    import re

    global _WORD
    from spamnb.mail.tokenizer import hash_token

    if _WORD is None:
        _WORD = re.compile(r"[^\W_][\w$€£.'-]*[^\W_]|[^\W_]", re.UNICODE)
    weights = None
    left = MARKS
    for part in parts:
        text = part.get("text")
        if not text or left <= 0:
            continue
        found = [(m.start(), m.end(), m.group().lower()) for m in _WORD.finditer(text)]
        if not found:
            continue
        if weights is None:
            weights = token_weights(spam_filter, cache)
        indices = spam_filter.vocabulary_.lookup(array.array("Q", [hash_token(w) for _, _, w in found]))
        segments, at = [], 0
        for (start, end, _), index in zip(found, indices):
            if index < 0 or left <= 0:
                continue
            weight = float(weights[index])
            if abs(weight) < MARK_WEIGHT:
                continue
            if start > at:
                segments.append([text[at:start], None])
            segments.append([text[start:end], round(weight, 3)])
            at = end
            left -= 1
        if segments:
            if at < len(text):
                segments.append([text[at:], None])
            part["segments"] = segments
    return parts


def _headers(header):
    """The header block as (name, value) strings, unfolded, at most 100."""
    text = header.decode("utf-8", "replace").replace("\r\n", "\n")
    out = []
    for line in text.split("\n"):
        if line[:1] in (" ", "\t") and out:
            out[-1][1] += " " + line.strip()
        elif ":" in line and len(out) < 100:
            name, _, value = line.partition(":")
            out.append([name[:100], value.strip()])
    return [[name, value[:2000]] for name, value in out]


def _parts(data):
    """A kept message's parts: content type, file name, and a text part's
    text (decoded, at most TEXT_CHARS); HTML is shown as its source text."""
    from email import policy
    from email.parser import BytesParser

    try:
        msg = BytesParser(policy=policy.default).parsebytes(data)
        parts = []
        for part in msg.walk():
            if len(parts) >= PARTS:
                break
            if part.is_multipart():
                continue
            kind = part.get_content_type()
            try:
                name = part.get_filename()
            except Exception:  # noqa: BLE001 - a hostile parameter: shown raw
                name = part.get_param("name")
            text = None
            if part.get_content_maintype() == "text":
                try:
                    text = part.get_content()[:TEXT_CHARS]
                except Exception:  # noqa: BLE001 - an unknown charset, a broken encoding
                    raw = part.get_payload(decode=True) or b""
                    text = raw[:TEXT_CHARS].decode("utf-8", "replace")
            parts.append({"type": kind, "name": str(name) if name is not None else None, "text": text})
        return parts
    except Exception:  # noqa: BLE001 - a message the parser cannot take: its start as text
        return [{"type": "text/plain", "name": None, "text": data[:TEXT_CHARS].decode("utf-8", "replace")}]
