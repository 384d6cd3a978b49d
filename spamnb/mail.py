"""A small, bounded MIME parser: raw RFC 822 bytes -> headers, decoded text parts, counts.

Written for the tokenizer's hot path, so it avoids the stdlib ``email`` package
(importing ``email.parser`` alone takes ~11 ms) and does all per-character work
in compiled code (``spamnb._mail`` for the header block and its fields,
Content-Type parameters, HTML tags and entities) and
C-speed ``bytes``/``str`` methods, ``re`` and ``binascii``; Python runs once per
message and MIME part.

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

from spamnb._mail import content_type as _content_type
from spamnb._mail import decode_entities as _decode_entities
from spamnb._mail import parse_fields as _fields_of_text
from spamnb._mail import split_headers as _split_headers
from spamnb._mail import strip_tags as _strip_tags

__all__ = ["Mail", "MailStats", "Part", "parse", "html_to_text", "decode_header_value"]

MAX_BYTES = 256 * 1024
MAX_DEPTH = 8
MAX_PARTS = 64
MAX_HEADER_CHARS = 16 * 1024

# The header block ("Name: value" lines and their continuation lines, up to the
# first line that is neither) and its fields are found by spamnb._mail
# (split_headers, parse_fields: C, one memchr per line), and so are the
# type and parameters of a Content-Type value (_content_type: (type, params)).
_ENCODED_WORD = re.compile(r"=\?([^?\s]+)\?([bBqQ])\?([^?\s]*)\?=", re.A)
_BETWEEN_ENCODED_WORDS = re.compile(r"(\?=)\s+(=\?)", re.A)
_NOT_BASE64 = re.compile(rb"[^A-Za-z0-9+/]+", re.A)
_HTML_SNIFF = re.compile(rb"\A\s*<(?:!doctype|html|head|body|table|div|p|font|center|br|a)\b", re.I | re.A)

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

    def header_list(self, name):
        """Like ``header_values``, but the parser's own list (no copy; not to be
        modified), or ``()``: for the tokenizer's hot path."""
        return self._by_name.get(name, ())


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


