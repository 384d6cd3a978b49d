"""SpamFilter: the mail filter on top of the tokenizer, vocabulary and count model.

The state is a :class:`spamnb.bayes.wordcounts.WordCounts` (messages and token
counts per class, the only place that derives log theta and log P(c)) and a
:class:`spamnb.bayes.vocabulary.Vocabulary`.  ``fit`` adds each message's counts as
it is tokenized; ``learn`` and ``forget`` are one signed add; after
``SpamFilter.load`` the counts, the derived logs and the vocabulary's hash
index are views of the model file read into memory (``spamnb.model.schema``), so
scoring one message of a loaded model needs neither numpy nor any per-token
Python object: that is the ``spamnb classify`` cold path.

Scoring one message (``score``/``classify``) runs one compiled function:
look up the token hashes, count them, and sum x_i log theta_ci with
log theta_ci = log(N_ci + alpha) - log(N_c + alpha V) computed for the
message's own tokens only.  ``score_many`` scores a batch through the sparse
kernel over the same log theta; both agree to rounding.

Labels: True (or "spam") is spam, False (or "ham") is ham.  Classes are
ordered [ham, spam], so the log-odds are jll[spam] - jll[ham].
"""

from __future__ import annotations

import math
import os
import stat
from collections import namedtuple

from spamnb.bayes import _vocab

from spamnb.model import schema

from spamnb.model import verdict
from spamnb.model.ages import Ages
from spamnb.model.labels import is_spam_label
from spamnb.model.store import ModelError
from spamnb.mail.tokenizer import Tokenizer
from spamnb.bayes.vocabulary import Vocabulary
from spamnb.bayes.wordcounts import WordCounts

__all__ = ["SpamFilter", "Score", "Verdict", "message_bytes", "default_model_path", "COUNT_TRANSFORMS"]

CLASSES = schema.CLASSES
COUNT_TRANSFORMS = {"raw": _vocab.COUNTS_RAW, "binary": _vocab.COUNTS_BINARY, "log": _vocab.COUNTS_LOG}
PRIORS = ("mle", "map", "uniform")

# Defaults, chosen by 5-fold cross-validation on the TRAIN part of the fixed split
# (python scripts/tune_filter.py; figures in docs/filter.md).
# -- alpha and counts: log(1 + count) with alpha 0.01 had the lowest CV 1-AUC
#    (0.0313 %; binary 0.0316 %, alpha 0.1: 0.0480 %, alpha 0.003: 0.0317 %)
#    without length normalisation; with it (below) alpha 0.001: alpha / length
#    is what ranks, and 0.001 / 5 won on both corpora (docs/accuracy.md).
DEFAULT_ALPHA = 0.001
DEFAULT_COUNTS = "log"
# -- prior: MLE and Dirichlet MAP give the same figures to the precision shown.
DEFAULT_PRIOR = "mle"
# -- cutoffs: spam at log-odds >= 14 (P >= 0.9999992) is the lowest cutoff whose CV
#    false-positive rate is <= 0.1 % (0.091 %; spam missed 5.45 %, unsure counted as
#    missed); ham at log-odds <= -4 (P <= 0.018), unsure in between.  With length
#    normalisation the scores of both classes sit closer to 0: at log-odds 0 the
#    held-out spam at or below the cutoff rose (SpamAssassin 2.66 -> 3.06 %), at -4
#    the held-out ham above it is where log-odds 0 had it before (0.33 %) and the
#    spam below it lower (2.26 %): 5-fold CV inside the train part, docs/accuracy.md.
DEFAULT_SPAM_CUTOFF = 0.9999992
DEFAULT_HAM_LOG_ODDS = -4.0
DEFAULT_HAM_CUTOFF = 1.0 / (1.0 + math.exp(-DEFAULT_HAM_LOG_ODDS))   # P = 0.018
# -- length_norm: 5 (with alpha 0.001).  Scaling each message's log counts to
#    Euclidean length 5 lowered the 5-fold CV 1-AUC on the train part of BOTH
#    corpora (SpamAssassin 0.0441 -> 0.0259 %, 4 wins / 0 losses; Enron-Spam
#    0.1421 -> 0.1110 %, 5/0; docs/accuracy.md, "The default since ...").
#    A model file keeps the settings it was written with (0 when it has none).
DEFAULT_LENGTH_NORM = 5.0
DEFAULT_EVIDENCE = 10
MAX_EVIDENCE = 1000


