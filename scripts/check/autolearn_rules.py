#!/usr/bin/env python3
"""Auto-learn rules against steering, measured online: what each costs honest mail.

``scripts/check/steer_autolearn.py`` shows that an outside sender can steer
``--auto-learn`` (ham text plus a target spam's text, auto-learned as ham).
A rule that stops the attack must not make auto-learn worse for honest
mail.  This script runs ``bench_online.py``'s "on error + auto-learn" mode
(``spamnb.evaluation.online.feedback_options("auto")``: a verdict 2
log-odds beyond the model's own cutoff is learned as itself, the user
corrects errors and sorts unsure mail) on each corpus, once through the
shipped ``run_online`` and once per rule through this script's copy of its
loop, in which a rule may stop a ham verdict from being learned (the
verdict is unchanged) or weigh it.  The shipped run and rule ``none`` must
give the same figures (checked: the copy is the shipped loop).

Rules (``--rules``, separated by ``;``, each ``name[:args]``, joined by
``+`` to combine):

- ``none``: the shipped rule;
- ``parts:SIZES:M``: learn ham only when the message's parts agree: each
  text part, and each window of SIZES tokens of a part (comma-separated,
  half a window apart; 0: the part whole), is scored on its own by the
  model (``OnlineModel.log_odds`` of its tokens: its own length
  normalisation, the prior included; one call a window); a segment at
  ``M`` log-odds or more stops the learn;
- ``spamparts:SIZES:M``: the mirror for spam verdicts: a segment at ``-M``
  log-odds or less stops a spam learn (a message whose parts lean both
  ways is learned as neither);
- ``strong:T[:K]``: no ham learned when the message's text has ``K``
  (default 1) distinct known tokens leaning spam by ``T`` or more
  (log theta_spam - log theta_ham, unscaled);
- ``weight:W``: auto-learned ham counted with weight ``W`` (parsed, not
  run: the protocol's filter learns a message whole; the figures in
  docs/notes came from its former model);
- ``tokens:M[:skip|learn[:scale]]``: token-wise learns (``harness.token_mask``):
  a ham verdict is learned without its known tokens that weigh more than
  ``M`` toward spam in the message's score (``LM``: whose own log-odds, not
  scaled by the message's counts, lean spam by more than ``M``) and without
  its unknown tokens (``learn``: with them); ``scale``: the kept tokens
  counted as they are in the whole message (else scaled to a message's
  length, as any learn).  A user's correction forgets exactly the tokens
  learned (the protocol keeps them) and learns the message whole;
- ``spamtokens:...``: the same for spam verdicts (tokens leaning ham left out).

    python scripts/check/autolearn_rules.py                       # both shared corpora, the default rules
    python scripts/check/autolearn_rules.py --rules "none;parts:0,32:16;strong:8"
    python scripts/check/autolearn_rules.py corpora --rules "none;parts:0:0"   # the sample: a smoke run
    python scripts/check/autolearn_rules.py --rules "none;tokens:0:skip;tokens:0:learn;tokens:2:learn:scale"

Figures: (1-ROCA) % over the whole stream, and how many ham verdicts the
rule stopped.  Time: about 10 s per rule and corpus on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from types import SimpleNamespace

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if REPO not in sys.path:
    sys.path.insert(0, REPO)
CORPORA = (os.path.join(REPO, "..", "shared", "corpora", "spamassassin"),
           os.path.join(REPO, "..", "shared", "corpora", "enron-spam"))
sys.path.insert(0, os.path.join(REPO, "scripts"))
import harness  # noqa: E402

DEFAULT_RULES = "none;parts:0:0;parts:0:4;parts:0,64:8;parts:0,32:16;parts:0,16:24;parts:8:4;strong:6;strong:8"


def parse_rule(text):
    """A rule's text -> dict(parts=(sizes, margin) or None, strong=(t, k) or None, weight=w)."""
    rule = {"parts": None, "spamparts": None, "strong": None, "weight": 1.0, "tokens": None, "spamtokens": None}
    for piece in text.split("+"):
        name, _, args = piece.strip().partition(":")
        fields = args.split(":") if args else []
        try:
            if name == "none" and not fields:
                continue
            if name in ("parts", "spamparts") and len(fields) == 2:
                rule[name] = (tuple(int(v) for v in fields[0].split(",")), float(fields[1]))
            elif name == "strong" and len(fields) in (1, 2):
                rule["strong"] = (float(fields[0]), int(fields[1]) if len(fields) == 2 else 1)
            elif name in ("tokens", "spamtokens") and len(fields) in (1, 2, 3) and (
                    len(fields) == 1 or fields[1] in ("skip", "learn")) and (len(fields) < 3 or fields[2] == "scale"):
                lean = fields[0].startswith("L")
                rule[name] = (float(fields[0][1:] if lean else fields[0]), len(fields) >= 2 and fields[1] == "learn",
                              lean)
                rule[name + "_scale"] = len(fields) == 3
            elif name == "weight" and len(fields) == 1 and 0 < float(fields[0]) <= 1:
                rule["weight"] = float(fields[0])
            else:
                raise ValueError(piece)
        except ValueError:
            raise SystemExit(f"autolearn_rules: not a rule: {piece!r} (none, parts:SIZES:M, spamparts:SIZES:M, "
                             "strong:T[:K], weight:W, tokens:[L]M[:skip|learn[:scale]], spamtokens:...)")
    return rule


