"""A small, bounded MIME parser: raw RFC 822 bytes -> headers, decoded text parts, counts.

Written for the tokenizer's hot path, so it avoids the stdlib ``email`` package
(importing ``email.parser`` alone takes ~11 ms) and does all per-character work
in compiled code (``spamnb._mail``: ``parse`` itself, the header block and its
fields, Content-Type parameters, text decoding, HTML tags and entities) and
C-speed ``bytes``/``str`` methods, ``re`` and ``binascii``; Python runs only for
RFC 2047 encoded words, an unseen charset name and broken base64.

Robustness: every input gives a :class:`Mail`, never an exception.  The work is
bounded: at most ``max_bytes`` of the message are looked at (the rest is
dropped and ``truncated`` set), MIME nesting deeper than ``max_depth`` and parts
beyond ``max_parts`` are not opened, a header field longer than
``max_header_chars`` is cut.  Broken input is decoded as far as possible and
noted in ``Mail.defects`` (the tokenizer turns defects into tokens):

- no blank line between headers and body: the headers end at the first line
  that is neither ``Name: value`` nor a continuation line;
- broken base64 (bad characters, bad padding): the decodable prefix is kept;
- a boundary that never closes: the last part runs to the end;
- a missing, unknown or wrong charset: the text is tried as strict UTF-8 and
  falls back to ``fallback_charset`` (see docs/tokenizer.md for the measurement);
- NUL bytes are dropped (from headers, and from text after decoding, so UTF-16
  bodies survive); CRLF line ends become LF.
"""

from __future__ import annotations

import binascii
import codecs
import re

from spamnb import _mail
from spamnb._mail import MAX_BYTES, MAX_DEPTH, MAX_HEADER_CHARS, MAX_PARTS, decode_text, parse
from spamnb._mail import content_type as _content_type
from spamnb._mail import decode_entities as _decode_entities
from spamnb._mail import header_fields as _parse_fields
from spamnb._mail import strip_tags as _strip_tags

__all__ = ["Mail", "MailStats", "Part", "parse", "html_to_text", "decode_header_value"]

# The header block ("Name: value" lines and their continuation lines, up to the
# first line that is neither) and its fields are found by spamnb._mail
# (split_headers, parse_fields: C, one memchr per line), and so are the
# type and parameters of a Content-Type value (content_type: (type, params)),
# the MIME entities and their leaves (parse).
_ENCODED_WORD = re.compile(r"=\?([^?\s]+)\?([bBqQ])\?([^?\s]*)\?=", re.A)
_BETWEEN_ENCODED_WORDS = re.compile(r"(\?=)\s+(=\?)", re.A)
_NOT_BASE64 = re.compile(rb"[^A-Za-z0-9+/]+", re.A)

_CHARSET_ALIASES = {
    "default_charset": None, "default": None, "unknown-8bit": None, "x-unknown": None,
    "us-ascii": None, "ascii": None, "ansi_x3.4-1968": None, "x-user-defined": None,
    "ks_c_5601-1987": "euc_kr", "ks_c_5601": "euc_kr", "gb2312": "gb18030", "gbk": "gb18030",
    "x-gbk": "gb18030", "iso-8859-1": "cp1252", "latin1": "cp1252", "latin-1": "cp1252",
    "iso-8859-8-i": "iso-8859-8", "x-mac-roman": "mac_roman", "utf8": "utf-8",
}
_codec_cache: dict = {}


class _Record:
    """A plain record (no ``dataclasses``: importing it costs ~5 ms of start-up)."""

    __slots__ = ()

    def __repr__(self):
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({fields})"

    def __eq__(self, other):
        return type(self) is type(other) and all(
            getattr(self, name) == getattr(other, name) for name in self.__slots__)


class Part(_Record):
    """One leaf MIME part.

    content_type : str -- e.g. "text/plain", lower case
    charset : str -- declared charset, lower case ("" if none)
    encoding : str -- Content-Transfer-Encoding, lower case ("" if none)
    size : int -- size of the (encoded) part body in bytes
    text : str or None -- decoded text of text/* parts, None for other parts
    filename : str
    """

    __slots__ = ("content_type", "charset", "encoding", "size", "text", "filename")

    def __init__(self, content_type, charset, encoding, size, text=None, filename=""):
        self.content_type = content_type
        self.charset = charset
        self.encoding = encoding
        self.size = size
        self.text = text
        self.filename = filename


