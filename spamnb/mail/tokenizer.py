"""Raw RFC 822 mail -> tokens.

``Tokenizer(**settings).stream(message_bytes)`` gives a ``TokenStream`` (token
hashes + strings on demand, see ``spamnb.mail._mail``, its ``_tokenize.pxi``); ``tokens(message)`` the
token strings, for inspection.  Parsing is ``spamnb.mail.parser``; every per-character
and per-token step runs in C (``spamnb.mail._mail``, its ``_tokenize.pxi`` or C-speed str/bytes/re
methods); Python runs per message, header and MIME part.

Token families (the figures that settled each choice are in the comments of
``DEFAULTS`` below; the full log, with the commands, is docs/tokenizer.md):

- body words, untagged, from the first ``max_text_chars`` characters of text;
- header words tagged by field: ``subject:free``, ``from:user@example.com``;
- ``received:`` relay host names and their last two labels, ``received:ip:`` IPs and their /24, /16;
- ``message-id:@domain``, ``x-mailer:<whole value>``;
- ``hdr:<name>``: which header fields are present;
- URL pieces from plain text and HTML links, tagged ``url:``: the scanner's words
  of the URL (scheme, host, path words), the host's last two labels, ``url:ip``;
- MIME structure: ``part:<type>``, ``charset:<name>``, ``cte:<encoding>``,
  ``boundary:<shape>``, attachment size classes and file extensions;
- HTML tells (off by default): ``html:img:<count class>``, ``html:split-word``
  (comment inside a word), ``html:invisible``, ``html:tag:<name>``;
- parse defects: ``mail:<defect>`` (``mail:truncated``, ``mail:no-separator``, ...);
- long words: ``skip:<first char> <length // 10 * 10>``.
"""

from spamnb.mail import lazy_re
from spamnb.mail import parser as _mail
from spamnb.mail._mail import Scanner, hash_token

__all__ = ["Tokenizer", "with_pairs", "hash_token", "PAIRS_TEXT_CHARS", "message_id_domain"]

