"""Compiled core of spamnb.mail.parser: ``parse`` (the MIME entities, their leaves
and counts).

Per-message, per-line and per-character work happens in C, here and in the
files ``parse`` uses, built into this module (``include``, so no step is a
Python call): ``_headers.pxi`` (the header block, its fields, Content-Type
parameters, RFC 2047 words), ``_text.pxi`` (charsets, lenient base64, the
text budget) and ``_html.pxi`` (tags, entities, the HTML sniff and counts).
Their public functions are importable from here.  The tokenizer's core
(``_tokenize.pxi``: ``hash_token``, ``Scanner``, ``TokenStream``) is built
in too: one compiled module for all of spamnb.mail, which a cold ``spamnb
classify`` loads (a compiled module's load and initialisation cost it
0.4-1.3 M instructions each, five of them before).  The module stands on its own: the records it makes come from
``spamnb.mail.records``, charset names are resolved by ``spamnb.mail.charsets``;
``spamnb.mail._mail.parse(b"Subject: hi\n\nbody")`` works without ``spamnb.mail.parser``.

The results are exactly those of the Python functions of spamnb.mail.parser
they replaced (parse, _parse_into, _leaf, _split_multipart, decode_text,
_parse_fields; kept as the reference in tests/reference_mail.py, which
tests/test_mail.py compares with this on the whole corpus, hand-written edge
cases and generated input).

Speed (all 6,046 corpus messages cut to the tokenizer's 6,144 bytes, best CPU
time of 7 passes, per message): the whole of ``mail.parse`` 29-31 us -> 15 us,
then (``parse`` compiled) 13.4 -> 9.9 us (docs/tokenizer.md, "Speed").
"""

from cpython.unicode cimport PyUnicode_DATA, PyUnicode_GET_LENGTH, PyUnicode_KIND
from libc.string cimport memchr, memcmp, memset

from spamnb.mail._unicode cimport PY_SSIZE_T_MAX, PyUnicode_Count, _find_char

# what parse uses, in this module: the text (charsets, base64, the budget), HTML, the header block
include "_text.pxi"
include "_html.pxi"
include "_headers.pxi"


# -- the whole message: mail.parse ----------------------------------------------------
# The entity loop, the leaves, the multipart split and the counts used to be
# Python (mail.parse, _parse_into, _leaf, _split_multipart, _parse_fields,
# decode_text; kept as the reference in tests/test_mail.py): the same steps in
# the same order, with the counts in a C struct (written to MailStats once), no
# Python call between the steps, the records made with object.__new__ and their
# slots set directly, the HTML sniff and the "href" / "<img" / "://" counts in C.
# Before / after: see docs/tokenizer.md, "Speed".

MAX_BYTES = 256 * 1024
MAX_DEPTH = 8
MAX_PARTS = 64

# The records the parser makes (plain Python classes).
from spamnb.mail.records import Mail as _Mail, MailStats as _MailStats, Part as _Part

cdef object _object_new = object.__new__
cdef object _binascii = None


cdef object _ascii():
    """The standard library's ``binascii``, imported when a message first needs
    it (a quoted-printable or base64 body, an encoded word): its shared object
    and the zlib it links are loaded by no cold classify of a plain message."""
    global _binascii
    if _binascii is None:
        import binascii
        _binascii = binascii
    return _binascii


cdef struct _Counts:
    Py_ssize_t n_header_bytes, n_headers, n_received, n_recipients, n_parts, n_text_parts
    Py_ssize_t n_html_parts, n_attachments, max_depth, text_chars, html_chars, n_links, n_images


# -- records --------------------------------------------------------------------------

cdef object _new_part(str ctype, str charset, str cte, Py_ssize_t size, text, filename):
    part = _object_new(_Part)
    part.content_type = ctype
    part.charset = charset
    part.encoding = cte
    part.size = size
    part.text = text
    part.filename = filename
    return part


cdef object _new_stats(_Counts *c, Py_ssize_t n_bytes, Py_ssize_t n_defects):
    stats = _object_new(_MailStats)
    stats.n_bytes = n_bytes
    stats.n_header_bytes = c.n_header_bytes
    stats.n_headers = c.n_headers
    stats.n_received = c.n_received
    stats.n_recipients = c.n_recipients
    stats.n_parts = c.n_parts
    stats.n_text_parts = c.n_text_parts
    stats.n_html_parts = c.n_html_parts
    stats.n_attachments = c.n_attachments
    stats.max_depth = c.max_depth
    stats.text_chars = c.text_chars
    stats.html_chars = c.html_chars
    stats.n_links = c.n_links
    stats.n_images = c.n_images
    stats.n_defects = n_defects
    return stats


