"""SpamFilter: the mail filter on top of the tokenizer, vocabulary and count model.

The state is a :class:`spamnb.bayes.wordcounts.WordCounts` (messages and token
counts per class, the only place that derives log theta and log P(c)) and a
:class:`spamnb.bayes.vocabulary.Vocabulary`.  ``fit`` is ``spamnb train``'s
pipeline (:mod:`spamnb.estimator.fitting`); ``learn`` and ``forget`` are one
signed add, updating the logs of the counts it changes in place (a learn
costs the message's tokens, not the vocabulary); a loaded model's counts,
derived logs and hash index are views of
the file read into memory (:mod:`spamnb.persistence.codec`), so scoring one message
needs neither numpy nor any per-token Python object (the ``spamnb classify``
cold path): one compiled function looks up the token hashes and sums
x_i log theta_ci.  Labels: True (or "spam") is spam; classes are [ham, spam].
"""


from spamnb.bayes.vocabulary import Vocabulary
from spamnb.mail.tokenizer import Tokenizer
from spamnb.persistence import codec
from spamnb.estimator import scoring, verdict
from spamnb.estimator.ages import Ages
from spamnb.estimator.guard import ReadWriteLock, contextmanager   # contextlib's, made when first called
from spamnb.estimator.defaults import (AUTO_PAIRS, DEFAULT_ALPHA, DEFAULT_COUNTS, DEFAULT_EVIDENCE, DEFAULT_HAM_CUTOFF,
                                   DEFAULT_LENGTH_NORM, DEFAULT_PAIR_WEIGHT, DEFAULT_PRIOR, DEFAULT_SPAM_CUTOFF,
                                   DEFAULT_TARGET_FPR, check_params, params_of,
                                   stored_params)
from spamnb.estimator.verdict import Cutoffs, Score, TupleRecord, Verdict, field

__all__ = ["SpamFilter", "Score", "Verdict", "Cutoffs", "Replayed", "FORMS"]

_probability = verdict.probability

FORMS = ("whole", "mapped", "following", "scoring")   # SpamFilter.load(form=...): see its docstring
# the state a filter is given by the modules that build or change it (SpamFilter.set_fitted)
FITTED = ("vocabulary_", "word_counts_", "ages_", "ledger_", "features_", "calibration_", "held_out_",
          "cutoff_source_", "journal_", "source_", "unread_", "mapped_", "mapped_file_", "pending_journal_",
          "pair_mixture_")


# A filter's state as its journal's replay and its learns in place left it
# (SpamFilter.replayed): the holes of forgets not folded out yet.
class Replayed(TupleRecord):
    """``(vocabulary, word_counts, ages)``: a named tuple (``verdict.TupleRecord``)."""

    __slots__ = ()
    _fields = __match_args__ = ("vocabulary", "word_counts", "ages")
    vocabulary, word_counts, ages = field(0), field(1), field(2)

    def __new__(cls, vocabulary, word_counts, ages):
        return tuple.__new__(cls, (vocabulary, word_counts, ages))


def is_spam_label(label):
    """:func:`spamnb.estimator.labels.is_spam_label`, its module loaded by the first learn or forget (a classify never)."""
    from spamnb.estimator.labels import is_spam_label as of_label

    return of_label(label)


def _deltas():
    """:mod:`spamnb.persistence.deltas` (the journal's records, their replay, a learn's and a forget's
    operations), loaded by the first that uses it: a classify never."""
    from spamnb.persistence import deltas

    return deltas


def _matrix():
    """:mod:`spamnb.estimator.matrix` (many messages at once, the strongest tokens), loaded by its first use."""
    from spamnb.estimator import matrix

    return matrix


def _saving():
    """:mod:`spamnb.persistence.saving` (the model file written), loaded by the first save: a classify never."""
    from spamnb.persistence import saving

    return saving


