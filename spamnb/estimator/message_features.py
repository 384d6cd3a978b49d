"""Continuous message features and their Gaussian naive Bayes model.

Some evidence in mail is a number, not a word: the size, the number of links,
the share of capitals.  :func:`message_features` turns a parsed
:class:`spamnb.mail.parser.Mail` into the numbers listed in :data:`FEATURE_NAMES`;
:class:`FeatureModel` models them per class with a diagonal Gaussian
(:class:`spamnb.bayes.gaussian.GaussianNB`) and gives the class-conditional
log-likelihoods log p(f | ham), log p(f | spam), without any class prior.

Combined score (the word model's prior is the only prior)::

    log-odds = word log-odds + weight * (log p(f | spam) - log p(f | ham))

Cold path.  ``message_features``, ``FeatureModel.from_dict`` and
``FeatureModel.log_likelihood_one`` are pure Python (no numpy import), and the
per-character work runs in C-speed ``str``/``bytes`` methods (``encode``,
``bytes.translate``, ``count``); Python runs once per message and MIME part.
numpy is imported only to fit the model or score a batch.
"""

from __future__ import annotations

import math
import re

from spamnb.estimator.labels import is_spam_label

__all__ = ["FEATURE_NAMES", "FeatureModel", "message_features", "raw_message_features",
           "DEFAULT_VAR_SMOOTHING", "DEFAULT_WEIGHT"]

# What each feature is (all finite floats; "log" is log1p, natural log).
FEATURE_NAMES = (
    "log_bytes",             # log(1 + raw message size in bytes, before truncation)
    "log_header_bytes",      # log(1 + size of the top-level header block)
    "log_headers",           # log(1 + number of top-level header fields)
    "log_received",          # log(1 + number of Received: fields, the relay hops)
    "log_recipients",        # log(1 + addresses in To: and Cc:, counted by "@")
    "log_parts",             # log(1 + leaf MIME parts)
    "log_attachments",       # log(1 + non-text leaf parts)
    "html_share",            # HTML characters / (HTML + plain text characters), 0 without text
    "log_links_per_kchar",   # log(1 + links per 1000 text characters); 0 without text
    "log_images",            # log(1 + <img tags in HTML parts)
    "caps_share",            # upper-case / all ASCII letters of the text, 0 without letters
    "non_ascii_share",       # non-ASCII characters / all characters of the text
    "log_exclamations",      # log(1 + "!" in the text and the Subject)
    "subject_caps_share",    # upper-case / ASCII letters of the Subject, 0 without letters
    "hour_sin",              # sin(2 pi h / 24), h = hour of the Date: field (sender's clock,
    "hour_cos",              #   minutes as a fraction); both 0 without a readable Date:
)
"""Names of the features returned by :func:`message_features`, in order.

"The text" is the decoded text of every text part, HTML markup included (the
markup is cheap to count and upper-case tags are a tell of their own).  Links:
``://`` in plain-text parts plus ``href`` in HTML parts (case-insensitive).
A missing or unreadable Date: puts the hour at the centre of the circle
(0, 0), the point equally far from every hour.
"""

# Chosen by cross-validation on the TRAIN part (a script since retired; docs/features.md).
DEFAULT_VAR_SMOOTHING = 1e-2
DEFAULT_WEIGHT = 0.0  # off: the features did not lower CV 1-AUC or false positives

_UPPER = bytes(range(ord("A"), ord("Z") + 1))
_LETTERS = _UPPER + bytes(range(ord("a"), ord("z") + 1))
_TIME = re.compile(r"(?<![0-9:])([0-9]{1,2}):([0-9]{2})(?::[0-9]{2})?(?![0-9:])", re.A)
_TWO_PI = 2.0 * math.pi
_LOG_2PI = math.log(_TWO_PI)


def _letter_counts(text):
    """(upper-case ASCII letters, ASCII letters, non-ASCII characters) of ``text``, at C speed."""
    data = text.encode("ascii", "ignore")
    n_ascii = len(data)
    upper = n_ascii - len(data.translate(None, _UPPER))
    letters = n_ascii - len(data.translate(None, _LETTERS))
    return upper, letters, len(text) - n_ascii


def _hour(date):
    """Hour of day in [0, 24) written in a Date: value (sender's clock), or None."""
    match = _TIME.search(date)
    if match is None:
        return None
    hour, minute = int(match.group(1)), int(match.group(2))
    if hour > 23 or minute > 59:
        return None
    return hour + minute / 60.0