# Hyper-parameters and their defaults; every value is JSON-serialisable.
# Figures: 1-AUC % of a plain multinomial NB (binary features, alpha 0.01),
# 5-fold CV on the TRAIN part (a script since retired; full log in
# docs/tokenizer.md).  Named groups of that log: "round 1" is the first
# tokenizer (all header fields, 256 KiB, no text budget); "final" the first
# header selection, 6 KiB and 1,000 characters (0.0470); "final 2" the final
# header fields with 750 characters and the HTML tells on (0.0399); "final 3"
# these defaults (0.0365).
DEFAULTS = {
    # -- Case.  Keeping case: 0.1850 vs 0.1749 lower-cased (round 1), 0.0537 vs
    #    0.0470 (final).  Lower-case everything.
    "lowercase": True,
    # -- Short words.  Dropping words under 2 / 3 characters: 0.1755 / 0.1793 vs
    #    0.1749 (round 1); 0.0481 vs 0.0470 (final).  Keep every word.
    "min_len": 1,
    # -- Long words become "skip:<first char> <length // 10 * 10>".  Limit 12 /
    #    30 / 60: 0.1741 / 0.1741 / 0.1496 vs 20: 0.1749 (round 1); the gain at 60
    #    was addresses and host names (with selected headers 60 vs 20: 0.1455 vs
    #    0.1462), so plain words keep 20 and words with a joiner inside get 60:
    #    max_len_joined=20 (off) 0.0537 vs 60: 0.0470 (final).
    "max_len": 20,
    "max_len_joined": 60,
    # -- Word characters.  No joiners: 0.1966, only "'": 0.1992 vs "'.-@": 0.1749
    #    (round 1); no joiners 0.0533 vs 0.0470 (final).  Extra word characters
    #    none / "$!" / "$": 0.1721 / 0.1730 / 0.1749, no difference; "$" keeps
    #    prices whole ("$19.99").
    "word_chars": "$",
    "joiners": "'.-@",
    # -- Han/kana runs as character bigrams.  One token per run: 0.1798 vs 0.1749
    #    (round 1); little CJK in the corpus, the usual choice kept.
    "cjk_bigrams": True,
    # -- Headers.  Words of no field / every field / the fields in _WORD_FIELDS:
    #    0.2813 / 0.1749 / 0.1462 (round 1); every field 0.0826 vs 0.0470 (final,
    #    before the list fields left _WORD_FIELDS).  A list of field names is
    #    accepted too.
    "headers": "selected",
    # -- The Subject: words also as body words (as well as "subject:" ones).
    #    Headerless mail such as Enron-Spam's is mostly a Subject: line and a
    #    short body, and the prefix kept the two apart: with length_norm 5,
    #    alpha 0.001, 5-fold CV 1-AUC on the train part 0.1110 -> 0.0874 %
    #    (5 wins, 0 losses) on Enron-Spam, 0.0259 -> 0.0258 % (2/2) on
    #    SpamAssassin (docs/accuracy.md).  Models written before this setting
    #    existed load with it off (``from_settings``).
    "subject_words": True,
    # -- Word pairs (orthogonal sparse bigrams, Siefkes et al. 2004): each
    #    untagged word (the Subject: words given as body words, then the body's)
    #    with each of the next word_pairs - 1 words, as "pair:w1 d w2", after all
    #    other tokens.  0 (off) is the default: with length normalisation, pairs
    #    of window 2 win every fold on Enron-Spam (5-fold CV 1-AUC 0.0874 ->
    #    0.0513 %, fixed-split test 0.0856 -> 0.0321 %) and lose every fold on
    #    SpamAssassin (0.0258 -> 0.0402 %, test 0.0012 -> 0.0116 %)
    #    (docs/accuracy.md).  ``spamnb train`` chooses between 0 and 2 on the
    #    user's own mail by the same cross-validation that sets the cutoffs
    #    (``spamnb.estimator.calibrate``), with the text budget PAIRS_TEXT_CHARS
    #    (``with_pairs``, below).
    "word_pairs": 0,
    # -- hdr:<name> tokens.  Off: 0.1611 vs 0.1749 (round 1, all fields), 0.0464
    #    vs 0.0470 ("final"), 0.0380 vs 0.0399 ("final 2"), 0.0364 vs 0.0365 with
    #    the HTML tells off ("tells"): neutral, kept.
    "header_names": True,
    # -- Received relays and IPs.  Off: 0.2090 (round 1), 0.0872 (final).
    "received": True,
    # -- URL pieces.  Off: 0.2615 (round 1), 0.0578 (final).
    "urls": True,
    # -- HTML / MIME tells.  Off: 0.1843 / 0.1809 vs 0.1749 (round 1); 0.0468 /
    #    0.0462 vs 0.0470 ("final"); with the 750-character budget and the final
    #    header fields ("final 2"): 0.0365 / 0.0380 vs 0.0399, both off 0.0362
    #    ("tells").  The HTML tells are off: with little text left they
    #    over-count what part:text/html and the URLs already say.  Their counts
    #    stay available to a numeric model in MailStats / HtmlText.
    "html_tells": False,
    "mime_tells": True,
    # -- Length normalisation, the biggest effect.  Multinomial NB adds one log
    #    ratio per token, so long messages get extreme scores (the misranked ham
    #    are long newsletters).  With selected headers: byte limit 8 / 12 / 16 /
    #    24 / 256 KiB: 0.0820 / 0.1070 / 0.1251 / 0.1439 / 0.1462; a budget of
    #    1,000 / 2,000 / 10,000 body characters (256 KiB): 0.0828 / 0.0963 /
    #    0.1303; both, 6 KiB and 1,000 characters: 0.0470, the best of a 4 x 4
    #    grid.  Budget 300 / 500 / 750 / 1,500: 0.0602 / 0.0464 / 0.0432 / 0.0514,
    #    a flat minimum.  With the final header fields, 750 vs 1,000: 0.0399 vs
    #    0.0446 (log a=0.01: 0.0384 vs 0.0429), so 750.
    #    Version 3: the budget is per text part, and a run of white space counts
    #    as one character (invisible format characters as none): junk before
    #    the text (a first text part of ham words, blank lines) no longer
    #    pushes the spam's own text out (docs/reliability.md, "Attacks").
    "max_text_chars": 750,
    # -- Bounded work.  Version 2 looked at the first 6 KiB of a message: 6.7 KB
    #    of junk header fields pushed all of the text out of it (every test spam
    #    became ham).  Now each region has its own bound: the message as a whole
    #    is read up to 256 KiB (attachments cost only the boundary search), each
    #    text part is decoded up to max_part_bytes, its text up to
    #    max_text_chars; a 50 MB message costs no more than 256 KiB.
    "max_bytes": _mail.MAX_BYTES,
    "max_part_bytes": 64 * 1024,
    "max_depth": _mail.MAX_DEPTH,
    "max_parts": _mail.MAX_PARTS,
    # -- Undeclared/unknown charset that is not UTF-8.  latin-1 / UTF-8 with
    #    replacement / cp1252: 0.1746 / 0.1754 / 0.1749 (round 1), no difference;
    #    cp1252 maps 0x80-0x9F to what Windows mailers mean (euro sign, quotes).
    "fallback_charset": "cp1252",
}