def fold(spam_filter):
    """:func:`spamnb.persistence.deltas.fold`."""
    _deltas().fold(spam_filter)


def read_whole(spam_filter):
    """:func:`spamnb.persistence.deltas.read_whole`."""
    _deltas().read_whole(spam_filter)


class Journaled:
    """A SpamFilter attribute that a journal's records change besides the counts
    (``ledger_``, ``held_out_``): reading it replays a journal that was only
    scored so far (``pending_journal_``: :mod:`spamnb.persistence.journal_view`,
    through :func:`spamnb.persistence.deltas.read_whole`)."""

    def __set_name__(self, owner, name):
        self.name = name

    def ready(self, obj):
        """Make the attribute of ``obj`` what it stands for, before it is read."""
        if obj.pending_journal_ is not None:
            read_whole(obj)

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        self.ready(obj)
        try:
            value = obj.__dict__[self.name]
        except KeyError:
            raise AttributeError(self.name) from None
        if type(value) is codec.DEFERRED:   # made when first read (a mapped load's ledger: codec.deferred)
            value = obj.__dict__[self.name] = value()
        return value

    def __set__(self, obj, value):
        obj.__dict__[self.name] = value


class Folded(Journaled):
    """A SpamFilter attribute (``vocabulary_``, ``word_counts_``, ``ages_``) whose
    reading or replacing folds the holes of forgets done in place first
    (:func:`spamnb.persistence.deltas.fold`) and reads the arrays a mapped load left
    unread (:func:`spamnb.persistence.deltas.read_whole`, which replays a journal only
    scored so far); scoring and learning in place read :meth:`SpamFilter.replayed` instead."""

    def ready(self, obj):
        if obj.unread_ is not None or obj.pending_journal_ is not None:   # loaded mapped: read for the caller
            read_whole(obj)
        if obj.has_holes():
            fold(obj)

    def __set__(self, obj, value):
        if obj.has_holes():
            fold(obj)
        obj.__dict__[self.name] = value