# -- leaves, multipart bodies, the entity loop -------------------------------------

cdef _leaf(list parts, _Counts *c, str ctype, dict params, str cte, str disposition, bytes body, fallback,
           Py_ssize_t max_part_bytes, list defects, bint counts):
    cdef bytes data
    cdef str text
    cdef bint is_html
    cdef Py_ssize_t size
    c.n_parts += 1
    cdef str charset = params.get("charset", "").strip().lower()
    filename = params.get("name", "")
    if not filename and "filename" in disposition:
        filename = (<dict>_content_type("x/x;" + disposition.partition(";")[2])[1]).get("filename", "")
    if not (ctype.startswith("text/") or ctype == "message/delivery-status" or ctype == "application/x-unknown"):
        parts.append(_new_part(ctype, charset, cte, len(body), None, filename))
        c.n_attachments += 1
        return
    size = len(body)
    if 0 < max_part_bytes < size:
        body = body[:max_part_bytes]
        if "part-truncated" not in defects:
            defects.append("part-truncated")
    try:
        if cte == "base64":
            data = base64_lenient(body)
        elif cte == "quoted-printable":
            data = _ascii().a2b_qp(body)
        else:
            data = body
        text = _decode_text(data, charset, fallback)
        if _find_char(PyUnicode_KIND(text), PyUnicode_DATA(text), 0, 0, PyUnicode_GET_LENGTH(text)) \
                < PyUnicode_GET_LENGTH(text):
            text = text.replace("\0", "")
    except BaseException:
        # as before: the part is kept (no text) when decoding fails
        parts.append(_new_part(ctype, charset, cte, size, None, filename))
        raise
    if ctype == "text/html" or (ctype == "text/plain" and _sniffs_html(data)):
        c.n_html_parts += 1
        c.html_chars += PyUnicode_GET_LENGTH(text)
        if counts:
            c.n_links += _count_ci(text, b"href", 4)
            c.n_images += _count_ci(text, b"<img", 4)
        parts.append(_new_part("text/html", charset, cte, size, text, filename))
    else:
        c.n_text_parts += 1
        c.text_chars += PyUnicode_GET_LENGTH(text)
        if counts:
            c.n_links += _count_ci(text, b"://", 3)
        parts.append(_new_part(ctype, charset, cte, size, text, filename))


cdef tuple _split_multipart(bytes body, bytes boundary, Py_ssize_t max_parts):
    """Body parts between ``--boundary`` lines; (parts, closed, hit_limit)."""
    cdef bytes delimiter = b"--" + boundary
    cdef bytes line_delimiter = b"\n" + delimiter
    cdef Py_ssize_t n = len(body), d = len(delimiter), pos, start, nxt
    cdef const char *s = <char *>body
    cdef const char *nl
    cdef list parts = []
    if body.startswith(delimiter):
        pos = 0
    else:
        pos = body.find(line_delimiter)
        if pos < 0:
            return [], False, False
        pos += 1
    while True:
        start = -1
        if pos + d < n:
            nl = <const char *>memchr(s + pos + d, 10, <size_t>(n - pos - d))
            if nl != NULL:
                start = nl - s
        if pos + d + 2 <= n and s[pos + d] == 0x2D and s[pos + d + 1] == 0x2D:
            return parts, True, False               # close delimiter
        if start < 0:
            return parts, False, False
        start += 1
        nxt = body.find(line_delimiter, start - 1)
        if len(parts) == max_parts:
            return parts, False, True
        if nxt < 0:
            parts.append(body[start:])
            return parts, False, False
        parts.append(body[start:nxt])
        pos = nxt + 1


cdef inline str _first(dict by_name, str name):
    """``Mail.header(name)``: the first value, or ""."""
    values = by_name.get(name)
    return (<list>values)[0] if values else ""


