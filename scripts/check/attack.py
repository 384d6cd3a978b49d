"""Attack suite: how much test spam each evasion moves to "ham", spamnb beside bogofilter.

For each corpus (default: the shared SpamAssassin and Enron-Spam corpora), both
filters are trained on the fixed split's train part (spamnb: ``SpamFilter().fit``, which
trains as ``spamnb train`` does: cutoffs chosen, word pairs decided;
bogofilter: ``-s``/``-n`` registration in bulk mode, its default cutoffs); each
attack is applied to every test spam, and the share of the attacked spam each
filter calls spam / unsure / ham is reported, with the attack's mean cost in
bytes (attacked size - original size).  The messages are rewritten as a
spammer's mail program would: the rewritten files are what both filters read.
Messages lose their mbox "From " line and get a blank line after their header
block when they have none (Enron-Spam), for both filters and in training too
(``normalise``).

Attacks (``ATTACKS``; ``ctx`` holds the random source and the train part's ham
text and words):

- ``none``: the test spam as it is; ``requoted``: every text part re-encoded as
  UTF-8 quoted-printable (the control for the attacks that rewrite text);
- ``header-padding``: 110 ``X-Trace-N:`` junk fields and a ``Message-ID:``
  (~6.7 KB) before the real header fields;
- ``whitespace``: 8 KB of blank lines before the body;
- ``base64-attachment``: a random 6 KB binary attachment (base64) before the text;
- ``big-attachment``: the same with 300 KB;
- ``good-words``: a paragraph of real ham text (train part) as the first text part;
- ``good-words-x8``: eight such paragraphs, each its own text part;
- ``hidden-html``: the ham paragraph as invisible HTML (display:none, white text) first;
- ``random-words``: 200 words drawn from the train part's vocabulary as a first part;
- ``many-parts``: 60 small text parts of ham text before the text;
- ``comment-split``: words of 4+ letters split by ``<!-- -->`` (text parts become HTML);
- ``zero-width``: a zero-width space inside every word of 4+ letters;
- ``homoglyphs``: Latin letters replaced by Cyrillic look-alikes;
- ``base64-text``: every text part base64-encoded;
- ``entities``: every letter of the text as an HTML numeric character reference.

Usage: ``python scripts/check/attack.py [--corpus DIR ...] [--md FILE] [--json FILE]``
(``--package DIR`` imports spamnb from another checkout, for before/after runs;
``--before OLD.json`` shows an earlier run's spamnb shares beside).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import quopri
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_CORPORA = [os.path.join(REPO, "..", "shared", "corpora", "spamassassin"),
                   os.path.join(REPO, "..", "shared", "corpora", "enron-spam")]
LABELS = ("spam", "unsure", "ham")

# ------------------------------------------------------------------ message surgery
_HEADER_LINE = re.compile(rb"[!-9;-~]+[ \t]*:")
_MIME_FIELDS = (b"content-type", b"content-transfer-encoding", b"mime-version", b"content-disposition")


def split_message(raw):
    """(header lines, body) of raw bytes (LF line ends): the header block is the
    run of "Name:" lines and their continuations; a blank line after it is dropped."""
    lines = raw.replace(b"\r\n", b"\n").split(b"\n")
    i = 0
    while i < len(lines) and (_HEADER_LINE.match(lines[i]) or (i and lines[i][:1] in (b" ", b"\t"))):
        i += 1
    body = lines[i:]
    if body and body[0] == b"":
        body = body[1:]
    return lines[:i], b"\n".join(body)


def normalise(raw):
    """``raw`` as a message is handed to a filter: without an mbox "From " line
    (the SpamAssassin files start with one; a spammer's junk goes after it, not
    before), and with a blank line between the header block and the body when
    it has none (the Enron-Spam files: a Subject line, then the body; without
    it bogofilter reads the whole file as header lines, in training too, and any
    rewrite that adds a separator changes its tokens wholesale).  Both filters
    get the same normalised bytes, in training and in testing."""
    if raw.startswith(b"From "):
        raw = raw.split(b"\n", 1)[1] if b"\n" in raw else b""
    header_lines, body = split_message(raw)
    text = raw.replace(b"\r\n", b"\n")
    head = b"\n".join(header_lines)
    if not header_lines or text.startswith(head + b"\n\n") or text == head:
        return raw
    return head + b"\n\n" + body


def _fields(header_lines):
    """[(lower-case name, [lines])] of header lines."""
    fields = []
    for line in header_lines:
        if line[:1] in (b" ", b"\t") and fields:
            fields[-1][1].append(line)
        else:
            fields.append((line.split(b":", 1)[0].strip().lower(), [line]))
    return fields


def wrap_multipart(raw, first_parts, subtype=b"mixed"):
    """``raw`` as the last part of a new multipart message whose first parts are
    ``first_parts`` ([(header bytes, body bytes)])."""
    header_lines, body = split_message(raw)
    outer, inner = [], []
    for name, lines in _fields(header_lines):
        (inner if name in _MIME_FIELDS and name != b"mime-version" else outer if name not in _MIME_FIELDS
         else []).extend(lines)
    boundary = b"=_part_" + b"%08x" % random.getrandbits(32)
    out = outer + [b"MIME-Version: 1.0", b'Content-Type: multipart/' + subtype + b'; boundary="' + boundary + b'"',
                   b"", b"This is a multi-part message in MIME format.", b""]
    for head, part_body in first_parts:
        out += [b"--" + boundary, head, b"", part_body]
    out += [b"--" + boundary] + (inner or [b"Content-Type: text/plain"]) + [b"", body, b"--" + boundary + b"--", b""]
    return b"\n".join(out)


def map_text(raw, fn, cte="quoted-printable"):
    """``raw`` with the text of each text/* part replaced by ``fn(text, is_html)``
    -> (text, is_html), re-encoded as UTF-8 with ``cte`` (stdlib email, compat32)."""
    import email
    import email.policy

    msg = email.message_from_bytes(raw.replace(b"\r\n", b"\n"), policy=email.policy.compat32)
    for part in msg.walk():
        if part.is_multipart() or part.get_content_maintype() != "text":
            continue
        payload = part.get_payload(decode=True) or b""
        charset = part.get_content_charset() or "latin-1"
        try:
            text = payload.decode(charset, "replace")
        except LookupError:
            text = payload.decode("latin-1")
        text, is_html = fn(text, part.get_content_subtype() == "html")
        data = text.encode("utf-8")
        del part["Content-Transfer-Encoding"]
        part["Content-Transfer-Encoding"] = cte
        if cte == "base64":
            part.set_payload(base64.encodebytes(data).decode("ascii"))
        else:
            part.set_payload(quopri.encodestring(data).decode("ascii"))
        if is_html and part.get_content_subtype() != "html":
            part.set_type("text/html")
        part.set_param("charset", "utf-8")
    return msg.as_bytes()


_LONG_WORD = re.compile(r"\b([^\W\d_]{2})([^\W\d_]{2,})")
_HOMOGLYPHS = str.maketrans("aceopxyiABCEHKMOPTXs", "асеорхуіАВСЕНКМОРТХѕ")


def _html(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _split_comments(text, is_html):
    if is_html:     # only in the text between tags
        return re.sub(r">([^<]*)<", lambda m: ">" + _LONG_WORD.sub(r"\1<!-- -->\2", m.group(1)) + "<", text), True
    return "<html><body><pre>" + _LONG_WORD.sub(r"\1<!-- -->\2", _html(text)) + "</pre></body></html>", True


def _entities(text, is_html):
    encode = lambda s: "".join(f"&#{ord(c)};" if c.isalpha() else c for c in s)  # noqa: E731
    if is_html:
        return re.sub(r">([^<]*)<", lambda m: ">" + encode(m.group(1)) + "<", text), True
    return "<html><body><pre>" + encode(_html(text)) + "</pre></body></html>", True


def _text_part(text):
    return (b"Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: quoted-printable",
            quopri.encodestring(text.encode("utf-8")))


def _paragraph(ctx):
    return ctx["rng"].choice(ctx["ham_paragraphs"])


ATTACKS = {
    "none": lambda raw, ctx: raw,
    "requoted": lambda raw, ctx: map_text(raw, lambda t, h: (t, h)),
    "header-padding": lambda raw, ctx: b"".join(
        b"X-Trace-%d: 0123456789abcdef0123456789abcdef0123456789abcdef\n" % i for i in range(110))
        + b"Message-ID: <%d.pad@example.com>\n" % ctx["rng"].getrandbits(40) + raw,
    "whitespace": lambda raw, ctx: (lambda h, b: b"\n".join(h) + b"\n\n" + b"  \n" * 2730 + b)(*split_message(raw)),
    "base64-attachment": lambda raw, ctx: wrap_multipart(raw, [(
        b'Content-Type: application/octet-stream; name="data.bin"\nContent-Transfer-Encoding: base64',
        base64.encodebytes(ctx["rng"].randbytes(6 * 1024)))]),
    "big-attachment": lambda raw, ctx: wrap_multipart(raw, [(
        b'Content-Type: application/octet-stream; name="data.bin"\nContent-Transfer-Encoding: base64',
        base64.encodebytes(ctx["rng"].randbytes(300 * 1024)))]),
    "good-words": lambda raw, ctx: wrap_multipart(raw, [_text_part(_paragraph(ctx))]),
    "good-words-x8": lambda raw, ctx: wrap_multipart(raw, [_text_part(_paragraph(ctx)) for _ in range(8)]),
    "hidden-html": lambda raw, ctx: wrap_multipart(raw, [(
        b"Content-Type: text/html; charset=utf-8\nContent-Transfer-Encoding: quoted-printable",
        quopri.encodestring(('<html><body><div style="display:none">' + _html(_paragraph(ctx))
                             + '</div><font color="#ffffff">' + _html(_paragraph(ctx))
                             + "</font></body></html>").encode("utf-8")))]),
    "random-words": lambda raw, ctx: wrap_multipart(raw, [_text_part(
        " ".join(ctx["rng"].choice(ctx["words"]) for _ in range(200)))]),
    "many-parts": lambda raw, ctx: wrap_multipart(raw, [_text_part(_paragraph(ctx)[:80]) for _ in range(60)]),
    "comment-split": lambda raw, ctx: map_text(raw, _split_comments),
    "zero-width": lambda raw, ctx: map_text(raw, lambda t, h: (_LONG_WORD.sub("\\1\u200b\\2", t), h)),
    "homoglyphs": lambda raw, ctx: map_text(raw, lambda t, h: (
        re.sub(r">([^<]*)<", lambda m: ">" + m.group(1).translate(_HOMOGLYPHS) + "<", t) if h
        else t.translate(_HOMOGLYPHS), h)),
    "base64-text": lambda raw, ctx: map_text(raw, lambda t, h: (t, h), cte="base64"),
    "entities": lambda raw, ctx: map_text(raw, _entities),
}


# ------------------------------------------------------------------ the filters
def ham_material(train_ham):
    """(paragraphs, words) from the train part's ham: text of ~700-900 characters
    cut at a word boundary, and the distinct words of 3-12 letters."""
    from spamnb.mail import parser as mail

    paragraphs, words = [], set()
    for raw in train_ham:
        for part in mail.parse(raw).parts:
            if part.text and part.content_type == "text/plain":
                text = " ".join(part.text.split())
                words.update(w for w in text.lower().split() if w.isalpha() and 3 <= len(w) <= 12)
                if len(text) >= 700:
                    cut = text[:900].rsplit(" ", 1)[0]
                    paragraphs.append(cut)
                break
    return paragraphs, sorted(words)


def bogofilter_train(db, train_files):
    base = ["bogofilter", "-C", "-d", db]
    for flag, label in (("-s", True), ("-n", False)):
        names = "".join(path + "\n" for path, is_spam in train_files if is_spam == label)
        subprocess.run(base + [flag, "-b"], input=names.encode(), check=True, capture_output=True)


def bogofilter_labels(db, paths):
    out = subprocess.run(["bogofilter", "-C", "-d", db, "-b", "-T"], input="".join(p + "\n" for p in paths).encode(),
                         capture_output=True).stdout.decode(errors="replace")
    letters = {"S": "spam", "H": "ham", "U": "unsure"}
    labels = {}
    for line in out.splitlines():
        path, letter, _score = line.rsplit(" ", 2)
        labels[path] = letters[letter]
    return [labels[p] for p in paths]


def shares(labels):
    n = max(len(labels), 1)
    return {label: 100.0 * labels.count(label) / n for label in LABELS}


def run_corpus(root, work, attacks, seed, word_pairs=0):
    from spamnb.training.corpus import is_test_message, labelled_messages
    from spamnb.model.spam_filter import SpamFilter

    items = [type(m)(m.relpath, normalise(m.data), m.is_spam) for m in labelled_messages(trees=[root])]
    train = [m for m in items if not is_test_message(m.relpath)]
    test_spam = [m for m in items if is_test_message(m.relpath) and m.is_spam]
    test_ham = [m for m in items if is_test_message(m.relpath) and not m.is_spam]
    t0 = time.perf_counter()
    from spamnb.mail.tokenizer import with_pairs

    spam_filter = SpamFilter(tokenizer=with_pairs(word_pairs)).fit([m.data for m in train],
                                                                   [m.is_spam for m in train])
    train_dir = os.path.join(work, "train")
    os.makedirs(train_dir)
    train_files = []
    for i, m in enumerate(train):
        path = os.path.join(train_dir, f"{i}")
        with open(path, "wb") as f:
            f.write(m.data)
        train_files.append((path, m.is_spam))
    db = os.path.join(work, "bogofilter")
    os.makedirs(db)
    bogofilter_train(db, train_files)
    paragraphs, words = ham_material([m.data for m in train if not m.is_spam])
    print(f"{os.path.basename(os.path.normpath(root))}: trained on {len(train)} in {time.perf_counter() - t0:.1f} s; "
          f"{len(test_spam)} test spam, {len(test_ham)} test ham; {len(paragraphs)} ham paragraphs", file=sys.stderr)
    rows = []
    ham_paths = []
    for i, m in enumerate(test_ham):
        path = os.path.join(work, f"ham-{i}")
        with open(path, "wb") as f:
            f.write(m.data)
        ham_paths.append(path)
    rows.append({"attack": "(clean ham)", "n": len(test_ham), "cost_bytes": 0,
                 "spamnb": shares([spam_filter.classify(m.data).label for m in test_ham]),
                 "bogofilter": shares(bogofilter_labels(db, ham_paths))})
    for name in attacks:
        ctx = {"rng": random.Random(f"{seed}/{name}"), "ham_paragraphs": paragraphs, "words": words}
        random.seed(f"{seed}/{name}/boundary")
        attack_dir = os.path.join(work, name)
        os.makedirs(attack_dir)
        paths, ours, cost, slowest = [], [], 0, 0.0
        for i, m in enumerate(test_spam):
            data = ATTACKS[name](m.data, ctx)
            cost += len(data) - len(m.data)
            path = os.path.join(attack_dir, f"{i}")
            with open(path, "wb") as f:
                f.write(data)
            paths.append(path)
            t = time.perf_counter()
            ours.append(spam_filter.classify(data).label)
            slowest = max(slowest, time.perf_counter() - t)
        row = {"attack": name, "n": len(test_spam), "cost_bytes": round(cost / max(len(test_spam), 1)),
               "spamnb": shares(ours), "bogofilter": shares(bogofilter_labels(db, paths)),
               "spamnb_slowest_ms": round(1000 * slowest, 2)}
        rows.append(row)
        shutil.rmtree(attack_dir)
        print(f"  {name:18s} cost {row['cost_bytes']:7d} B  spamnb ham {row['spamnb']['ham']:5.1f} %  "
              f"bogofilter ham {row['bogofilter']['ham']:5.1f} %", file=sys.stderr)
    return rows


def markdown(results, before=None):
    """The tables; with ``before`` (the JSON of an earlier run), spamnb's shares
    of that run in extra columns."""
    lines = []
    for corpus, rows in results.items():
        old = {r["attack"]: r["spamnb"] for r in (before or {}).get(corpus, [])}
        extra = " spamnb before: spam | unsure | **ham** |" if old else ""
        lines += [f"**{corpus}** (test spam of the fixed split, and its test ham in the first row; shares in %)", "",
                  "| attack | cost (bytes) |" + extra + " spamnb: spam | unsure | **ham** | bogofilter: spam | "
                  "unsure | **ham** |", "|---|---:|" + "---:|" * (9 if old else 6)]
        for r in rows:
            s, b = r["spamnb"], r["bogofilter"]
            o = old.get(r["attack"])
            cells = f" {o['spam']:.1f} | {o['unsure']:.1f} | **{o['ham']:.1f}** |" if o else (" | | |" if old else "")
            lines.append(f"| {r['attack']} | {r['cost_bytes']:,} |{cells} {s['spam']:.1f} | {s['unsure']:.1f} | "
                         f"**{s['ham']:.1f}** | {b['spam']:.1f} | {b['unsure']:.1f} | **{b['ham']:.1f}** |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", action="append", help="corpus root (repeatable; default: the shared "
                        "SpamAssassin and Enron-Spam corpora next to this repository)")
    parser.add_argument("--attack", action="append", choices=sorted(ATTACKS), help="run only these (repeatable)")
    parser.add_argument("--package", default=REPO, help="import spamnb from this checkout (default: this one)")
    parser.add_argument("--seed", default="attack")
    parser.add_argument("--word-pairs", type=int, default=0, metavar="W",
                        help="spamnb's tokenizer with word pairs of window W, as `spamnb train` "
                             "chooses it for mail such as Enron-Spam's (its text budget too)")
    parser.add_argument("--md", help="write the table as Markdown")
    parser.add_argument("--json", help="write the figures as JSON")
    parser.add_argument("--before", help="JSON of an earlier run: its spamnb shares are shown beside")
    parser.add_argument("--table-only", action="store_true", help="only print the table of --json FILE (with "
                        "--before): no run")
    args = parser.parse_args(argv)
    before = None
    if args.before:
        with open(args.before) as f:
            before = json.load(f)
    if args.table_only:
        with open(args.json) as f:
            print(markdown(json.load(f), before))
        return 0
    if shutil.which("bogofilter") is None:
        print("attack.py: bogofilter is not installed", file=sys.stderr)
        return 1
    sys.path.insert(0, os.path.abspath(args.package))
    attacks = args.attack or list(ATTACKS)
    results = {}
    with tempfile.TemporaryDirectory(prefix="spamnb-attack-") as work:
        for i, root in enumerate(args.corpus or DEFAULT_CORPORA):
            corpus_work = os.path.join(work, str(i))
            os.makedirs(corpus_work)
            results[os.path.basename(os.path.normpath(root))] = run_corpus(root, corpus_work, attacks, args.seed,
                                                                             args.word_pairs)
            shutil.rmtree(corpus_work)
    table = markdown(results, before)
    print(table)
    if args.md:
        with open(args.md, "w") as f:
            f.write(table)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
