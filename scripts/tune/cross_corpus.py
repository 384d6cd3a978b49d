#!/usr/bin/env python3
"""Settings chosen on one shared corpus, judged on the other: a protocol that cannot flatter.

Each tuned setting is chosen on ONE corpus and reported on the OTHER (both
directions), beside the setting chosen on that corpus itself, the one chosen
on both, and the shipped one; bogofilter's figure in the same protocol beside.

Two protocols:

- ``--online`` (the TREC protocol, full feedback, from an empty model as
  ``spamnb learn`` grows one: ``spamnb.evaluation.online.run_online``, the
  stream in ``spamnb evaluate --online``'s order).  Figure: (1-ROCA) %.
  Families (each varied alone from the shipped learned model, the others kept):
  ``pairs`` (words alone, window 2 at weights 0.25 / 0.5 / 0.75 / 1, window 3
  at 0.5), ``alpha``, ``length_norm``.  bogofilter: ``--peers JSON``, a
  ``scripts/bench/bench_online.py --systems bogofilter --json`` report of the
  same streams (its run costs minutes of process starts: made once).
- ``--fixed`` (the fixed split, md5(relpath) % 5 == 0 is test): the choice
  by 5-fold cross-validation inside the train part (mean 1-AUC over the
  folds, the held-out log-odds of ``spamnb.estimator.calibrate.cross_val_log_odds``),
  the report on the test part of the other corpus (a filter fitted on its
  train part).  Word pairs are not a shared-corpus choice here: for every
  candidate they are decided inside the corpus's own train part by ``spamnb
  train``'s rule (``calibrate.prefer_pairs`` on the held-out spam missed at
  the cutoffs ``calibrate.from_scores`` chooses, and the held-out 1-AUC).
  Families: ``alpha``, ``length_norm``, ``subject_words``.  Paired wins and
  losses over the judged corpus's folds against the shipped settings.
  bogofilter: trained on the train part (``-s -b`` / ``-n -b``), the test
  part scored with ``-b -TT``.

"Chosen on both": the candidate with the lowest geometric mean over the two
corpora of its figure divided by the shipped setting's.  "Chosen on A,
judged on B": every family's choice on A, together, run on B.

    python scripts/tune/cross_corpus.py                          # both protocols, both shared corpora
    python scripts/tune/cross_corpus.py --online --peers bogofilter.json --json online.json
    python scripts/tune/cross_corpus.py --fixed --subsample 3000  # explore on a share of each train part
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if REPO not in sys.path:
    sys.path.insert(0, REPO)
CORPORA = (os.path.join(REPO, "..", "shared", "corpora", "spamassassin"),
           os.path.join(REPO, "..", "shared", "corpora", "enron-spam"))

# The online families: the learned model's settings (spamnb.estimator.defaults LEARNED_*,
# DEFAULT_ALPHA, DEFAULT_LENGTH_NORM) each varied alone.
ONLINE_FAMILIES = {
    "pairs": [{"word_pairs": 0}, {"pair_weight": 0.25}, {"pair_weight": 0.5}, {"pair_weight": 0.75},
              {"pair_weight": 1.0}, {"word_pairs": 3, "pair_weight": 0.5}],
    "alpha": [{"alpha": 0.0003}, {"alpha": 0.001}, {"alpha": 0.003}, {"alpha": 0.01}, {"alpha": 0.03}],
    "length_norm": [{"length_norm": 3.0}, {"length_norm": 5.0}, {"length_norm": 8.0}],
}
# The fixed split's families: what `spamnb train` fixes (word pairs it decides on the mail).
FIXED_FAMILIES = {
    "alpha": [{"alpha": 0.0003}, {"alpha": 0.001}, {"alpha": 0.003}, {"alpha": 0.01}],
    "length_norm": [{"length_norm": 0.0}, {"length_norm": 3.0}, {"length_norm": 5.0}, {"length_norm": 8.0}],
    "subject_words": [{"subject_words": True}, {"subject_words": False}],
}


def shipped_online():
    from spamnb.estimator.defaults import DEFAULT_ALPHA, DEFAULT_LENGTH_NORM, LEARNED_PAIR_WEIGHT, LEARNED_WORD_PAIRS

    return {"word_pairs": LEARNED_WORD_PAIRS, "pair_weight": LEARNED_PAIR_WEIGHT, "alpha": DEFAULT_ALPHA,
            "length_norm": DEFAULT_LENGTH_NORM}


def shipped_fixed():
    from spamnb.mail.tokenizer import DEFAULTS
    from spamnb.estimator.defaults import DEFAULT_ALPHA, DEFAULT_LENGTH_NORM

    return {"alpha": DEFAULT_ALPHA, "length_norm": DEFAULT_LENGTH_NORM, "subject_words": DEFAULTS["subject_words"]}


def key_of(settings):
    return ",".join(f"{k}={settings[k]:g}" if isinstance(settings[k], float) else f"{k}={settings[k]}"
                    for k in sorted(settings))


def choose(families, figure, corpora, base):
    """Per family: the candidate chosen on each corpus and on both (``figure(corpus, settings)``:
    lower is better).  Returns ``{family: {corpus or "both": candidate}}`` and the rows seen."""
    chosen, rows = {}, []
    for family, candidates in families.items():
        per = {}
        base_fig = {c: figure(c, base) for c in corpora}
        for cand in candidates:
            settings = dict(base, **cand)
            figs = {c: figure(c, settings) for c in corpora}
            rows.append((family, key_of(cand), figs))
            for c in corpora:
                if c not in per or figs[c] < per[c][1]:
                    per[c] = (cand, figs[c])
            gm = math.exp(sum(math.log(max(figs[c], 1e-9) / max(base_fig[c], 1e-9)) for c in corpora) / len(corpora))
            if "both" not in per or gm < per["both"][1]:
                per["both"] = (cand, gm)
        chosen[family] = {k: v[0] for k, v in per.items()}
    return chosen, rows


def candidate_table(title, chosen, rows, names):
    """The markdown lines of every candidate's figures and where it was chosen, and the
    report's dict (``judged`` left to fill)."""
    lines = [f"### {title}", "", "| family | candidate | " + " | ".join(names) + " | chosen on |",
             "|---|---|" + "---:|" * len(names) + "---|"]
    for family, cand, figs in rows:
        on = [w for w, c in chosen[family].items() if key_of(c) == cand]
        lines.append(f"| {family} | {cand} | " + " | ".join(f"{figs[c]:.4f}" for c in names) + f" | {', '.join(on)} |")
    out = {"candidates": [{"family": f, "candidate": c, "figures": figs} for f, c, figs in rows],
           "chosen": {f: {w: key_of(c) for w, c in per.items()} for f, per in chosen.items()}, "judged": []}
    return lines, out


