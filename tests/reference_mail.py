"""Reference implementations for tests/test_mail.py (a helper module, not collected).

The regular expressions and Python functions spamnb.mail.parser used before the
compiled spamnb.mail._mail replaced them, kept verbatim as an independent reference:
the compiled header, HTML, Content-Type and parse functions must give exactly
their results, on every input.
"""
import binascii
import re

import pytest

from spamnb.mail import _mail

from spamnb.mail import parser as mail


# -- header block and fields --
# The regular-expression implementation spamnb.mail.parser used before spamnb.mail._mail,
# kept verbatim here as an independent reference: the compiled functions must
# give exactly its results, on every input.
REF_HEADER_BLOCK = re.compile(rb"(?:[!-9;-~]+[ \t]*:[^\n]*(?:\n|\Z)(?:[ \t][^\n]*(?:\n|\Z))*)*", re.A)
REF_FOLD = re.compile(r"\n(?=[ \t])")


def ref_field_pattern(max_chars):
    return re.compile(r"\n([!-9;-~]+)[ \t]*:[ \t]*([^\n]{0,%d})" % max_chars, re.A)


REF_FIELD = ref_field_pattern(mail.MAX_HEADER_CHARS)


def ref_split_headers(data):
    end = REF_HEADER_BLOCK.match(data).end()
    if data[end:end + 1] == b"\n":
        return data[:end], data[end + 1:], True
    return data[:end], data[end:], end == len(data)


def ref_fields_of_text(text, field=REF_FIELD):
    """The fields of a decoded block, before RFC 2047 decoding."""
    if "\n " in text or "\n\t" in text:
        text = REF_FOLD.sub("", text)
    return [(name.lower(), value) for name, value in field.findall("\n" + text)]


def ref_parse_fields(block, by_name=None):
    try:
        text = block.decode("ascii")
    except UnicodeDecodeError:
        text = ref_decode_text(block, "")
    if "\n " in text or "\n\t" in text:
        text = REF_FOLD.sub("", text)
    fields = REF_FIELD.findall("\n" + text)
    if "=?" in text:
        fields = [(name.lower(), mail.decode_header_value(value)) for name, value in fields]
    else:
        fields = [(name.lower(), value) for name, value in fields]
    if by_name is not None:
        for name, value in fields:
            by_name.setdefault(name, []).append(value)
    return fields


def ref_parse(raw, **limits):
    """The reference parser with the reference header functions."""
    return ref_mail_parse(raw, split_headers=ref_split_headers, parse_fields=ref_parse_fields, **limits)


# -- HTML tags, entities and Content-Type parameters --
# The regular expressions and Python functions spamnb.mail.parser used before, kept
# verbatim as the reference: strip_tags, decode_entities and content_type must
# give exactly their results, on every input.
REF_PARAM = re.compile(r""";\s*([A-Za-z0-9_.*-]+)\s*=\s*(?:"([^"]*)"?|'([^']*)'?|([^;\s]*))""", re.A)
REF_TAG = re.compile(r"<[/a-z!][^<>]{0,4000}>", re.A)
REF_TAG_ANY_CASE = re.compile(r"<[/A-Za-z!][^<>]{0,4000}>", re.A)
REF_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[a-zA-Z]{2,8});?", re.A)
REF_COMMON_ENTITIES = {"nbsp": " ", "amp": "&", "lt": "<", "gt": ">", "quot": '"', "apos": "'",
                       "copy": "\u00a9", "reg": "\u00ae", "middot": "\u00b7", "trade": "\u2122"}


def ref_content_type(value):
    """(type/subtype, params dict) of a Content-Type value (str)."""
    main, _, rest = value.partition(";")
    ctype = main.strip().lower()
    if "/" not in ctype:
        ctype = "text/plain" if not ctype else ctype
    params = {}
    if rest:
        for name, quoted, single, bare in REF_PARAM.findall(";" + rest):
            params.setdefault(name.lower().split("*", 1)[0], quoted or single or bare)
    return ctype, params


def ref_entity(match):
    name = match.group(0)[1:].rstrip(";")
    if name[0] == "#":
        try:
            cp = int(name[2:], 16) if name[1] in "xX" else int(name[1:])
            return chr(cp) if 0 < cp < 0x110000 and not 0xD800 <= cp < 0xE000 else " "
        except ValueError:
            return " "
    value = REF_COMMON_ENTITIES.get(name)
    if value is not None:
        return value
    import html                                     # rare: the full entity table
    return html.unescape(match.group(0))


def ref_strip_tags(html, any_case=False):
    return (REF_TAG_ANY_CASE if any_case else REF_TAG).sub(" ", html)


def ref_decode_entities(text, unescape=None):
    return REF_ENTITY.sub(ref_entity, text)