class FilterState:
    """What the modules of :mod:`spamnb.model` and the layers above use of a
    :class:`SpamFilter`'s state, as methods (nothing reaches into it by name:
    tests/test_reaching.py): its state as replayed, its holes, the fitted
    attributes set, the file a mapped load reads, its journal; and the
    :class:`spamnb.estimator.forms.Scorer` interface."""

    # a journal a mapped load scored and did not replay (spamnb.persistence.journal_view.JournalView), until replayed
    pending_journal_ = None
    # the pair weight a model that grows by learning chooses on its own mail (estimator.variants.PairMixture), or None
    pair_mixture_ = None

    def pair_scoring(self):
        """``(pair weight, scale)`` this filter scores with: the log-odds at that
        ``pair_weight``, times ``scale``.  Its own ``pair_weight`` and 1, or, for a
        model that chooses its pair weight on its own mail (``pair_mixture_``:
        ``spamnb.estimator.variants.PairMixture``), the mixture's."""
        mixture = self.pair_mixture_
        if mixture is None:
            return float(self.pair_weight), 1.0
        return mixture.weight, mixture.scale

    def replayed(self):
        """The :class:`Replayed` ``(vocabulary, word_counts, ages)`` as they stand:
        the holes forgets left in place not folded, the arrays a mapped load left
        unread not read (reading ``vocabulary_``, ``word_counts_`` or ``ages_``
        does both first).  What scoring and learning in place read
        (:mod:`spamnb.persistence.deltas`, :mod:`spamnb.estimator.scoring`); a journal
        only scored so far (``pending_journal_``) is replayed first."""
        if self.pending_journal_ is not None:
            read_whole(self)
        state = self.__dict__
        return Replayed(state["vocabulary_"], state["word_counts_"], state["ages_"])

    def read_whole(self):
        """Read the arrays a mapped load left unread and replay a journal only
        scored so far (:func:`spamnb.persistence.deltas.read_whole`): what the
        estimator's scorer calls before it needs the model whole."""
        read_whole(self)

    def set_fitted(self, **state):
        """Set fitted attributes, by name (:data:`FITTED`: ``set_fitted(vocabulary_=...,
        word_counts_=...)``), in the order given: the one way the modules of
        ``spamnb.model``, ``.estimator``, ``.persistence`` that fit, count, load, merge, prune or learn a filter give it
        its state (``vocabulary_``, ``word_counts_`` and ``ages_`` fold the holes of
        forgets first, as setting them does)."""
        unknown = [name for name in state if name not in FITTED]
        if unknown:
            raise TypeError(f"not a fitted attribute of a SpamFilter: {', '.join(unknown)}")
        for name, value in state.items():
            setattr(self, name, value)
        return self

    def adopt(self, other):
        """Take ``other``'s tokenizer, fitted state and cutoffs (the variant of
        itself that ``fit`` kept: :func:`spamnb.estimator.fitting.fit`)."""
        for name in ("tokenizer_", "vocabulary_", "word_counts_", "ages_", "ledger_", "spam_cutoff", "ham_cutoff"):
            setattr(self, name, getattr(other, name))
        return self

    def set_max_tokens(self, max_tokens):
        """Expire the oldest tokens past ``max_tokens`` from now on (None: never): ``spamnb prune --expire-at``."""
        self.ages_.max_tokens = max_tokens

    def replace_ages(self, ages):
        """Set ``ages_`` as :meth:`replayed` reads it (nothing folded first)."""
        self.__dict__["ages_"] = ages

    def has_holes(self):
        """Whether forgets in place left holes not folded yet (:func:`spamnb.persistence.deltas.forget_now`)."""
        return bool(self.__dict__.get("_holes"))

    def mark_holes(self):
        """Note that a forget in place left holes (folded on the next read of the folded attributes)."""
        self.__dict__["_holes"] = True

    def take_holes(self):
        """Whether there were holes to fold; they are no longer noted (:func:`spamnb.persistence.deltas.fold`)."""
        return bool(self.__dict__.pop("_holes", None))

    def save_counts(self, counts, path=None, backup=None):
        """``save`` of the filter ``counts.to_filter(self)`` would make of this
        unfitted one, without making it (``counts``, a
        :class:`~spamnb.estimator.counting.Counts`, consumed): the same file, byte
        for byte, written a piece at a time from the counts
        (:func:`spamnb.persistence.saving.write_counts`; ``spamnb train``'s save,
        through :class:`spamnb.estimator.fitting.Unfitted`); this filter stays unfitted."""
        if self.is_fitted:
            raise ValueError("save_counts takes an unfitted SpamFilter")
        _saving().write_counts(self, counts, path, backup)

    def file_layout(self):
        """``(file, layout)`` of a filter loaded ``form="mapped"`` and unchanged:
        the open model file and the byte offsets ``(keys, capacity, values,
        log_count)`` of its hash index and log-counts, which
        :func:`spamnb.estimator.scoring.gather` reads a message's entries from
        (:mod:`spamnb.server.overlay` shares it); None for any other filter."""
        if self.mapped_file_ is None:
            return None
        file, offsets, capacity = self.mapped_file_
        return file, (offsets["keys"], capacity, offsets["values"], offsets["log_count"])

    def set_cutoffs(self, cutoffs, source):
        """Set the :class:`Cutoffs` and record where they came from (``cutoff_source_``:
        "defaults", "train", "given", "held-out")."""
        self.cutoffs, self.cutoff_source_ = cutoffs, source

    def follow_journal(self):
        """Apply the records the model's journal got since this filter (loaded
        ``form="following"``) read it or last followed it, under the write lock
        (a score sees them whole or not at all): the number applied, or None
        when it cannot follow (loaded otherwise, the journal replaced, ...:
        load the model again).  See :func:`spamnb.persistence.journal.follow`."""
        if self.journal_ is None:
            return None
        from spamnb.persistence import journal

        with self.guard.writing():
            return journal.follow(self, _deltas().NoLedger())

    def journal_state(self):
        """``(status, size, end)`` of the journal a loaded filter replayed or follows
        (:class:`spamnb.persistence.journal.Journal`), or None."""
        journal = self.journal_
        return None if journal is None else (journal.status, journal.size, journal.end)

    # ------------------------------------------------------------------ the Scorer interface (spamnb.estimator.forms)
    def kernel(self):
        """The :class:`spamnb.estimator.forms.Kernel` that scores this form's token hashes: :meth:`scorer`."""
        return self.scorer()

    def tokens(self, message):
        """The token stream of ``message`` (bytes, text or a ``Path``), as this filter's tokenizer makes it."""
        return self.tokenizer_.stream(scoring.message_data(message))

    def score_stream(self, stream, n_evidence=0, parts=True):
        """A :class:`spamnb.estimator.verdict.MessageScore` of a token ``stream`` (:meth:`tokens`),
        without the message features (:func:`spamnb.estimator.scoring.score_stream`)."""
        with self.guard.reading():
            return scoring.score_stream(self.scorer(), stream, n_evidence, parts)

    def token_names(self, evidence):
        """``(token, weight)`` of a :class:`MessageScore`'s evidence ``(feature index, weight)``."""
        return scoring.evidence_tokens(self, evidence)

    def _keep(self, form):
        """The filter loaded as ``form`` (:meth:`SpamFilter.load`): what it keeps of the file."""
        if form == "following":
            _deltas().drop_ages(self)
            self.set_fitted(ledger_=None, source_=None)   # follows its journal without days or ledger: never saved
        elif form == "scoring":
            from spamnb.estimator.forms import keep_scoring_only

            keep_scoring_only(self)
        return self


