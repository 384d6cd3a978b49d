"""The compiled frame builder (spamnb.console._frames) against the Python
reference (spamnb.console.records._append, which ``encode`` uses): byte
for byte the same frames for hostile strings, numbers, evidence and
headers; the same header block as spamnb.mail.headers.header_length; the
same records refused (none half appended)."""

import math
import random

import pytest

from spamnb.console import _frames, records
from spamnb.mail import headers

BIG = b"".join(b"X-Filler-%05d: %s\n" % (i, b"v" * 40) for i in range(400))     # about 22 KB of fields
H = records.HEAD_BYTES
MESSAGES = [
    b"Subject: hello\nFrom: a@b.example\n\nbody\n",
    b"Subject: hello\r\nFrom: a@b.example\r\n\r\nbody\r\n",
    b"Subject: x\r\r\nTo: y\r\r\n\r\nbody",
    b"Subject: hello\nFrom: a@b.example\nX-Last: z",            # no blank line
    b"Subject: x\rTo: y\r\rbody",                                # CR-only lines
    b"just a body\n\nwith lines\n",                              # no header
    b"", b"S", b"S:", b":x\n\n", b" S: x\n\n", b"S :\n\n", b"S\t:\n\n", b"S : x\n\r\n",
    b"From a@b.example Sun Nov 29 00:00:00 2026\nSubject: x\n\nbody",
    b"From a@b.example\n no field\n\n",
    b"From : x\n\nbody", b"From x", b"From \nS: y\n\nb", b"From \n\n",
    BIG + b"\nbody\n", BIG.replace(b"\n", b"\r\n") + b"\r\nbody\r\n", BIG,
    b"S: " + b"v" * (H - 5) + b"\n\nbody",          # the blank line ends at the cut
    b"S: " + b"v" * (H - 4) + b"\n\nbody",          # ... one past it
    b"S: " + b"v" * (H - 5) + b"\r\n\r\nbody",
    b"S: " + b"v" * (H - 6) + b"\n\r\nbody",
    b"S: " + b"v" * (H - 5) + b"\n\r\nbody",
    b"Subject: \x00\xff\xfe\nFrom: \xe9\n\n\x00",
    b"Subject: x\n\r\nTo: y\n\nbody", b"S: x\n\r\r\n\n", b"S: x\r\r\r\n\n", b"\n\n", b"S: x\n\n",
    b"S: x\x00\n\x00\n\n",
]
HOSTILE = ["", "a" * 5000, "nul\0in\0it", "\0", "\ud800 lone surrogate \udfff", "\U0001f600 emoji", "é" * 999,
           "x" * 1000]


def _numbers(length, **change):
    numbers = dict(pid=4242, t=1.7e9, score=9.0, required=5.0, log_odds=-3.25, p=0.01, ms=1.5, spam=0.9, ham=0.1,
                   size=length, tokens=42, dropped=7)
    numbers.update(change)
    return tuple(numbers.values())


def _reference(numbers, strings, evidence, source, message=b"", envelope=None):
    out = bytearray(b"before")
    records._append(out, numbers, strings, evidence, source, headers.header_length(source, H), message, envelope)
    return bytes(out)


def _compiled(numbers, strings, evidence, source, message=b"", envelope=None):
    out = bytearray(b"before")
    _frames.append_frame(out, numbers, strings, evidence, source, message, envelope)
    return bytes(out)


def _both(*args):
    try:
        expected = _reference(*args)
    except Exception as error:  # noqa: BLE001 - the builder must refuse the same records
        out = bytearray(b"before")
        with pytest.raises(Exception):
            _frames.append_frame(out, *args)
        assert out == b"before", f"a refused record left bytes behind ({error!r})"
        return None
    assert _compiled(*args) == expected
    return expected


def test_the_builders_bounds_are_the_records():
    assert _frames.BOUNDS == (records.STRING_CHARS, records.HEAD_BYTES, records.KEEP_BYTES, records.EVIDENCE)


@pytest.mark.parametrize("message", MESSAGES)
def test_the_header_block_is_cut_as_header_length_cuts_it(message):
    for limit in (None, H, 0, 1, 5, 17, len(message), len(message) + 1):
        assert _frames.header_length(message, limit) == headers.header_length(message, limit), limit
    assert _frames.header_length(bytearray(message), H) == headers.header_length(message, H)


