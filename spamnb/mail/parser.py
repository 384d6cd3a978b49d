"""A small, bounded MIME parser: raw RFC 822 bytes -> headers, decoded text parts, counts.

Written for the tokenizer's hot path, so it avoids the stdlib ``email`` package
(importing ``email.parser`` alone takes ~11 ms) and does all per-character work
in compiled code (``spamnb.mail._mail``: ``parse`` itself, the header block and its
fields, Content-Type parameters, text decoding, HTML tags and entities) and
C-speed ``bytes``/``str`` methods, ``re`` and ``binascii``; Python runs only for
RFC 2047 encoded words, an unseen charset name (``spamnb.mail.charsets``) and broken
base64.  The records (``Mail``, ``Part``, ``MailStats``) live in
``spamnb.mail.records``.

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

from spamnb.mail import lazy_re
# records and charsets before _mail, whose init imports them (in C: importlib's _find_and_load, not a short
# run's own loading, spamnb.cli.main._import): imported here first, they are found loaded
from spamnb.mail.records import Mail, MailStats, Part, Record
from spamnb.mail.charsets import codec as _codec
from spamnb.mail.charsets import is_text_codec
from spamnb.mail._mail import MAX_BYTES, MAX_DEPTH, MAX_HEADER_CHARS, MAX_PARTS, decode_header_value, decode_text, parse
from spamnb.mail._mail import base64_lenient as _base64
from spamnb.mail._mail import content_type, text_prefix, text_prefix_marked
from spamnb.mail._mail import content_type as _content_type
from spamnb.mail._mail import decode_entities as _decode_entities
from spamnb.mail._mail import header_fields as _parse_fields
from spamnb.mail._mail import strip_tags as _strip_tags

__all__ = ["Mail", "MailStats", "Part", "parse", "html_to_text", "decode_header_value", "content_type",
           "text_prefix", "text_prefix_marked", "is_text_codec"]

# The header block ("Name: value" lines and their continuation lines, up to the
# first line that is neither) and its fields are found by spamnb.mail._mail
# (split_headers, parse_fields: C, one memchr per line), and so are the
# type and parameters of a Content-Type value (content_type: (type, params)),
# the MIME entities and their leaves (parse).

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
_COMMENT = lazy_re.pattern(r"<!--.*?-->", lazy_re.S | lazy_re.A)
_WORD_COMMENT = lazy_re.pattern(r"-->(?=\w)", lazy_re.A)
# Possessive quantifiers (Python >= 3.11): the runs of blanks around "=" and the
# quote cannot be split in more than one way, so a failing match gives up at
# once instead of trying every split (before: quadratic in the blanks after
# "href=", 0.5-0.8 s for one 6 KB message; 48,000 blanks took 35.6 s).
_LINK = lazy_re.pattern(r"""href\s*+=\s*+["']?+\s*+([^"'\s>]+)""", lazy_re.A)
# Tags (<[/a-z!][^<>]{0,4000}>, [/A-Za-z!] when not lower-cased) become a space
# and entities (&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[a-zA-Z]{2,8});?) are
# decoded by spamnb.mail._mail (strip_tags, decode_entities: one C pass each).
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


_WHITE_COLOR = lazy_re.pattern(r"""color\s*+[=:]\s*+["']?+\s*+(?:#?f{3}(?:f{3})?\b|white)""", lazy_re.A)
_INVISIBLE_STYLES = ("display:none", "display: none", "visibility:hidden", "font-size:0", "font-size: 0",
                     'size="1"', "size=1")
_TELLS = lazy_re.pattern(r"<(script|iframe|form|input|object|embed|map|area|base|meta|table|font|center|b|i|u)\b", lazy_re.A)


class HtmlText(Record):
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