class SpamFilter(FilterState):
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
        Weight of the continuous message features (``spamnb.estimator.message_features``: size,
        links, share of capitals, ...) modelled by a Gaussian naive Bayes whose
        log-likelihood ratio is added to the word log-odds under the one class
        prior.  0 (the default, chosen by cross-validation: docs/features.md)
        leaves them out.  With features on, ``forget`` is not available.
    length_norm : float
        When > 0, each message's transformed token counts are scaled to this
        Euclidean length before they are added or scored (length normalisation,
        Rennie et al. 2003; when scoring, over the tokens the model knows).
        0 leaves them as they are; the default is 5 (``DEFAULT_LENGTH_NORM``).
    pair_weight : float
        Word pairs' weight when a message is scored (1; a learned model's: ``spamnb.estimator.defaults``).

    Notes
    -----
    Threads may share one filter: its methods lock it internally
    (:mod:`spamnb.estimator.guard`), scoring (``score``, ``classify``,
    ``evidence``, ``score_many``, ``transform``, ``strongest_tokens``, ``save``)
    in many threads at once, learning (``learn``, ``forget``, ``fit``) in one
    at a time and never during a score, so every score sees a learn whole or
    not at all.  The fitted attributes (``vocabulary_``, ``word_counts_``, ...)
    are not locked: read them while no other thread learns.  Processes share
    a model file through ``spamnb.persistence.store.locked`` instead.
    """

    vocabulary_, word_counts_, ages_, ledger_, held_out_ = Folded(), Folded(), Folded(), Journaled(), Journaled()

    def __init__(self, tokenizer=None, alpha=DEFAULT_ALPHA, prior=DEFAULT_PRIOR, counts=DEFAULT_COUNTS,
                 spam_cutoff=DEFAULT_SPAM_CUTOFF, ham_cutoff=DEFAULT_HAM_CUTOFF, n_evidence=DEFAULT_EVIDENCE,
                 feature_weight=0.0, length_norm=DEFAULT_LENGTH_NORM, pair_weight=DEFAULT_PAIR_WEIGHT):
        self.tokenizer = tokenizer
        self.alpha = alpha
        self.prior = prior
        self.counts = counts
        self.spam_cutoff = spam_cutoff
        self.ham_cutoff = ham_cutoff
        self.n_evidence = n_evidence
        self.feature_weight = feature_weight
        self.length_norm = length_norm
        self.pair_weight = pair_weight
        check_params(alpha, prior, counts, length_norm, ham_cutoff, spam_cutoff, n_evidence, feature_weight,
                     pair_weight)
        self.tokenizer_ = tokenizer if tokenizer is not None else Tokenizer()
        self.unread_ = None       # a mapped load's arrays left unread (spamnb.persistence.store.map_model), until read whole
        self.vocabulary_ = Vocabulary()
        self.word_counts_ = None  # WordCounts once fitted, learned or loaded
        self.ages_ = Ages()       # last-seen day per token, the model's dates (spamnb.estimator.ages)
        self.ledger_ = None       # spamnb.estimator.ledger_table.Ledger of the messages `spamnb learn` took, or None
        self._scorer = None       # a token_kernels.Scorer over the counts and the vocabulary, made on first use
        self.features_ = None    # FeatureModel when feature_weight > 0
        self.source_ = None      # the model file a loaded filter came from
        self.calibration_ = None  # the cutoffs fit chose (spamnb.estimator.calibrate.Calibration), or None
        self.journal_ = None      # the journal replayed over the model file at load (spamnb.persistence.journal)
        self.mapped_ = False      # loaded from a mapped file, its checksum unchecked (SpamFilter.load)
        self.mapped_file_ = None  # then (the file, open; its arrays' offsets; the index's capacity)
        self.held_out_ = None     # scores of learned messages before each was learned (prequential.ScoreHistogram)
        self.cutoff_source_ = None    # "defaults", "train", "given", "held-out"; None: not recorded (cutoffs_from)
        self.guard = ReadWriteLock()   # threads: scores together, a learn alone (spamnb.estimator.guard)

    def __copy__(self):
        other = type(self).__new__(type(self))
        other.__dict__.update(self.__dict__)
        other.guard = ReadWriteLock()   # a lock of its own (the buffers it shares are not changed in place)
        return other

    @contextmanager
    def _reading(self):
        """Hold the read lock; first fold the holes forgets left (:func:`deltas.fold`),
        under the write lock, for readers that go through the folded attributes."""
        guard = self.guard
        with guard.reading():
            if not self.has_holes() or guard.writer_is_me():
                yield
                return
        with guard.writing():
            fold(self)
            yield

    # ------------------------------------------------------------------ params
    def get_params(self):
        """``{name: value}`` of the hyper-parameters (``spamnb.estimator.defaults.PARAMS``),
        as a model file stores them."""
        return params_of(self)

    @classmethod
    def from_params(cls, params, tokenizer=None):
        """A filter of the hyper-parameters ``params`` (a model file's or a dump's:
        a parameter newer than the file takes the value of a file without it)."""
        return cls(tokenizer=tokenizer, **stored_params(params))

    @property
    def cutoffs(self):
        """The :class:`Cutoffs` ``(spam, ham)`` in effect; set one to change both."""
        return Cutoffs(self.spam_cutoff, self.ham_cutoff)

    @cutoffs.setter
    def cutoffs(self, cutoffs):
        self.spam_cutoff, self.ham_cutoff = cutoffs

    # ------------------------------------------------------------------ state
    @property
    def is_fitted(self):
        return self.__dict__["word_counts_"] is not None

    @property
    def class_count_(self):
        """Messages learned per class, [ham, spam] (floats)."""
        with self.guard.reading():
            return tuple(self.__dict__["word_counts_"].class_count_) if self.is_fitted else (0.0, 0.0)

    @property
    def model_(self):
        """A :class:`MultinomialNB` with a copy of the counts (classes 0 ham, 1 spam)."""
        from spamnb.bayes.multinomial import MultinomialNB

        with self._reading():
            return MultinomialNB.from_word_counts(self.sized_counts())

    def require_fitted(self):
        if not self.is_fitted:
            raise ValueError("this SpamFilter has learned nothing yet: fit, learn or load a model first")

    def sized_counts(self):
        """The count model, as wide as the vocabulary (tokens it never counted count 0)."""
        self.require_fitted()
        self.word_counts_.resize(self.vocabulary_.n_features)
        return self.word_counts_

    def scorer(self):
        """The single-message scorer over the counts as they stand (``spamnb.estimator.scoring.scorer``),
        made on first use after a change."""
        if self._scorer is None:
            self._scorer = scoring.scorer(self)
        return self._scorer

    def counts_changed(self):
        """Drop the scorer: call after changing the counts, vocabulary or ages in place."""
        self._scorer = None

    # ------------------------------------------------------------------ training
    def fit(self, messages, labels, tune=True, target_fpr=DEFAULT_TARGET_FPR, word_pairs=AUTO_PAIRS):
        """Learn from scratch: ``messages`` (bytes, paths or Message objects), ``labels``
        (True/"spam" for spam, False/"ham" for ham).  Returns self.

        ``tune`` fits as ``spamnb train`` does (``spamnb.estimator.fitting``): cutoffs
        by 10-fold cross-validation for a false-positive rate of ``target_fpr``
        (0: those given stay), word pairs of window ``word_pairs`` (0: never)
        when the held-out figures favour them (``calibration_`` says what).
        ``tune=False`` only counts (the sums of ``MultinomialNB.partial_fit``).
        """
        from spamnb.estimator import fitting

        with self.guard.writing():
            return fitting.fit(self, messages, labels, tune, target_fpr, word_pairs)

    # ------------------------------------------------------------------ cutoffs of a model that grows by learning
    @property
    def cutoffs_from(self):
        """Where the cutoffs came from (:func:`spamnb.estimator.prequential.cutoffs_from`)."""
        from spamnb.estimator.prequential import cutoffs_from

        return cutoffs_from(self)

    def refit_cutoffs(self):
        """Fit the cutoffs on the held-out scores (:func:`spamnb.estimator.prequential.refit_cutoffs`)."""
        if self.held_out_ is None:   # no held-out scores: nothing to fit (nor to import)
            return False
        from spamnb.estimator.prequential import refit_cutoffs

        return refit_cutoffs(self)

    def learn(self, message, spam, stream=None):
        """Add one message to the counts (train-on-error), at a cost in its tokens.  ``spam``: the
        label, as ``fit`` takes it (True/"spam" or False/"ham"); ``stream``: its ``tokenizer_.stream``
        if tokenized already (the online protocol; ``message`` then read for message features only)."""
        spam = is_spam_label(spam)
        data = scoring.message_data(message) if stream is None or self.feature_weight else None
        features = [scoring.message_features_of(self, data)] if self.feature_weight else None
        with self.guard.writing():   # as a learning session learns: forgets' holes stay until folded (deltas)
            _deltas().learn(self, int(spam), None, stream if stream is not None else self.tokenizer_.stream(data))
            if features is not None:
                if self.features_ is None:
                    from spamnb.estimator.message_features import FeatureModel

                    self.features_ = FeatureModel()
                self.features_.partial_fit(features, [bool(spam)])
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
        hashes = self.tokenizer_.stream(scoring.message_data(message)).hashes   # tokenized before the lock
        return self.forget_hashes(hashes, spam)

    def forget_hashes(self, hashes, spam):
        """``forget`` of a message given as its token hashes (a journal's replay); it costs
        what a learn costs (:func:`spamnb.persistence.deltas.forget_now`)."""
        if self.feature_weight:
            raise ValueError("forget is not available with message features on (feature_weight > 0)")
        with self.guard.writing():
            self.require_fitted()
            _deltas().forget_now(self, hashes, spam)
        return self

    # ------------------------------------------------------------------ scoring
    def transform(self, messages):
        """Token-count vectors of messages over the fitted vocabulary: CSR (n_messages, n_features)."""
        with self._reading():
            return _matrix().transform(self, messages)

    def score_many(self, messages):
        """Log-odds of many messages through the sparse kernel: float64 array (n_messages,)."""
        with self._reading():
            return _matrix().score_many(self, messages)

    def evidence(self, message):
        """``(log_odds, spam_evidence, ham_evidence, part_max)`` of one message:
        what the verdict rule (``spamnb.estimator.verdict``) reads."""
        with self.guard.reading():
            scored = scoring.score_one(self, message, 0)
        return (scored.log_odds,) + tuple(scored.sums)

    def score(self, message):
        """``Score(probability, log_odds)`` of one message."""
        with self.guard.reading():
            log_odds = scoring.score_one(self, message, 0, parts=False).log_odds
        return Score(_probability(log_odds), log_odds)

    def classify(self, message, evidence=True):
        """A :class:`Verdict`: spam / unsure / ham by the cutoffs and the evidence
        (the rule of ``spamnb.estimator.verdict.decide``), with its strongest tokens
        (``evidence=False``: the same verdict without them, which is cheaper)."""
        with self.guard.reading():
            scored = scoring.score_one(self, message, int(self.n_evidence) if evidence else 0)
            tokens = scoring.evidence_tokens(self, scored.evidence) if evidence else ()
        return verdict.verdict_of(scored, self.cutoffs, tokens)

    # ------------------------------------------------------------------ inspection and files
    def strongest_tokens(self, n=10, min_count=5):
        """The ``n`` tokens pointing most to spam and to ham: see :func:`spamnb.estimator.matrix.strongest_tokens`."""
        with self._reading():
            return _matrix().strongest_tokens(self, n, min_count)

    def save(self, path=None, backup=None):
        """Write the model atomically to ``path`` (default: ``$SPAMNB_HOME/model.spamnb``);
        ``backup``: where to keep the model it replaces (None: nowhere).

        A symbolic link is followed (its target is replaced, the link kept);
        an existing file keeps its owner, group and mode; anything but a
        regular file is refused.  Call it under ``spamnb.persistence.store.locked(path)``
        for read-modify-write (``learn``); see ``spamnb.persistence.store.write_model``.
        """
        with self._reading():
            _saving().write(self, path, backup)

    @classmethod
    def load(cls, path=None, tokenizer=None, max_size=None, mapped=False, form=None):
        """Read a model file as ``form`` (:data:`FORMS`: "whole", the default; "mapped", as
        ``mapped=True``; "following"; "scoring": :mod:`spamnb.estimator.forms`), a ``Scorer``.
        Raises :class:`spamnb.persistence.store.ModelError` for any missing, damaged, foreign
        or mismatched file (e.g. a ``tokenizer`` whose settings differ from the model's),
        and, unread, for anything but a regular file or one over ``max_size`` bytes
        (default :data:`spamnb.persistence.store.MAX_MODEL_SIZE`, 1 GiB)."""
        form = ("mapped" if mapped else "whole") if form is None else form
        if form not in FORMS or (mapped and form != "mapped"):
            raise ValueError(f"form must be one of {', '.join(FORMS)}, not {form!r}")
        return codec.read(cls, path, tokenizer, max_size=max_size, mapped=form == "mapped")._keep(form)

    def __repr__(self):
        return (f"SpamFilter(alpha={self.alpha!r}, prior={self.prior!r}, counts={self.counts!r}, "
                f"spam_cutoff={self.spam_cutoff!r}, ham_cutoff={self.ham_cutoff!r})")