def parts_disagree(model, stream, sizes, margin, sign=1.0):
    """Whether a segment of ``stream`` (``harness.text_windows``, as steer_autolearn.py checks)
    scores ``margin`` or more on its own (``sign`` -1: ``-margin`` or less)."""
    for start, end in harness.text_windows(stream.regions, sizes):
        if sign * model.log_odds(SimpleNamespace(hashes=stream.hashes[start:end], pairs_start=-1)) >= margin:
            return True
    return False


def strong_tokens(model, stream, threshold, k):
    """Whether the text of ``stream`` has ``k`` distinct known tokens leaning spam by ``threshold`` or more."""
    import numpy as np

    if not stream.regions:
        return False
    vocabulary = model.filter.vocabulary_
    idx = np.frombuffer(vocabulary.lookup(stream.hashes), dtype=np.int32)
    idx = np.unique(np.concatenate([idx[a:b] for a, b in stream.regions]))
    idx = idx[idx >= 0]
    if idx.size < k:
        return False
    from spamnb.bayes import arithmetic

    fc, a = np.asarray(model.filter.word_counts_.matrix()), model.filter.alpha
    norm = arithmetic.log_norms(fc.sum(axis=1), a, vocabulary.n_features)
    lean = arithmetic.log_odds_weights(arithmetic.log_counts(fc[0, idx], a), arithmetic.log_counts(fc[1, idx], a),
                                       norm)
    return int((lean >= threshold).sum()) >= k


def run_rule(streams, y, rule, margin):
    """The on error + auto-learn run of ``run_online`` with ``rule``: (OnlineResult, ham verdicts
    stopped, spam verdicts stopped)."""
    import numpy as np

    from spamnb.evaluation.online import OnlineModel, OnlineResult
    from spamnb.model.autolearn import auto_label

    if rule["weight"] != 1.0:   # the protocol's filter learns a message whole (SpamFilter.learn)
        raise SystemExit("autolearn_rules: weight:W needs learns of a weight, which SpamFilter.learn does not take "
                         "(the figures of the weight rules in the notes came from the protocol's former model)")
    model = OnlineModel()
    learn = model.learn

    def scaled_learn(stream, spam, score=None, weight=1):
        length = getattr(stream, "length", None)
        if length is None:
            return learn(stream, spam, score, weight)
        keep = model.filter.length_norm
        model.filter.length_norm = length
        try:
            return learn(stream, spam, score, weight)
        finally:
            model.filter.length_norm = keep
            model.filter.counts_changed()

    model.learn = scaled_learn
    n = len(y)
    log_odds, spam_cuts, ham_cuts = np.empty(n), np.empty(n), np.empty(n)
    trained, auto = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    stopped = spam_stopped = 0
    started = time.perf_counter()
    for i, stream in enumerate(streams):
        score = model.log_odds(stream)
        spam_cut, ham_cut = model.cutoffs()
        log_odds[i], spam_cuts[i], ham_cuts[i] = score, spam_cut, ham_cut
        is_spam = bool(y[i])
        right = (score >= spam_cut) if is_spam else (score <= ham_cut)
        verdict = auto_label(score, spam_cut, ham_cut, margin)
        if verdict is False and ((rule["parts"] and parts_disagree(model, stream, *rule["parts"]))
                                 or (rule["strong"] and strong_tokens(model, stream, *rule["strong"]))):
            verdict = None
            stopped += 1
        elif verdict is True and rule["spamparts"] and parts_disagree(model, stream, *rule["spamparts"], -1.0):
            verdict = None
            spam_stopped += 1
        tokens = rule["spamtokens" if verdict else "tokens"] if verdict is not None else None
        if tokens is not None:
            keep = harness.token_mask(model.filter, stream, verdict, *tokens)
            if not keep:
                verdict = None
                if not right:
                    model.learn(stream, is_spam, score)
                    trained[i] = True
                continue
            if len(keep) < len(stream.hashes):
                stream = harness.MaskedStream(stream, keep)
                if rule[("spamtokens" if verdict else "tokens") + "_scale"]:
                    stream.scaled(model.filter.length_norm)
                if verdict != is_spam:     # the correction forgets what was learned and learns the message whole
                    model.learn(stream, verdict, score)
                    auto[i] = trained[i] = True
                    model.learn(stream, verdict, score, -1)
                    model.learn(streams[i], is_spam, score)
                    continue
        if verdict is not None:
            weight = 1.0 if verdict else rule["weight"]
            model.learn(stream, verdict, score, weight)
            auto[i] = trained[i] = True
            if verdict != is_spam:          # the user's correction: the verdict taken back exactly
                model.learn(stream, verdict, score, -weight)
                model.learn(stream, is_spam, score)
        elif not right:
            model.learn(stream, is_spam, score)
            trained[i] = True
    return (OnlineResult(log_odds, y, trained, time.perf_counter() - started, model.n_features,
                         spam_cuts, ham_cuts, auto), stopped, spam_stopped)