def default_model_path():
    """``$SPAMNB_HOME/model.spamnb``, or ``~/.spamnb/model.spamnb``."""
    home = os.environ.get("SPAMNB_HOME") or os.path.join(os.path.expanduser("~"), ".spamnb")
    return os.path.join(home, "model.spamnb")


def message_bytes(message):
    """The raw bytes of a message given as bytes, a path (``os.PathLike``, such
    as ``pathlib.Path``), an ``email.message.Message``, or ``str`` text (encoded
    as UTF-8).  A ``str`` of one line naming an existing file is refused
    (TypeError): a path must be a ``pathlib.Path``, text must not pass for one."""
    if isinstance(message, bytes):
        return message
    if isinstance(message, (bytearray, memoryview)):
        return bytes(message)
    if isinstance(message, os.PathLike):
        return _read_file(message)
    if isinstance(message, str):
        if "\n" not in message and os.path.exists(message):
            raise TypeError(f"a str message is the message's text, and {message!r} names a file: "
                            "pass pathlib.Path(...) to read a file")
        return message.encode("utf-8", "surrogateescape")
    if hasattr(message, "as_bytes"):  # email.message.Message, without importing email
        try:
            return message.as_bytes()
        except Exception:  # a Message that cannot be re-serialised (bad charset, ...)
            return str(message).encode("utf-8", "surrogateescape")
    raise TypeError(f"a message must be bytes, str text, a path (os.PathLike) or an email.message.Message, "
                    f"not {type(message).__name__}")


def _read_file(path):
    """The whole content of the file at ``path``.  With ``os`` calls instead of
    ``open(path, "rb").read()``: 5.6 instead of 8.5 us per corpus message (no
    file object, and no second read to find the end of a regular file)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        chunks = []
        if stat.S_ISREG(info.st_mode):
            data = os.read(fd, info.st_size + 1)
            if len(data) <= info.st_size:   # a regular file reads short only at its end
                return data
            chunks.append(data)             # it grew since fstat: read on
        while True:                         # pipes and the like have no size to go by
            chunk = os.read(fd, 65536)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        os.close(fd)


_probability = verdict.probability


# collections.namedtuple, not typing.NamedTuple: importing typing costs ~2.7 ms
# of the ``spamnb classify`` cold start where nothing else has imported it.
class Score(namedtuple("Score", "probability log_odds")):
    """A message's spam probability P(spam | message) and log-odds log P(spam|m)/P(ham|m)."""

    __slots__ = ()


class Verdict(namedtuple("Verdict", "label probability log_odds evidence tokens known_tokens",
                         defaults=((), 0, 0))):
    """The filter's decision on one message.

    ``label`` is "spam", "ham" or "unsure"; ``evidence`` lists the strongest
    tokens as ``(token, weight)``, weight > 0 pointing to spam, strongest
    first; ``tokens`` counts the message's tokens, ``known_tokens`` those in
    the vocabulary.
    """

    __slots__ = ()