class MailStats(_Record):
    """Counts for a numeric-feature model (all ints; sizes in bytes, text in characters).

    n_bytes (raw size, before truncation), n_header_bytes, n_headers, n_received,
    n_recipients (addresses in To + Cc), n_parts (leaf MIME parts), n_text_parts,
    n_html_parts, n_attachments (non-text leaves), max_depth (deepest MIME nesting),
    text_chars (text/plain), html_chars (text/html, markup included), n_links
    ("href" attributes in HTML + "://" in plain text), n_images ("<img" in HTML),
    n_defects.
    """

    __slots__ = ("n_bytes", "n_header_bytes", "n_headers", "n_received", "n_recipients",
                 "n_parts", "n_text_parts", "n_html_parts", "n_attachments", "max_depth",
                 "text_chars", "html_chars", "n_links", "n_images", "n_defects")

    def __init__(self, **counts):
        # one assignment per count (a setattr loop cost ~2 us per message)
        self.n_bytes = self.n_header_bytes = self.n_headers = self.n_received = 0
        self.n_recipients = self.n_parts = self.n_text_parts = self.n_html_parts = 0
        self.n_attachments = self.max_depth = self.text_chars = self.html_chars = 0
        self.n_links = self.n_images = self.n_defects = 0
        if counts:
            unknown = set(counts) - set(self.__slots__)
            if unknown:
                raise TypeError(f"unknown counts: {sorted(unknown)}")
            for name, value in counts.items():
                setattr(self, name, value)

    def as_dict(self):
        return {name: getattr(self, name) for name in self.__slots__}


class Mail(_Record):
    """A parsed message.

    headers : list of (name, value) -- top-level fields, lower-case names, decoded values
    parts : list of Part -- leaf parts in order
    defects : list of str -- e.g. "no-separator", "truncated"
    stats : MailStats
    truncated : bool -- the message was longer than max_bytes
    """

    __slots__ = ("headers", "parts", "defects", "stats", "truncated", "_by_name")

    def __init__(self):
        self.headers = []
        self.parts = []
        self.defects = []
        self.stats = MailStats()
        self.truncated = False
        self._by_name = {}      # name -> [values], filled by parse

    def header(self, name, default=""):
        """The first value of header ``name`` (lower case), or ``default``."""
        values = self._by_name.get(name)
        return values[0] if values else default

    def header_values(self, name):
        """All values of header ``name`` (lower case), in order."""
        return list(self._by_name.get(name, ()))

    @property
    def by_name(self):
        """{lower-case name: [values, in order]} of the top-level fields: the
        parser's own table (not to be modified), for the tokenizer's hot path."""
        return self._by_name


# Codecs a message may not choose: they are not charsets, and some decode in
# quadratic time (punycode) or to lone surrogates (the escape codecs).
_REFUSED_CODECS = frozenset(("punycode", "idna", "unicode_escape", "raw_unicode_escape", "mbcs",
                             "oem", "undefined"))


def _codec(charset):
    """A codec name for a declared charset, or None (unknown: use the fallback)."""
    try:
        return _codec_cache[charset]
    except KeyError:
        pass
    name = _CHARSET_ALIASES.get(charset, charset)
    if name is not None:
        try:
            info = codecs.lookup(name)
            name = info.name if getattr(info, "_is_text_encoding", True) else None
        except (LookupError, ValueError, TypeError):
            name = None
    if name is not None and name.replace("-", "_") in _REFUSED_CODECS:
        name = None
    if len(_codec_cache) < 1000:
        _codec_cache[charset] = name
    return name


def is_text_codec(name):
    """True when ``name`` is a charset this parser decodes with (used to validate settings)."""
    return _codec(name.strip().lower()) is not None


def _decode_encoded_word(match):
    charset, kind, payload = match.group(1).lower(), match.group(2), match.group(3)
    charset = charset.split("*", 1)[0]             # RFC 2231 language suffix
    try:
        raw = payload.encode("ascii", "replace")
        if kind in "bB":
            data = _base64(raw)
        else:
            data = binascii.a2b_qp(raw, header=True)
    except Exception:
        return match.group(0)
    return decode_text(data, charset)


def decode_header_value(value):
    """Decode the RFC 2047 encoded words of a header value (str; bytes are decoded first)."""
    if isinstance(value, bytes):
        value = decode_text(value, "")
    if "=?" in value:
        value = _BETWEEN_ENCODED_WORDS.sub(r"\1\2", value)
        value = _ENCODED_WORD.sub(_decode_encoded_word, value)
    return value


