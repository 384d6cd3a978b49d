"""``spamnb serve --metrics``: counters of requests, errors, latency, model
reloads and learned messages, kept across worker processes, and served as
Prometheus text (``/metrics``) and as a report for people (``/status``,
printed by ``spamnb serve --status``).

The counters live in a shared anonymous memory map created before worker
processes are forked: each process has a slot of its own (unsigned 64-bit
counters only it writes, so no lock is needed), and the process serving
``/metrics`` adds the slots up.  A worker started again in a dead one's
place takes over its slot, so counters never go down.
"""

from __future__ import annotations

import mmap
import os
import time

from spamnb.server.models import journal_signature

VERBS = ("CHECK", "SYMBOLS", "REPORT", "REPORT_IFSPAM", "PROCESS", "HEADERS", "TELL", "PING", "SKIP", "EOM", "other")
PROTOCOLS = ("spamd", "milter")     # EOM: a milter's end of message
ACTIONS = ("none", "tag", "reject", "quarantine", "accept", "tempfail")  # what the milter did; none: SPAMD
VERDICTS = ("spam", "ham", "unsure", "none")
USER_CLASSES = ("site", "user")
ERRORS = ("protocol", "too_large", "timeout", "no_model", "no_permission", "no_user", "connection_limit",
          "internal", "client_closed", "other")
BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

_N_REQUESTS = len(PROTOCOLS) * len(VERBS) * len(VERDICTS) * len(USER_CLASSES) * len(ACTIONS)
_ERRORS_AT = _N_REQUESTS
_BUCKETS_AT = _ERRORS_AT + len(ERRORS)
_SUM_AT = _BUCKETS_AT + len(BUCKETS) + 1           # latency sum, microseconds
_RELOADS_AT, _LEARNED_AT, _FORGOTTEN_AT, _RESTARTS_AT = _SUM_AT + 1, _SUM_AT + 2, _SUM_AT + 3, _SUM_AT + 4
SLOT = _SUM_AT + 5                                  # counters per process

_CODE_KIND = {64: "protocol", 65: "protocol", 76: "protocol", 79: "timeout", 69: "no_model", 77: "no_permission",
              67: "no_user", 70: "internal"}