def message_features(mail):
    """The features of a parsed :class:`~spamnb.mail.parser.Mail`: a list of
    ``len(FEATURE_NAMES)`` finite floats, in the order of FEATURE_NAMES."""
    stats = mail.stats
    n_links = 0
    n_images = 0
    n_upper = n_letters = n_non_ascii = n_chars = n_bang = 0
    for part in mail.parts:
        text = part.text
        if not text:
            continue
        if part.content_type == "text/html":
            lower = text.lower()
            n_links += lower.count("href")
            n_images += lower.count("<img")
        else:
            n_links += text.count("://")
        upper, letters, non_ascii = _letter_counts(text)
        n_upper += upper
        n_letters += letters
        n_non_ascii += non_ascii
        n_chars += len(text)
        n_bang += text.count("!")
    subject = mail.header("subject")
    s_upper, s_letters, _ = _letter_counts(subject)
    n_bang += subject.count("!")
    text_total = stats.html_chars + stats.text_chars
    hour = _hour(mail.header("date"))
    if hour is None:
        hour_sin = hour_cos = 0.0
    else:
        angle = _TWO_PI * hour / 24.0
        hour_sin, hour_cos = math.sin(angle), math.cos(angle)
    log1p = math.log1p
    return [
        log1p(stats.n_bytes),
        log1p(stats.n_header_bytes),
        log1p(stats.n_headers),
        log1p(stats.n_received),
        log1p(stats.n_recipients),
        log1p(stats.n_parts),
        log1p(stats.n_attachments),
        stats.html_chars / text_total if text_total else 0.0,
        log1p(1000.0 * n_links / n_chars) if n_chars else 0.0,
        log1p(n_images),
        n_upper / n_letters if n_letters else 0.0,
        n_non_ascii / n_chars if n_chars else 0.0,
        log1p(n_bang),
        s_upper / s_letters if s_letters else 0.0,
        hour_sin,
        hour_cos,
    ]


def raw_message_features(message, **parse_options):
    """``message_features(spamnb.mail.parser.parse(message, **parse_options))`` for raw bytes."""
    from spamnb.mail.parser import parse

    return message_features(parse(message, **parse_options))


def _finite_rows(rows, width, what):
    for row in rows:
        if len(row) != width or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in row):
            raise ValueError(f"{what} must be {width} finite numbers per class")


