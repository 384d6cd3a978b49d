"""The text dump of a model (``spamnb dump`` / ``spamnb load``): a header of
the settings and counts, then one line a token (escaped string, ham and spam
counts, last-seen day), checksummed; read back whole and checked before any
model is touched (``DumpError`` names the line)."""

from __future__ import annotations

import datetime
import json
import re
import zlib
from array import array

from spamnb.errors import DumpError, DuplicateToken
from spamnb.estimator.defaults import are_params
from spamnb.model.lifecycle import (EPOCH, MAX_COUNT, UNKNOWN_DAY, build_filter, State, state_of,
                                    check_max_tokens, day_text)

__all__ = ["DumpError", "DUMP_FORMAT", "DUMP_VERSION", "dump", "load_dump", "escape_token", "unescape_token"]

DUMP_FORMAT = "spamnb-dump"
DUMP_VERSION = 2
DUMP_VERSIONS = (1, 2)        # the versions load_dump reads
COLUMNS = "token ham spam last-seen"
MAX_LINE = 1 << 16            # bytes; the tokenizer's tokens are at most ~1,000 characters
_CHUNK = 4096                 # lines written per write()


def _parse_day(text):
    if text == "-":
        return UNKNOWN_DAY
    if len(text) != 10:
        raise ValueError(f"bad day {text!r} (YYYY-MM-DD or -)")
    day = datetime.date.fromisoformat(text).toordinal() - EPOCH
    if day <= 0:
        raise ValueError(f"day {text!r} is before 1970-01-02")
    return day


# ---------------------------------------------------------------------------- adapter
# The only functions that know how a SpamFilter keeps its state.


_ESCAPE_BYTES = re.compile(rb"[\x00-\x1f\x7f\\]|\xed[\xa0-\xbf]")   # controls, backslash, UTF-8 of surrogates
_ESCAPE_CHARS = re.compile("[\x00-\x1f\x7f\\\\\ud800-\udfff]")
_NAMED = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape_char(match):
    c = match.group()
    named = _NAMED.get(c)
    if named is not None:
        return named
    code = ord(c)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_token(token_bytes):
    """The dump form of a token given as its UTF-8 (surrogatepass) bytes."""
    if _ESCAPE_BYTES.search(token_bytes) is None:
        return token_bytes
    text = token_bytes.decode("utf-8", "surrogatepass")
    return _ESCAPE_CHARS.sub(_escape_char, text).encode("utf-8")


_UNESCAPE = re.compile(r"\\(?:(x[0-9a-f]{2})|(u[dD][89a-fA-F][0-9a-fA-F]{2})|([\\tnr])|(.|$))", re.S)
_UNNAMED = {"\\": "\\", "t": "\t", "n": "\n", "r": "\r"}


def _unescape_char(match):
    hex_byte, surrogate, named, bad = match.groups()
    if bad is not None:
        raise ValueError(f"bad escape \\{bad}" if bad else "a backslash ends the token")
    if named is not None:
        return _UNNAMED[named]
    return chr(int((hex_byte or surrogate)[1:], 16))


def unescape_token(text):
    """The token (a str) of its dump form (a str).  Raises ValueError."""
    if "\\" not in text:
        return text
    return _UNESCAPE.sub(_unescape_char, text)


def _number(value):
    """A count, exactly: digits for an integer, else the shortest repr."""
    if value.is_integer() and abs(value) < 9007199254740992.0:
        return b"%d" % value
    return repr(value).encode()