class Metrics:
    """Counters for ``n_slots`` processes in shared memory; a process counts
    in the slot :meth:`use_slot` gave it (slot 0 at first)."""

    def __init__(self, n_slots=1):
        self.n_slots = n_slots
        self._map = mmap.mmap(-1, n_slots * SLOT * 8)   # MAP_SHARED: seen by every forked process
        self._all = memoryview(self._map).cast("Q")
        self.started = time.time()
        self.use_slot(0)

    def use_slot(self, slot):
        self._mine = self._all[slot * SLOT:(slot + 1) * SLOT]

    # ------------------------------------------------------------------ counting
    def request(self, verb, user_class, outcome, seconds, protocol="spamd", action="none"):
        """One request, as the daemon logs it: ``outcome`` is its log text
        ("spam 7.2/5.0 ...", "error 76 ...", "tell spam set=1 removed=0", ...);
        ``protocol`` the front end that took it, ``action`` what the milter did."""
        mine = self._mine
        word = outcome.split(" ", 1)[0]
        if word == "error" or outcome.startswith(("client closed", "too big")):
            self.error(_error_kind(outcome))
        verdict = word if word in ("spam", "ham", "unsure") else "none"
        v = VERBS.index(verb) if verb in VERBS else len(VERBS) - 1
        c = 1 if user_class == "user" else 0
        p = PROTOCOLS.index(protocol) if protocol in PROTOCOLS else 0
        a = ACTIONS.index(action) if action in ACTIONS else 0
        mine[(((p * len(VERBS) + v) * len(VERDICTS) + VERDICTS.index(verdict)) * len(USER_CLASSES) + c)
             * len(ACTIONS) + a] += 1
        if word == "tell":
            mine[_LEARNED_AT] += "set=1" in outcome
            mine[_FORGOTTEN_AT] += "removed=1" in outcome
        b = 0
        while b < len(BUCKETS) and seconds > BUCKETS[b]:
            b += 1
        mine[_BUCKETS_AT + b] += 1
        mine[_SUM_AT] += int(seconds * 1e6)

    def error(self, kind):
        self._mine[_ERRORS_AT + (ERRORS.index(kind) if kind in ERRORS else len(ERRORS) - 1)] += 1

    def model_loaded(self, path=None):
        self._mine[_RELOADS_AT] += 1

    def worker_restarted(self):
        self._mine[_RESTARTS_AT] += 1

    # ------------------------------------------------------------------ reading
    def totals(self):
        """The counters summed over the slots (a list of SLOT ints)."""
        out = [0] * SLOT
        for s in range(self.n_slots):
            for i, value in enumerate(self._all[s * SLOT:(s + 1) * SLOT]):
                out[i] += value
        return out

    def figures(self, model_path, workers):
        """Everything reported, as a dict (the two renderings read this)."""
        t = self.totals()
        requests = {}
        i = 0
        for protocol in PROTOCOLS:
            for verb in VERBS:
                for verdict in VERDICTS:
                    for user_class in USER_CLASSES:
                        for action in ACTIONS:
                            if t[i]:
                                requests[(verb, verdict, user_class, protocol, action)] = t[i]
                            i += 1
        return {
            "requests": requests,
            "errors": {kind: t[_ERRORS_AT + i] for i, kind in enumerate(ERRORS)},
            "buckets": t[_BUCKETS_AT:_BUCKETS_AT + len(BUCKETS) + 1],
            "latency_sum": t[_SUM_AT] / 1e6,
            "reloads": t[_RELOADS_AT],
            "learned": t[_LEARNED_AT],
            "forgotten": t[_FORGOTTEN_AT],
            "restarts": t[_RESTARTS_AT],
            "model_age": model_age(model_path),
            "uptime": time.time() - self.started,
            "workers": workers,
        }

    def prometheus(self, model_path, workers):
        """The figures in Prometheus' text exposition format (version 0.0.4)."""
        f = self.figures(model_path, workers)
        out = ["# HELP spamnb_requests_total Requests answered, by verb, verdict, whose model answered, protocol"
               " (spamd, milter) and the milter's action.",
               "# TYPE spamnb_requests_total counter"]
        for (verb, verdict, user_class, protocol, action), n in sorted(f["requests"].items()):
            out.append(f'spamnb_requests_total{{verb="{verb}",verdict="{verdict}",user_class="{user_class}",'
                       f'protocol="{protocol}",action="{action}"}} {n}')
        out += ["# HELP spamnb_errors_total Requests that went wrong by kind; connection_limit: times accepting paused"
                " at --max-connections.",
                "# TYPE spamnb_errors_total counter"]
        out += [f'spamnb_errors_total{{kind="{kind}"}} {n}' for kind, n in f["errors"].items()]
        out += ["# HELP spamnb_request_duration_seconds Time from a request's first byte to its answer.",
                "# TYPE spamnb_request_duration_seconds histogram"]
        cumulative = 0
        for le, n in zip([*map(repr, BUCKETS), "+Inf"], f["buckets"]):
            cumulative += n
            out.append(f'spamnb_request_duration_seconds_bucket{{le="{le}"}} {cumulative}')
        out += [f"spamnb_request_duration_seconds_sum {f['latency_sum']:.6f}",
                f"spamnb_request_duration_seconds_count {cumulative}",
                "# HELP spamnb_model_reloads_total Models read from their files (at start, after a change, after SIGHUP).",
                "# TYPE spamnb_model_reloads_total counter",
                f"spamnb_model_reloads_total {f['reloads']}",
                "# HELP spamnb_model_age_seconds Time since the site model (or its journal) last changed.",
                "# TYPE spamnb_model_age_seconds gauge",
                f"spamnb_model_age_seconds {f['model_age']:.3f}" if f["model_age"] is not None
                else "spamnb_model_age_seconds NaN",
                "# HELP spamnb_learned_messages_total Messages learned and forgotten through TELL.",
                "# TYPE spamnb_learned_messages_total counter",
                f'spamnb_learned_messages_total{{action="learn"}} {f["learned"]}',
                f'spamnb_learned_messages_total{{action="forget"}} {f["forgotten"]}',
                "# HELP spamnb_workers Worker processes running.",
                "# TYPE spamnb_workers gauge",
                f"spamnb_workers {f['workers']}",
                "# HELP spamnb_worker_restarts_total Worker processes started again after one died.",
                "# TYPE spamnb_worker_restarts_total counter",
                f"spamnb_worker_restarts_total {f['restarts']}",
                "# HELP spamnb_uptime_seconds Time since the server started.",
                "# TYPE spamnb_uptime_seconds gauge",
                f"spamnb_uptime_seconds {f['uptime']:.3f}"]
        return "\n".join(out) + "\n"

    def status(self, model_path, workers):
        """The same figures for people."""
        f = self.figures(model_path, workers)
        total = sum(f["buckets"])
        by_verdict, by_class = {}, {}
        by_protocol = {}
        for (verb, verdict, user_class, protocol, action), n in f["requests"].items():
            by_verdict[verdict] = by_verdict.get(verdict, 0) + n
            by_class[user_class] = by_class.get(user_class, 0) + n
            key = protocol if protocol == "spamd" else f"{protocol} {action}"
            by_protocol[key] = by_protocol.get(key, 0) + n
        age = f["model_age"]
        lines = [f"uptime          {_duration(f['uptime'])}, {f['workers']} worker(s), "
                 f"{f['restarts']} restarted",
                 f"site model      {model_path}, "
                 + (f"changed {_duration(age)} ago" if age is not None else "missing"),
                 f"model reloads   {f['reloads']}",
                 f"requests        {total}: " + ", ".join(f"{k} {v}" for k, v in sorted(by_verdict.items())),
                 "  by model      " + ", ".join(f"{k} {v}" for k, v in sorted(by_class.items())),
                 "  by protocol   " + ", ".join(f"{k} {v}" for k, v in sorted(by_protocol.items())),
                 "  by verb       " + ", ".join(
                     f"{verb} {sum(n for (v, *_), n in f['requests'].items() if v == verb)}"
                     for verb in VERBS if any(v == verb for (v, *_) in f["requests"])),
                 f"latency         mean {1000 * f['latency_sum'] / total:.2f} ms, p50 <= {_quantile(f['buckets'], 0.5)}, "
                 f"p99 <= {_quantile(f['buckets'], 0.99)}" if total else "latency         -",
                 f"errors          {sum(f['errors'].values())}"
                 + "".join(f", {k} {v}" for k, v in f["errors"].items() if v),
                 f"TELL            learned {f['learned']}, forgot {f['forgotten']}"]
        return "\n".join(lines) + "\n"