def ref_html_to_text(html, lower=True, tells=True):
    """mail.html_to_text with the reference tag and entity functions."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(mail, "_strip_tags", ref_strip_tags)
        patch.setattr(mail, "_decode_entities", ref_decode_entities)
        return mail.html_to_text(html, lower, tells)


def ref_parse_all(raw, **limits):
    """The reference parser with every reference function (header block, fields, Content-Type)."""
    return ref_mail_parse(raw, split_headers=ref_split_headers, parse_fields=ref_parse_fields,
                          content_type=ref_content_type, **limits)


# -- mail.parse --
# spamnb.mail.parser's parse, _parse_into, _leaf, _split_multipart, _parse_fields,
# decode_text and _without_surrogates before they moved to spamnb.mail._mail, kept
# verbatim as the reference (the header and Content-Type functions they call are
# parameters: the compiled ones by default, the regex references above in
# ref_parse / ref_parse_all).
REF_HTML_SNIFF = re.compile(rb"\A\s*<(?:!doctype|html|head|body|table|div|p|font|center|br|a)\b", re.I | re.A)


def ref_without_surrogates(text):
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def ref_decode_text(data, charset, fallback="cp1252"):
    codec = mail._codec(charset) if charset else None
    if codec is not None and codec != "utf-8":
        try:
            text = data.decode(codec, "replace")
        except Exception:
            pass
        else:
            return text if text.isascii() else ref_without_surrogates(text)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        if codec == "utf-8":
            return data.decode("utf-8", "replace")
        return ref_without_surrogates(data.decode(fallback, "replace"))


def ref_block_fields(block, by_name=None):
    try:
        text = block.decode("ascii")
    except UnicodeDecodeError:
        text = ref_decode_text(block, "")
    return _mail.parse_fields(text, mail.MAX_HEADER_CHARS, mail.decode_header_value, by_name)


def ref_split_multipart(body, boundary, max_parts):
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
            return parts, True, False
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


def ref_mail_parse(raw, max_bytes=mail.MAX_BYTES, max_depth=mail.MAX_DEPTH, max_parts=mail.MAX_PARTS,
                   fallback_charset="cp1252", split_headers=_mail.split_headers, parse_fields=ref_block_fields,
                   content_type=_mail.content_type):
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogateescape")
    parsed = mail.Mail()
    stats = parsed.stats
    stats.n_bytes = len(raw)
    if len(raw) > max_bytes:
        raw = raw[:max_bytes]
        parsed.truncated = True
        parsed.defects.append("truncated")
    if b"\r" in raw:
        raw = raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    if raw.startswith(b"From "):
        raw = raw[raw.find(b"\n") + 1:] if b"\n" in raw else b""
    try:
        ref_parse_into(parsed, raw, max_depth, max_parts, fallback_charset, split_headers, parse_fields,
                       content_type)
    except Exception:
        parsed.defects.append("parse-error")
    stats.n_defects = len(parsed.defects)
    return parsed


def ref_parse_into(parsed, raw, max_depth, max_parts, fallback_charset, split_headers, parse_fields, content_type):
    stats = parsed.stats
    block, body, separated = split_headers(raw)
    if b"\0" in block:
        block = block.replace(b"\0", b"")
        parsed.defects.append("nul")
    if not separated:
        parsed.defects.append("no-separator")
    stats.n_header_bytes = len(block)
    by_name = {}
    parsed.headers = parse_fields(block, by_name)
    parsed._by_name = by_name
    stats.n_headers = len(parsed.headers)
    stats.n_received = len(by_name.get("received", ()))
    for name in ("to", "cc"):
        for value in by_name.get(name, ()):
            stats.n_recipients += value.count("@")
    header = parsed.header
    stack = [(header("content-type"), header("content-transfer-encoding"),
              header("content-disposition"), body, 0)]
    n_entities = 0
    while stack:
        ctype_value, cte, disposition, body, depth = stack.pop()
        n_entities += 1
        stats.max_depth = max(stats.max_depth, depth)
        ctype, params = content_type(ctype_value)
        if ctype.startswith("multipart/") or ctype == "message/rfc822":
            if depth >= max_depth:
                parsed.defects.append("depth-limit")
                parsed.parts.append(mail.Part(ctype, "", "", len(body)))
                continue
            if ctype == "message/rfc822":
                children = [body]
            else:
                boundary = params.get("boundary", "").encode("utf-8", "replace")
                hit_limit = False
                if not boundary:
                    parsed.defects.append("no-boundary")
                    children = []
                else:
                    children, closed, hit_limit = ref_split_multipart(
                        body, boundary, max(0, max_parts - n_entities - len(stack)))
                    if hit_limit:
                        parsed.defects.append("part-limit")
                    elif not closed:
                        parsed.defects.append("unclosed-boundary")
                if not children:
                    if ctype != "message/rfc822" and not (boundary and hit_limit):
                        stack.append(("text/plain", cte, "", body, depth + 1))
                    continue
            entries = []
            for child in children:
                child_block, child_body, _ = split_headers(child)
                child_headers = {}
                for name, value in parse_fields(child_block):
                    if name.startswith("content-") and name not in child_headers:
                        child_headers[name] = value
                default = "message/rfc822" if ctype == "multipart/digest" else "text/plain"
                entries.append((child_headers.get("content-type", default),
                                child_headers.get("content-transfer-encoding", ""),
                                child_headers.get("content-disposition", ""),
                                child_body, depth + 1))
            stack.extend(reversed(entries))
            continue
        ref_leaf(parsed, ctype, params, cte.strip().lower(), disposition, body, fallback_charset, content_type)


def ref_leaf(parsed, ctype, params, cte, disposition, body, fallback_charset, content_type):
    stats = parsed.stats
    stats.n_parts += 1
    charset = params.get("charset", "").strip().lower()
    filename = params.get("name", "")
    if not filename and "filename" in disposition:
        filename = content_type("x/x;" + disposition.partition(";")[2])[1].get("filename", "")
    part = mail.Part(ctype, charset, cte, len(body), None, filename)
    parsed.parts.append(part)
    is_text = ctype.startswith("text/") or ctype in ("message/delivery-status", "application/x-unknown")
    if not is_text:
        stats.n_attachments += 1
        return
    if cte == "base64":
        data = mail._base64(body)
    elif cte == "quoted-printable":
        data = binascii.a2b_qp(body)
    else:
        data = body
    text = ref_decode_text(data, charset, fallback_charset)
    if "\0" in text:
        text = text.replace("\0", "")
    if ctype == "text/html" or (ctype == "text/plain" and REF_HTML_SNIFF.match(data)):
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

