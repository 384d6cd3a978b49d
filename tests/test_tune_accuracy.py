"""scripts/tune/tune_accuracy.py's experiment tokenizers: the Received: fields the receiving side added."""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts" / "tune"))
import tune_accuracy  # noqa: E402

MESSAGE = (b"Received: from relay.example.net (relay.example.net [192.0.2.7])\r\n"
           b"\tby mx.example.org (Postfix) with ESMTP id ABC123; Sat, 1 Jan 2022 10:00:00 +0000\r\n"
           b"Received: from forged.example.com (forged [198.51.100.9]) by relay.example.net\r\n"
           b"Subject: hello\r\n\r\nbody words\r\n")


def test_received_tokens_come_from_the_first_fields_only_and_stop_at_the_date():
    assert tune_accuracy._received_lines(MESSAGE, 1) == [
        "from relay.example.net (relay.example.net [192.0.2.7]) by mx.example.org (postfix) with esmtp id abc123"]
    tokens = tune_accuracy._tokenizer({}, {"rcvd_words": 1, "rcvd_phrases": 1}).stream(MESSAGE).tokens()
    words = [t for t in tokens if t.startswith("rcvd:")]
    phrases = [t for t in tokens if t.startswith("rcvd2:")]
    assert "rcvd:mx.example.org" in words and "rcvd:192.0.2.7" in words and "rcvd:abc123" in words
    assert not any("forged" in t or "2022" in t for t in words + phrases)   # the second field, the date
    assert "rcvd2:by mx.example.org" in phrases
    plain = tune_accuracy._tokenizer({}, {}).stream(MESSAGE).tokens()
    assert not any(t.startswith("rcvd") for t in plain)
    assert [t for t in tokens if not t.startswith("rcvd")] == plain      # added to the default tokens