def model_age(path):
    """Seconds since the model at ``path`` or its journal last changed, or None."""
    try:
        mtime = os.stat(path).st_mtime
    except OSError:
        return None
    journal = journal_signature(path)
    if journal is not None:
        mtime = max(mtime, journal[2] / 1e9)
    return max(0.0, time.time() - mtime)


def _error_kind(outcome):
    if outcome.startswith("client closed"):
        return "client_closed"
    if outcome.startswith("too big") or "larger than" in outcome:
        return "too_large"
    parts = outcome.split(" ", 2)
    if len(parts) > 1 and parts[1].isdigit():
        return _CODE_KIND.get(int(parts[1]), "other")
    return "other"


def _quantile(buckets, q):
    total = sum(buckets)
    seen = 0
    for le, n in zip(BUCKETS + (float("inf"),), buckets):
        seen += n
        if seen >= q * total:
            return f"{le * 1000:g} ms" if le != float("inf") else f"> {BUCKETS[-1]:g} s"
    return "-"


def _duration(seconds):
    seconds = int(seconds)
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    if seconds < 172800:
        return f"{seconds // 3600} h {seconds % 3600 // 60} min"
    return f"{seconds // 86400} days"


# ============================================================================ HTTP
MAX_HTTP_HEAD = 8192


def http_answer(head, figures, peer_allowed=True):
    """The HTTP/1.0 answer (bytes) to a request head: ``/metrics`` and
    ``/status``; ``figures(kind)`` renders "metrics" or "status"."""
    line = head.split(b"\r\n", 1)[0].split(b"\n", 1)[0].decode("latin-1").split()
    if not peer_allowed:
        return _http(403, "forbidden\n")
    if len(line) < 2 or line[0] not in ("GET", "HEAD"):
        return _http(405, "GET /metrics or /status\n")
    path = line[1].split("?", 1)[0]
    if path == "/metrics":
        body = figures("metrics")
        ctype = "text/plain; version=0.0.4; charset=utf-8"
    elif path in ("/status", "/stat"):
        body = figures("status")
        ctype = "text/plain; charset=utf-8"
    else:
        return _http(404, "not found: GET /metrics or /status\n")
    return _http(200, body, ctype, head_only=line[0] == "HEAD")


def _http(code, body, ctype="text/plain; charset=utf-8", head_only=False):
    reason = {200: "OK", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed"}[code]
    data = body.encode()
    head = (f"HTTP/1.0 {code} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {len(data)}\r\n"
            f"Connection: close\r\n\r\n").encode()
    return head if head_only else head + data


async def serve_http(reader, writer, figures, allows, timeout=5.0):
    """An asyncio connection handler for the metrics address."""
    import asyncio

    try:
        peer = writer.get_extra_info("peername")
        async with asyncio.timeout(timeout):
            head = await reader.readuntil(b"\r\n\r\n")
            writer.write(http_answer(head, figures, allows(peer[0] if isinstance(peer, tuple) else "")))
            await writer.drain()
    except (TimeoutError, OSError, EOFError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


def serve_http_blocking(sock, figures, allows, timeout=2.0):
    """Answer one connection waiting on the listening ``sock`` (the worker
    supervisor's loop, which has no event loop): bounded by ``timeout``."""
    try:
        conn, peer = sock.accept()
    except (BlockingIOError, InterruptedError, ConnectionAbortedError):
        return
    with conn:
        try:
            conn.settimeout(timeout)
            deadline = time.monotonic() + timeout
            head = b""
            while b"\r\n\r\n" not in head and len(head) < MAX_HTTP_HEAD and time.monotonic() < deadline:
                chunk = conn.recv(MAX_HTTP_HEAD)
                if not chunk:
                    break
                head += chunk
            conn.sendall(http_answer(head, figures, allows(peer[0] if isinstance(peer, tuple) else "")))
        except OSError:
            pass
