"""The settings file: its own reader of the simple form agrees with tomllib; checks of every key."""

import subprocess
import sys
import tomllib

import pytest
from hypothesis import given, settings, strategies as st

from spamnb.settings import SettingsError, _flat_toml, load_settings

from conftest import REPO


EXAMPLES = [
    b'model = "/var/lib/spamnb/model.spamnb"\nspam_cutoff = 0.9999992\nham_cutoff = 0.5\n',
    b"# comment\n\n  header_name = 'X-Spamnb-Status'   # trailing\r\nsubject_tag = \"[SPAM]\"\r\n",
    b"spam_cutoff = 1\nham_cutoff = 0\nx = -0.5e-3\ny = +7\n",
    b"a = 01\n", b"a = 1.\n", b"a = .5\n", b"a = 1_000\n", b"a = inf\n", b'a = "x\\ty"\n', b"a = 'x\ty'\n",
    b"a = 1\na = 2\n", b"[table]\na = 1\n", b"a = \"unterminated\n", b"a = 1 # \x01\n", b"a = 1 2\n",
    b"a.b = 1\n", b"\"quoted\" = 1\n", b"a = true\n", b"a = [1, 2]\n", b"a = 1\rb = 2\n", b"\xef\xbb\xbfa = 1\n",
]


def _tomllib(raw):
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return "error"


def _agrees(raw):
    ours = _flat_toml(raw)
    if ours is not None:  # what the simple reader takes, tomllib reads the same (value and type)
        theirs = _tomllib(raw)
        assert theirs == ours and all(type(theirs[k]) is type(v) for k, v in ours.items()), (raw, ours, theirs)
    return ours


def test_the_simple_form_reads_as_tomllib_reads_it():
    accepted = [raw for raw in EXAMPLES if _agrees(raw) is not None]
    assert accepted == EXAMPLES[:3]  # the rest goes to tomllib
    assert _flat_toml(EXAMPLES[0]) == {"model": "/var/lib/spamnb/model.spamnb", "spam_cutoff": 0.9999992,
                                       "ham_cutoff": 0.5}
    assert _flat_toml(b"[table]\na = 1\n") is None and _flat_toml(b"a = 1\na = 2\n") is None


RANDOM_LINES = st.lists(st.text(alphabet="ab_-=#. \t\"'\\01e+E[]\r\x01\n", max_size=20), max_size=4)


@settings(max_examples=300, deadline=None)
@given(RANDOM_LINES)
def test_random_lines_never_disagree_with_tomllib(lines):
    _agrees("\n".join(lines).encode())


@pytest.mark.slow
@settings(max_examples=3000, deadline=None)
@given(RANDOM_LINES)
def test_many_random_lines_never_disagree_with_tomllib(lines):
    _agrees("\n".join(lines).encode())


@pytest.mark.parametrize("text, message", [("spam_cutoff = 1.5", "probability"), ("spam_cutoff = 'x'", "number"),
                                           ("colour = 'red'", "unknown"), ("header_name = 'A: B'", "header"),
                                           ("subject_tag = \"a\\nb\"", "one line"), ("x = [", "TOML"),
                                           ("spam_cutoff = 0.2\nham_cutoff = 0.3", "above")])
def test_bad_settings(tmp_path, text, message):
    path = tmp_path / "settings.toml"
    path.write_text(text + "\n")
    with pytest.raises(SettingsError, match=message):
        load_settings(path)


def test_options_win_over_the_file_and_a_missing_default_file_is_no_error(tmp_path, monkeypatch):
    path = tmp_path / "s.toml"
    path.write_text("spam_cutoff = 0.99\nham_cutoff = 0.1\n[extra]\n")  # not the simple form: tomllib reads it
    with pytest.raises(SettingsError, match="unknown setting 'extra'"):
        load_settings(path)
    path.write_text("spam_cutoff = 0.99\nham_cutoff = 0.1\n")
    got = load_settings(path, {"spam_cutoff": 0.999, "ham_cutoff": None})
    assert (got.spam_cutoff, got.ham_cutoff, got.path) == (0.999, 0.1, str(path))
    monkeypatch.setenv("SPAMNB_HOME", str(tmp_path / "nowhere"))
    assert load_settings().path is None
    with pytest.raises(SettingsError, match="No such file"):
        load_settings(tmp_path / "missing.toml")  # named explicitly: must exist


def test_classify_with_a_settings_file_imports_neither_tomllib_nor_typing(tmp_path):
    (tmp_path / "settings.toml").write_text('spam_cutoff = 0.9999992\nheader_name = "X-Spamnb-Status"\n')
    code = ("import os, sys; sys.path.insert(0, sys.argv[1]); os.environ['SPAMNB_HOME'] = sys.argv[2]; "
            "from spamnb.cli.main import build_parser; from spamnb.cli.common import settings_of; "
            "args = build_parser('classify').parse_args(['classify']); s = settings_of(args); "
            "assert s.spam_cutoff == 0.9999992, s.spam_cutoff; "
            "print(sorted(m for m in ('tomllib', 'typing', 'datetime') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-S", "-c", code, str(REPO), str(tmp_path)], capture_output=True,
                         check=True, cwd=tmp_path)
    assert out.stdout.decode().strip() == "[]"