class SpamFilter:
    """A Bayesian spam filter.

    Parameters
    ----------
    tokenizer : Tokenizer, optional
        How messages become tokens (default ``Tokenizer()``); part of the model.
    alpha : float
        Dirichlet soft count added to every token count (``theta_ci =
        (N_ci + alpha) / (N_c + alpha V)``).
    prior : {"mle", "map", "uniform"}
        Class prior estimator (``ClassPrior``); "map" uses a Dirichlet prior
        with one pseudo-message per class.
    counts : {"binary", "raw", "log"}
        What a token contributes per message: presence, its count, or log(1 + count).
    spam_cutoff, ham_cutoff : float
        A message is spam when P(spam) >= spam_cutoff, ham when P(spam) <=
        ham_cutoff, unsure in between.
    n_evidence : int
        How many tokens a verdict lists as its evidence.
    feature_weight : float
        Weight of the continuous message features (``spamnb.model.message_features``: size,
        links, share of capitals, ...) modelled by a Gaussian naive Bayes whose
        log-likelihood ratio is added to the word log-odds under the one class
        prior.  0 (the default, chosen by cross-validation: docs/features.md)
        leaves them out.  With features on, ``forget`` is not available.
    length_norm : float
        When > 0, each message's transformed token counts are scaled to this
        Euclidean length before they are added or scored (length normalisation,
        Rennie et al. 2003; when scoring, over the tokens the model knows).
        0 leaves them as they are; the default is 5 (``DEFAULT_LENGTH_NORM``).
    """

    def __init__(self, tokenizer=None, alpha=DEFAULT_ALPHA, prior=DEFAULT_PRIOR, counts=DEFAULT_COUNTS,
                 spam_cutoff=DEFAULT_SPAM_CUTOFF, ham_cutoff=DEFAULT_HAM_CUTOFF, n_evidence=DEFAULT_EVIDENCE,
                 feature_weight=0.0, length_norm=DEFAULT_LENGTH_NORM):
        self.tokenizer = tokenizer
        self.alpha = alpha
        self.prior = prior
        self.counts = counts
        self.spam_cutoff = spam_cutoff
        self.ham_cutoff = ham_cutoff
        self.n_evidence = n_evidence
        self.feature_weight = feature_weight
        self.length_norm = length_norm
        self._check_params()
        self.tokenizer_ = tokenizer if tokenizer is not None else Tokenizer()
        self.vocabulary_ = Vocabulary()
        self.word_counts_ = None  # WordCounts once fitted, learned or loaded
        self.ages_ = Ages()       # last-seen day per token, the model's dates (spamnb.model.ages)
        self.ledger_ = None       # spamnb.model.ledger.Ledger of the messages `spamnb learn` took, or None
        self._scorer = None       # a _vocab.Scorer over the counts and the vocabulary, made on first use
        self.features_ = None    # FeatureModel when feature_weight > 0
        self.source_ = None      # the model file a loaded filter came from

    # ------------------------------------------------------------------ params
    def _check_params(self):
        if not (isinstance(self.alpha, (int, float)) and math.isfinite(self.alpha) and self.alpha > 0):
            raise ValueError(f"alpha must be a positive number, got {self.alpha!r}")
        if self.prior not in PRIORS:
            raise ValueError(f"prior must be one of {PRIORS}, got {self.prior!r}")
        if self.counts not in COUNT_TRANSFORMS:
            raise ValueError(f"counts must be one of {tuple(COUNT_TRANSFORMS)}, got {self.counts!r}")
        if not 0.0 <= self.ham_cutoff <= self.spam_cutoff <= 1.0:
            raise ValueError("cutoffs must satisfy 0 <= ham_cutoff <= spam_cutoff <= 1")
        if (isinstance(self.n_evidence, bool) or not isinstance(self.n_evidence, int)
                or not 0 <= self.n_evidence <= MAX_EVIDENCE):
            raise ValueError(f"n_evidence must be an integer from 0 to {MAX_EVIDENCE}, got {self.n_evidence!r}")
        if not (isinstance(self.feature_weight, (int, float)) and math.isfinite(self.feature_weight)
                and self.feature_weight >= 0):
            raise ValueError(f"feature_weight must be a number >= 0, got {self.feature_weight!r}")
        if not (isinstance(self.length_norm, (int, float)) and math.isfinite(self.length_norm)
                and self.length_norm >= 0):
            raise ValueError(f"length_norm must be a number >= 0, got {self.length_norm!r}")

    def _new_counts(self):
        return WordCounts(float(self.alpha), self.prior, len(CLASSES))

    # ------------------------------------------------------------------ state
    @property
    def is_fitted(self):
        return self.word_counts_ is not None

    @property
    def class_count_(self):
        """Messages learned per class, [ham, spam] (floats)."""
        return tuple(self.word_counts_.class_count_) if self.word_counts_ is not None else (0.0, 0.0)

    @property
    def model_(self):
        """A :class:`MultinomialNB` with a copy of the counts (classes 0 ham, 1 spam)."""
        return self._counts().to_estimator()

    def _require_fitted(self):
        if not self.is_fitted:
            raise ValueError("this SpamFilter has learned nothing yet: fit, learn or load a model first")

    def _counts(self):
        """The count model, as wide as the vocabulary (tokens it never counted count 0)."""
        self._require_fitted()
        self.word_counts_.resize(self.vocabulary_.n_features)
        return self.word_counts_

    def _scoring(self):
        if self._scorer is None:
            log_count, log_norm, log_prior = self._counts().derived()
            vocab = self.vocabulary_
            self._scorer = _vocab.Scorer(vocab.keys, vocab.values, log_count, vocab.n_features, log_norm, log_prior,
                                         COUNT_TRANSFORMS[self.counts], float(self.length_norm))
        return self._scorer

    # ------------------------------------------------------------------ training
    def _rows(self, messages, grow, features=None):
        """A CSRBuilder with the messages' transformed token counts; the messages'
        continuous features are appended to ``features`` when it is a list."""
        builder = _vocab.CSRBuilder(COUNT_TRANSFORMS[self.counts], float(self.length_norm))
        stream = self.tokenizer_.stream
        index = self.vocabulary_.add if grow else (lambda s: self.vocabulary_.lookup(s.hashes))
        for message in messages:
            data = message_bytes(message)
            builder.add_row(index(stream(data)))
            if features is not None:
                features.append(self._message_features(data))
        return builder

    def _message_features(self, data):
        from spamnb.model.message_features import raw_message_features

        tokenizer = self.tokenizer_
        return raw_message_features(data, max_bytes=tokenizer.max_bytes, max_depth=tokenizer.max_depth,
                                    max_parts=tokenizer.max_parts, fallback_charset=tokenizer.fallback_charset)

    def _csr(self, builder):
        import numpy as np
        from scipy import sparse

        n_rows = builder.n_rows
        indptr = np.frombuffer(builder.indptr, dtype=np.int64)  # never empty: it starts with 0
        indices = np.frombuffer(builder.indices, dtype=np.int32) if len(builder.indices) else np.zeros(0, np.int32)
        data = np.frombuffer(builder.data, dtype=np.float64) if len(builder.data) else np.zeros(0, np.float64)
        return sparse.csr_matrix((data, indices, indptr), shape=(n_rows, self.vocabulary_.n_features))

    def fit(self, messages, labels):
        """Learn from scratch: ``messages`` (bytes, paths or Message objects), ``labels``
        (True/"spam" for spam, False/"ham" for ham).  Returns self.

        Each message's transformed token counts are added to its class's
        counts as it is tokenized (``WordCounts.add``): the same sums, in the
        same order, as ``MultinomialNB.partial_fit`` over the messages' rows,
        without building the rows.
        """
        y = [int(is_spam_label(label)) for label in labels]
        self.vocabulary_ = vocabulary = Vocabulary()
        self.word_counts_ = self._scorer = self.features_ = None
        features = [] if self.feature_weight else None
        counts = self._new_counts()
        add = counts.add
        transform = COUNT_TRANSFORMS[self.counts]
        length = float(self.length_norm)
        stream = self.tokenizer_.stream
        n_messages = 0
        for message in messages:  # may be lazy (progress bars)
            data = message_bytes(message)
            indices = vocabulary.add(stream(data))
            if n_messages < len(y):
                add(indices, y[n_messages], transform, 1, vocabulary.n_features, length)
            if features is not None:
                features.append(self._message_features(data))
            n_messages += 1
        if n_messages != len(y):
            raise ValueError(f"{n_messages} messages but {len(y)} labels")
        counts.resize(vocabulary.n_features)
        self.word_counts_ = counts
        self.ages_ = Ages.fresh(vocabulary.n_features, max_tokens=self.ages_.max_tokens)
        if features is not None:
            from spamnb.model.message_features import FeatureModel

            self.features_ = FeatureModel().fit(features, [bool(v) for v in y])
        return self

    def learn(self, message, spam):
        """Add one message to the counts (train-on-error).  ``spam`` is the
        label, as ``fit`` takes it: True/"spam" or False/"ham" (required)."""
        spam = is_spam_label(spam)
        data = message_bytes(message)
        features = [self._message_features(data)] if self.feature_weight else None
        if self.word_counts_ is None:
            self.word_counts_ = self._new_counts()
        indices = self.vocabulary_.add(self.tokenizer_.stream(data))
        self.word_counts_.add(indices, int(spam), COUNT_TRANSFORMS[self.counts], 1, self.vocabulary_.n_features,
                              float(self.length_norm))
        self.ages_.seen(indices, self.vocabulary_.n_features)
        if features is not None:
            if self.features_ is None:
                from spamnb.model.message_features import FeatureModel

                self.features_ = FeatureModel()
            self.features_.partial_fit(features, [bool(spam)])
        self._scorer = None
        return self

    def forget(self, message, spam):
        """Remove one learned message: the exact inverse of ``learn``.

        Tokens left with no count in any class are dropped from the vocabulary,
        so ``forget(m)`` after ``learn(m)`` restores the same model.  Raises
        ValueError (changing nothing) when the message cannot have been learned
        as that class: one of its tokens is unknown, or a count would go negative.
        (Counts cannot tell two messages with the same tokens apart.)
        ``spam`` is the label the message was learned with: True/"spam" or False/"ham".
        """
        spam = is_spam_label(spam)  # the label, as fit takes it (required)
        counts = self._counts()
        if self.feature_weight:
            raise ValueError("forget is not available with message features on (feature_weight > 0)")
        stream = self.tokenizer_.stream(message_bytes(message))
        indices = self.vocabulary_.lookup(stream.hashes)
        unknown = indices.count(-1)
        if unknown:  # a learned message has every one of its tokens in the vocabulary
            raise ValueError(f"the message was not learned: {unknown} of its {len(indices)} tokens are unknown")
        counts.add(indices, int(bool(spam)), COUNT_TRANSFORMS[self.counts], -1, length=float(self.length_norm))
        self._scorer = None
        unused = counts.unused()
        if any(unused):
            keep = [not u for u in unused]
            self.vocabulary_.compact(keep)
            counts.compact(keep)
            self.ages_.compact(keep)
        return self

    # ------------------------------------------------------------------ scoring
    def transform(self, messages):
        """Token-count vectors of messages over the fitted vocabulary: CSR (n_messages, n_features)."""
        self._require_fitted()
        return self._csr(self._rows(messages, grow=False))

    def score_many(self, messages):
        """Log-odds of many messages through the sparse kernel: float64 array (n_messages,)."""
        import numpy as np

        from spamnb.bayes import kernels

        counts = self._counts()
        messages = [message_bytes(m) for m in messages]
        jll = kernels.joint_log_likelihood(self.transform(messages), counts.log_theta(),
                                           np.asarray(counts.derived()[2], dtype=np.float64))
        with np.errstate(invalid="ignore"):
            log_odds = jll[:, 1] - jll[:, 0]
        log_odds[np.isneginf(jll).all(axis=1)] = 0.0  # impossible under both classes: even odds
        if self.features_ is not None and self.feature_weight:
            features = [self._message_features(m) for m in messages]
            log_odds = log_odds + self.feature_weight * self.features_.log_likelihood_ratio(features)
        return log_odds

    def _score(self, message, n_evidence, parts=True):
        scorer = self._scoring()
        data = message_bytes(message)
        stream = self.tokenizer_.stream(data)
        hashes = stream.hashes
        jll, evidence, n_tokens, n_known, spam_ev, ham_ev = scorer.score(hashes, n_evidence)
        log_odds = jll[1] - jll[0]
        if self.features_ is not None and self.feature_weight:
            ll_ham, ll_spam = self.features_.log_likelihood_one(self._message_features(data))
            log_odds += self.feature_weight * (ll_spam - ll_ham)
        part_max = verdict.part_max(scorer, hashes, stream.regions, stream.truncated) if parts else None
        return log_odds, evidence, n_tokens, n_known, (spam_ev, ham_ev, part_max)

    def evidence(self, message):
        """``(log_odds, spam_evidence, ham_evidence, part_max)`` of one message:
        what the verdict rule (``spamnb.model.verdict``) reads."""
        log_odds, _evidence, _n, _known, sums = self._score(message, 0)
        return (log_odds,) + sums

    def score(self, message):
        """``Score(probability, log_odds)`` of one message."""
        log_odds = self._score(message, 0, parts=False)[0]
        return Score(_probability(log_odds), log_odds)

    def classify(self, message, evidence=True):
        """A :class:`Verdict`: spam / unsure / ham by the cutoffs and the evidence
        (the rule of ``spamnb.model.verdict.decide``), with its strongest tokens
        (``evidence=False``: the same verdict without them, which is cheaper)."""
        log_odds, evidence, n_tokens, n_known, sums = self._score(message, int(self.n_evidence) if evidence else 0)
        probability = _probability(log_odds)
        label = verdict.decide(log_odds, *sums, self.spam_cutoff, self.ham_cutoff)
        token = self.vocabulary_.token
        return Verdict(label, probability, log_odds, tuple((token(i), w) for i, w in evidence), n_tokens, n_known)

    # ------------------------------------------------------------------ inspection
    def strongest_tokens(self, n=10, min_count=5):
        """The ``n`` tokens pointing most to spam and to ham: two lists of
        ``(token, log theta_spam - log theta_ham, ham count, spam count)``,
        among tokens whose counts add up to at least ``min_count`` (the
        transformed counts: with ``length_norm`` > 0 each message's are
        scaled by its length, so they are not counts of occurrences)."""
        import numpy as np

        counts = self._counts()
        fc = counts.matrix()
        log_count, log_norm, _log_prior = counts.derived()
        log_count = np.frombuffer(log_count, dtype=np.float64).reshape(fc.shape)
        weight = (log_count[1] - log_norm[1]) - (log_count[0] - log_norm[0])
        eligible = np.flatnonzero(fc.sum(axis=0) >= min_count)
        order = eligible[np.argsort(weight[eligible], kind="stable")]
        token = self.vocabulary_.token

        def rows(indices):
            return [(token(i), float(weight[i]), float(fc[0, i]), float(fc[1, i])) for i in indices]

        return rows(order[::-1][:n]), rows(order[:n])

    # ------------------------------------------------------------------ files
    def save(self, path=None, backup=None):
        """Write the model atomically to ``path`` (default: ``default_model_path()``);
        ``backup``: where to keep the model it replaces (None: nowhere).

        A symbolic link is followed (its target is replaced, the link kept);
        an existing file keeps its owner, group and mode; anything but a
        regular file is refused.  Call it under ``spamnb.model.store.locked(path)``
        for read-modify-write (``learn``); see ``spamnb.model.store.write_model``.
        """
        path = default_model_path() if path is None else path
        counts = self._counts()
        log_count, log_norm, log_prior = counts.derived()
        vocab = self.vocabulary_
        blob, offsets = vocab.string_table()
        params = {"alpha": float(self.alpha), "prior": self.prior, "counts": self.counts,
                  "spam_cutoff": float(self.spam_cutoff), "ham_cutoff": float(self.ham_cutoff),
                  "n_evidence": int(self.n_evidence), "feature_weight": float(self.feature_weight),
                  "length_norm": float(self.length_norm)}
        schema.write(path, {
            "spamnb": _package_version(),
            "tokenizer": self.tokenizer_.settings,
            "params": params,
            "features": self.features_.to_dict() if self.features_ is not None else None,
            "n_features": vocab.n_features,
            "class_count": [float(v) for v in counts.class_count_],
            "log_prior": list(log_prior),
            "log_norm": list(log_norm),
            **self.ages_.fields(),
        }, {
            "keys": vocab.keys,
            "values": vocab.values,
            "offsets": offsets,
            "strings": blob,
            "feature_count": counts.feature_count_,
            "log_count": log_count,  # derived from feature_count: saves the logs at load
            "last_seen": self.ages_.days(vocab.n_features),
            **_ledger_arrays(self.ledger_),
        }, backup=backup)

    @classmethod
    def load(cls, path=None, tokenizer=None):
        """Read a model file.  Raises :class:`spamnb.model.store.ModelError` for any
        missing, damaged, foreign or mismatched file (e.g. a ``tokenizer``
        given here whose settings differ from the model's)."""
        path = default_model_path() if path is None else path
        where = os.fspath(path)
        header, arrays = schema.read(path)
        try:
            params = header["params"]
            try:
                model_tokenizer = Tokenizer.from_settings(header["tokenizer"])
            except (ValueError, TypeError, KeyError) as exc:
                raise ModelError(f"{where}: the model was trained with tokenizer settings this spamnb "
                                 f"cannot reproduce ({exc}); retrain it") from None
            if tokenizer is not None and tokenizer.settings != model_tokenizer.settings:
                raise ModelError(f"{where}: the model was trained with other tokenizer settings "
                                 f"than the ones given; retrain it or load it without a tokenizer")
            self = cls(tokenizer=model_tokenizer, alpha=params["alpha"], prior=params["prior"],
                       counts=params["counts"], spam_cutoff=params["spam_cutoff"],
                       ham_cutoff=params["ham_cutoff"], n_evidence=params["n_evidence"],
                       feature_weight=params["feature_weight"], length_norm=params.get("length_norm", 0.0))
            if header.get("features") is not None:
                from spamnb.model.message_features import FeatureModel

                self.features_ = FeatureModel.from_dict(header["features"])
            n_features = header["n_features"]
            schema.check_counts(header, arrays, self.alpha)
            self.vocabulary_ = Vocabulary.from_buffers(arrays["keys"], arrays["values"], n_features,
                                                       arrays["strings"], arrays["offsets"])
            if arrays["ledger_labels"]:
                from spamnb.model.ledger import Ledger

                self.ledger_ = Ledger.from_arrays(arrays["ledger_digests"], arrays["ledger_labels"])
        except ModelError:
            raise
        except (ValueError, KeyError, TypeError) as exc:
            raise ModelError(f"{where}: the model is inconsistent ({exc})") from None
        self.word_counts_ = WordCounts.from_arrays(
            float(self.alpha), self.prior, header["class_count"], arrays["feature_count"],
            derived=(arrays["log_count"], tuple(header["log_norm"]), tuple(header["log_prior"])))
        self.ages_ = Ages.from_file(header, arrays)
        self.source_ = where
        return self

    def __repr__(self):
        return (f"SpamFilter(alpha={self.alpha!r}, prior={self.prior!r}, counts={self.counts!r}, "
                f"spam_cutoff={self.spam_cutoff!r}, ham_cutoff={self.ham_cutoff!r})")


def _ledger_arrays(ledger):
    """The model file's ledger arrays of a Ledger (or None: empty)."""
    digests, labels = ledger.to_arrays() if ledger is not None else (b"", b"")
    return {"ledger_digests": digests, "ledger_labels": labels}


def _package_version():
    from spamnb import __version__

    return __version__
