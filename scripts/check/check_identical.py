#!/usr/bin/env python3
"""Are scores and tokens bit-identical to a reference made by another revision?

Trains a SpamFilter (default settings) on the train part of the fixed split,
then records, for every test message, the exact bits (``float.hex``) of

- ``score`` of the fitted filter (the single-message scorer),
- ``score`` after ``save`` and ``load`` (the file read whole and checked),
- ``score`` after ``load(mapped=True)`` (the file mapped: ``spamnb classify``'s path),
- ``score_many`` (the batch kernel),
- where the revision has the model's forms (``SpamFilter.load(form=...)``):
  ``score`` of the server's forms, the scoring-only copy (``served``:
  ``form="scoring"``) and the journal follower (``following``), and the
  score of a user's overlay (``overlay``: ``spamnb.server.overlay``) of a
  hard link of the file, its kernel reading the file as the server's does
  (a reference without these is compared with its ``loaded`` score),

and a digest of the message's token hashes.  Run it once on the old revision
with ``--write``, once on the new one with ``--check``::

    git stash; python scripts/check/check_identical.py --write /tmp/ref.json; git stash pop
    python scripts/check/check_identical.py --check /tmp/ref.json

It uses only the public API, so the same script runs on both sides.  With
``--tokenizer-version 2`` the new side trains with the older tokenizer that
models of that version load with (check it against a reference written by a
revision of that version: its tokens and scores must not have moved).  A folder
in a message's path whose name starts with "spam" makes it spam.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from spamnb import SpamFilter  # noqa: E402
from spamnb.training.corpus import is_test_message  # noqa: E402

CORPORA = {
    "spamassassin": REPO.parent / "shared" / "corpora" / "spamassassin",
    "enron": REPO.parent / "shared" / "corpora" / "enron-spam",
}


def corpus_files(root):
    """(relpath, is_spam, is_test) of every file under ``root`` but README.md, sorted."""
    out = []
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            if rel.lower().startswith("readme"):
                continue
            is_spam = any(part.lower().startswith("spam") for part in rel.split("/")[:-1])
            out.append((rel, is_spam, is_test_message(rel)))
    return out


def record(root, tokenizer_version=None):
    files = corpus_files(root)
    train = [(root / rel, spam) for rel, spam, test in files if not test]
    test = [rel for rel, _spam, is_test in files if is_test]
    tokenizer = None
    if tokenizer_version is not None:
        from spamnb.mail.tokenizer import Tokenizer

        tokenizer = Tokenizer(version=tokenizer_version)
    started = time.perf_counter()
    # the plain count (fit's tune=False where the revision has it: cutoffs and word pairs are not compared)
    plain = {"tune": False} if "tune" in inspect.signature(SpamFilter.fit).parameters else {}
    spam_filter = SpamFilter(tokenizer=tokenizer).fit([p for p, _ in train], [s for _, s in train], **plain)
    fit_seconds = time.perf_counter() - started
    data = [(root / rel).read_bytes() for rel in test]
    started = time.perf_counter()
    fitted = [spam_filter.score(d).log_odds for d in data]
    score_seconds = time.perf_counter() - started
    batch = spam_filter.score_many(data).tolist()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.spamnb")
        spam_filter.save(path)
        loaded_filter = SpamFilter.load(path)
        assert loaded_filter.tokenizer_.settings == spam_filter.tokenizer_.settings
        loaded = [loaded_filter.score(d).log_odds for d in data]
        if "mapped" in inspect.signature(SpamFilter.load).parameters:   # the file mapped (spamnb classify)
            mapped_filter = SpamFilter.load(path, mapped=True)
            mapped = [mapped_filter.score(d).log_odds for d in data]
        else:
            mapped = loaded
        served = following = held = loaded
        if "form" in inspect.signature(SpamFilter.load).parameters:   # the forms a server scores with
            from spamnb.server import overlay

            served = [SpamFilter.load(path, form="scoring").score(d).log_odds for d in data]
            site = SpamFilter.load(path, form="following")
            following = [site.score(d).log_odds for d in data]
            user = os.path.join(tmp, "user.spamnb")
            os.link(path, user)
            form = overlay.build(user, site, path)
            held = [form.score_stream(form.tokens(d), 0, parts=False).log_odds for d in data]
    tokens = [hashlib.sha256(bytes(memoryview(spam_filter.tokenizer_.stream(d).hashes).cast("B"))).hexdigest()[:16]
              for d in data]
    messages = {rel: {"fitted": f.hex(), "loaded": l.hex(), "mapped": m.hex(), "batch": b.hex(), "tokens": t,
                      "served": s.hex(), "following": w.hex(), "overlay": o.hex()}
                for rel, f, l, m, b, t, s, w, o in zip(test, fitted, loaded, mapped, batch, tokens, served, following,
                                                       held)}
    return messages, {"fit_s": fit_seconds, "score_s": score_seconds, "n_train": len(train), "n_test": len(test)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", metavar="REF", help="write the reference to REF (JSON)")
    action.add_argument("--check", metavar="REF", help="compare with the reference in REF")
    parser.add_argument("--corpus", action="append", metavar="NAME=PATH",
                        help="corpora to use (default: spamassassin and enron beside the repo)")
    parser.add_argument("--tokenizer-version", type=int, metavar="N",
                        help="train with this tokenizer version (default: the newest)")
    args = parser.parse_args(argv)
    corpora = dict(item.split("=", 1) for item in args.corpus) if args.corpus else CORPORA
    results = {}
    for name, root in corpora.items():
        messages, timing = record(Path(root), args.tokenizer_version)
        results[name] = messages
        print(f"{name}: {timing['n_train']} train, {timing['n_test']} test messages; "
              f"fit {timing['fit_s']:.2f} s, score loop {timing['score_s']:.2f} s")
    if args.write:
        Path(args.write).write_text(json.dumps(results, sort_keys=True))
        return 0
    reference = json.loads(Path(args.check).read_text())
    failures = 0
    for name, messages in results.items():
        if name not in reference:
            print(f"{name}: not in the reference (its corpora: {', '.join(sorted(reference))}; name them with "
                  f"--corpus NAME=PATH)")
            failures += 1
            continue
        ref = reference[name]
        if set(ref) != set(messages):
            print(f"{name}: the test messages differ from the reference's")
            failures += 1
        for what in ("fitted", "loaded", "mapped", "batch", "tokens", "served", "following", "overlay"):
            # a reference without "mapped" (written before the mapped reader) or the served
            # forms (before SpamFilter.load(form=...)): the loaded score
            compared = [rel for rel in messages if rel in ref]
            differ = [rel for rel in compared if ref[rel].get(what, ref[rel]["loaded"]) != messages[rel][what]]
            print(f"{name}: {what}: {len(compared) - len(differ)} of {len(messages)} identical")
            failures += bool(differ)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
