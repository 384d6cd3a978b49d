"""Models of tokenizer version 2 (written before the attack hardening) keep
loading and scoring as they did: ``Tokenizer(version=2)`` gives the tokens of
658063e, the last revision of version 2, and ``learn`` keeps such a model at
version 2.  tests/data/models/tokens-658063e.json holds the tokens 658063e gave
for ``CASES`` (made there by ``Tokenizer(**settings).tokens(message)``)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import spamnb
from spamnb.persistence import schema
from spamnb.model.spam_filter import SpamFilter
from spamnb.mail.tokenizer import Tokenizer

from conftest import REPO

FIXTURES = REPO / "tests" / "data" / "models"
OLD_MODEL = FIXTURES / "corpora-658063e.spamnb"
PYTHONPATH = str(Path(spamnb.__file__).resolve().parent.parent)


def _multipart(*parts, boundary="b0undary"):
    out = [f"Subject: parts\nMIME-Version: 1.0\nContent-Type: multipart/alternative; boundary={boundary}\n\n"]
    for ctype, body in parts:
        out.append(f"--{boundary}\nContent-Type: {ctype}; charset=utf-8\n\n{body}\n")
    out.append(f"--{boundary}--\n")
    return "".join(out).encode()


def cases():
    """(name, message bytes, tokenizer settings) where versions 2 and 3 differ."""
    words = " ".join(f"word{i}" for i in range(200))
    links = " ".join(f'<a href="http://site{i}.example/x">link {i}</a>' for i in range(150))
    return [
        ("look-alike letters", "Subject: offer\nContent-Type: text/plain; charset=utf-8\n\n"
                               "buy v\u0456\u0430gr\u0430 now \uff26\uff32\uff25\uff25\n".encode(), {}),
        ("invisible characters", "Subject: x\nContent-Type: text/plain; charset=utf-8\n\n"
                                 "fr\u200bee mon\u00adey \ufeffcash\u2060now\n".encode(), {}),
        ("white-space runs", b"Subject: x\n\n" + b"\n" * 900 + b"cheap pills online\n", {}),
        ("one budget across parts", _multipart(("text/plain", words), ("text/html", f"<p>{words} other</p>")), {}),
        ("long header field", ("Subject: x\nTo: " + ", ".join(f"user{i}@host{i}.example" for i in range(120))
                               + "\n\nbody words\n").encode(), {}),
        ("past 6 KiB", b"Subject: x\n" + b"X-Junk: " + b"j" * 70 + b"\n" * 1 + b"".join(
            b"X-Junk%d: %s\n" % (i, b"q" * 70) for i in range(90)) + b"\nthe spam text after the junk\n", {}),
        ("long HTML, larger max_bytes", _multipart(("text/html", f"<p>{words}</p>" + "<p>pad</p>" * 800 + links)),
         {"max_bytes": 65536}),
        ("long text part, larger max_bytes", b"Subject: x\n\n" + b"word " * 20000 + b"\n", {"max_bytes": 262144}),
        ("text budget off", b"Subject: x\nContent-Type: text/plain; charset=utf-8\n\n"
                            + "\u0430\u0441\u0435 \u200b \n\n\n x".encode() * 10, {"max_text_chars": 0}),
    ]


@pytest.fixture(scope="module")
def old_tokens():
    return json.loads((FIXTURES / "tokens-658063e.json").read_text())


@pytest.mark.parametrize("name, message, settings", cases(), ids=[c[0] for c in cases()])
def test_version_2_gives_the_tokens_of_658063e(name, message, settings, old_tokens):
    got = Tokenizer(version=2, **settings).tokens(message)
    assert got == old_tokens[name]
    # ... and the case is one where version 3 differs (so the test could fail)
    assert Tokenizer(**settings).tokens(message) != got


def test_new_tokenizers_are_version_3():
    tok = Tokenizer()
    assert tok.version == Tokenizer.VERSION == 3
    assert tok.settings["version"] == 3 and tok.settings["max_part_bytes"] == 64 * 1024
    assert Tokenizer.from_settings(tok.settings).settings == tok.settings


def test_version_2_settings_round_trip_as_stored():
    stored = schema.read(OLD_MODEL)[0]["tokenizer"]
    tok = Tokenizer.from_settings(stored)
    assert tok.version == 2 and tok.settings == stored and "max_part_bytes" not in tok.settings
    assert Tokenizer(version=2).settings == stored          # version 2's defaults, 6 KiB among them
    assert repr(Tokenizer(version=2)) == "Tokenizer(version=2)"


def test_unknown_versions_and_version_3_settings_in_version_2_are_refused():
    settings = Tokenizer(version=2).settings
    with pytest.raises(ValueError, match="max_part_bytes"):
        Tokenizer.from_settings(dict(settings, max_part_bytes=1000))
    for version in (1, 4, None, "2", 2.0, True):
        with pytest.raises(ValueError, match="not supported"):
            Tokenizer.from_settings(dict(settings, version=version))
    with pytest.raises(TypeError, match="max_part_bytes"):
        Tokenizer(version=2, max_part_bytes=1000)


def _cli(args, home):
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, SPAMNB_HOME=str(home))
    return subprocess.run([sys.executable, "-m", "spamnb", *map(str, args)], capture_output=True, env=env,
                          cwd=home, timeout=120)


def test_learn_keeps_a_version_2_model_at_version_2_and_info_says_so(tmp_path):
    model = tmp_path / "old.spamnb"
    shutil.copyfile(OLD_MODEL, model)
    message = (REPO / "corpora" / "spam").iterdir().__next__().read_bytes()
    before = SpamFilter.load(model)
    path = tmp_path / "msg.eml"
    path.write_bytes(message)
    out = _cli(["learn", "--spam", "-m", model, path], tmp_path)
    assert out.returncode == 0, out.stderr
    after = SpamFilter.load(model)
    assert after.tokenizer_.version == 2 and after.tokenizer_.settings == before.tokenizer_.settings
    assert after.class_count_[1] == before.class_count_[1] + 1
    # the command learned the message's version-2 tokens, as the library does
    expected = SpamFilter.load(OLD_MODEL)
    expected.learn(message, spam=True)
    # model + journal: the derived logs of the learned counts taken without numpy (spamnb.persistence.journal), to rounding
    assert after.score(message).log_odds == pytest.approx(expected.score(message).log_odds, rel=1e-12)
    info = _cli(["info", "-m", model], tmp_path)
    assert info.returncode == 0 and b"older tokenizer version 2" in info.stdout and b"retrain" in info.stdout
    new = tmp_path / "new.spamnb"
    SpamFilter().fit([message, b"Subject: hi\n\nlunch today"], [True, False]).save(new)
    info = _cli(["info", "-m", new], tmp_path)
    assert info.returncode == 0 and b"older tokenizer" not in info.stdout