def test_random_header_blocks_are_cut_as_header_length_cuts_them():
    rng = random.Random(50)
    pieces = [b"\n", b"\r", b"\r\n", b"\n\n", b"\n\r\n", b":", b" ", b"\t", b"From ", b"S", b"x", b"\x00", b"\xff",
              b"Subject: y", b"\n "]
    for number in range(20000):     # short ones, and long ones (the 16-byte steps of the blank line's search)
        message = b"".join(rng.choice(pieces) for _ in range(rng.randrange(0, 12 if number % 2 else 80)))
        limit = rng.choice([None, H, rng.randrange(0, 40)])
        assert _frames.header_length(message, limit) == headers.header_length(message, limit), (message, limit)


@pytest.mark.parametrize("message", MESSAGES)
def test_a_frame_of_each_header_is_the_references(message):
    strings = ("spam", "bob", "CHECK", "spamd", "none", "")
    frame = _both(_numbers(len(message)), strings, (), message)
    assert frame is not None
    _, _, _, header, kept = records.unpack(frame[len(b"before") + 4:])
    assert header == message[:headers.header_length(message, H)]
    assert _both(_numbers(len(message)), strings, [("tok", 1.5)], message, message) is not None


@pytest.mark.parametrize("hostile", HOSTILE)
@pytest.mark.parametrize("where", ["label", "user", "reason", "envelope", "token"])
def test_hostile_strings_are_cleaned_as_the_reference_cleans_them(hostile, where):
    strings = ["spam", "bob", "CHECK", "milter", "accept", "why"]
    envelope, evidence = None, [("a", 1.0), ("b", -2.0)]
    if where == "envelope":
        envelope = ("1.2.3.4", hostile, "<a@b>", hostile + hostile, "")
    elif where == "token":
        evidence = [(hostile, 3.0)] * 3
    else:
        strings[{"label": 0, "user": 1, "reason": 5}[where]] = hostile
    frame = _both(_numbers(10), tuple(strings), evidence, MESSAGES[0], b"", envelope)
    assert frame is not None
    records.unpack(frame[len(b"before") + 4:])      # the recorder reads it


class _Str(str):
    def __str__(self):
        return "another"


@pytest.mark.parametrize("value", [None, 0, 12, 3.5, b"bytes", _Str("sub"), _Str("a" * 2000), ["x"], object()])
def test_values_that_are_not_str_are_made_str_as_the_reference_does(value):
    assert _both(_numbers(10), ("spam", value, "CHECK", "spamd", "none", ""), [], MESSAGES[0]) is not None


@pytest.mark.parametrize("n", [0, 1, 23, 24, 40])
def test_any_evidence_is_the_references(n):
    rng = random.Random(n)
    evidence = [(f"tok{i}\0" if i % 7 == 3 else f"tok{i}", rng.uniform(-30, 30)) for i in range(n)]
    assert _both(_numbers(10), ("spam", "", "CHECK", "spamd", "none", ""), evidence, MESSAGES[1]) is not None
    assert _both(_numbers(10), ("spam", "", "CHECK", "spamd", "none", ""), tuple(evidence), MESSAGES[1]) is not None


@pytest.mark.parametrize("change", [
    {}, {"t": math.nan}, {"spam": math.inf, "ham": -math.inf}, {"score": -0.0}, {"ms": 10}, {"pid": 0},
    {"pid": 2 ** 32 - 1}, {"tokens": True}, {"dropped": 2 ** 32 - 1},
    # refused by both
    {"pid": -1}, {"pid": 2 ** 32}, {"tokens": 1.5}, {"size": "9"}, {"t": "now"}, {"dropped": None},
])
def test_numbers_are_packed_or_refused_as_the_reference_does(change):
    _both(_numbers(10, **change), ("spam", "", "CHECK", "spamd", "none", ""), [("a", 0.5)], MESSAGES[0])


@pytest.mark.parametrize("bad", [
    dict(evidence=[("a", "heavy")]), dict(evidence=[("a",)]), dict(evidence=[("a", 1.0, 2)]), dict(evidence=[7]),
    dict(envelope=["a", "b", "c", "d", "e"]), dict(envelope=("a", "b")), dict(envelope=()),
    dict(message=memoryview(b"kept whole")), dict(message=bytearray(b"kept")), dict(source=bytearray(MESSAGES[1])),
    dict(source="Subject: str\n\n"), dict(message="str"),
])
def test_odd_records_are_made_or_refused_as_the_reference_does(bad):
    args = dict(numbers=_numbers(10), strings=("spam", "", "CHECK", "spamd", "none", ""), evidence=[("a", 1.0)],
                source=MESSAGES[0], message=b"", envelope=None)
    args.update(bad)
    _both(*args.values())