# Word pairs ("w1 w2" tokens for consecutive body words), emulated in the tuning
# script: 0.0821 vs 0.0470 (final settings).  Not implemented.

# Header fields tagged by words in "selected" mode.  Mailing-list fields
# (list-id, precedence, x-mailing-list, mailing-list) were in the first list:
# without them 0.0446 vs 0.0470 (log a=0.01: 0.0429 vs 0.0458), every cell of
# the grid better; adding list-unsubscribe, list-post, list-help, x-beenthere
# made it worse (0.0602); to/cc out: 0.0484; return-path, sender, errors-to
# out: 0.0480; only subject, from, reply-to: 0.0469 (group "header fields").
_WORD_FIELDS = ("subject", "from", "reply-to", "sender", "to", "cc", "return-path",
                "organization", "errors-to")
# Fields handled specially (or not at all: their words are noise) in every mode.
_SPECIAL_FIELDS = frozenset(("received", "message-id", "date", "x-mailer", "user-agent",
                             "content-type", "references", "in-reply-to", "delivered-to",
                             "content-transfer-encoding", "mime-version"))

# URL finding: two patterns that start with a literal, so re jumps between
# candidates with a substring search: 4 us/message instead of 95 us for one
# pattern with alternatives (measured on 1,200 corpus messages).
_URL_AFTER_SCHEME = lazy_re.pattern(r"""://[^\s<>"'`]+""", lazy_re.A)
_URL_WWW = lazy_re.pattern(r"""www(?<![/\w.]www)\.[^\s<>"'`]+""", lazy_re.A)
_URL_DOMAIN = lazy_re.pattern(r"(?://|^|@)(?:[\w-]+\.)*([a-z0-9-]+\.[a-z]{2,})\b", lazy_re.M | lazy_re.A)
_URL_IP = lazy_re.pattern(r"//\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b", lazy_re.A)
_SHAPE_LOWER = lazy_re.pattern(r"[a-z]+", lazy_re.A)
_SHAPE_UPPER = lazy_re.pattern(r"[A-Z]+", lazy_re.A)
_SHAPE_DIGIT = lazy_re.pattern(r"[0-9]+", lazy_re.A)
_ID_DOMAIN_ENDS = frozenset(">\t\n\r\f\v ")


def _find_urls(text):
    """The URLs of plain text: after a scheme's ``://``, then from ``www.``."""
    return _URL_AFTER_SCHEME.findall(text) + _URL_WWW.findall(text)


def message_id_domain(message_id):
    """What ``re.search(r"@([^>\\s]+)", message_id, re.A).group(1)`` gives (None
    when it finds nothing): the domain of a Message-ID, without ``re``, which
    a cold ``spamnb classify`` of mail with a Message-ID imported for it alone."""
    at = message_id.find("@")
    while at >= 0:
        end = at + 1
        while end < len(message_id) and message_id[end] not in _ID_DOMAIN_ENDS:
            end += 1
        if end > at + 1:
            return message_id[at + 1:end]
        at = message_id.find("@", at + 1)
    return None


_MAX_URLS = 64
# HTML is converted 8 KiB at a time: the rest of the part only when the first
# 8 KiB leave the text budget unfilled.  Converting whole parts (up to 64 KiB)
# brought in every link of long HTML: 10-fold CV 1-AUC on SpamAssassin 0.069 %
# against 0.018 % for the 6 KiB of version 2 (two folds with a spam full of
# links to a mailing-list site scored -150 and -200).
_HTML_FIRST = 8192
# The header region's budget: words from the first 1,000 characters of each
# selected field (all its lines together).  Version 2 read the fields only
# within its 6 KiB; reading them whole, a spam to a list of hundreds of
# recipients had hundreds of to: words.
_MAX_FIELD_CHARS = 1000
_MAX_SHARED_FIELD_PREFIXES = 256    # header names kept in the Scanner's prefix table
_MAX_RECEIVED = 16


def _size_class(n):
    """Powers of two: 0, 1, 2, 4, 8, ... (a coarse size or count bucket)."""
    return 0 if n <= 0 else 1 << (int(n).bit_length() - 1)


