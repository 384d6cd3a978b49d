"""Long fuzz runs: mutate real messages and check every one gets a verdict.

Mutations of messages from the SpamAssassin corpus (byte flips, truncations,
splices of two messages, header duplication, boundary damage, encoding and
charset swaps, insertions of MIME/HTML/encoding fragments, repeated slices)
go through ``SpamFilter.classify`` in this process; a crash is an exception
escaping ``classify`` (or a verdict that is not spam/ham/unsure, or a NaN
probability).  Every ``--cli-every``-th input also goes through the real
``spamnb classify`` command, where a crash is an exit code outside {0, 1, 2}
(a segfault shows as a negative code).  Inputs that crash are written to
``--out`` for replay.

One process, one core:

    python scripts/check/fuzz.py --minutes 5 --model /tmp/m.spamnb

trains the model first (``spamnb train corpora``) when --model does not exist;
``--large-limits`` trains it with the tokenizer's limits at their largest
(256 KiB parsed, no text budget, every header's words), where slow paths show.
Prints the count of inputs tried and of crashes, per mutation kind.
"""

from __future__ import annotations

import argparse
import base64
import os
import random
import subprocess
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

DEFAULT_CORPUS = str(REPO.parent / "shared" / "corpora" / "spamassassin")
FRAGMENTS = [
    b"\n", b"\n\n", b"\r\n", b"\r", b"\x00", b"\xff\xfe", b"\xc3", b"\xed\xa0\x80", b"--", b"=\n", b"=ZZ", b"=",
    b"Content-Type: multipart/mixed; boundary=\"x\"\n", b"Content-Type: message/rfc822\n",
    b"Content-Type: text/html\n", b"Content-Transfer-Encoding: base64\n",
    b"Content-Transfer-Encoding: quoted-printable\n", b"charset=utf-7", b"charset=unicode_escape",
    b"=?utf-8?B?", b"=?utf-7?Q?+2D0-?=", b"?=", b"<!--", b"-->", b"<style>", b"</style>", b"<script>",
    b"<a href=\"", b"&#x", b"&#1114112;", b"+2D0-", b"\\ud800", b"http://", b"www.", b"From ", b"Received: from ",
    b":", b";", b" ", b"\t", b"\"", "\u202e\u200b\U0001F4B0\u4e2d\u6587".encode(),
]
CHARSETS = [b"utf-8", b"utf-7", b"utf-16", b"utf-32", b"iso-2022-jp", b"gb2312", b"big5", b"koi8-r", b"cp1252",
            b"unicode_escape", b"raw_unicode_escape", b"idna", b"punycode", b"x-bogus", b"", b"\"\"", b"rot13"]


def load_corpus(root, limit):
    files = sorted(p for p in Path(root).rglob("*") if p.is_file() and not p.name.startswith("."))
    rng = random.Random(0)
    rng.shuffle(files)
    return [p.read_bytes() for p in files[:limit]]


# ---------------------------------------------------------------------------- mutations
def flip(rng, data, corpus):
    data = bytearray(data)
    for _ in range(rng.randint(1, 16)):
        if data:
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    return bytes(data)


def truncate(rng, data, corpus):
    return data[:rng.randint(0, len(data))]


def splice(rng, data, corpus):
    other = rng.choice(corpus)
    return data[:rng.randint(0, len(data))] + other[rng.randint(0, len(other)):]


def duplicate_headers(rng, data, corpus):
    head, sep, body = data.partition(b"\n\n")
    lines = head.split(b"\n")
    if not lines:
        return data
    picked = [rng.choice(lines) for _ in range(rng.randint(1, 8))]
    times = rng.choice([2, 10, 100, 1000])
    for line in picked:
        lines.insert(rng.randint(0, len(lines)), b"\n".join([line] * times))
    return b"\n".join(lines) + sep + body


