#!/usr/bin/env python3
"""Steering auto-learn from outside: can a sender teach a model that a spam is ham?

The attack (issue 45, item 7): a sender who knows a spam the victim should
refuse (the *target*) mails the victim messages made of ordinary ham text
plus the target's body.  The ham text outweighs the spam body, the whole
message is confident ham, and ``--auto-learn`` learns it as ham: the
target's tokens move toward ham, message after message, until the target
itself is no longer spam.

What this script does, per corpus:

1. learns a model as ``spamnb learn`` users have one (``learning.session``,
   from empty: ``learned_model``), from the first ``--learn`` messages of
   the corpus in arrival order (``spamnb evaluate --online``'s order);
2. takes the *target*: the first later spam the model calls spam with
   log-odds of at least ``--min-target``;
3. for each header style (``own``: the attacker's own From/To/Subject;
   ``victim``: a real later ham's header fields, as a sender imitating the
   victim's correspondents would), on a fresh copy of the model, sends
   ``--messages`` crafted messages through the auto-learn path of
   ``spamnb classify --auto-learn`` (the model loaded mapped, the message
   classified, ``spamnb.model.autolearn.learn_verdict`` with the model's
   cutoffs; ``spamnb serve --auto-learn`` calls the same function), one
   every ``3600 / AUTO_LEARN_PER_HOUR`` seconds of a simulated clock (the
   hourly cap is the real one, counted in ``MODEL.autolearn``);
4. prints the target's log-odds and verdict after every ``--every``
   messages, how many were learned as ham and as spam, and, before and
   after, how many of ``--ham-check`` later ham (the first of the cover
   ham) the model calls spam or unsure: what the attack does to the
   victim's own mail.

Each crafted message: the header fields, then one text/plain part of the
target's text followed by a different later ham's text (its text parts,
HTML as text) each time: the target first, so that it lies within the
text the tokenizer reads (``max_text_chars``), the ham text after it as
far as the tokenizer reads.  ``--interleave N`` spreads the target's text
through the ham text in runs of N words instead (a sender who knows the
defence); style ``control`` sends the later ham as it is (no target: how
far learning that ham alone moves the target).

``--parts SIZES --part-margin M`` measures the rule "learn ham only when
the message's parts agree" (not shipped): before a ham verdict is
auto-learned, each text part of the message and each window of SIZES
tokens of a part (``harness.text_windows``: half a window apart; 0: the
part whole) is scored on its own by the model (:func:`segments`, one
scorer call a window, its own length normalisation); when one scores
``M`` log-odds or more the message is not learned ("parts disagree"), the
verdict unchanged.
``--spam-part-margin M2`` adds the mirror for spam verdicts: a segment at
``-M2`` or less stops a spam learn (the refused attack messages that later
score spam are then not learned as spam, cover text and all).
``scripts/check/autolearn_rules.py`` measures the same rule online.

``--tokens M[:unknown][:lean][:spam=M2]`` measures the token-wise rule (not
shipped): a ham verdict is auto-learned without its known tokens weighing
more than ``M`` toward spam (``harness.token_mask``; ``lean``: a token's own
log-odds) and without its unknown tokens (``unknown``: with them); ``spam=M2``
the mirror for spam verdicts (known tokens leaning ham by more than ``M2`` left
out, unknown ones counted: ``autolearn_rules.py``'s ``spamtokens:M2:learn``).  Such a learn goes through the same decision
and hourly cap, under the model's lock, and saves the model whole
(:func:`learn_masked`: the journal and the ledger record whole messages).

``--package DIR`` imports spamnb from another checkout (the tree before a
change); a ``learn_verdict`` without ``now`` is given a cap the sending rate
never reaches, the same thing.

    python scripts/check/steer_autolearn.py                               # the shared SpamAssassin corpus
    python scripts/check/steer_autolearn.py ../shared/corpora/enron-spam --messages 1000
    python scripts/check/steer_autolearn.py corpora --learn 200 --messages 300   # the sample: a smoke run
    python scripts/check/steer_autolearn.py --parts 0,32 --part-margin 16 --interleave 4
    python scripts/check/steer_autolearn.py --tokens 0 --interleave 4
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if REPO not in sys.path:
    sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "scripts"))
import harness  # noqa: E402

DEFAULT_CORPUS = os.path.join(REPO, "..", "shared", "corpora", "spamassassin")
OWN_HEADERS = (b"From: Mallory <mallory@sender.example>\nTo: victim@example.org\n"
               b"Subject: %s\nMessage-ID: <steer-%d@sender.example>\nMIME-Version: 1.0\n")
VICTIM_FIELDS = (b"from", b"to", b"cc", b"subject", b"date", b"list-id", b"list-unsubscribe", b"reply-to",
                 b"sender", b"received", b"x-mailer", b"user-agent")


def text_of(data):
    """The text of a message's text parts (HTML as its text), one string."""
    from spamnb.mail.parser import html_to_text, parse

    texts = []
    for part in parse(data).parts:
        if part.text is None:
            continue
        texts.append(html_to_text(part.text, False, False).text if part.content_type == "text/html" else part.text)
    return "\n\n".join(t.strip() for t in texts if t.strip())