# Allowed values: (type, low, high) for numbers; settings come from model files
# too, so a crafted value must be refused here, not fail later on a message.
_INT_RANGES = {
    "min_len": (1, 1000), "max_len": (1, 1000), "max_len_joined": (1, 1000),
    "max_text_chars": (0, 1 << 30), "max_bytes": (1, 1 << 30), "max_part_bytes": (0, 1 << 30), "max_depth": (0, 64),
    "max_parts": (1, 100_000), "word_pairs": (0, 8),
}
# Version 2's settings (models written before version 3 store them): no
# max_part_bytes, and the first 6 KiB of a message were all it read.
_V2_DEFAULTS = {name: value for name, value in DEFAULTS.items()
                if name not in ("max_part_bytes", "subject_words", "word_pairs")}
_V2_DEFAULTS["max_bytes"] = 6144
_BOOLS = ("lowercase", "cjk_bigrams", "header_names", "received", "urls", "html_tells", "mime_tells",
          "subject_words")
# Settings added within a version, with the value that gives the tokens of a
# model file written before them (its settings lack the name).
_ADDED_IN_VERSION_3 = {"subject_words": False, "word_pairs": 0}
_SUBJECT_AS_BODY = (("subject", 0),)


def _validate(tok):
    """ValueError unless every setting of ``tok`` has an allowed type and value."""
    for name, (low, high) in _INT_RANGES.items():
        value = getattr(tok, name)
        if type(value) is not int or not low <= value <= high:
            raise ValueError(f"tokenizer setting {name} must be an int in [{low}, {high}], got {value!r}")
    if tok.max_len < tok.min_len:
        raise ValueError(f"max_len ({tok.max_len}) must be >= min_len ({tok.min_len})")
    for name in _BOOLS:
        if type(getattr(tok, name)) is not bool:
            raise ValueError(f"tokenizer setting {name} must be true or false, got {getattr(tok, name)!r}")
    for name in ("word_chars", "joiners"):
        value = getattr(tok, name)
        if type(value) is not str or not value.isascii() or len(value) > 64:
            raise ValueError(f"tokenizer setting {name} must be a short ASCII string, got {value!r}")
    if isinstance(tok.headers, (list, tuple)):
        if not all(type(f) is str and f == f.lower() for f in tok.headers) or len(tok.headers) > 200:
            raise ValueError(f"headers as a list must hold lower-case field names, got {tok.headers!r}")
        tok.headers = list(tok.headers)
    elif tok.headers not in ("all", "selected", "none"):
        raise ValueError(f"headers must be 'all', 'selected', 'none' or a list of field names, got {tok.headers!r}")
    if type(tok.fallback_charset) is not str or (   # the default is one: its codec is not looked up (imported) here
            tok.fallback_charset != DEFAULTS["fallback_charset"] and not _mail.is_text_codec(tok.fallback_charset)):
        raise ValueError(f"fallback_charset must name a text codec, got {tok.fallback_charset!r}")


# -- The text budget of a tokenizer with word pairs.  Pairs want more text
#    than words alone: with pairs of window 2, a budget of 750 / 1,000 / 1,500 /
#    2,000 / 3,000 / 4,000 characters per text part gives Enron-Spam's 5-fold CV
#    1-AUC 0.0513 / 0.0488 / 0.0458 / 0.0406 / 0.0397 / 0.0404 % (wins/losses
#    against 750: 3/2, 4/1, 5/0, 4/1, 5/0) and its fixed-split test part caught
#    at 0.1 % FPR 91.4 / 93.7 / 94.3 / 95.5 / 95.5 / 95.4 %; without pairs a
#    larger budget loses (1,500 / 3,000 characters: test caught 87.3 -> 83.9 /
#    64.7 %), so only the paired tokenizer gets it.  SpamAssassin's mail is
#    trained without pairs by ``spamnb train``'s choice either way
#    (docs/accuracy.md, "word pairs, chosen on the user's own mail").
PAIRS_TEXT_CHARS = 2000


def with_pairs(window, tokenizer=None):
    """The tokenizer ``spamnb`` trains with word pairs of ``window`` (>= 2):
    ``tokenizer``'s settings (the defaults when None) with ``word_pairs`` set,
    and the text budget raised to :data:`PAIRS_TEXT_CHARS` when it is the
    default one.  ``window`` 0 gives ``tokenizer`` (or the default one) unchanged."""
    tokenizer = tokenizer or Tokenizer()
    if not window:
        return tokenizer
    settings = tokenizer.settings
    if settings["max_text_chars"] == DEFAULTS["max_text_chars"]:
        settings["max_text_chars"] = PAIRS_TEXT_CHARS
    return Tokenizer.from_settings(dict(settings, word_pairs=window))