def _base64(data):
    """Lenient base64: ignores non-alphabet bytes, decodes the longest valid prefix."""
    try:
        return binascii.a2b_base64(data)
    except binascii.Error:
        pass
    data = _NOT_BASE64.sub(b"", data)
    data = data[: len(data) // 4 * 4]
    try:
        return binascii.a2b_base64(data)
    except binascii.Error:
        return b""


# parse, decode_text and the header fields are compiled (spamnb._mail: the
# entity loop, the leaves and their counts in C); they call back the records
# and helpers above.
_mail.bind(Mail, MailStats, Part, _codec, _codec_cache, decode_header_value, _base64, binascii.a2b_qp)


# --------------------------------------------------------------------------
# HTML -> text
# --------------------------------------------------------------------------
# The patterns run on lower-cased HTML and start with a literal where possible:
# re then skips ahead with a fast substring search instead of trying every
# position (e.g. 2 us instead of 57 us per message for the "invisible" tells).
#
# Linear time on hostile HTML: a lazy ".*?" searching for a closing "-->" or
# "</style>" that never comes rescans to the end from every opening, which is
# quadratic ("<!--" * 64000).  So comments are removed only up to the last
# "-->" (every opening before it finds a close), and style/script blocks with
# a str.find loop that stops at the first unclosed block.
_COMMENT = re.compile(r"<!--.*?-->", re.S | re.A)
_WORD_COMMENT = re.compile(r"-->(?=\w)", re.A)
_LINK = re.compile(r"""href\s*=\s*["']?\s*([^"'\s>]+)""", re.A)
# Tags (<[/a-z!][^<>]{0,4000}>, [/A-Za-z!] when not lower-cased) become a space
# and entities (&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[a-zA-Z]{2,8});?) are
# decoded by spamnb._mail (strip_tags, decode_entities: one C pass each).
_ASCII_LOWER = {c: c + 32 for c in range(65, 91)}


def _remove_comments(html):
    """``html`` without its complete ``<!-- -->`` comments (linear time)."""
    end = html.rfind("-->")
    if end < 0:
        return html
    return _COMMENT.sub("", html[:end + 3]) + html[end + 3:]


def _lower_same_length(text):
    """``text`` lower-cased, position for position (ASCII only if full lower-casing
    would change the length, as it does for a few letters such as U+0130)."""
    lowered = text.lower()
    return lowered if len(lowered) == len(text) else text.translate(_ASCII_LOWER)


def _remove_blocks(html, name, is_lower):
    """``html`` with each ``<name ...> ... </name>`` block replaced by a space.
    Stops at the first unclosed block (its text stays), so the work is linear."""
    lowered = html if is_lower else _lower_same_length(html)
    opening, closing = "<" + name, "</" + name
    pieces = []
    pos = 0
    while True:
        start = lowered.find(opening, pos)
        if start < 0:
            break
        close = lowered.find(closing, start)
        end = lowered.find(">", close) if close >= 0 else -1
        if end < 0:
            break
        pieces.append(html[pos:start])
        pos = end + 1
    if not pieces:
        return html
    pieces.append(html[pos:])
    return " ".join(pieces)


def _remove_style_and_script(html, is_lower):
    return _remove_blocks(_remove_blocks(html, "style", is_lower), "script", is_lower)


_WHITE_COLOR = re.compile(r"""color\s*[=:]\s*["']?\s*(?:#?f{3}(?:f{3})?\b|white)""", re.A)
_INVISIBLE_STYLES = ("display:none", "display: none", "visibility:hidden", "font-size:0", "font-size: 0",
                     'size="1"', "size=1")
_TELLS = re.compile(r"<(script|iframe|form|input|object|embed|map|area|base|meta|table|font|center|b|i|u)\b", re.A)


class HtmlText(_Record):
    """Text and tells extracted from one HTML part.

    text : str; links : list of str (href targets); n_images (<img> tags);
    n_comments (<!-- --> comments); n_split_words (comments inside words, as in
    "vi<!-- x -->agra"); n_invisible (white text, display:none, tiny fonts);
    tags : list of str (telling tag names found, lower case, with repeats).
    """

    __slots__ = ("text", "links", "n_images", "n_comments", "n_split_words", "n_invisible", "tags")

    def __init__(self, text, links, n_images, n_comments, n_split_words, n_invisible, tags):
        self.text = text
        self.links = links
        self.n_images = n_images
        self.n_comments = n_comments
        self.n_split_words = n_split_words
        self.n_invisible = n_invisible
        self.tags = tags


def html_to_text(html, lower=True, tells=True):
    """Turn HTML into text (lower-cased unless ``lower`` is false): comments vanish
    (re-joining split words), tags become spaces, entities are decoded; returns an
    :class:`HtmlText` with the tells (found in the lower-cased HTML; with
    ``tells`` false only links, images and comments are counted, the rest is 0/[])."""
    original = html
    html = html.lower()
    n_comments = html.count("<!--")
    n_word_comments = 0
    if n_comments:
        if tells:
            n_word_comments = len(_WORD_COMMENT.findall(html))
        html = _remove_comments(html)
    has_blocks = "<s" in html
    if has_blocks:
        html = _remove_style_and_script(html, True)
    links = _LINK.findall(html)
    n_images = html.count("<img")
    if tells:
        n_invisible = len(_WHITE_COLOR.findall(html)) + sum(html.count(s) for s in _INVISIBLE_STYLES)
        tags = _TELLS.findall(html)
    else:
        n_invisible, tags = 0, []
    if lower:
        text = _strip_tags(html, False)
    else:
        text = _remove_comments(original) if n_comments else original
        if has_blocks:
            text = _remove_style_and_script(text, False)
        text = _strip_tags(text, True)
    if "&" in text:
        text = text.replace("&nbsp;", " ").replace("&amp;", "&")   # the common ones at C speed
        if "&" in text:
            text = _decode_entities(text, _unescape)
    return HtmlText(text, links, n_images, n_comments, n_word_comments, n_invisible, tags)


def _unescape(entity):
    """An entity reference whose name _decode_entities does not know, decoded."""
    import html                                     # rare: the full entity table
    return html.unescape(entity)
