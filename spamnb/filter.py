"""SpamFilter: the mail filter on top of the tokenizer, vocabulary and multinomial NB.

Two states share one interface:

- *counts*: after ``fit``, the per-class token counts are flat float64
  buffers that ``fit`` filled in compiled code, message by message, as the
  vocabulary grew (no sparse matrix, no numpy); after ``SpamFilter.load``
  they and the vocabulary's hash index are zero-copy views of the
  memory-mapped model file, with the derived log-counts, normalisers and log
  priors stored beside them.  Scoring one message of a loaded model needs
  neither numpy nor any per-token Python object: that is the ``spamnb
  classify`` cold path.  A fitted filter derives those values through its
  :class:`MultinomialNB` the first time it scores or saves.
- *live*: after ``learn``/``forget``, the counts are a :class:`MultinomialNB`
  (numpy arrays) and the vocabulary grows; the first ``learn``/``forget``
  copies the counts into one.

Scoring one message (``score``/``classify``) runs one compiled function:
look up the token hashes, count them, and sum x_i log theta_ci with
log theta_ci = log(N_ci + alpha) - log(N_c + alpha V) computed for the
message's own tokens only.  ``score_many`` scores a batch through the sparse
kernel instead; both agree to rounding.

Labels: True (or "spam") is spam, False (or "ham") is ham.  Classes are
ordered [ham, spam], so the log-odds are jll[spam] - jll[ham].
"""

from __future__ import annotations

import math
import os
import stat
from array import array
from collections import namedtuple

from spamnb import _vocab
from spamnb.store import ModelError, read_model, write_model
from spamnb.tokenizer import Tokenizer
from spamnb.vocabulary import Vocabulary

__all__ = ["SpamFilter", "Score", "Verdict", "message_bytes", "default_model_path", "COUNT_TRANSFORMS"]

MODEL_FORMAT = "spamnb-model"
CLASSES = ("ham", "spam")
COUNT_TRANSFORMS = {"raw": _vocab.COUNTS_RAW, "binary": _vocab.COUNTS_BINARY, "log": _vocab.COUNTS_LOG}
PRIORS = ("mle", "map", "uniform")

# Defaults, chosen by 5-fold cross-validation on the TRAIN part of the fixed split
# (python scripts/tune_filter.py; figures in docs/filter.md).
# -- alpha and counts: log(1 + count) with alpha 0.01 had the lowest CV 1-AUC
#    (0.0313 %; binary 0.0316 %, alpha 0.1: 0.0480 %, alpha 0.003: 0.0317 %).
DEFAULT_ALPHA = 0.01
DEFAULT_COUNTS = "log"
# -- prior: MLE and Dirichlet MAP give the same figures to the precision shown.
DEFAULT_PRIOR = "mle"
# -- cutoffs: spam at log-odds >= 14 (P >= 0.9999992) is the lowest cutoff whose CV
#    false-positive rate is <= 0.1 % (0.091 %; spam missed 5.45 %, unsure counted as
#    missed); ham at P <= 0.5 (log-odds <= 0), unsure in between.
DEFAULT_SPAM_CUTOFF = 0.9999992
DEFAULT_HAM_CUTOFF = 0.5
# -- length_norm: 0 (off).  Scaling each message's log counts to Euclidean length 50
#    lowered the 5-fold CV 1-AUC on the train part of BOTH corpora (docs/accuracy.md).
DEFAULT_LENGTH_NORM = 0.0
DEFAULT_EVIDENCE = 10
MAX_EVIDENCE = 1000


def default_model_path():
    """``$SPAMNB_HOME/model.spamnb``, or ``~/.spamnb/model.spamnb``."""
    home = os.environ.get("SPAMNB_HOME") or os.path.join(os.path.expanduser("~"), ".spamnb")
    return os.path.join(home, "model.spamnb")