def main(argv=None):
    import numpy as np

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpora", nargs="*", default=list(CORPORA), metavar="CORPUS")
    ap.add_argument("--rules", default=DEFAULT_RULES, help="rules separated by ';' (see the module's help)")
    ap.add_argument("--json", metavar="PATH", help="write the figures as JSON")
    args = ap.parse_args(argv)
    rules = [(text.strip(), parse_rule(text)) for text in args.rules.split(";") if text.strip()]

    from spamnb.evaluation.online import OnlineModel, feedback_options, online_figures, run_online
    from spamnb.model.autolearn import AUTO_LEARN_MARGIN

    out = {"protocol": "on error + auto-learn, margin %g" % AUTO_LEARN_MARGIN, "corpora": {}}
    for corpus in args.corpora:
        name = os.path.basename(os.path.normpath(corpus))
        messages, how = harness.arrival_stream(corpus)
        datas, y = [data for data, _ in messages], np.asarray([is_spam for _, is_spam in messages], dtype=bool)
        shipped = online_figures(run_online(datas, y, **feedback_options("auto")))["one_minus_roca_percent"]
        tokenizer = OnlineModel()
        streams = [tokenizer.stream(data) for data in datas]
        print(f"{name}: {len(y)} messages ({int(y.sum())} spam), order {how}; shipped run_online: "
              f"(1-ROCA) {shipped:.4f} %", flush=True)
        rows = out["corpora"][name] = {"shipped": shipped, "rules": {}}
        for text, rule in rules:
            result, stopped, spam_stopped = run_rule(streams, y, rule, AUTO_LEARN_MARGIN)
            figure = online_figures(result)["one_minus_roca_percent"]
            if text == "none" and abs(figure - shipped) > 1e-9:
                raise SystemExit(f"autolearn_rules: rule none gave {figure} but run_online {shipped}: the copy differs")
            rows["rules"][text] = {"one_minus_roca_percent": figure, "ham_stopped": stopped,
                                   "spam_stopped": spam_stopped,
                                   "auto_learned": int(result.auto_learned.sum())}
            print(f"  {text:32s} (1-ROCA) {figure:.4f} %  ham stopped {stopped:5d}  "
                  f"spam stopped {spam_stopped:5d}  auto-learned {int(result.auto_learned.sum()):5d}  "
                  f"{result.seconds:.0f} s", flush=True)
    names = list(out["corpora"])
    print("\n| rule | " + " | ".join(f"{n} (1-ROCA) % | {n} ham stopped" for n in names) + " |")
    print("|---|" + "---:|---:|" * len(names))
    for text, _rule in rules:
        cells = [f"{out['corpora'][n]['rules'][text]['one_minus_roca_percent']:.4f} | "
                 f"{out['corpora'][n]['rules'][text]['ham_stopped']}" for n in names]
        print(f"| {text} | " + " | ".join(cells) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