def dump(spam_filter, out):
    """Write the model's dump to ``out`` (a binary file object), a few thousand
    lines at a time (the dump is never built whole).  Returns the number of
    token lines."""
    state = state_of(spam_filter)
    crc = 0

    def write(data):
        nonlocal crc
        crc = zlib.crc32(data, crc)
        out.write(data)

    header = [f"{DUMP_FORMAT} {DUMP_VERSION}",
              f"columns {COLUMNS}",
              "settings " + json.dumps(state.settings, sort_keys=True, separators=(",", ":"), allow_nan=False),
              "features " + json.dumps(state.features, sort_keys=True, separators=(",", ":"), allow_nan=False),
              f"created {day_text(state.created)}",
              f"last-learn {day_text(state.last_learn)}",
              f"max-tokens {'-' if state.max_tokens is None else state.max_tokens}",
              "messages " + " ".join(_number(float(v)).decode() for v in state.class_count),
              f"tokens {state.n_features}"]
    write(("\n".join(header) + "\n").encode("utf-8"))
    blob = memoryview(state.blob).cast("B")
    day_cache = {}
    n = state.n_features
    for start in range(0, n, _CHUNK):   # a chunk of lines at a time: memory stays bounded
        end = min(n, start + _CHUNK)
        offsets = state.offsets[start:end + 1].tolist()
        chunk = bytes(blob[offsets[0]:offsets[-1]])
        base = offsets[0]
        lines = []
        for j, (ham, spam, day) in enumerate(zip(state.counts[0, start:end].tolist(),
                                                 state.counts[1, start:end].tolist(), state.days[start:end].tolist())):
            text = day_cache.get(day)
            if text is None:
                text = day_cache[day] = day_text(day).encode()
            lines.append(b"\t".join((escape_token(chunk[offsets[j] - base:offsets[j + 1] - base]), _number(ham),
                                     _number(spam), text)))
        lines.append(b"")
        write(b"\n".join(lines))
    digests, labels = spam_filter.ledger_.to_arrays() if spam_filter.ledger_ is not None else (b"", b"")
    write(b"ledger %d\n" % len(labels))
    size = len(digests) // len(labels) if labels else 0
    for start in range(0, len(labels), _CHUNK):
        write(b"".join(b"%s\t%s\n" % (digests[i * size:(i + 1) * size].hex().encode(), b"spam" if labels[i] else b"ham")
                       for i in range(start, min(len(labels), start + _CHUNK))))
    out.write(b"end %d %08x\n" % (n, crc))
    return n