def table_head(title, text_columns, number_columns):
    """A blank line, a ``###`` title and a markdown table's head (numbers right-aligned)."""
    return ["", f"### {title}", "", "| " + " | ".join(text_columns + number_columns) + " |",
            "|" + "---|" * len(text_columns) + "---:|" * len(number_columns)]


def combined(base, chosen, where):
    out = dict(base)
    for per in chosen.values():
        out.update(per[where])
    return out


# ---------------------------------------------------------------- online
def arrival_order(corpus, limit=None, shuffle=None):
    """``(None, labels, messages, order)`` of a corpus in ``spamnb evaluate --online``'s order
    (``limit``: about that many, every k-th message of the stream; ``shuffle``: a random
    order of the stream instead, seeded as ``bench_online.py --shuffle`` seeds it)."""
    import numpy as np

    from spamnb.evaluation.online import order_messages
    from spamnb.training.corpus import labelled_messages

    items = labelled_messages([corpus])
    order, how = order_messages([m.relpath for m in items], [m.data for m in items], "auto")
    if shuffle is not None:
        import random

        random.Random(shuffle).shuffle(order)
        how = f"shuffled, seed {shuffle}"
    if limit:
        order = order[::max(1, len(order) // limit)][:limit]
    return None, np.array([items[i].is_spam for i in order], dtype=bool), [items[i].data for i in order], how


class OnlineBench:
    """The online runs of each corpus's stream (``orders`` > 0: also that many random
    orders of it, seeds 1..orders, a setting chosen by its mean over them all)."""

    def __init__(self, corpora, limit=None, peers=None, shuffle=None, orders=0):
        import numpy as np

        self.streams, self.orders = {}, {}
        for path in corpora:
            name = os.path.basename(os.path.normpath(path))
            self.streams[name] = base = arrival_order(path, limit, shuffle)
            self.orders[name] = [base]
            for seed in range(1, orders + 1):
                order = list(range(len(base[1])))
                random.Random(seed).shuffle(order)
                self.orders[name].append((None, base[1][np.asarray(order)], [base[2][i] for i in order],
                                          f"shuffled, seed {seed}"))
        self.cache = {}
        self.peers = peers or {}

    def run(self, corpus, settings, mode="full", order=0):
        from spamnb.evaluation.online import feedback_options, online_figures, run_online
        from spamnb.mail.tokenizer import Tokenizer
        from spamnb.model.autolearn import AUTO_LEARN_MARGIN

        key = (corpus, key_of(settings), mode, order)
        if key not in self.cache:
            _paths, y, datas, how = self.orders[corpus][order]
            params = {k: v for k, v in settings.items() if k != "word_pairs"}
            result = run_online(datas, y, params, tokenizer=Tokenizer(word_pairs=settings["word_pairs"]),
                                **feedback_options(mode, AUTO_LEARN_MARGIN))
            figures = online_figures(result, threshold=0.0)
            self.cache[key] = figures
            print(f"  online {mode} {corpus} ({how}) {key_of(settings)}: "
                  f"(1-ROCA) {figures['one_minus_roca_percent']:.4f} %", file=sys.stderr)
        return self.cache[key]

    def figure(self, corpus, settings):
        """(1-ROCA) % in full feedback: the stream's own order, or the mean over its orders."""
        runs = [self.run(corpus, settings, "full", k) for k in range(len(self.orders[corpus]))]
        return sum(f["one_minus_roca_percent"] for f in runs) / len(runs)

    def mixing(self, corpus, settings):
        """Full feedback with the pair weight the model chooses on its own stream
        (``spamnb.estimator.variants.PairWeightChooser``): each message scored at
        weight 0 and 1 (the same counts), given the chooser's weight's log-odds,
        learned, its two held-out scores counted."""
        key = (corpus, key_of(settings), "mixing")
        if key not in self.cache:
            result, weights = mixing_run(self.streams[corpus][2], self.streams[corpus][1], settings)
            self.cache[key] = dict(online_figures_of(result), final_weight=float(weights[-1]),
                                   mean_weight=float(weights.mean()))
            print(f"  online mixing {corpus}: (1-ROCA) {self.cache[key]['one_minus_roca_percent']:.4f} %",
                  file=sys.stderr)
        return self.cache[key]


    def bogofilter(self, corpus, mode="full"):
        """bogofilter's (1-ROCA) % on this stream from a ``bench_online.py --json`` report (None: not given)."""
        known = self.peers.get(corpus, {}).get(f"{mode}/bogofilter")
        if known is None or known["n"] != len(self.streams[corpus][1]):    # another stream (--limit): no figure
            return None
        return known["one_minus_roca_percent"]


def online_figures_of(result):
    from spamnb.evaluation.online import online_figures

    return online_figures(result, threshold=0.0)


def mixing_run(datas, y, settings):
    """:func:`spamnb.evaluation.online.run_online`, full feedback, the pair weight chosen as it goes;
    returns its ``OnlineResult`` and the weight each message was scored at."""
    import time

    import numpy as np

    from spamnb.evaluation.online import OnlineModel, OnlineResult
    from spamnb.mail.tokenizer import Tokenizer
    from spamnb.estimator.prequential import counts_scores
    from spamnb.estimator.variants import PairWeightChooser

    params = {k: v for k, v in settings.items() if k not in ("word_pairs", "pair_weight")}
    model = OnlineModel(Tokenizer(word_pairs=settings["word_pairs"]), params)
    chooser = PairWeightChooser()
    n = len(y)
    log_odds, spam_cuts, ham_cuts, weights = (np.empty(n) for _ in range(4))
    started = time.perf_counter()
    for i, data in enumerate(datas):
        stream = model.stream(data)
        model.pair_weight = 0.0
        words = model.log_odds(stream)
        model.pair_weight = 1.0
        pairs = model.log_odds(stream) - words if np.isfinite(words) else 0.0
        weights[i] = w = chooser.weight
        log_odds[i] = score = words + w * pairs if np.isfinite(words) else words
        spam_cuts[i], ham_cuts[i] = model.cutoffs()
        if counts_scores(model.class_count_):
            chooser.add(words, pairs, bool(y[i]))
        model.learn(stream, bool(y[i]), score)
    result = OnlineResult(log_odds, np.asarray(y, dtype=bool), np.ones(n, dtype=bool), time.perf_counter() - started,
                          model.n_features, spam_cuts, ham_cuts, None)
    return result, weights


def variants_of(spec):
    """The variants object a ``--variants`` spec names: ``chooser`` (the argmax of the running
    1-AUC, ``PairWeightChooser``) or ``mixture[:eta[:prior width[:temperature]]]``
    (``PairWeightMixture``, its log loss), ``rank[:eta[:prior width[:horizon]]]`` (the
    same, its prequential ranking loss, discounted over about ``horizon`` messages);
    ``rank-scaled:...`` (the same, its scores rescaled to the shipped weight's spread);
    ``pair-mixture`` (``PairMixture``: what a learned model keeps in its file and
    ``spamnb learn`` runs, rank-scaled:3 in pure Python)."""
    from spamnb.estimator import variants

    name, *values = spec.split(":")
    if name == "chooser":
        return variants.PairWeightChooser()
    if name == "pair-mixture" and not values:
        return variants.PairMixture()
    if name in ("mixture", "rank", "rank-scaled"):
        keys = ("eta", "prior_width")
        options = {k: float(v) for k, v in zip(keys, values)}
        if name.startswith("rank"):
            options["loss"] = "rank"
            options["rescale"] = name == "rank-scaled"
        if len(values) > 2 and name.startswith("rank"):
            options["horizon"] = float(values[2])
        elif len(values) > 2:   # one temperature (the log-odds read as they are: 1)
            options["temperatures"] = (float(values[2]),)
        return variants.PairWeightMixture(**options)
    raise ValueError(f"unknown variants {spec!r}: chooser or mixture[:eta[:width[:temperature]]]")


def run_variants(args, report):
    """The shipped learned model against the pair weight its variants choose on its own
    stream, in each feedback mode and each order: (1-ROCA) % and lam %, the mean over the
    orders, the paired wins and losses."""
    from spamnb.evaluation.online import feedback_options, online_figures, run_online
    from spamnb.mail.tokenizer import Tokenizer
    from spamnb.model.autolearn import AUTO_LEARN_MARGIN

    bench = OnlineBench(args.corpora, args.limit, None, args.shuffle, args.orders)
    base = shipped_online()
    params = {k: v for k, v in base.items() if k != "word_pairs"}
    specs = args.variants.split(",")
    lines = ["| corpus | feedback | order | shipped (1-ROCA) % | " + " | ".join(f"{v} (1-ROCA) %" for v in specs)
             + " | shipped lam % | " + " | ".join(f"{v} lam %" for v in specs) + " | "
             + " | ".join(f"{v} weight at the end" for v in specs) + " |",
             "|---|---|---|" + "---:|" * (2 + 3 * len(specs))]
    out = report.setdefault("variants", [])
    for name in bench.streams:
        for mode in [m for m in args.modes.split(",") if m]:
            rows = []
            for k, (_paths, y, datas, how) in enumerate(bench.orders[name]):
                shipped = bench.run(name, base, mode, k)
                row = {"corpus": name, "mode": mode, "order": how, "shipped": shipped["one_minus_roca_percent"],
                       "shipped_lam": shipped["lam"], "variants": {}}
                for spec in specs:
                    chooser = variants_of(spec)
                    result = run_online(datas, y, params, tokenizer=Tokenizer(word_pairs=base["word_pairs"]),
                                        variants=chooser, **feedback_options(mode, AUTO_LEARN_MARGIN))
                    figs = online_figures(result, threshold=0.0)
                    row["variants"][spec] = {"one_minus_roca_percent": figs["one_minus_roca_percent"],
                                             "lam": figs["lam"], "final_weight": float(chooser.weight)}
                    print(f"  variants {spec} {mode} {name} ({how}): (1-ROCA) {figs['one_minus_roca_percent']:.4f} % "
                          f"(shipped {shipped['one_minus_roca_percent']:.4f}), weight at the end "
                          f"{chooser.weight:.3f}", file=sys.stderr)
                rows.append(row)
                v = row["variants"]
                lines.append(f"| {name} | {mode} | {how} | {row['shipped']:.4f} | "
                             + " | ".join(f"{v[s]['one_minus_roca_percent']:.4f}" for s in specs)
                             + f" | {100 * row['shipped_lam']:.2f} | "
                             + " | ".join(f"{100 * v[s]['lam']:.2f}" for s in specs) + " | "
                             + " | ".join(f"{v[s]['final_weight']:.3f}" for s in specs) + " |")
            if len(rows) > 1:
                def mean(values):
                    return sum(values) / len(values)

                cells, lams, records = [], [], []
                for s in specs:
                    cells.append(f"{mean([r['variants'][s]['one_minus_roca_percent'] for r in rows]):.4f}")
                    lams.append(f"{100 * mean([r['variants'][s]['lam'] for r in rows]):.2f}")
                    wins = sum(r["variants"][s]["one_minus_roca_percent"] < r["shipped"] for r in rows)
                    losses = sum(r["variants"][s]["one_minus_roca_percent"] > r["shipped"] for r in rows)
                    records.append(f"{wins}/{losses} wins/losses")
                lines.append(f"| {name} | {mode} | mean over {len(rows)} orders | {mean([r['shipped'] for r in rows]):.4f} | "
                             + " | ".join(cells) + f" | {100 * mean([r['shipped_lam'] for r in rows]):.2f} | "
                             + " | ".join(lams) + " | " + " | ".join(records) + " |")
            out.extend(rows)
    return lines


def run_online_protocol(args, report):
    peers = {}
    for path in args.peers or ():
        with open(path) as f:
            for corpus, entry in json.load(f)["corpora"].items():
                peers.setdefault(corpus, {}).update({key: dict(fig, n=entry["n"]) for key, fig in entry["systems"].items()})
    bench = OnlineBench(args.corpora, args.limit, peers, args.shuffle, args.orders)
    names = list(bench.streams)
    base = shipped_online()
    if args.mixing_only:
        lines = ["| corpus (order) | shipped (1-ROCA) % | own pair weight (1-ROCA) % | weight at the end | mean weight |",
                 "|---|---:|---:|---:|---:|"]
        report["mixing"] = {}
        for name in names:
            shipped, own = bench.run(name, base), bench.mixing(name, base)
            lines.append(f"| {name} ({bench.streams[name][3]}) | {shipped['one_minus_roca_percent']:.4f} | "
                         f"{own['one_minus_roca_percent']:.4f} | {own['final_weight']:g} | {own['mean_weight']:.2f} |")
            report["mixing"][name] = {"shipped": shipped["one_minus_roca_percent"], "own": own["one_minus_roca_percent"],
                                      "final_weight": own["final_weight"], "mean_weight": own["mean_weight"]}
        return lines
    chosen, rows = choose(ONLINE_FAMILIES, bench.figure, names, base)
    lines, out = candidate_table("Online, full feedback: each candidate, (1-ROCA) % (the others at the shipped "
                                 "settings; with --orders, the mean over the orders)", chosen, rows, names)
    lines += table_head("Online, settings chosen on one corpus and judged on the other",
                        ["judged on", "feedback", "settings chosen on", "settings"],
                        ["spamnb (1-ROCA) %", "lam %", "bogofilter (1-ROCA) %", "ratio", "mean (1-ROCA) % over the orders"])
    modes = [m for m in args.modes.split(",") if m]
    for judged in names:
        others = [c for c in names if c != judged]
        for mode in modes:
            bogo = bench.bogofilter(judged, mode)
            rows_here = ([(f"{o} (the other)", combined(base, chosen, o)) for o in others]
                         + [(f"{judged} (itself)", combined(base, chosen, judged)),
                            ("both", combined(base, chosen, "both")), ("shipped", base)])
            if args.mixing and mode == "full":
                rows_here.append(("none: the model's own stream (pair weight)", dict(base, pair_weight="own")))
            for label, settings in rows_here:
                if settings["pair_weight"] == "own":
                    figs = bench.mixing(judged, dict(base))
                    settings = dict(base, pair_weight=f"own (ends at {figs['final_weight']:g})")
                else:
                    figs = bench.run(judged, settings, mode)
                ratio = None if bogo is None else figs["one_minus_roca_percent"] / bogo
                over = (bench.figure(judged, settings) if mode == "full" and args.orders
                        and "own" not in str(settings["pair_weight"]) else None)
                lines.append(f"| {judged} | {mode} | {label} | {key_of(settings)} | {figs['one_minus_roca_percent']:.4f} | "
                             f"{100 * figs['lam']:.2f} | {'-' if bogo is None else f'{bogo:.4f}'} | "
                             f"{'-' if ratio is None else f'{ratio:.2f}x'} | {'-' if over is None else f'{over:.4f}'} |")
                out["judged"].append({"corpus": judged, "mode": mode, "chosen_on": label, "settings": key_of(settings),
                                      "mean_over_orders": over,
                                      "one_minus_roca_percent": figs["one_minus_roca_percent"], "lam": figs["lam"],
                                      "bogofilter": bogo, "ratio": ratio})
    report["online"] = out
    return lines


# ---------------------------------------------------------------- fixed split
class FixedBench:
    def __init__(self, corpora, n_folds=5, subsample=0, seed=0):
        import numpy as np

        from spamnb.evaluation.crossval import md5_split
        from spamnb.estimator.calibrate import stratified_folds
        from spamnb.training.corpus import labelled_messages

        self.corpora = {}
        for path in corpora:
            items = labelled_messages([path])
            name = os.path.basename(os.path.normpath(path))
            y = np.array([m.is_spam for m in items], dtype=bool)
            train, test = md5_split([m.relpath for m in items])
            if subsample:
                rng = np.random.default_rng(seed)
                train = np.sort(rng.choice(train, size=min(subsample, train.size), replace=False))
            self.corpora[name] = {"path": path, "relpaths": [m.relpath for m in items], "data": [m.data for m in items],
                                  "y": y, "train": train, "test": test,
                                  "folds": stratified_folds(y[train], n_folds, 0)}
        self.n_folds = n_folds
        self.cv_cache, self.test_cache = {}, {}

    def _filter(self, settings, window):
        from spamnb import SpamFilter
        from spamnb.mail.tokenizer import Tokenizer, with_pairs

        tok = {k: v for k, v in settings.items() if k in ("subject_words",)}
        model = {k: v for k, v in settings.items() if k not in tok}
        return SpamFilter(tokenizer=with_pairs(window, Tokenizer(**tok)), **model)

    def cv(self, corpus, settings):
        """(per-fold 1-AUC % of the variant train's rule keeps, window kept) inside the train part."""
        import numpy as np

        from spamnb.bayes.metrics import one_minus_auc_percent
        from spamnb.estimator import calibrate

        key = (corpus, key_of(settings))
        if key in self.cv_cache:
            return self.cv_cache[key]
        c = self.corpora[corpus]
        msgs = [c["data"][i] for i in c["train"]]
        y = c["y"][c["train"]]
        variants = {}
        for window in (0, calibrate.AUTO_PAIRS):
            f = self._filter(settings, window).fit(msgs, y, tune=False)
            held = calibrate.cross_val_log_odds(f, msgs, y, self.n_folds, 0)
            cal = calibrate.from_scores(held[~y], held[y], self.n_folds)
            variants[window] = (held, cal.expected_spam_missed, one_minus_auc_percent(y, held))
        (w0, v0), (w2, v2) = sorted(variants.items())
        window = w2 if calibrate.prefer_pairs(v0[1], v2[1], v0[2], v2[2]) else w0
        held = variants[window][0]
        per_fold = np.array([one_minus_auc_percent(y[f], held[f]) for f in c["folds"]])
        self.cv_cache[key] = (per_fold, window)
        print(f"  fixed CV {corpus} {key_of(settings)}: 1-AUC {per_fold.mean():.4f} % (pairs {window})", file=sys.stderr)
        return self.cv_cache[key]

    def figure(self, corpus, settings):
        return float(self.cv(corpus, settings)[0].mean())

    def test(self, corpus, settings):
        import numpy as np

        from spamnb.bayes.metrics import one_minus_auc_percent

        key = (corpus, key_of(settings))
        if key not in self.test_cache:
            c = self.corpora[corpus]
            _per_fold, window = self.cv(corpus, settings)
            f = self._filter(settings, window).fit([c["data"][i] for i in c["train"]], c["y"][c["train"]], tune=False)
            scores = np.asarray(f.score_many([c["data"][i] for i in c["test"]]))
            self.test_cache[key] = one_minus_auc_percent(c["y"][c["test"]], scores)
        return self.test_cache[key]

    def bogofilter(self, corpus):
        import subprocess

        import numpy as np

        from spamnb.bayes.metrics import one_minus_auc_percent

        c = self.corpora[corpus]
        if "bogofilter" not in c:
            with tempfile.TemporaryDirectory(prefix="cross-corpus-bogo-") as db:
                path = lambda i: os.path.join(c["path"], c["relpaths"][i])  # noqa: E731
                for flag, spam in (("-s", True), ("-n", False)):
                    names = "".join(path(i) + "\n" for i in c["train"] if c["y"][i] == spam)
                    subprocess.run(["bogofilter", "-C", "-d", db, flag, "-b"], input=names.encode(), check=True)
                out = subprocess.run(["bogofilter", "-C", "-d", db, "-b", "-TT"], capture_output=True,
                                     input="".join(path(i) + "\n" for i in c["test"]).encode()).stdout.decode()
            score = {p: float(v) for p, _, v in (line.rpartition(" ") for line in out.splitlines())}
            c["bogofilter"] = one_minus_auc_percent(c["y"][c["test"]],
                                                    np.array([score[path(i)] for i in c["test"]]))
        return c["bogofilter"]


def run_fixed_protocol(args, report):
    bench = FixedBench(args.corpora, args.folds, args.subsample)
    names = list(bench.corpora)
    base = shipped_fixed()
    chosen, rows = choose(FIXED_FAMILIES, bench.figure, names, base)
    lines, out = candidate_table("Fixed split: each candidate, CV 1-AUC % inside the train part (the others at the "
                                 "shipped settings)", chosen, rows, names)
    lines += table_head("Fixed split, settings chosen on one corpus and judged on the other's test part",
                        ["judged on", "settings chosen on", "settings"],
                        ["pairs (own rule)", "test 1-AUC %", "CV 1-AUC %", "wins/losses vs shipped (folds)",
                         "bogofilter test 1-AUC %"])
    for judged in names:
        others = [c for c in names if c != judged]
        bogo = bench.bogofilter(judged)
        base_folds = bench.cv(judged, base)[0]
        for label, settings in ([(f"{o} (the other)", combined(base, chosen, o)) for o in others]
                                + [(f"{judged} (itself)", combined(base, chosen, judged)),
                                   ("both", combined(base, chosen, "both")), ("shipped", base)]):
            folds, window = bench.cv(judged, settings)
            test = bench.test(judged, settings)
            record = f"{int((folds < base_folds).sum())}/{int((folds > base_folds).sum())}"
            lines.append(f"| {judged} | {label} | {key_of(settings)} | {window} | {test:.4f} | {folds.mean():.4f} | "
                         f"{record} | {bogo:.4f} |")
            out["judged"].append({"corpus": judged, "chosen_on": label, "settings": key_of(settings), "pairs": window,
                                  "test_one_minus_auc_percent": test, "cv_per_fold": folds.tolist(),
                                  "wins_losses": record, "bogofilter": bogo})
    report["fixed"] = out
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpora", nargs="*", default=list(CORPORA), metavar="CORPUS")
    parser.add_argument("--online", action="store_true", help="the online protocol only")
    parser.add_argument("--fixed", action="store_true", help="the fixed split only")
    parser.add_argument("--modes", default="full", help="online feedback modes the chosen settings are judged in "
                                                        "(full, error, auto; chosen in full feedback)")
    parser.add_argument("--limit", type=int, help="online: about N messages of each stream (every k-th)")
    parser.add_argument("--peers", nargs="+", metavar="JSON",
                        help="online: bogofilter's figures, from scripts/bench/bench_online.py --systems bogofilter "
                             "--modes M --json reports of the same streams (without: no peer column)")
    parser.add_argument("--mixing", action="store_true",
                        help="online: also a row of the pair weight the model chooses on its own stream "
                             "(spamnb.estimator.variants; full feedback)")
    parser.add_argument("--mixing-only", action="store_true",
                        help="online: only the shipped learned model against the pair weight it chooses on its own "
                             "stream (no families)")
    parser.add_argument("--variants", metavar="SPEC[,SPEC...]",
                        help="online: only the shipped learned model against the pair weight chosen on the model's "
                             "own stream by each SPEC (chooser: the argmax of the running 1-AUC; "
                             "mixture[:eta[:prior width[:temperature]]]: spamnb.estimator.variants.PairWeightMixture, its log loss; "
                             "rank[:eta[:prior width[:horizon]]]: the same, its prequential ranking loss; "
                             "rank-scaled[:...]: the same rescaled; pair-mixture: the one a learned model keeps), "
                             "in each of --modes and each order (with --orders: the mean and paired wins)")
    parser.add_argument("--shuffle", type=int, metavar="SEED", help="online: a random order of each stream")
    parser.add_argument("--orders", type=int, default=0, metavar="N",
                        help="online: choose each setting by its mean (1-ROCA) over the stream's order and N random "
                             "orders of it (seeds 1..N), and report that mean beside (default 0: the order alone)")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--subsample", type=int, default=0, help="fixed: N messages of each train part")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(argv)
    if len(args.corpora) < 2 and not args.variants:   # --variants judges each stream alone
        parser.error("two corpora at least: a setting is chosen on one and judged on another")
    both = not (args.online or args.fixed)
    report, lines = {}, []
    if args.variants:
        lines += run_variants(args, report)
        args.online = args.fixed = both = False
    if args.mixing_only:
        args.online, both = True, False
    if args.online or both:
        lines += run_online_protocol(args, report) + [""]
    if args.fixed or both:
        lines += run_fixed_protocol(args, report)
    print("\n".join(lines))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