class FeatureModel:
    """Diagonal Gaussian model of message features for the classes [ham, spam].

    Parameters
    ----------
    var_smoothing : float >= 0
        Added to every variance, times the largest feature variance of the
        training data (as in :class:`~spamnb.bayes.gaussian.GaussianNB`).
    names : sequence of str
        The feature names, stored with the model (default FEATURE_NAMES).

    Attributes (plain Python lists, so scoring needs no numpy)
    ----------
    class_count_ : [n_ham, n_spam], messages learned per class
    means_ : [[d floats] ham, [d floats] spam]
    scatter_ : same shape, sum of squared deviations from the class mean (the state)
    var_ : same shape, the smoothed variances (derived)
    """

    def __init__(self, var_smoothing=DEFAULT_VAR_SMOOTHING, names=FEATURE_NAMES):
        self.var_smoothing = var_smoothing
        self.names = names

    # ------------------------------------------------------------------ learning
    def _gaussian(self):
        """A GaussianNB holding this model's statistics (restored from the lists if needed)."""
        gnb = self.__dict__.get("_gnb")
        if gnb is not None:
            return gnb
        from spamnb.bayes.gaussian import GaussianNB

        if hasattr(self, "means_"):
            gnb = GaussianNB.from_statistics(self.class_count_, self.means_, self.scatter_, classes=[False, True],
                                             var_smoothing=self.var_smoothing, prior="mle")
        else:
            gnb = GaussianNB(var_smoothing=self.var_smoothing)
        self._gnb = gnb
        return gnb

    def _sync(self, gnb):
        """Copy the statistics and derived variances of ``gnb`` into the Python lists."""
        self._gnb = gnb
        self.class_count_ = [float(v) for v in gnb.class_count_]
        self.means_ = gnb.means_.tolist()
        self.scatter_ = gnb.scatter_.tolist()
        self.var_ = gnb.var_.tolist()
        self._prepare()

    def _prepare(self):
        """Per class: the constant -1/2 sum log(2 pi var) and 1/var (for log_likelihood_one)."""
        self._const = [-0.5 * sum(_LOG_2PI + math.log(v) for v in row) for row in self.var_]
        self._inv_var = [[1.0 / v for v in row] for row in self.var_]

    def _labels(self, y):
        import numpy as np

        return np.array([is_spam_label(label) for label in y], dtype=bool)

    def fit(self, F, y):
        """Learn from scratch.  F: (n_messages, n_features) floats; y: True/"spam" for spam."""
        from spamnb.bayes.gaussian import GaussianNB

        self.names_ = list(self.names)
        gnb = GaussianNB(var_smoothing=self.var_smoothing)
        gnb.partial_fit(self._check_F(F), self._labels(y), classes=[False, True])
        self._sync(gnb)
        return self

    def partial_fit(self, F, y):
        """Add messages to the statistics (the first call starts the model)."""
        if not hasattr(self, "means_"):
            self.names_ = list(self.names)
        gnb = self._gaussian()
        gnb.partial_fit(self._check_F(F), self._labels(y), classes=[False, True])
        self._sync(gnb)
        return self

    def _check_F(self, F):
        import numpy as np

        F = np.asarray(F, dtype=np.float64)
        width = len(self.names_) if hasattr(self, "names_") else len(self.names)
        if F.ndim != 2 or F.shape[1] != width:
            raise ValueError(f"F must have shape (n_messages, {width}), got {F.shape}")
        return F

    # ------------------------------------------------------------------ scoring
    def _require_fitted(self):
        if not hasattr(self, "var_"):
            raise ValueError("this FeatureModel is not fitted yet: call fit or from_dict first")

    def log_likelihood(self, F):
        """log p(f | c) without the class prior: float64 (n_messages, 2), columns [ham, spam]."""
        self._require_fitted()
        import numpy as np

        F = self._check_F(F)
        means = np.array(self.means_)
        var = np.array(self.var_)
        out = np.empty((F.shape[0], 2))
        for k in range(2):
            out[:, k] = -0.5 * np.sum(np.log(2.0 * np.pi * var[k]))
            out[:, k] -= 0.5 * np.sum((F - means[k]) ** 2 / var[k], axis=1)
        return out

    def log_likelihood_ratio(self, F):
        """log p(f | spam) - log p(f | ham): float64 (n_messages,)."""
        ll = self.log_likelihood(F)
        return ll[:, 1] - ll[:, 0]

    def log_likelihood_one(self, features):
        """``(log p(f | ham), log p(f | spam))`` of one feature list, in pure Python."""
        self._require_fitted()
        if len(features) != len(self.names_):
            raise ValueError(f"expected {len(self.names_)} features, got {len(features)}")
        out = []
        for const, means, inv_var in zip(self._const, self.means_, self._inv_var):
            quad = 0.0
            for x, mu, iv in zip(features, means, inv_var):
                quad += (x - mu) * (x - mu) * iv
            out.append(const - 0.5 * quad)
        return out[0], out[1]

    # ------------------------------------------------------------------ storage
    def to_dict(self):
        """A JSON-serialisable dict of the model (statistics, derived variances, names)."""
        self._require_fitted()
        return {
            "names": list(self.names_),
            "classes": ["ham", "spam"],
            "var_smoothing": float(self.var_smoothing),
            "class_count": list(self.class_count_),
            "means": [list(row) for row in self.means_],
            "scatter": [list(row) for row in self.scatter_],
            "variances": [list(row) for row in self.var_],
        }

    @classmethod
    def from_dict(cls, data):
        """The model stored by :meth:`to_dict` (pure Python; ValueError if inconsistent)."""
        try:
            names = [str(name) for name in data["names"]]
            if data.get("classes", ["ham", "spam"]) != ["ham", "spam"]:
                raise ValueError("unexpected classes")
            self = cls(var_smoothing=float(data["var_smoothing"]), names=tuple(names))
            width = len(names)
            for key in ("means", "scatter", "variances"):
                if len(data[key]) != 2:
                    raise ValueError(f"{key} must have one row per class")
                _finite_rows(data[key], width, key)
            counts = [float(v) for v in data["class_count"]]
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a feature model ({exc!r})") from None
        if len(counts) != 2 or not all(math.isfinite(v) and v >= 0 for v in counts):
            raise ValueError("class_count must be two finite counts >= 0")
        if any(v > 2.0 ** 53 for v in counts):
            raise ValueError("class_count must be at most 2**53")
        # ranges that keep every log-likelihood finite: (x - mean)^2 / var never overflows
        if any(not 1e-300 <= v <= 1e300 for row in data["variances"] for v in row):
            raise ValueError("variances must be from 1e-300 to 1e300")
        if any(not 0 <= v <= 1e300 for row in data["scatter"] for v in row):
            raise ValueError("scatter must be from 0 to 1e300")
        if any(not abs(v) <= 1e150 for row in data["means"] for v in row):
            raise ValueError("means must be within +-1e150")
        self.names_ = names
        self.class_count_ = counts
        self.means_ = [[float(v) for v in row] for row in data["means"]]
        self.scatter_ = [[float(v) for v in row] for row in data["scatter"]]
        self.var_ = [[float(v) for v in row] for row in data["variances"]]
        self._prepare()
        return self

    def __repr__(self):
        return f"FeatureModel(var_smoothing={self.var_smoothing!r}, names=<{len(self.names)} features>)"