def test_a_frame_with_a_kept_message_is_the_references():
    message = BIG + b"\n" + b"body " * 1000
    frame = _both(_numbers(len(message)), ("spam", "", "CHECK", "spamd", "none", ""), [("a", 1.0)], message, message)
    assert records.unpack(frame[len(b"before") + 4:])[4] == message


class _Model:
    cutoffs = type("C", (), {"spam": 0.9, "ham": 0.1})()


def _checked(evidence=(), model=_Model(), **fields):
    verdict = dict(label="spam", log_odds=9.5, probability=0.99, evidence=evidence, reason="na\0me", tokens=42)
    verdict.update(fields)

    class Checked:
        score, score_map = 9.0, type("S", (), {"required": 5.0})()
    checked = Checked()
    checked.verdict, checked.model = type("V", (), verdict)(), model
    return checked


def _build_reference(out, checked, message, user, when, verb, ms, protocol, action, envelope, pid, dropped, keep):
    """RecordSender._build's loop body before the compiled builder."""
    verdict = checked.verdict
    cutoffs = getattr(checked.model, "cutoffs", None)
    spam_cut, ham_cut = (cutoffs.spam, cutoffs.ham) if cutoffs is not None else (math.nan, math.nan)
    records._append(out, (pid, when, checked.score, checked.score_map.required, verdict.log_odds,
                          verdict.probability, ms, spam_cut, ham_cut, len(message), verdict.tokens or 0, dropped),
                    (verdict.label, user or "", verb, protocol, action, verdict.reason or ""),
                    verdict.evidence[:records.EVIDENCE], message, headers.header_length(message, H),
                    message if keep and len(message) <= records.KEEP_BYTES else b"", envelope)


@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("case", [
    dict(), dict(evidence=[(f"t{i}", i / 3) for i in range(30)]), dict(model=None), dict(model=object()),
    dict(reason=None, tokens=None), dict(reason=0, tokens=0), dict(label="x" * 3000), dict(user=None),
    dict(user=""), dict(envelope=("1.2.3.4", "helo", "<a@b>", "<c@d>,<e@f>", "")),
    dict(message=b"x" * (records.KEEP_BYTES + 1)), dict(message=b""), dict(message=BIG),
    # refused by both
    dict(tokens=-1), dict(label=b"\xff"), dict(evidence=[("a",)]),
])
def test_a_checks_frame_is_the_one_build_made_before(case, keep):
    case = dict(case)
    message = case.pop("message", MESSAGES[1])
    user = case.pop("user", "bob")
    envelope = case.pop("envelope", None)
    checked = _checked(**case)
    args = (checked, message, user, 1.7e9, "CHECK", 2.5, "milter", "accept", envelope, 4242, 3, keep)
    held = [((checked, message, user, 1.7e9), "CHECK", 2.5, "milter", "accept", envelope)]
    expected = bytearray(b"before")
    try:
        _build_reference(expected, *args)
    except Exception:  # noqa: BLE001
        out = bytearray(b"before")
        assert _frames.append_held(out, held, 4242, 3, keep) == (0, 4)     # refused: dropped and counted
        assert out == b"before"
        return
    out = bytearray(b"before")
    assert _frames.append_held(out, held, 4242, 3, keep) == (1, 3)
    assert out == expected


def test_held_records_are_appended_as_build_appended_them_one_by_one():
    good = (_checked(evidence=[("a", 1.0)]), MESSAGES[1], "bob", 1.7e9)
    bad = (_checked(tokens=-1), MESSAGES[0], "eve", 1.7e9)
    odd = (_checked(label="x\0" * 900, model=None), BIG, None, 1.8e9)
    held = [(inputs, "CHECK", 2.5, "spamd", "none", envelope)
            for inputs, envelope in [(good, None), (bad, None), (odd, ("1.2.3.4", "h", "<a@b>", "<c@d>", "")),
                                     (bad, None), (good, None)] * 40]
    for keep in (False, True):
        expected, dropped, made = bytearray(b"before"), 5, 0
        for (checked, message, user, when), verb, ms, protocol, action, envelope in held:
            try:
                _build_reference(expected, checked, message, user, when, verb, ms, protocol, action, envelope,
                                 4242, dropped, keep)
                made += 1
            except Exception:  # noqa: BLE001
                dropped += 1
        out = bytearray(b"before")
        assert _frames.append_held(out, held, 4242, 5, keep) == (made, dropped) == (120, 85)
        assert out == expected
        assert records.frames_within(bytes(out[len(b"before"):]), len(out))[1] == made