# ---------------------------------------------------------------------------- load
def load_dump(stream, name="-"):
    """Read a dump from ``stream`` (a binary file object) into a new SpamFilter.

    The whole dump is checked before anything is returned; any fault raises
    :class:`DumpError` naming ``name`` and the line.  Memory: the model's
    arrays plus one line (lines longer than MAX_LINE bytes are refused).
    """
    import numpy as np

    from spamnb.mail.tokenizer import hash_token

    crc = 0
    line_no = 0

    def fail(message, at=None):
        raise DumpError(f"{name}: line {line_no if at is None else at}: {message}") from None

    def next_line():
        nonlocal crc, line_no
        line = stream.readline(MAX_LINE + 1)
        line_no += 1
        if not line:
            fail("the dump ends here: it was cut short (no 'end' line)")
        if not line.endswith(b"\n"):
            if len(line) > MAX_LINE:
                fail(f"line longer than {MAX_LINE} bytes")
            fail("the dump ends in the middle of a line: it was cut short")
        return line

    def header_field(key):
        nonlocal crc
        line = next_line()
        crc = zlib.crc32(line, crc)
        try:
            text = line[:-1].decode("utf-8")
        except UnicodeDecodeError:
            fail("not UTF-8")
        found, _, value = text.partition(" ")
        if found != key:
            fail(f"expected the {key!r} field, found {text[:40]!r}")
        return value

    def count_field(key):
        """A header field holding a count (an integer >= 0)."""
        text = header_field(key)
        try:
            value = int(text)
            if value < 0:
                raise ValueError
        except ValueError:
            fail(f"{key!r} must be a count")
        return value

    first = header_field(DUMP_FORMAT)
    if first not in [str(v) for v in DUMP_VERSIONS]:
        fail(f"dump format version {first!r}, this spamnb reads versions {', '.join(map(str, DUMP_VERSIONS))}")
    version = int(first)
    if header_field("columns") != COLUMNS:
        fail(f"columns must be {COLUMNS!r}")
    text = header_field("settings")
    try:
        settings = json.loads(text)
        if (not isinstance(settings, dict) or "tokenizer" not in settings
                or not are_params(set(settings) - {"tokenizer"})):
            raise ValueError("not the model's settings")
        from spamnb.model.spam_filter import SpamFilter
        from spamnb.mail.tokenizer import Tokenizer

        Tokenizer.from_settings(settings["tokenizer"])
        SpamFilter.from_params(settings)
    except (ValueError, TypeError, KeyError, RecursionError) as exc:
        fail(f"bad settings ({exc})")
    text = header_field("features")
    try:
        features = json.loads(text)
        if features is not None:
            from spamnb.estimator.message_features import FeatureModel

            FeatureModel.from_dict(features)
    except (ValueError, TypeError, KeyError, RecursionError) as exc:
        fail(f"bad message-feature statistics ({exc})")
    text = header_field("created")
    try:
        created = _parse_day(text)
    except ValueError as exc:
        fail(str(exc))
    text = header_field("last-learn")
    try:
        last_learn = _parse_day(text)
    except ValueError as exc:
        fail(str(exc))
    text = header_field("max-tokens")
    try:
        max_tokens = None if text in ("-", "0") else check_max_tokens(int(text))   # 0: off, as --expire-at 0
    except ValueError as exc:
        fail(f"'max-tokens': {exc}" if "limit" in str(exc) else "'max-tokens' must be a count or -")
    text = header_field("messages")
    try:
        class_count = tuple(float(v) for v in text.split(" "))
        if len(class_count) != 2 or not all(v.is_integer() and 0 <= v <= MAX_COUNT for v in class_count):
            raise ValueError
    except ValueError:
        fail(f"'messages' must be two whole counts (ham spam) from 0 to {MAX_COUNT:.0f}")
    n_declared = count_field("tokens")

    blob = bytearray()
    offsets = array("Q", [0])
    hashes = array("Q")
    ham, spam, days = array("d"), array("d"), array("i")
    first_line = line_no + 1
    for _ in range(n_declared):
        line = next_line()
        crc = zlib.crc32(line, crc)
        fields = line[:-1].split(b"\t")
        if len(fields) != 4:
            if fields[0].startswith(b"end "):
                fail(f"'end' after {line_no - first_line} token lines; 'tokens' said {n_declared}")
            fail(f"expected 4 tab-separated fields (token, ham, spam, last-seen), found {len(fields)}")
        try:
            token = unescape_token(fields[0].decode("utf-8"))
        except UnicodeDecodeError:
            fail("the token is not UTF-8")
        except ValueError as exc:
            fail(f"the token is badly escaped ({exc})")
        try:
            n_ham, n_spam = float(fields[1]), float(fields[2])
        except ValueError:
            fail("the counts are not numbers")
        if not (0 <= n_ham <= MAX_COUNT and 0 <= n_spam <= MAX_COUNT):   # NaN fails too
            fail(f"the counts must be numbers from 0 to {MAX_COUNT:.0f}")
        try:
            days.append(_parse_day(fields[3].decode("ascii")))
        except (ValueError, UnicodeDecodeError) as exc:
            fail(str(exc))
        blob += token.encode("utf-8", "surrogatepass")
        offsets.append(len(blob))
        hashes.append(hash_token(token))
        ham.append(n_ham)
        spam.append(n_spam)
    ledger = None
    if version >= 2:
        from spamnb.estimator.ledger import DIGEST_SIZE
        from spamnb.estimator.ledger_table import Ledger

        n_ledger = count_field("ledger")
        digests, labels = bytearray(), bytearray()
        for _ in range(n_ledger):
            line = next_line()
            crc = zlib.crc32(line, crc)
            digest, tab, label = line[:-1].partition(b"\t")
            try:
                digest = bytes.fromhex(digest.decode("ascii"))
            except (ValueError, UnicodeDecodeError):
                digest = b""
            if not tab or len(digest) != DIGEST_SIZE or label not in (b"spam", b"ham"):
                fail(f"expected a ledger line ({2 * DIGEST_SIZE} hex digits, a tab, spam or ham)")
            digests += digest
            labels.append(label == b"spam")
        try:
            ledger = Ledger.from_arrays(digests, labels) if labels else None
        except ValueError as exc:
            fail(str(exc))
    line = next_line()
    try:
        end, count, checksum = line[:-1].decode("ascii").split(" ")
        if end != "end":
            raise ValueError
    except (ValueError, UnicodeDecodeError):
        fail(f"expected 'end {n_declared} CRC' after {n_declared} token lines")
    if count != str(n_declared):
        fail(f"'end' says {count} tokens, 'tokens' said {n_declared}")
    if checksum != "-" and checksum != f"{crc:08x}":
        fail("checksum mismatch: the dump is damaged")
    if stream.read(1):
        line_no += 1
        fail("text after the 'end' line")
    n = len(hashes)
    state = State(settings, class_count, np.vstack([np.frombuffer(ham, dtype=np.float64),
                                                     np.frombuffer(spam, dtype=np.float64)]).reshape(2, n),
                   np.frombuffer(hashes, dtype=np.uint64), bytes(blob), np.frombuffer(offsets, dtype=np.uint64),
                   np.frombuffer(days, dtype=np.int32), features, created, last_learn, max_tokens)
    try:
        spam_filter = build_filter(state)
    except DuplicateToken as exc:
        fail("the token repeats an earlier one (or shares its 64-bit hash)", first_line + exc.position)
    spam_filter.set_fitted(ledger_=ledger)
    return spam_filter


# ---------------------------------------------------------------------------- merge