def damage_boundary(rng, data, corpus):
    marker = b"boundary="
    at = data.find(marker)
    if at < 0:  # make it multipart with a broken boundary
        return (b"Content-Type: multipart/mixed; boundary=\"zz\"\n" + data.replace(b"\n\n", b"\n\n--zz\n", 1))
    end = at + len(marker)
    choice = rng.randrange(5)
    if choice == 0:   # empty boundary
        return data[:end] + b'""' + data[end:]
    if choice == 1:   # a boundary that never closes: drop the close delimiter
        return data.replace(b"--\n", b"\n")
    if choice == 2:   # nest the message inside itself, many times
        return data[:end] + b"\"nest\"\n\n" + b"--nest\n" * rng.randint(1, 50) + data
    if choice == 3:   # garbage in the boundary value
        return data[:end] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 100))) + data[end:]
    return data[:end] + b"\"" + b"-" * rng.randint(1, 5000) + b"\"" + data[end:]


def swap_encoding(rng, data, corpus):
    head, sep, body = data.partition(b"\n\n")
    choice = rng.randrange(5)
    if choice == 0:   # declare base64 but keep the text, or the reverse
        head += b"\nContent-Transfer-Encoding: " + rng.choice([b"base64", b"quoted-printable", b"x-uue", b"8bit"])
    elif choice == 1:
        head += b"\nContent-Transfer-Encoding: base64"
        body = base64.encodebytes(body)[: rng.randint(0, 4 * len(body) // 3 + 4)]
    elif choice == 2:
        head += b"\nContent-Type: text/plain; charset=" + rng.choice(CHARSETS)
    elif choice == 3:
        codec = rng.choice(["utf-16", "utf-32", "utf-7", "utf-16-be"])
        body = body.decode("latin-1").encode(codec)
        head += b"\nContent-Type: text/plain; charset=" + codec.encode()
    else:
        head += b"\nContent-Type: text/html"
        body = b"<html><body>" + body.replace(b" ", b"<b> ") + b"<!--" * rng.randint(0, 200)
    return head + (sep or b"\n\n") + body


def insert_fragments(rng, data, corpus):
    data = bytearray(data)
    for _ in range(rng.randint(1, 10)):
        at = rng.randint(0, len(data))
        data[at:at] = rng.choice(FRAGMENTS) * rng.choice([1, 1, 2, 10, 100, 1000])
    return bytes(data)


def repeat_slice(rng, data, corpus):
    if not data:
        return data
    start = rng.randrange(len(data))
    piece = data[start:start + rng.randint(1, 200)]
    return data[:start] + piece * rng.randint(2, 5000) + data[start:]


def random_bytes(rng, data, corpus):
    return bytes(rng.randrange(256) for _ in range(rng.randint(0, 2000)))


MUTATIONS = [flip, truncate, splice, duplicate_headers, damage_boundary, swap_encoding, insert_fragments,
             repeat_slice, random_bytes]


def mutate(rng, corpus):
    data = rng.choice(corpus)
    kinds = []
    for _ in range(rng.choice([1, 1, 2, 3])):
        mutation = rng.choice(MUTATIONS)
        data = mutation(rng, data, corpus)
        kinds.append(mutation.__name__)
    return data, "+".join(kinds)


# ---------------------------------------------------------------------------- running
def ensure_model(path, large_limits=False):
    """Train the model on corpora/ when ``path`` does not exist.  With
    ``large_limits`` the tokenizer parses up to mail.MAX_BYTES (256 KiB), has
    no text budget and tags every header's words (the model carries these
    settings, so `spamnb classify` uses them too)."""
    if os.path.exists(path):
        return
    if not large_limits:
        env = dict(os.environ, PYTHONPATH=str(REPO))
        subprocess.run([sys.executable, "-m", "spamnb", "train", "-q", "-m", path, str(REPO / "corpora")],
                       check=True, env=env)
        return
    from spamnb.mail import parser as mail
    from spamnb.training.corpus import labelled_messages
    from spamnb.model.spam_filter import SpamFilter
    from spamnb.mail.tokenizer import Tokenizer

    messages = labelled_messages([REPO / "corpora"])
    tokenizer = Tokenizer(max_bytes=mail.MAX_BYTES, max_text_chars=0, headers="all")
    SpamFilter(tokenizer=tokenizer).fit([m.data for m in messages], [m.is_spam for m in messages], tune=False).save(path)


def run_cli(model, data, timeout):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("SPAMNB_DEBUG", None)
    try:
        proc = subprocess.run([sys.executable, "-m", "spamnb", "classify", "-v", "-m", model], input=data,
                              capture_output=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", b""
    return proc.returncode, proc.stderr


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=DEFAULT_CORPUS)
    parser.add_argument("--model", default="/tmp/spamnb-fuzz.spamnb")
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--max-inputs", type=int, default=0, help="stop after this many inputs (0: no limit)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cli-every", type=int, default=200, help="send every Nth input through spamnb classify")
    parser.add_argument("--slow", type=float, default=2.0, help="report inputs taking longer (seconds)")
    parser.add_argument("--out", default="fuzz-crashes", help="folder for crashing inputs")
    parser.add_argument("--limit", type=int, default=2000, help="corpus messages to mutate")
    parser.add_argument("--large-limits", action="store_true",
                        help="train the model (when missing) with max_bytes = 256 KiB, no text budget, all headers")
    args = parser.parse_args(argv)

    from spamnb.model.spam_filter import SpamFilter

    ensure_model(args.model, args.large_limits)
    spam_filter = SpamFilter.load(args.model, mapped=True)   # as spamnb classify loads it (the file mapped)
    corpus = load_corpus(args.corpus, args.limit)
    rng = random.Random(args.seed)
    deadline = time.monotonic() + 60.0 * args.minutes
    tried = Counter()
    crashes = Counter()
    cli_runs = 0
    slowest = (0.0, "")
    started = time.monotonic()
    n = 0
    while time.monotonic() < deadline and (not args.max_inputs or n < args.max_inputs):
        data, kind = mutate(rng, corpus)
        n += 1
        tried[kind.split("+")[0]] += 1
        t0 = time.perf_counter()
        failure = None
        try:
            verdict = spam_filter.classify(data)
            if verdict.label not in ("spam", "ham", "unsure") or not verdict.probability == verdict.probability:
                failure = f"bad verdict {verdict!r}"
            for token, _weight in verdict.evidence:
                token.encode("utf-8")  # what `classify -v` prints must be printable
        except Exception:
            failure = traceback.format_exc(limit=3)
        took = time.perf_counter() - t0
        if took > slowest[0]:
            slowest = (took, kind)
        if took > args.slow:
            print(f"slow input ({took:.2f} s, {kind}, {len(data)} bytes)", flush=True)
        if failure is None and args.cli_every and n % args.cli_every == 0:
            cli_runs += 1
            code, stderr = run_cli(args.model, data, timeout=30)
            if code not in (0, 1, 2):
                failure = f"spamnb classify exit {code}: {stderr.decode(errors='replace').strip()}"
        if failure is not None:
            crashes[kind.split("+")[0]] += 1
            os.makedirs(args.out, exist_ok=True)
            name = os.path.join(args.out, f"crash-{args.seed}-{n}.eml")
            with open(name, "wb") as f:
                f.write(data)
            print(f"CRASH #{sum(crashes.values())} ({kind}) saved to {name}:\n{failure}", flush=True)
    elapsed = time.monotonic() - started
    print(f"inputs tried: {n} in {elapsed:.0f} s ({n / max(elapsed, 1e-9):.0f}/s); "
          f"through spamnb classify: {cli_runs}; crashes: {sum(crashes.values())}; "
          f"slowest: {slowest[0] * 1000:.1f} ms ({slowest[1]})")
    for kind in sorted(tried):
        print(f"  {kind:18s} {tried[kind]:8d} tried  {crashes[kind]:4d} crashes")
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