def message_bytes(message):
    """The raw bytes of a message given as bytes, a path, or an ``email.message.Message``."""
    if isinstance(message, bytes):
        return message
    if isinstance(message, (bytearray, memoryview)):
        return bytes(message)
    if isinstance(message, (str, os.PathLike)):
        return _read_file(message)
    if hasattr(message, "as_bytes"):  # email.message.Message, without importing email
        try:
            return message.as_bytes()
        except Exception:  # a Message that cannot be re-serialised (bad charset, ...)
            return str(message).encode("utf-8", "surrogateescape")
    raise TypeError(f"a message must be bytes, a path or an email.message.Message, not {type(message).__name__}")


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


def _probability(log_odds):
    """sigmoid(log_odds), without overflow."""
    if log_odds >= 0:
        return 1.0 / (1.0 + math.exp(-log_odds))
    z = math.exp(log_odds)
    return z / (1.0 + z)


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


# log_count: flat float64 (n_classes * n_features), log(N_ci + alpha), derived;
# feature_count: the same shape, the counts; log_norm, log_prior: tuples;
# scorer: a _vocab.Scorer over these and the vocabulary's hash index
_ScoringState = namedtuple("_ScoringState", "log_count feature_count log_norm log_prior scorer")


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
        Weight of the continuous message features (``spamnb.features``: size,
        links, share of capitals, ...) modelled by a Gaussian naive Bayes whose
        log-likelihood ratio is added to the word log-odds under the one class
        prior.  0 (the default, chosen by cross-validation: docs/features.md)
        leaves them out.  With features on, ``forget`` is not available.
    length_norm : float
        When > 0, each message's transformed token counts are scaled to this
        Euclidean length before they are added or scored (length normalisation,
        Rennie et al. 2003; when scoring, over the tokens the model knows).
        0 (the default) leaves them as they are.
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
        self._nb = None          # MultinomialNB when live
        self._counts = None      # counts state: (class_count, feature_count, log_count, log_prior, log_norm);
                                 # the last three are None after fit (derived on first use)
        self._state = None       # cached _ScoringState
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

    def _new_model(self):
        from spamnb.multinomial import MultinomialNB

        if self.prior == "uniform":
            return MultinomialNB(alpha=float(self.alpha), fit_prior=False)
        return MultinomialNB(alpha=float(self.alpha), prior=self.prior)

    # ------------------------------------------------------------------ state
    @property
    def is_fitted(self):
        return self._nb is not None or self._counts is not None

    @property
    def class_count_(self):
        """Messages learned per class, [ham, spam] (floats)."""
        if self._nb is not None:
            return tuple(float(v) for v in self._nb.class_count_)
        if self._counts is not None:
            return tuple(self._counts[0])
        return (0.0, 0.0)

    @property
    def model_(self):
        """The MultinomialNB holding the counts (a filter in the counts state is copied into one)."""
        self._require_fitted()
        if self._nb is None:
            self._nb = self._model_from_counts(self._counts[0], self._counts[1])
        return self._nb

    def _model_from_counts(self, class_count, feature_count):
        import numpy as np

        nb = self._new_model()
        n_features = self.vocabulary_.n_features
        prior = nb._make_prior().partial_fit(np.zeros(0, dtype=bool), classes=[False, True])
        prior.add_counts(np.asarray(class_count, dtype=np.float64))
        nb.prior_ = prior
        nb.feature_count_ = np.array(feature_count, dtype=np.float64).reshape(len(CLASSES), n_features)
        return nb

    def _require_fitted(self):
        if not self.is_fitted:
            raise ValueError("this SpamFilter has learned nothing yet: fit, learn or load a model first")

    def _go_live(self):
        """Make the counts and vocabulary writable (copying the counts state once)."""
        if self._counts is not None:
            self.model_  # copies the counts into a MultinomialNB, once
        elif self._nb is None:
            self._nb = self._new_model()  # fitted by the partial_fit that follows
        self._counts = None
        self._state = None

    def _scoring_state(self):
        if self._state is not None:
            return self._state
        self._require_fitted()
        vocab = self.vocabulary_
        if self._nb is None and self._counts[2] is None:
            self.model_  # fitted counts: their logs and priors are derived through the model
        if self._nb is not None:
            import numpy as np

            fc = np.ascontiguousarray(self._nb.feature_count_, dtype=np.float64)
            if fc.shape[1] != vocab.n_features:  # features the model never counted are zero
                fc = np.pad(fc, ((0, 0), (0, vocab.n_features - fc.shape[1])))
            log_norm = tuple(np.log(fc.sum(axis=1) + self.alpha * vocab.n_features).tolist())
            log_prior = tuple(np.asarray(self._nb.class_log_prior_, dtype=np.float64).tolist())
            flat = fc.reshape(-1)
            log_count = np.log(flat + self.alpha)
        else:
            _class_count, flat, log_count, log_prior, log_norm = self._counts
        scorer = _vocab.Scorer(vocab.keys, vocab.values, log_count, vocab.n_features, log_norm, log_prior,
                               COUNT_TRANSFORMS[self.counts], float(self.length_norm))
        self._state = _ScoringState(log_count, flat, log_norm, log_prior, scorer)
        return self._state

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
        from spamnb.features import raw_message_features

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
        counts as it is tokenized (``_vocab.add_counts``): the same sums, in
        the same order, as ``MultinomialNB.partial_fit`` over the messages'
        rows, without building the rows.
        """
        from spamnb.features import is_spam_label   # not on the scoring path: its import costs 0.4 ms

        y = [is_spam_label(label) for label in labels]
        self.vocabulary_ = vocabulary = Vocabulary()
        self._counts = self._nb = self._state = None
        self.features_ = None
        features = [] if self.feature_weight else None
        class_counts = (array("d"), array("d"))   # [ham, spam] x n_features, grown with the vocabulary
        transform = COUNT_TRANSFORMS[self.counts]
        length = float(self.length_norm)
        stream = self.tokenizer_.stream
        n_messages = 0
        for message in messages:  # may be lazy (progress bars)
            data = message_bytes(message)
            indices = vocabulary.add(stream(data))
            if n_messages < len(y):
                counts = class_counts[y[n_messages]]
                counts.frombytes(bytes(8 * (vocabulary.n_features - len(counts))))
                _vocab.add_counts(indices, counts, transform, length)
            if features is not None:
                features.append(self._message_features(data))
            n_messages += 1
        if n_messages != len(y):
            raise ValueError(f"{n_messages} messages but {len(y)} labels")
        for counts in class_counts:
            counts.frombytes(bytes(8 * (vocabulary.n_features - len(counts))))
        n_spam = sum(y)
        self._counts = ((float(len(y) - n_spam), float(n_spam)), class_counts[0] + class_counts[1], None, None, None)
        if features is not None:
            from spamnb.features import FeatureModel

            self.features_ = FeatureModel().fit(features, y)
        return self

    def learn(self, message, spam=True):
        """Add one message to the counts (train-on-error)."""
        self._go_live()
        features = [] if self.feature_weight else None
        X = self._csr(self._rows([message], grow=True, features=features))
        self._nb.partial_fit(X, [bool(spam)], classes=[False, True])
        if features is not None:
            if self.features_ is None:
                from spamnb.features import FeatureModel

                self.features_ = FeatureModel()
            self.features_.partial_fit(features, [bool(spam)])
        self._state = None
        return self

    def forget(self, message, spam=True):
        """Remove one learned message: the exact inverse of ``learn``.

        Tokens left with no count in any class are dropped from the vocabulary,
        so ``forget(m)`` after ``learn(m)`` restores the same model.  Raises
        ValueError (changing nothing) when the message cannot have been learned
        as that class: one of its tokens is unknown, or a count would go negative.
        (Counts cannot tell two messages with the same tokens apart.)
        """
        import numpy as np

        self._require_fitted()
        if self.feature_weight:
            raise ValueError("forget is not available with message features on (feature_weight > 0)")
        stream = self.tokenizer_.stream(message_bytes(message))
        indices = self.vocabulary_.lookup(stream.hashes)
        unknown = indices.count(-1)
        if unknown:  # a learned message has every one of its tokens in the vocabulary
            raise ValueError(f"the message was not learned: {unknown} of its {len(indices)} tokens are unknown")
        self._go_live()
        builder = _vocab.CSRBuilder(COUNT_TRANSFORMS[self.counts], float(self.length_norm))
        builder.add_row(indices)
        self._nb.unlearn(self._csr(builder), [bool(spam)])
        totals = self._nb.feature_count_.sum(axis=0)
        keep = totals > 0
        if not keep.all():
            self.vocabulary_.compact(keep.tolist())
            class_count = self._nb.class_count_.copy()
            self._nb = self._model_from_counts(class_count, self._nb.feature_count_[:, keep])
        self._state = None
        return self

    # ------------------------------------------------------------------ scoring
    def transform(self, messages):
        """Token-count vectors of messages over the fitted vocabulary: CSR (n_messages, n_features)."""
        self._require_fitted()
        return self._csr(self._rows(messages, grow=False))

    def score_many(self, messages):
        """Log-odds of many messages through the sparse kernel: float64 array (n_messages,)."""
        nb = self.model_
        messages = [message_bytes(m) for m in messages]
        log_odds = nb.decision_function(self.transform(messages))
        if self.features_ is not None and self.feature_weight:
            features = [self._message_features(m) for m in messages]
            log_odds = log_odds + self.feature_weight * self.features_.log_likelihood_ratio(features)
        return log_odds

    def _score(self, message, n_evidence):
        scorer = self._scoring_state().scorer
        data = message_bytes(message)
        jll, evidence, n_tokens, n_known = scorer.score(self.tokenizer_.stream(data).hashes, n_evidence)
        log_odds = jll[1] - jll[0]
        if self.features_ is not None and self.feature_weight:
            ll_ham, ll_spam = self.features_.log_likelihood_one(self._message_features(data))
            log_odds += self.feature_weight * (ll_spam - ll_ham)
        return log_odds, evidence, n_tokens, n_known

    def score(self, message):
        """``Score(probability, log_odds)`` of one message."""
        log_odds = self._score(message, 0)[0]
        return Score(_probability(log_odds), log_odds)

    def classify(self, message):
        """A :class:`Verdict`: spam / unsure / ham by the cutoffs, with its evidence."""
        log_odds, evidence, n_tokens, n_known = self._score(message, int(self.n_evidence))
        probability = _probability(log_odds)
        if probability >= self.spam_cutoff:
            label = "spam"
        elif probability <= self.ham_cutoff:
            label = "ham"
        else:
            label = "unsure"
        token = self.vocabulary_.token
        return Verdict(label, probability, log_odds, tuple((token(i), w) for i, w in evidence), n_tokens, n_known)

    # ------------------------------------------------------------------ inspection
    def strongest_tokens(self, n=10, min_count=5):
        """The ``n`` tokens pointing most to spam and to ham: two lists of
        ``(token, log theta_spam - log theta_ham, ham count, spam count)``,
        among tokens seen at least ``min_count`` times."""
        import numpy as np

        nb = self.model_
        fc = nb.feature_count_
        state = self._scoring_state()
        weight = (np.log(fc[1] + self.alpha) - state.log_norm[1]) - (np.log(fc[0] + self.alpha) - state.log_norm[0])
        eligible = np.flatnonzero(fc.sum(axis=0) >= min_count)
        order = eligible[np.argsort(weight[eligible], kind="stable")]
        token = self.vocabulary_.token

        def rows(indices):
            return [(token(i), float(weight[i]), float(fc[0, i]), float(fc[1, i])) for i in indices]

        return rows(order[::-1][:n]), rows(order[:n])

    # ------------------------------------------------------------------ files
    def save(self, path=None):
        """Write the model atomically to ``path`` (default: ``default_model_path()``)."""
        path = default_model_path() if path is None else path
        self._require_fitted()
        state = self._scoring_state()
        vocab = self.vocabulary_
        blob, offsets = vocab.string_table()
        class_count = [float(v) for v in self.class_count_]
        header = {
            "format": MODEL_FORMAT,
            "spamnb": _package_version(),
            "tokenizer": self.tokenizer_.settings,
            "classes": list(CLASSES),
            "params": {"alpha": float(self.alpha), "prior": self.prior, "counts": self.counts,
                       "spam_cutoff": float(self.spam_cutoff), "ham_cutoff": float(self.ham_cutoff),
                       "n_evidence": int(self.n_evidence), "feature_weight": float(self.feature_weight),
                       "length_norm": float(self.length_norm)},
            "features": self.features_.to_dict() if self.features_ is not None else None,
            "n_features": vocab.n_features,
            "class_count": class_count,
            "log_prior": list(state.log_prior),
            "log_norm": list(state.log_norm),
        }
        write_model(path, header, {
            "keys": ("Q", vocab.keys),
            "values": ("i", vocab.values),
            "offsets": ("Q", offsets),
            "strings": ("B", blob),
            "feature_count": ("d", state.feature_count),
            "log_count": ("d", state.log_count),  # derived from feature_count: saves the logs at load
        })

    @classmethod
    def load(cls, path=None, tokenizer=None):
        """Map a model file.  Raises :class:`spamnb.store.ModelError` for any
        missing, damaged, foreign or mismatched file (e.g. a ``tokenizer``
        given here whose settings differ from the model's)."""
        path = default_model_path() if path is None else path
        header, arrays = read_model(path)
        where = os.fspath(path)
        try:
            if header.get("format") != MODEL_FORMAT:
                raise ValueError("not a spam filter model")
            if header.get("classes") != list(CLASSES):
                raise ValueError("unexpected classes")
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
                from spamnb.features import FeatureModel

                self.features_ = FeatureModel.from_dict(header["features"])
            n_features = header["n_features"]
            if not isinstance(n_features, int) or n_features < 0:
                raise ValueError("bad vocabulary size")
            numbers = [header["class_count"], header["log_prior"], header["log_norm"]]
            for values in numbers:
                if len(values) != len(CLASSES) or not all(isinstance(v, (int, float)) for v in values):
                    raise ValueError("bad class statistics")
            if not all(math.isfinite(v) and v >= 0 for v in header["class_count"]):
                raise ValueError("bad class counts")
            if not all(math.isfinite(v) for v in header["log_norm"]):
                raise ValueError("bad normalisers")
            if any(math.isnan(v) or v > 0 for v in header["log_prior"]):
                raise ValueError("bad class priors")
            expected = {"keys": "Q", "values": "i", "offsets": "Q", "strings": "B", "feature_count": "d",
                        "log_count": "d"}
            for name, typecode in expected.items():
                if name not in arrays or arrays[name].format != typecode:
                    raise ValueError(f"array {name!r} missing or of the wrong type")
            feature_count = arrays["feature_count"]
            if len(feature_count) != len(CLASSES) * n_features:
                raise ValueError("count matrix does not match the vocabulary")
            if not _vocab.check_counts(feature_count):
                raise ValueError("negative or non-finite counts")
            log_count = arrays["log_count"]
            if len(log_count) != len(feature_count) or not _vocab.check_finite(log_count):
                raise ValueError("derived log-counts do not match the counts")
            self.vocabulary_ = Vocabulary.from_buffers(arrays["keys"], arrays["values"], n_features,
                                                       arrays["strings"], arrays["offsets"])
        except ModelError:
            raise
        except (ValueError, KeyError, TypeError) as exc:
            raise ModelError(f"{where}: the model is inconsistent ({exc})") from None
        self._counts = (tuple(float(v) for v in header["class_count"]), feature_count, log_count,
                        tuple(float(v) for v in header["log_prior"]), tuple(float(v) for v in header["log_norm"]))
        self.source_ = where
        return self

    def __repr__(self):
        return (f"SpamFilter(alpha={self.alpha!r}, prior={self.prior!r}, counts={self.counts!r}, "
                f"spam_cutoff={self.spam_cutoff!r}, ham_cutoff={self.ham_cutoff!r})")


def _package_version():
    from spamnb import __version__

    return __version__