def _without_surrogates(text):
    """``text`` with lone surrogates (from UTF-7, UTF-16 and friends) replaced by U+FFFD."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def decode_text(data, charset, fallback="cp1252"):
    """Bytes -> str: the declared charset if known, else strict UTF-8, else ``fallback``."""
    codec = _codec(charset) if charset else None
    if codec is not None and codec != "utf-8":
        try:
            text = data.decode(codec, "replace")
        except Exception:  # codec-specific failures (e.g. utf-7 state errors)
            pass
        else:
            return text if text.isascii() else _without_surrogates(text)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        if codec == "utf-8":
            return data.decode("utf-8", "replace")
        return _without_surrogates(data.decode(fallback, "replace"))


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


def _parse_fields(block, by_name=None):
    """[(lower-case name, decoded value)] of a header block (bytes): 8-bit bytes
    decoded, lines unfolded, RFC 2047 words decoded, values cut at MAX_HEADER_CHARS;
    each value also appended to ``by_name[name]`` if ``by_name`` (a dict) is given."""
    try:
        text = block.decode("ascii")
    except UnicodeDecodeError:
        text = decode_text(block, "")
    return _fields_of_text(text, MAX_HEADER_CHARS, decode_header_value, by_name)


def _split_multipart(body, boundary, max_parts):
    """Body parts between ``--boundary`` lines; (parts, closed, hit_limit)."""
    delimiter = b"--" + boundary
    parts = []
    if body.startswith(delimiter):
        pos = 0
    else:
        pos = body.find(b"\n" + delimiter)
        if pos < 0:
            return [], False, False
        pos += 1
    while True:
        start = body.find(b"\n", pos + len(delimiter))
        if body.startswith(b"--", pos + len(delimiter)):
            return parts, True, False               # close delimiter
        if start < 0:
            return parts, False, False
        start += 1
        nxt = body.find(b"\n" + delimiter, start - 1)
        if len(parts) == max_parts:
            return parts, False, True
        if nxt < 0:
            parts.append(body[start:])
            return parts, False, False
        parts.append(body[start:nxt])
        pos = nxt + 1


def parse(raw, max_bytes=MAX_BYTES, max_depth=MAX_DEPTH, max_parts=MAX_PARTS,
          fallback_charset="cp1252"):
    """Parse raw RFC 822 bytes (str is encoded as UTF-8) into a :class:`Mail`; never raises."""
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogateescape")
    mail = Mail()
    stats = mail.stats
    stats.n_bytes = len(raw)
    if len(raw) > max_bytes:
        raw = raw[:max_bytes]
        mail.truncated = True
        mail.defects.append("truncated")
    if b"\r" in raw:
        raw = raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    if raw.startswith(b"From "):                    # mbox separator line
        raw = raw[raw.find(b"\n") + 1:] if b"\n" in raw else b""

    try:
        _parse_into(mail, raw, max_depth, max_parts, fallback_charset)
    except Exception:       # a bug must not cost a message its tokens: keep what was parsed
        mail.defects.append("parse-error")
    stats.n_defects = len(mail.defects)
    return mail


def _parse_into(mail, raw, max_depth, max_parts, fallback_charset):
    stats = mail.stats
    block, body, separated = _split_headers(raw)
    if b"\0" in block:
        block = block.replace(b"\0", b"")
        mail.defects.append("nul")
    if not separated:
        mail.defects.append("no-separator")
    stats.n_header_bytes = len(block)
    by_name = {}
    mail.headers = _parse_fields(block, by_name)
    mail._by_name = by_name
    stats.n_headers = len(mail.headers)
    stats.n_received = len(by_name.get("received", ()))
    for name in ("to", "cc"):
        for value in by_name.get(name, ()):
            stats.n_recipients += value.count("@")
    header = mail.header
    # stack of (content-type value, transfer encoding, disposition, body, depth)
    stack = [(header("content-type"), header("content-transfer-encoding"),
              header("content-disposition"), body, 0)]
    n_entities = 0
    while stack:
        ctype_value, cte, disposition, body, depth = stack.pop()
        n_entities += 1
        stats.max_depth = max(stats.max_depth, depth)
        ctype, params = _content_type(ctype_value)
        if ctype.startswith("multipart/") or ctype == "message/rfc822":
            if depth >= max_depth:
                mail.defects.append("depth-limit")
                mail.parts.append(Part(ctype, "", "", len(body)))
                continue
            if ctype == "message/rfc822":
                children = [body]
            else:
                boundary = params.get("boundary", "").encode("utf-8", "replace")
                hit_limit = False
                if not boundary:
                    mail.defects.append("no-boundary")
                    children = []
                else:
                    children, closed, hit_limit = _split_multipart(
                        body, boundary, max(0, max_parts - n_entities - len(stack)))
                    if hit_limit:
                        mail.defects.append("part-limit")
                    elif not closed:
                        mail.defects.append("unclosed-boundary")
                if not children:
                    if ctype != "message/rfc822" and not (boundary and hit_limit):
                        # no parts found: read the body as text
                        stack.append(("text/plain", cte, "", body, depth + 1))
                    continue
            entries = []
            for child in children:
                child_block, child_body, _ = _split_headers(child)
                child_headers = {}
                for name, value in _parse_fields(child_block):
                    if name.startswith("content-") and name not in child_headers:
                        child_headers[name] = value
                default = "message/rfc822" if ctype == "multipart/digest" else "text/plain"
                entries.append((child_headers.get("content-type", default),
                                child_headers.get("content-transfer-encoding", ""),
                                child_headers.get("content-disposition", ""),
                                child_body, depth + 1))
            stack.extend(reversed(entries))
            continue
        _leaf(mail, ctype, params, cte.strip().lower(), disposition, body, fallback_charset)


def _leaf(mail, ctype, params, cte, disposition, body, fallback_charset):
    stats = mail.stats
    stats.n_parts += 1
    charset = params.get("charset", "").strip().lower()
    filename = params.get("name", "")
    if not filename and "filename" in disposition:
        filename = _content_type("x/x;" + disposition.partition(";")[2])[1].get("filename", "")
    part = Part(ctype, charset, cte, len(body), None, filename)
    mail.parts.append(part)
    is_text = ctype.startswith("text/") or ctype in ("message/delivery-status", "application/x-unknown")
    if not is_text:
        stats.n_attachments += 1
        return
    if cte == "base64":
        data = _base64(body)
    elif cte == "quoted-printable":
        data = binascii.a2b_qp(body)
    else:
        data = body
    text = decode_text(data, charset, fallback_charset)
    if "\0" in text:
        text = text.replace("\0", "")
    if ctype == "text/html" or (ctype == "text/plain" and _HTML_SNIFF.match(data)):
        part.content_type = "text/html"
        stats.n_html_parts += 1
        stats.html_chars += len(text)
        lowered = text.lower()
        stats.n_links += lowered.count("href")
        stats.n_images += lowered.count("<img")
    else:
        stats.n_text_parts += 1
        stats.text_chars += len(text)
        stats.n_links += text.count("://")
    part.text = text


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