class Tokenizer:
    """Raw RFC 822 mail -> token stream; hyper-parameters as in ``DEFAULTS``.

    ``settings`` (JSON-serialisable, with "version") is stored in model files;
    ``Tokenizer.from_settings(settings)`` rebuilds the same tokenizer.
    """

    # 1: first version.  2: "selected" headers without the mailing-list fields;
    #    lone surrogates replaced; linear-time style/script/comment removal.
    #    3: budgets per region (max_part_bytes; the text budget per text part,
    #    white-space runs count one), invisible characters dropped and look-alike
    #    letters folded to Latin (spamnb.mail._mail.text_prefix), HTML converted
    #    8 KiB first, header field words from the first 1,000 characters.
    #    Models of version 2 still load: ``version=2`` gives its tokens exactly
    #    (one text budget across parts, no folding, whole HTML, whole fields,
    #    no max_part_bytes, max_bytes 6 KiB by default) without the hardening.
    VERSION = 3
    VERSIONS = (2, 3)

    def __init__(self, *, version=VERSION, **settings):
        if type(version) is not int or version not in self.VERSIONS:
            raise ValueError(f"tokenizer version {version!r} is not supported (this spamnb reads versions "
                             f"{', '.join(map(str, self.VERSIONS))})")
        defaults = DEFAULTS if version >= 3 else _V2_DEFAULTS
        unknown = set(settings) - set(defaults)
        if unknown:
            raise TypeError(f"unknown tokenizer settings{'' if version >= 3 else ' for version 2'}: "
                            f"{sorted(unknown)}")
        self.version = version
        for name, default in DEFAULTS.items():
            setattr(self, name, settings.get(name, defaults.get(name, default)))
        if version < 3:
            self.max_part_bytes = 0         # version 2 decoded each text part whole
            self.subject_words = False
            self.word_pairs = 0
        _validate(self)
        # version 3's region budgets and text handling (version 2: max_bytes only)
        self._hardened = version >= 3
        self._field_chars = _MAX_FIELD_CHARS if version >= 3 else -1
        self._scanner = Scanner(min_len=self.min_len, max_len=self.max_len,
                                word_chars=self.word_chars, joiners=self.joiners,
                                cjk_bigrams=self.cjk_bigrams, max_len_joined=self.max_len_joined)
        self._word_fields = tuple(_WORD_FIELDS if self.headers == "selected" else
                                  () if self.headers in ("all", "none") else
                                  [f for f in dict.fromkeys(self.headers) if f not in _SPECIAL_FIELDS])
        # the Subject: words again, untagged, when its words are tokens at all
        self._subject_words = self.subject_words and (self.headers == "all" or "subject" in self._word_fields)
        self._prefix_ids = {}
        self._field_prefix = {}
        # (field name, prefix id) of the fields whose words are tokens, in token order
        self._word_field_prefixes = tuple((name, self._field_prefix_id(name, None)) for name in self._word_fields)
        self._p_url = self._prefix("url:")
        self._p_part = self._prefix("part:")
        self._p_html = self._prefix("html:")
        self._p_html_tag = self._prefix("html:tag:")
        self._p_hdr = self._prefix("hdr:")
        self._p_mailer = self._prefix("x-mailer:")
        self._p_message_id = self._prefix("message-id:")
        self._p_received = self._prefix("received:")
        self._p_received_ip = self._prefix("received:ip:")
        self._p_boundary = self._prefix("boundary:")
        self._p_mail = self._prefix("mail:")
        self._p_pair = self._prefix("pair:")
        # What the head of a stream (the header tokens, the Subject: words as body words), the HTML
        # parts' conversion and the lower-cased text parts depend on: every setting but the text
        # budget and the word pairs.  Two tokenizers with the same key (a tokenizer and its
        # with_pairs) make them alike, so the second takes them from the first's stream of the same
        # parse (``stream``'s ``like``).  None for headers="all" (field prefixes met as they come).
        head = {k: v for k, v in self.settings.items() if k not in ("max_text_chars", "word_pairs")}
        self._head_key = None if self.headers == "all" else repr(sorted(head.items()))

    # -- settings -------------------------------------------------------------
    @property
    def settings(self):
        """The hyper-parameters plus ``"version"``: a JSON-serialisable dict."""
        names = DEFAULTS if self.version >= 3 else _V2_DEFAULTS
        out = {name: getattr(self, name) for name in names}
        out["version"] = self.version
        return out

    @classmethod
    def from_settings(cls, settings):
        """The tokenizer described by ``settings`` (of version 2 or 3, as a
        model file stores them); ValueError for another version or unknown keys."""
        settings = dict(settings)
        version = settings.pop("version", None)
        if type(version) is not int or version not in cls.VERSIONS:
            raise ValueError(f"tokenizer version {version!r} is not supported (this spamnb reads versions "
                             f"{', '.join(map(str, cls.VERSIONS))})")
        unknown = set(settings) - set(DEFAULTS if version >= 3 else _V2_DEFAULTS)
        if unknown:
            raise ValueError(f"unknown tokenizer settings for version {version}: {sorted(unknown)}")
        if version == 3:   # a model file written before a setting existed: its tokens
            settings = {**_ADDED_IN_VERSION_3, **settings}
        return cls(version=version, **settings)

    def __repr__(self):
        defaults = DEFAULTS if self.version >= 3 else _V2_DEFAULTS
        changed = {k: v for k, v in self.settings.items() if k != "version" and v != defaults[k]}
        if self.version != self.VERSION:
            changed = {"version": self.version, **changed}
        return f"Tokenizer({', '.join(f'{k}={v!r}' for k, v in changed.items())})"

    def _prefix(self, text):
        pid = self._prefix_ids.get(text)
        if pid is None:
            pid = self._prefix_ids[text] = self._scanner.prefix(text)
        return pid

    def _field_prefix_id(self, name, stream):
        """The prefix id of ``name + ":"``: shared by all streams for the first
        _MAX_SHARED_FIELD_PREFIXES names, local to ``stream`` beyond them."""
        pid = self._field_prefix.get(name)
        if pid is None:
            if len(self._field_prefix) < _MAX_SHARED_FIELD_PREFIXES:
                pid = self._field_prefix[name] = self._prefix(name + ":")
            else:       # the same tokens, without growing the shared table
                pid = stream.local_prefix(name + ":")
        return pid

    # -- tokenizing -----------------------------------------------------------
    def tokens(self, message):
        """The token strings of ``message`` (bytes or str), in order."""
        return self.stream(message).tokens()

    def parse(self, message):
        """One raw message parsed as :meth:`stream` parses it (for :meth:`stream`'s ``parsed``)."""
        return _mail.parse(message, self.max_bytes, self.max_depth, self.max_parts,
                           self.fallback_charset, self.max_part_bytes)

    def parses_as(self, other):
        """True when ``other`` parses a message as this tokenizer does (the same
        settings of :meth:`parse`: a tokenizer and its :func:`with_pairs`), so one
        :meth:`parse` serves both streams."""
        mine = (self.max_bytes, self.max_depth, self.max_parts, self.fallback_charset, self.max_part_bytes)
        return mine == (other.max_bytes, other.max_depth, other.max_parts, other.fallback_charset,
                        other.max_part_bytes)

    def stream(self, message, parsed=None, like=None, share=False):
        """The ``TokenStream`` of one raw message (bytes; str is encoded as UTF-8).
        ``parsed``: the message's :meth:`parse` by this tokenizer or one that
        :meth:`parses_as` it (the parse is not changed: one serves several
        tokenizers; the stream is the same as without it).  ``share``: the
        stream keeps what another tokenizer's stream of the same ``parsed``
        can take from its making (its head of header tokens, the HTML
        converted, the text lower-cased), until it is dropped; ``like``: such
        a stream, made by a tokenizer of the same settings but the text
        budget and the word pairs (a tokenizer and its :func:`with_pairs`):
        what both make alike is taken from it (the stream is the same as
        without it; any other ``like`` is not used)."""
        return self._stream(message, parsed, like, share, None)[0]

    def marks(self, plain):
        """True when :meth:`streams` makes ``plain``'s stream of a message in
        this tokenizer's pass: ``plain`` has no word pairs, a text budget no
        larger than this one's and every other setting this one's (a
        tokenizer's :func:`with_pairs`), both of version 3 with selected
        header fields."""
        mine, theirs = self.max_text_chars or -1, plain.max_text_chars or -1
        return (self._hardened and plain._hardened and self._head_key is not None
                and self._head_key == plain._head_key and not plain.word_pairs
                and (mine < 0 or 0 <= theirs <= mine))

    def streams(self, message, parsed, plain):
        """``(plain.stream(message), self.stream(message))`` of one :meth:`parse`
        ``parsed`` (of a tokenizer that :meth:`parses_as` this one), made in
        one pass when this tokenizer :meth:`marks` ``plain`` (its word pairs'
        trial and the default tokenizer): the header tokens made once, each
        text part scanned once to this budget, its words up to ``plain``'s
        budget (and the word cut there) given to ``plain``'s stream too, the
        URL tokens made once when both find the same URLs; the streams are
        the ones each tokenizer makes alone (every token, hash and region)."""
        if not self.marks(plain):
            first = plain.stream(message, parsed, None, True)
            return first, self.stream(message, parsed, first)
        return self._stream(message, parsed, None, False, plain)[::-1]

    def _stream(self, message, parsed, like, share, plain):
        """:meth:`stream`, and with ``plain`` (:meth:`marks`) ``plain``'s stream
        made in the same pass: ``(stream, plain's or None)``."""
        if parsed is None:   # no link and image counts: the stream reads none of the parse's stats
            parsed = _mail.parse(message, self.max_bytes, self.max_depth, self.max_parts,
                                 self.fallback_charset, self.max_part_bytes, False)
        stream = self._scanner.stream()
        twin = None   # plain's stream: every token added to stream is added to it, but for the parts below
        lower = self.lowercase
        urls = []
        if plain is not None:
            twin = self._scanner.stream()
            stream.twin(twin)
            twin.truncated = parsed.truncated
            small = plain.max_text_chars or -1
            plain_urls = []
        reuse = None if like is None else like.reuse
        if reuse is not None and reuse[1] is parsed and reuse[0] == self._head_key:
            stream.extend(like, reuse[2])    # the same header tokens: copied, not made again
            done = reuse[3]
        else:
            self._headers(stream, parsed, lower)
            if self._subject_words:
                stream.add_field_words(parsed.by_name, _SUBJECT_AS_BODY, lower, self._field_chars)
            done = {}
        # part number -> its text lower-cased, or its HTML converted (first 8 KiB; "all": all of it)
        if share and self._head_key is not None:
            stream.reuse = (self._head_key, parsed, len(stream), done)
        stream.truncated = parsed.truncated
        plain_seen = False
        html_seen = False
        budget = self.max_text_chars or -1
        text_prefix = _mail.text_prefix
        hardened = self._hardened           # False: version 2's tokens (a branch per part)
        for number, part in enumerate(parsed.parts):
            if self.mime_tells:
                self._mime_tells(stream, part)
            text = part.text
            if text is None:
                continue
            own = None   # plain's HTML converted when it is not this one's (then its part is made apart)
            if part.content_type == "text/html":
                html_seen = True
                if hardened:
                    html = first = done.get(number)
                    if html is None:
                        html = first = done[number] = _mail.html_to_text(text[:_HTML_FIRST], lower, self.html_tells)
                    if len(text) > _HTML_FIRST and (budget < 0 or len(text_prefix(html.text, budget)) == len(html.text)):
                        # the first 8 KiB did not fill the budget (e.g. a long <style> block first): all of it
                        html = done.get(-1 - number)
                        if html is None:
                            html = done[-1 - number] = _mail.html_to_text(text, lower, self.html_tells)
                        if twin is not None and small >= 0 and len(text_prefix(first.text, small)) < len(first.text):
                            own = first      # plain's smaller budget filled by the first 8 KiB: those
                            stream.twin(None)
                else:
                    html = _mail.html_to_text(text, lower, self.html_tells)
                text = html.text
                urls.extend(html.links)
                if self.html_tells:
                    self._html_tells(stream, html)
                if own is not None:
                    plain_urls.extend(own.links)
                    if self.html_tells:
                        self._html_tells(twin, own)
                elif twin is not None:
                    plain_urls.extend(html.links)
            else:
                plain_seen = True
                if lower:
                    lowered = done.get(number)
                    if lowered is None:
                        lowered = done[number] = text.lower()
                    text = lowered
            mark = -1
            if not hardened:                         # version 2: one budget across parts, text as it is
                if budget >= 0:
                    text = text[:budget]
                    budget -= len(text)
            elif twin is not None and own is None:   # plain's words: those of text[:mark]
                text, mark = _mail.text_prefix_marked(text, budget, small)
            else:
                text = text_prefix(text, budget)     # also drops invisible characters, folds look-alikes
            if self.urls and ("://" in text or "www." in text):
                found = _find_urls(text)
                urls.extend(found)
                if mark >= 0:   # plain's own: a URL may end past its text, or be cut there
                    plain_urls.extend(found if mark == len(text) else _find_urls(text[:mark]))
            start = len(stream)
            if twin is not None:
                plain_start = len(twin)
            stream.add_words(text, 0, mark)
            if len(stream) > start:
                stream.regions.append((start, len(stream)))
            if own is not None:
                own_text = text_prefix(own.text, small)
                if self.urls and ("://" in own_text or "www." in own_text):
                    plain_urls.extend(_find_urls(own_text))
                twin.add_words(own_text)
                stream.twin(twin)
            if twin is not None and len(twin) > plain_start:
                twin.regions.append((plain_start, len(twin)))
        if self.html_tells and html_seen and not plain_seen:
            stream.add_token("html:only")
        if self.urls and twin is not None and urls[:_MAX_URLS] != plain_urls[:_MAX_URLS]:   # each its own
            stream.twin(None)
            if plain_urls:
                self._urls(twin, plain_urls[:_MAX_URLS], lower)
            if urls:
                self._urls(stream, urls[:_MAX_URLS], lower)
            stream.twin(twin)
        elif self.urls and urls:
            self._urls(stream, urls[:_MAX_URLS], lower)
        if parsed.defects:
            stream.add_tokens(sorted(set(parsed.defects)), self._p_mail)
        if twin is not None:
            stream.twin(None)
        if self.word_pairs >= 2:     # last: the tokens before them are the stream without pairs
            stream.add_pairs(self.word_pairs, self._p_pair)
        return stream, twin

    def _headers(self, stream, parsed, lower):
        # Per message: one dict look-up per selected field and one C call per value
        # (no lists of (name, value) pairs built first, prefix ids looked up once
        # per tokenizer): parse + tokenize 44.6 -> 42.3 us per corpus message
        # (scripts/bench/bench_tokenize.py, identical tokens).
        if self.headers == "all":
            for name, value in parsed.headers:
                if name not in _SPECIAL_FIELDS:
                    stream.add_words(value.lower() if lower else value, self._field_prefix_id(name, stream))
        else:
            stream.add_field_words(parsed.by_name, self._word_field_prefixes, lower, self._field_chars)
        if self.header_names:
            stream.add_names(parsed.headers, self._p_hdr)
        if self.headers == "none":
            return
        mailer = parsed.header("x-mailer") or parsed.header("user-agent")
        if mailer:
            stream.add_token(" ".join(mailer.lower().split()), self._p_mailer)
        message_id = parsed.header("message-id", None)
        if message_id is None:
            stream.add_token("none", self._p_message_id)
        else:
            domain = message_id_domain(message_id)
            stream.add_token("@" + domain.lower() if domain else "no-domain", self._p_message_id)
        received = parsed.by_name.get("received")
        if self.received and received:
            text = "\n".join(received[:_MAX_RECEIVED]).lower()
            # compiled: 5.3-5.7 -> 1.8 us per message with Received: fields (the three
            # re.findall passes it replaced, tokens included; tests/test_tokenizer.py)
            stream.add_received(text, self._p_received, self._p_received_ip)
        if self.mime_tells:
            ctype = parsed.header("content-type", None)
            if ctype is not None:
                boundary = _mail.content_type(ctype)[1].get("boundary")
                if boundary:
                    shape = _SHAPE_DIGIT.sub("9", _SHAPE_UPPER.sub("A", _SHAPE_LOWER.sub("a", boundary)))
                    stream.add_token(shape[:40], self._p_boundary)

    def _mime_tells(self, stream, part):
        tokens = [part.content_type]
        if part.charset:
            tokens.append("charset:" + part.charset)
        if part.encoding:
            tokens.append("cte:" + part.encoding)
        if part.text is None:
            tokens.append(f"size:{_size_class(part.size)}")
            if "." in part.filename:
                tokens.append("ext:" + part.filename.rsplit(".", 1)[1].lower()[:10])
        stream.add_tokens(tokens, self._p_part)

    def _html_tells(self, stream, html):
        tokens = [f"img:{_size_class(html.n_images)}"]
        if html.n_comments:
            tokens.append("comment")
        if html.n_split_words:
            tokens.append("split-word")
        if html.n_invisible:
            tokens.append("invisible")
        stream.add_tokens(tokens, self._p_html)
        if html.tags:
            stream.add_tokens(set(html.tags), self._p_html_tag)

    def _urls(self, stream, urls, lower):
        """URL pieces: the scanner's words of the URLs (scheme, host, path words) tagged
        ``url:``, plus each host's registered-domain guess (last two labels) and ``url:ip``."""
        text = "\n".join(urls)
        if lower:
            text = text.lower()
        stream.add_words(text, self._p_url)
        stream.add_tokens(_URL_DOMAIN.findall(text.lower() if not lower else text), self._p_url)
        if _URL_IP.search(text):
            stream.add_token("ip", self._p_url)