def parse(raw, Py_ssize_t max_bytes=MAX_BYTES, Py_ssize_t max_depth=MAX_DEPTH, Py_ssize_t max_parts=MAX_PARTS,
          fallback_charset="cp1252", Py_ssize_t max_part_bytes=0, bint counts=True):
    """Parse raw RFC 822 bytes (str is encoded as UTF-8) into a :class:`spamnb.mail.parser.Mail`;
    never raises on bytes or str.

    At most ``max_bytes`` of the message are looked at; with ``max_part_bytes``
    > 0, at most that many (encoded) bytes of each text part are decoded (defect
    "part-truncated"), so one big text part costs no more than that.  With
    ``counts`` False the text is not searched for links and images
    (``stats.n_links`` and ``stats.n_images`` are 0; the rest is the same): the
    tokenizer's own parse reads no counts, and the searches cost a message of
    the SpamAssassin corpus about a tenth of its parse."""
    cdef _Counts c
    cdef list defects = [], parts = [], headers = [], fields, stack, children, entries
    cdef dict by_name = {}, names, child_headers, params
    cdef bint truncated = False, separated, closed, hit_limit
    cdef Py_ssize_t n_bytes, n_entities = 0, depth
    cdef bytes block, body, child_block, child_body, boundary, data
    cdef const char *nl
    cdef str ctype, ctype_value, cte, disposition, default
    memset(&c, 0, sizeof(c))
    if isinstance(raw, str):
        raw = (<str>raw).encode("utf-8", "surrogateescape")
    n_bytes = len(raw)
    if n_bytes > max_bytes:
        raw = raw[:max_bytes]
        truncated = True
        defects.append("truncated")
    if type(raw) is bytes:
        data = <bytes>raw
        if memchr(<char *>data, 13, <size_t>len(data)) != NULL:
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if len(data) >= 5 and memcmp(<char *>data, b"From ", 5) == 0:    # mbox separator line
            nl = <const char *>memchr(<char *>data, 10, <size_t>len(data))
            data = data[nl - <char *>data + 1:] if nl != NULL else b""
        raw = data
    else:       # other types behave as before (bytes subclasses parse, others are a parse-error)
        if b"\r" in raw:
            raw = raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if raw.startswith(b"From "):
            raw = raw[raw.find(b"\n") + 1:] if b"\n" in raw else b""

    try:
        if not isinstance(raw, bytes):
            raise TypeError("raw must be bytes or str")
        block, body, separated = _split_headers(raw)
        if memchr(<char *>block, 0, <size_t>len(block)) != NULL:
            block = block.replace(b"\0", b"")
            defects.append("nul")
        if not separated:
            defects.append("no-separator")
        c.n_header_bytes = len(block)
        names = {}
        fields = _block_fields(block, names)
        headers, by_name = fields, names
        c.n_headers = len(headers)
        c.n_received = len(by_name.get("received", ()))
        for name in ("to", "cc"):
            for value in by_name.get(name, ()):
                c.n_recipients += PyUnicode_Count(value, "@", 0, PY_SSIZE_T_MAX)
        # stack of (content-type value, transfer encoding, disposition, body, depth)
        stack = [(_first(by_name, "content-type"), _first(by_name, "content-transfer-encoding"),
                  _first(by_name, "content-disposition"), body, 0)]
        while stack:
            ctype_value, cte, disposition, body, depth = stack.pop()
            n_entities += 1
            if depth > c.max_depth:
                c.max_depth = depth
            ctype, params = _content_type(ctype_value)
            if ctype.startswith("multipart/") or ctype == "message/rfc822":
                if depth >= max_depth:
                    defects.append("depth-limit")
                    parts.append(_new_part(ctype, "", "", len(body), None, ""))
                    continue
                if ctype == "message/rfc822":
                    children = [body]
                else:
                    boundary = params.get("boundary", "").encode("utf-8", "replace")
                    hit_limit = False
                    if not boundary:
                        defects.append("no-boundary")
                        children = []
                    else:
                        children, closed, hit_limit = _split_multipart(
                            body, boundary, max(0, max_parts - n_entities - len(stack)))
                        if hit_limit:
                            defects.append("part-limit")
                        elif not closed:
                            defects.append("unclosed-boundary")
                    if not children:
                        if not (boundary and hit_limit):
                            # no parts found: read the body as text
                            stack.append(("text/plain", cte, "", body, depth + 1))
                        continue
                default = "message/rfc822" if ctype == "multipart/digest" else "text/plain"
                entries = []
                for child in children:
                    child_block, child_body, _ = _split_headers(child)
                    child_headers = {}
                    for name, value in _block_fields(child_block, None):
                        if (<str>name).startswith("content-") and name not in child_headers:
                            child_headers[name] = value
                    entries.append((child_headers.get("content-type", default),
                                    child_headers.get("content-transfer-encoding", ""),
                                    child_headers.get("content-disposition", ""),
                                    child_body, depth + 1))
                entries.reverse()
                stack.extend(entries)
                continue
            _leaf(parts, &c, ctype, params, cte.strip().lower(), disposition, body, fallback_charset,
                  max_part_bytes, defects, counts)
    except Exception:       # a bug must not cost a message its tokens: keep what was parsed
        defects.append("parse-error")
    mail = _object_new(_Mail)
    mail.headers = headers
    mail.parts = parts
    mail.defects = defects
    mail.stats = _new_stats(&c, n_bytes, len(defects))
    mail.truncated = truncated
    mail._by_name = by_name
    return mail


# -- the tokenizer's core: the token hash, the word scanner, TokenStream --------------
include "_tokenize.pxi"