def header_block(data):
    """The raw header fields of ``data`` (continuation lines kept), as a list of (lower name, raw lines)."""
    head = data.replace(b"\r\n", b"\n").split(b"\n\n", 1)[0]
    fields = []
    for line in head.split(b"\n"):
        if line[:1] in (b" ", b"\t") and fields:
            fields[-1][1].append(line)
        elif b":" in line and not line.startswith(b"From "):
            fields.append((line.split(b":", 1)[0].strip().lower(), [line]))
    return fields


def craft(n, ham, target_text, style, interleave):
    """The ``n``-th attack message: ``ham``'s text (and, ``style`` "victim", its header
    fields) with the target's text, appended or (``interleave`` words) spread through it."""
    ham_text = text_of(ham)
    if interleave:
        ham_words, spam_words = ham_text.split(), target_text.split()
        runs = [spam_words[i:i + interleave] for i in range(0, len(spam_words), interleave)]
        step = max(1, len(ham_words) // max(1, len(runs)))
        out = []
        for k, run in enumerate(runs):
            out.extend(ham_words[k * step:(k + 1) * step])
            out.extend(run)
        out.extend(ham_words[len(runs) * step:])
        body = " ".join(out)
    else:
        body = target_text + "\n\n" + ham_text
    if style == "control":
        return ham
    if style == "victim":
        kept = [b"\n".join(lines) for name, lines in header_block(ham) if name in VICTIM_FIELDS]
        head = b"\n".join(kept) + b"\nMIME-Version: 1.0\n"
    else:
        subject = next((b" ".join(lines).split(b":", 1)[1].strip() for name, lines in header_block(ham)
                        if name == b"subject"), b"hello")
        head = OWN_HEADERS % (subject, n)
    return (head + b"Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: 8bit\n\n"
            + body.encode("utf-8", "replace") + b"\n")


def stream(corpus):
    """(data, is_spam) of a corpus in ``spamnb evaluate --online``'s order."""
    return harness.arrival_stream(corpus)[0]


def learn_model(path, messages):
    """A model learned from empty as ``spamnb learn`` learns (one session, the ledger)."""
    from spamnb.model import learning
    from spamnb.estimator.ledger import Tally

    tally = Tally()
    with learning.session(path, create=True) as session:
        for data, is_spam in messages:
            session.learn(data, is_spam, tally)


def check(path, message):
    """``spamnb classify``'s view of ``message``: the model loaded mapped, its verdict."""
    from spamnb.model.spam_filter import SpamFilter

    spam_filter = SpamFilter.load(path, mapped=True)
    return spam_filter, spam_filter.classify(message, evidence=False)


def segments(spam_filter, message, sizes, sign=1.0):
    """The largest log-odds of one segment of ``message`` (``harness.text_windows``),
    each scored on its own by ``spam_filter`` (one scorer call a segment); -inf
    without text.  ``sign`` -1: the largest of minus the log-odds (the segment
    leaning most to ham)."""
    stream = spam_filter.tokenizer_.stream(message)
    scorer = spam_filter.scorer()
    best = float("-inf")
    for start, end in harness.text_windows(stream.regions, sizes):
        jll = scorer.score(stream.hashes[start:end], 0)[0]
        best = max(best, sign * (jll[1] - jll[0]))
    return best


def auto_learn(path, message, clock, parts=None, select=None):
    """One message through ``spamnb classify --auto-learn``'s path at time ``clock``: its outcome.
    ``parts``: ``(sizes, margin)``, a ham verdict one of whose segments scores ``margin`` or
    more is not learned ("parts disagree")."""
    from spamnb.model.autolearn import learn_verdict
    from spamnb.estimator.verdict import logit

    spam_filter, verdict = check(path, message)
    if parts is not None and verdict.label == "ham" and segments(spam_filter, message, parts[0]) >= parts[1]:
        return verdict, "parts disagree"
    if (parts is not None and len(parts) > 2 and verdict.label == "spam"
            and segments(spam_filter, message, parts[0], -1.0) >= parts[2]):
        return verdict, "parts disagree"
    cutoffs = logit(spam_filter.spam_cutoff), logit(spam_filter.ham_cutoff)
    if select is not None:
        return verdict, learn_masked(path, message, verdict, cutoffs, clock, select)
    try:
        outcome = learn_verdict(path, message, verdict.log_odds, verdict.label, *cutoffs, wait=60, now=clock)
    except TypeError:   # a tree before ``now``: one message every 3600 / cap seconds never meets the cap
        outcome = learn_verdict(path, message, verdict.log_odds, verdict.label, *cutoffs, wait=60,
                                per_hour=1 << 30)
    return verdict, outcome


def learn_masked(path, message, verdict, cutoffs, clock, rule):
    """``learn_verdict`` with the token-wise rule (not shipped): the same decision (the
    margin beyond the cutoffs, the verdict's label, the hourly cap), then only the
    tokens ``harness.token_mask`` keeps are learned (``rule``: its margin, unknown,
    lean and the margin for spam verdicts, None: spam learned whole; a spam
    verdict's unknown tokens are counted), under the
    model's lock, the model saved whole (the journal and the ledger record whole
    messages only)."""
    from spamnb.model import learning
    from spamnb.model.autolearn import AUTO_LEARN_PER_HOUR, RateLimit, auto_label

    spam = auto_label(verdict.log_odds, *cutoffs)
    if spam is None or verdict.label != ("spam" if spam else "ham"):
        return "not sure"
    margin, unknown, lean, spam_margin = rule
    with learning.session(path, wait=60, create=False) as session:
        if not RateLimit(session.path, AUTO_LEARN_PER_HOUR).take(clock):
            return "rate limit"
        sf = session.filter
        stream = sf.tokenizer_.stream(message)
        if not spam or spam_margin is not None:
            keep = harness.token_mask(sf, stream, spam, spam_margin if spam else margin, unknown or spam, lean)
            if not keep:
                return "no token kept"
            if len(keep) < len(stream.hashes):
                stream = harness.MaskedStream(stream, keep)
        sf.learn(None, spam, stream)
        sf.refit_cutoffs()
        session.compact()
    return "learned"


def attack(base, work, target, hams, style, n_messages, every, interleave, say, parts=None, select=None):
    from spamnb.model.autolearn import AUTO_LEARN_PER_HOUR

    path = os.path.join(work, f"steer-{style}.spamnb")
    shutil.copyfile(base, path)
    _sf, first = check(path, target)
    rows = [{"sent": 0, "learned": 0, "target_log_odds": round(first.log_odds, 2), "target": first.label}]
    say(f"  {style}: target {first.log_odds:+.1f} ({first.label}) before")
    counts = {}
    scores = []
    clock = 1.0e9   # a simulated clock, AUTO_LEARN_PER_HOUR messages an hour
    for n in range(1, n_messages + 1):
        message = craft(n, hams[(n - 1) % len(hams)], text_of(target), style, interleave)
        verdict, outcome = auto_learn(path, message, clock, parts, select)
        clock += 3600.0 / AUTO_LEARN_PER_HOUR
        outcome = f"learned as {verdict.label}" if outcome == "learned" else outcome
        counts[outcome] = counts.get(outcome, 0) + 1
        scores.append(verdict.log_odds)
        if n % every == 0 or n == n_messages:
            _sf, now = check(path, target)
            row = {"sent": n, "learned": counts.get("learned as ham", 0), "target_log_odds": round(now.log_odds, 2),
                   "target": now.label, "outcomes": dict(counts),
                   "attack_log_odds": [round(min(scores), 1), round(max(scores), 1)]}
            rows.append(row)
            say(f"  {style}: after {n:5d} sent, {row['learned']:5d} learned as ham "
                f"({counts.get('learned as spam', 0)} as spam, {counts.get('parts disagree', 0)} stopped by parts): "
                f"target {now.log_odds:+7.1f} ({now.label}); "
                f"messages scored {min(scores):+.0f} .. {max(scores):+.0f}")
            scores = []
    return rows


def ham_called_spam(path, hams):
    """How many of ``hams`` the model at ``path`` calls spam, and how many unsure."""
    from spamnb.model.spam_filter import SpamFilter

    spam_filter = SpamFilter.load(path)
    labels = [spam_filter.classify(data, evidence=False).label for data in hams]
    return labels.count("spam"), labels.count("unsure")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus", nargs="?", default=DEFAULT_CORPUS)
    ap.add_argument("--learn", type=int, default=3000, help="messages learned first (default 3000)")
    ap.add_argument("--messages", type=int, default=1000, help="attack messages sent (default 1000)")
    ap.add_argument("--every", type=int, default=100, help="print the target's score every N (default 100)")
    ap.add_argument("--min-target", type=float, default=30.0, help="the target's least log-odds (default 30)")
    ap.add_argument("--styles", default="own,victim,control",
                    help="own (the sender's headers), victim (a later ham's), control (the later ham alone)")
    ap.add_argument("--interleave", type=int, default=0,
                    help="spread the target's text through the ham text in runs of N words (default 0: appended)")
    ap.add_argument("--ham-check", type=int, default=500,
                    help="classify this many later ham before and after each attack (default 500)")
    ap.add_argument("--parts", metavar="SIZES",
                    help="the parts rule (not shipped): segment sizes in tokens, comma-separated "
                         "(0: a text part whole)")
    ap.add_argument("--part-margin", type=float, default=0.0,
                    help="with --parts: a segment scoring this log-odds or more stops a ham learn (default 0)")
    ap.add_argument("--spam-part-margin", type=float,
                    help="with --parts: a segment scoring minus this or less stops a spam learn (default: off)")
    ap.add_argument("--tokens", metavar="M[:unknown][:lean][:spam=M2]",
                    help="token-wise auto-learn (not shipped; harness.token_mask): a ham verdict is learned "
                         "without the tokens weighing more than M toward spam (unknown: unknown tokens "
                         "counted; lean: M is a token's own log-odds; spam=M2: the mirror for spam verdicts)")
    ap.add_argument("--package", help="import spamnb from this checkout (e.g. the tree before a change)")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args(argv)
    if args.package:
        sys.path.insert(0, os.path.abspath(args.package))
    select = None
    if args.tokens:
        fields = args.tokens.split(":")
        try:
            spam_margin = [float(f[5:]) for f in fields[1:] if f.startswith("spam=")]
            if set(f for f in fields[1:] if not f.startswith("spam=")) - {"unknown", "lean"}:
                raise ValueError(args.tokens)
            select = (float(fields[0]), "unknown" in fields, "lean" in fields,
                      spam_margin[0] if spam_margin else None)
        except ValueError:
            ap.error(f"--tokens: M[:unknown][:lean][:spam=M2], not {args.tokens!r}")
    parts = None
    if args.parts:
        try:
            parts = (tuple(int(v) for v in args.parts.split(",")), args.part_margin)
            if args.spam_part_margin is not None:
                parts += (args.spam_part_margin,)
        except ValueError:
            ap.error(f"--parts: sizes in tokens, comma-separated, not {args.parts!r}")

    def say(text):
        print(text, flush=True)

    started = time.perf_counter()
    messages = stream(args.corpus)
    learned, later = messages[:args.learn], messages[args.learn:]
    work = tempfile.mkdtemp(prefix="steer-")
    try:
        base = os.path.join(work, "model.spamnb")
        learn_model(base, learned)
        target = None
        for data, is_spam in later:
            if is_spam and text_of(data):
                verdict = check(base, data)[1]
                if verdict.label == "spam" and verdict.log_odds >= args.min_target:
                    target = data
                    break
        if target is None:
            raise SystemExit("steer_autolearn: no later spam scores spam at --min-target")
        hams = []
        for data, is_spam in later:   # ham the model has not learned, each called ham with some text
            if not is_spam and len(text_of(data).split()) >= 50:
                hams.append(data)
        import spamnb
        say(f"spamnb from {os.path.dirname(os.path.dirname(os.path.abspath(spamnb.__file__)))}")
        say(f"{os.path.basename(os.path.normpath(args.corpus))}: model learned from {len(learned)} messages; "
            f"{len(hams)} later ham as cover text; interleave {args.interleave or 'none'}; "
            f"parts rule {'off' if parts is None else f'sizes {args.parts}, margin {args.part_margin:g}'}"
            f"{'' if args.spam_part_margin is None else f', spam margin {args.spam_part_margin:g}'}; "
            f"token rule {args.tokens or 'off'}")
        out = {"corpus": os.path.basename(os.path.normpath(args.corpus)), "learned": len(learned),
               "tokens": args.tokens,
               "interleave": args.interleave, "parts": args.parts, "part_margin": args.part_margin,
               "spam_part_margin": args.spam_part_margin, "styles": {}}
        checked = hams[:args.ham_check]
        before = ham_called_spam(base, checked)
        say(f"  ham check: of {len(checked)} later ham, {before[0]} called spam, {before[1]} unsure, before")
        for style in args.styles.split(","):
            out["styles"][style] = attack(base, work, target, hams, style, args.messages, args.every,
                                          args.interleave, say, parts, select)
            after = ham_called_spam(os.path.join(work, f"steer-{style}.spamnb"), checked)
            out["styles"][style].append({"ham_check": len(checked), "ham_called_spam": after[0],
                                         "ham_unsure": after[1]})
            say(f"  {style}: ham check: of {len(checked)} later ham, {after[0]} called spam, {after[1]} unsure")
        say(f"{time.perf_counter() - started:.0f} s")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(out, f, indent=1)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
