"""The model lifecycle: dump/load, merge, prune (spamnb.model.lifecycle) and their commands."""
import io
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from spamnb.model import dumpfile, lifecycle
from spamnb.mail.tokenizer import hash_token
from spamnb.training.corpus import labelled_messages
from spamnb.model.spam_filter import SpamFilter

from conftest import REPO, journal_without_records, run_spamnb

SAMPLE = REPO / "corpora"


@pytest.fixture(scope="module")
def corpus():
    messages = labelled_messages([SAMPLE])
    return [m.data for m in messages], [m.is_spam for m in messages]


@pytest.fixture(scope="module")
def fitted(corpus):
    return SpamFilter().fit(*corpus)


def dump_bytes(spam_filter):
    out = io.BytesIO()
    dumpfile.dump(spam_filter, out)
    return out.getvalue()


def load_bytes(data, name="d"):
    return dumpfile.load_dump(io.BytesIO(data), name)


def counts_of(spam_filter):
    return lifecycle.state_of(spam_filter).counts


HOSTILE = ["plain", "tab\there", "new\nline", "cr\rx", "back\\slash", "\\t", "nul\x00", "del\x7f", "esc\x1b[31m",
           "lone\ud800surrogate", "\udfff", "emoji\U0001F600", "日本語", "", "end\\", "x" * 1000, "\u2028sep"]


def hostile_filter(days=None):
    """A filter whose tokens are the HOSTILE strings (the tokenizer never makes most of them)."""
    n = len(HOSTILE)
    encoded = [t.encode("utf-8", "surrogatepass") for t in HOSTILE]
    offsets = np.concatenate([[0], np.cumsum([len(e) for e in encoded])]).astype(np.uint64)
    counts = np.vstack([np.arange(n, dtype=np.float64) * 0.5, np.linspace(0.1, 3.3, n)])
    state = lifecycle.State(lifecycle._settings(SpamFilter()), (7.0, 3.0), counts,
                             np.array([hash_token(t) for t in HOSTILE], dtype=np.uint64), b"".join(encoded), offsets,
                             np.array(days if days is not None else [0] * n, dtype=np.int32))
    return lifecycle.build_filter(state)


# ---------------------------------------------------------------------------- the text format
@pytest.mark.parametrize("token", HOSTILE)
def test_any_token_fits_on_one_line_and_comes_back(token):
    escaped = dumpfile.escape_token(token.encode("utf-8", "surrogatepass"))
    text = escaped.decode("utf-8")                  # strict UTF-8: no raw surrogate in the dump
    assert "\n" not in text and "\t" not in text and "\r" not in text
    assert dumpfile.unescape_token(text) == token


@pytest.mark.parametrize("bad", ["a\\", "a\\q", "\\x4", "\\ud7ff"])
def test_bad_escapes_are_refused(bad):
    with pytest.raises(ValueError):
        dumpfile.unescape_token(bad)


def test_hostile_tokens_round_trip_exactly():
    original = hostile_filter(days=list(range(20000, 20000 + len(HOSTILE))))
    data = dump_bytes(original)
    data.decode("utf-8")                            # the dump is valid UTF-8
    assert data.count(b"\n") == 9 + len(HOSTILE) + 1 + 1   # header, tokens, "ledger 0", end
    loaded = load_bytes(data)
    assert loaded.vocabulary_.tokens() == HOSTILE
    assert np.array_equal(counts_of(loaded), counts_of(original))
    assert list(loaded.ages_.last_seen) == list(range(20000, 20000 + len(HOSTILE)))
    assert dump_bytes(loaded) == data
    # the hash index finds each token by the tokenizer's hash
    assert list(loaded.vocabulary_.lookup(lifecycle.array("Q", [hash_token(t) for t in HOSTILE]))) == \
        list(range(len(HOSTILE)))


def test_dump_load_dump_is_identical_and_scores_bit_identical(fitted, corpus, tmp_path):
    path = tmp_path / "m.spamnb"
    fitted.save(path)
    from_file = SpamFilter.load(path)
    data = dump_bytes(from_file)
    assert data == dump_bytes(fitted)
    loaded = load_bytes(data)
    assert dump_bytes(loaded) == data
    assert loaded.class_count_ == fitted.class_count_
    assert loaded.vocabulary_.tokens() == fitted.vocabulary_.tokens()
    assert counts_of(loaded).tobytes() == counts_of(fitted).tobytes()
    for message in corpus[0]:
        assert loaded.score(message).log_odds == from_file.score(message).log_odds
    loaded.save(tmp_path / "again.spamnb")
    again = SpamFilter.load(tmp_path / "again.spamnb")
    assert [again.score(m).log_odds for m in corpus[0][:50]] == [from_file.score(m).log_odds for m in corpus[0][:50]]


def test_dump_is_written_in_pieces(fitted):
    class Recorder(io.BytesIO):
        sizes = []

        def write(self, data):
            self.sizes.append(len(data))
            return super().write(data)

    out = Recorder()
    n = dumpfile.dump(fitted, out)
    assert n > 2 * dumpfile._CHUNK
    assert len(out.sizes) >= n // dumpfile._CHUNK
    assert max(out.sizes) < len(out.getvalue()) / 2


def test_counts_are_written_exactly():
    assert dumpfile._number(3.0) == b"3"
    assert dumpfile._number(0.1 + 0.2) == b"0.30000000000000004"
    assert float(dumpfile._number(2.0 ** 60)) == 2.0 ** 60


# ---------------------------------------------------------------------------- damaged dumps
def _error_line(data):
    with pytest.raises(dumpfile.DumpError) as info:
        load_bytes(data)
    message = str(info.value)
    return int(message.split("line ")[1].split(":")[0]), message


def test_truncated_dumps_are_refused_with_the_line(fitted):
    data = dump_bytes(fitted)
    lines = data.split(b"\n")
    n_lines = len(lines) - 1
    for cut in (0, 10, len(lines[0]) + 5, len(data) // 2, len(data) - 30, len(data) - 1):
        line, message = _error_line(data[:cut])
        assert "cut short" in message
        assert line == data[:cut].count(b"\n") + 1
    # whole lines missing at the end (the 'end' line, or token lines and the 'end' line)
    assert _error_line(b"\n".join(lines[:-2]) + b"\n")[0] == n_lines
    line, message = _error_line(b"\n".join(lines[:20] + [lines[-2]]) + b"\n")
    assert line == 21 and "'end' after 11 token lines" in message


def test_damaged_dumps_are_refused_with_the_line(fitted):
    lines = dump_bytes(fitted).split(b"\n")

    def damaged(index, new):
        copy = list(lines)
        copy[index] = new
        return b"\n".join(copy)

    assert _error_line(damaged(0, b"spamnb-dump 9"))[0] == 1
    assert _error_line(damaged(2, b"settings {\"alpha\": -1}"))[0] == 3
    assert _error_line(damaged(7, b"messages 1"))[0] == 8
    assert _error_line(damaged(8, b"tokens many"))[0] == 9
    token_line = lines[12].split(b"\t")
    assert _error_line(damaged(12, b"\t".join(token_line[:3])))[0] == 13
    assert _error_line(damaged(12, b"\t".join([token_line[0], b"nan", token_line[2], token_line[3]])))[0] == 13
    assert _error_line(damaged(12, b"\t".join([token_line[0], b"-1", token_line[2], token_line[3]])))[0] == 13
    assert _error_line(damaged(12, b"\t".join(token_line[:3] + [b"2026-13-01"])))[0] == 13
    assert _error_line(damaged(12, b"\xff\xfe\t1\t1\t-"))[0] == 13
    twice = damaged(13, lines[12]).split(b"\n")                              # a token twice
    twice[-2] = twice[-2].rsplit(b" ", 1)[0] + b" -"                         # (a hand-edited dump: no checksum)
    line, message = _error_line(b"\n".join(twice))
    assert line == 14 and "repeats" in message
    # a changed count that still parses: only the checksum sees it
    line, message = _error_line(damaged(12, b"\t".join([token_line[0], b"12345", token_line[2], token_line[3]])))
    assert "checksum" in message and line == len(lines) - 1
    assert _error_line(b"\n".join(lines) + b"more\n")[1].endswith("text after the 'end' line")


def test_a_handwritten_dump_without_checksum_loads(fitted):
    lines = dump_bytes(fitted).split(b"\n")
    lines[-2] = lines[-2].rsplit(b" ", 1)[0] + b" -"
    assert load_bytes(b"\n".join(lines)).vocabulary_.n_features == fitted.vocabulary_.n_features


def test_an_overlong_line_is_refused_without_reading_it_whole(fitted):
    lines = dump_bytes(fitted).split(b"\n")
    lines[9] = b"x" * (dumpfile.MAX_LINE * 4) + b"\t1\t1\t-"
    line, message = _error_line(b"\n".join(lines))
    assert line == 10 and "longer than" in message


# ---------------------------------------------------------------------------- merge
def _halves(corpus):
    data, y = corpus
    return (data[::2], y[::2]), (data[1::2], y[1::2])


@pytest.mark.parametrize("counts", ["raw", "binary"])
def test_merge_equals_training_on_the_union_bit_for_bit(corpus, counts):
    (a_data, a_y), (b_data, b_y) = _halves(corpus)
    a = SpamFilter(counts=counts, length_norm=0).fit(a_data, a_y)      # whole numbers: exact sums
    b = SpamFilter(counts=counts, length_norm=0).fit(b_data, b_y)
    union = SpamFilter(counts=counts, length_norm=0).fit(a_data + b_data, a_y + b_y)
    merged = lifecycle.merge([a, b])
    assert merged.vocabulary_.tokens() == union.vocabulary_.tokens()
    assert merged.class_count_ == union.class_count_
    assert counts_of(merged).tobytes() == counts_of(union).tobytes()
    for message in corpus[0]:
        assert merged.score(message).log_odds == union.score(message).log_odds
    assert dump_bytes(merged) == dump_bytes(union)


def test_merge_with_log_counts_equals_the_union_to_rounding(corpus):
    (a_data, a_y), (b_data, b_y) = _halves(corpus)
    merged = lifecycle.merge([SpamFilter().fit(a_data, a_y), SpamFilter().fit(b_data, b_y)])
    union = SpamFilter().fit(a_data + b_data, a_y + b_y)
    assert merged.vocabulary_.tokens() == union.vocabulary_.tokens()
    np.testing.assert_allclose(counts_of(merged), counts_of(union), rtol=1e-13, atol=0)
    merged_scores = np.array([merged.score(m).log_odds for m in corpus[0]])
    union_scores = np.array([union.score(m).log_odds for m in corpus[0]])
    np.testing.assert_allclose(merged_scores, union_scores, rtol=1e-10, atol=1e-9)


def test_merge_three_and_days_take_the_latest():
    a, b = hostile_filter(days=[100] * len(HOSTILE)), hostile_filter(days=[50] + [200] * (len(HOSTILE) - 1))
    merged = lifecycle.merge([a, b, a])
    assert np.array_equal(counts_of(merged), 2 * counts_of(a) + counts_of(b))
    assert merged.class_count_ == (21.0, 9.0)
    assert list(merged.ages_.last_seen) == [100] + [200] * (len(HOSTILE) - 1)


def test_merge_refuses_other_settings(corpus):
    a = SpamFilter(alpha=0.01).fit(*corpus)
    with pytest.raises(ValueError, match="alpha"):
        lifecycle.merge([a, SpamFilter(alpha=0.1).fit(*corpus)])
    with pytest.raises(ValueError, match="counts"):
        lifecycle.merge([a, SpamFilter(alpha=0.01, counts="raw").fit(*corpus)])
    with pytest.raises(ValueError, match="length_norm"):
        lifecycle.merge([a, SpamFilter(alpha=0.01, length_norm=0).fit(*corpus)])


def test_merge_leaves_its_inputs_alone(fitted):
    before = dump_bytes(fitted)
    lifecycle.merge([fitted, fitted])
    assert dump_bytes(fitted) == before


# ---------------------------------------------------------------------------- prune
def test_prune_by_count_drops_exactly_the_rare_tokens(corpus):
    model = SpamFilter(counts="raw", length_norm=0).fit(*corpus)
    totals = counts_of(model).sum(axis=0)
    pruned, dropped = lifecycle.prune(model, min_count=3)
    assert dropped == int((totals < 3).sum()) > 0
    kept = [t for t, n in zip(model.vocabulary_.tokens(), totals) if n >= 3]
    assert pruned.vocabulary_.tokens() == kept
    assert pruned.class_count_ == model.class_count_
    assert np.array_equal(counts_of(pruned), counts_of(model)[:, totals >= 3])


def test_prune_by_count_counts_occurrences_with_log_counts(corpus):
    model = SpamFilter(counts="log", length_norm=0).fit(*corpus)
    totals = counts_of(model).sum(axis=0)
    _, dropped = lifecycle.prune(model, min_count=1.5)
    assert dropped == int((totals < 1.5 * np.log(2) * (1 - 1e-9)).sum())
    assert lifecycle.prune(model, min_count=1)[1] == 0      # every token was seen at least once


def test_a_length_normalised_model_has_no_occurrence_counts(corpus, tmp_path):
    """length_norm scales each message by its own length: its counts do not tell
    how often a token was seen, so --min-count is refused (model unchanged) and
    info counts no hapaxes; the other policies work."""
    model = SpamFilter(length_norm=5).fit(*corpus)
    with pytest.raises(ValueError, match="length_norm"):
        lifecycle.prune(model, min_count=2)
    facts = lifecycle.describe(model)
    assert facts["hapax"] is None and not any("min-count" in k for k in facts["would_remove"])
    assert lifecycle.prune(model, target_size=100)[0].vocabulary_.n_features == 100
    plain = lifecycle.describe(SpamFilter(length_norm=0).fit(*corpus))
    assert plain["hapax"] > 0 and "--min-count 2" in plain["would_remove"]
    path = tmp_path / "m.spamnb"
    model.save(path)
    before = path.read_bytes()
    proc = run_spamnb(["prune", "--min-count", "2", "-m", str(path)], tmp_path)
    assert proc.returncode == 3 and "length_norm" in proc.stderr.decode() and path.read_bytes() == before
    assert len(proc.stderr.decode().strip().splitlines()) == 1
    info = run_spamnb(["info", "-m", str(path)], tmp_path).stdout.decode()
    assert "hapaxes:     not counted" in info


def test_prune_by_age():
    days = [0, 100, 200, 300] + [365] * (len(HOSTILE) - 4)
    model = hostile_filter(days=days)
    pruned, dropped = lifecycle.prune(model, max_age=100, now=365)
    # unknown (0) is kept; 100 and 200 are more than 100 days old
    assert dropped == 2
    assert pruned.vocabulary_.tokens() == [HOSTILE[0]] + HOSTILE[3:]
    assert list(pruned.ages_.last_seen) == [0, 300] + [365] * (len(HOSTILE) - 4)


def test_prune_to_a_target_keeps_the_most_useful():
    settings = lifecycle._settings(SpamFilter(alpha=0.01))
    tokens = ["even", "spammy", "hammy", "rare", "weakspam"]
    counts = np.array([[50.0, 0.0, 40.0, 0.0, 2.0],     # ham
                       [50.0, 40.0, 0.0, 1.0, 20.0]])   # spam
    encoded = [t.encode() for t in tokens]
    state = lifecycle.State(settings, (92.0, 111.0), counts,
                             np.array([hash_token(t) for t in tokens], dtype=np.uint64), b"".join(encoded),
                             np.concatenate([[0], np.cumsum([len(e) for e in encoded])]).astype(np.uint64),
                             np.zeros(5, dtype=np.int32))
    useful = lifecycle.usefulness(state)
    assert useful.argmin() == 0                          # a token as common in ham as in spam tells nothing
    assert useful[1] > useful[4] > useful[3]             # many one-sided counts beat few
    model = lifecycle.build_filter(state)
    assert lifecycle.prune(model, target_size=2)[0].vocabulary_.tokens() == ["spammy", "hammy"]
    assert lifecycle.prune(model, target_size=3)[0].vocabulary_.tokens() == ["spammy", "hammy", "weakspam"]
    assert lifecycle.prune(model, target_size=5)[1] == 0


def test_prune_ties_keep_the_recently_seen():
    model = hostile_filter(days=[10] * len(HOSTILE))
    state = lifecycle.state_of(model)
    state.counts[:] = 1.0
    state.days[:] = np.arange(len(HOSTILE))
    keep = lifecycle.prune_mask(state, target_size=3)
    assert list(np.flatnonzero(keep)) == [len(HOSTILE) - 3, len(HOSTILE) - 2, len(HOSTILE) - 1]


def test_pruned_model_file_is_smaller_and_scores_like_a_model_of_those_tokens(fitted, corpus, tmp_path):
    fitted.save(tmp_path / "full.spamnb")
    pruned, dropped = lifecycle.prune(fitted, target_size=fitted.vocabulary_.n_features // 4)
    pruned.save(tmp_path / "small.spamnb")
    assert os.path.getsize(tmp_path / "small.spamnb") < 0.5 * os.path.getsize(tmp_path / "full.spamnb")
    loaded = SpamFilter.load(tmp_path / "small.spamnb")
    assert [loaded.score(m).log_odds for m in corpus[0][:30]] == [pruned.score(m).log_odds for m in corpus[0][:30]]


def test_describe(corpus):
    fitted = SpamFilter(length_norm=0).fit(*corpus)     # log counts of occurrences
    facts = lifecycle.describe(fitted, target_size=100)
    totals = counts_of(fitted).sum(axis=0)
    assert facts["tokens"] == fitted.vocabulary_.n_features
    assert facts["hapax"] == int((totals <= np.log(2) * (1 + 1e-9)).sum())
    assert sum(n for _, n in facts["ages"]) == facts["tokens"]
    assert facts["would_remove"]["--target-size 100"] == facts["tokens"] - 100


# ---------------------------------------------------------------------------- commands
def run(args, home, stdin=b""):
    return run_spamnb(args, home, stdin=stdin, cwd=home, timeout=120)


@pytest.fixture()
def home(tmp_path, sample_model):
    """A home of this test's own with the model `spamnb train -q corpora/` writes (a copy)."""
    shutil.copyfile(sample_model, tmp_path / "model.spamnb")
    return tmp_path


def model_dump(home):
    """The bytes ``spamnb dump`` prints of the home's model, made in this process (where the
    dump is the test's input, not what it checks; the command: test_cli_dump_file_is_as_private_as_the_model,
    test_the_backup_keeps_the_learns_journaled_for_the_model_replaced, and with -m slow
    test_cli_dump_load_dump_is_identical)."""
    return dump_bytes(SpamFilter.load(home / "model.spamnb"))


@pytest.mark.slow
def test_cli_dump_load_dump_is_identical(home):
    first = run(["dump"], home)
    assert first.returncode == 0, first.stderr
    assert run(["dump", "-o", home / "d.txt"], home).returncode == 0
    assert (home / "d.txt").read_bytes() == first.stdout
    proc = run(["load", "-m", home / "copy.spamnb", "-"], home, stdin=first.stdout)
    assert proc.returncode == 0, proc.stderr
    assert run(["dump", "-m", home / "copy.spamnb"], home).stdout == first.stdout
    message = (SAMPLE / "spam").iterdir().__next__().read_bytes()
    assert run(["classify", "-m", home / "copy.spamnb"], home, message).stdout == run(["classify"], home, message).stdout


def test_cli_load_refuses_a_damaged_dump_and_changes_nothing(home):
    model = home / "model.spamnb"
    before = model.read_bytes()
    dump = model_dump(home)
    (home / "cut.txt").write_bytes(dump[:len(dump) // 2])
    for args in (["load", "cut.txt"], ["load", "--add", "cut.txt"]):
        proc = run(args, home)
        assert proc.returncode == 3
        assert proc.stderr.decode().count("\n") == 1 and "line " in proc.stderr.decode()
        assert "nothing was changed" in proc.stderr.decode()
        assert model.read_bytes() == before


def test_cli_load_add_adds_the_counts(home):
    dump = model_dump(home)
    proc = run(["load", "--add", "-"], home, stdin=dump)
    assert proc.returncode == 0, proc.stderr
    doubled = load_bytes(model_dump(home))
    single = load_bytes(dump)
    assert doubled.class_count_ == tuple(2 * v for v in single.class_count_)
    assert np.array_equal(counts_of(doubled), 2 * counts_of(single))


def test_cli_load_add_refuses_other_settings(home):
    dump = _edited_dump(home, b"settings ", _settings_line(home, alpha=0.5))    # the model trained with --alpha 0.5
    before = (home / "model.spamnb").read_bytes()
    proc = run(["load", "--add", "-"], home, stdin=dump)
    assert proc.returncode == 3 and "alpha" in proc.stderr.decode()
    assert (home / "model.spamnb").read_bytes() == before


@pytest.mark.slow
def test_cli_merge(home):
    assert run(["dump", "-o", "d.txt"], home).returncode == 0
    proc = run(["merge", "model.spamnb", "d.txt", "-o", "merged.spamnb"], home)
    assert proc.returncode == 0, proc.stderr
    merged = load_bytes(run(["dump", "-m", "merged.spamnb"], home).stdout)
    single = load_bytes((home / "d.txt").read_bytes())
    assert np.array_equal(counts_of(merged), 2 * counts_of(single))
    assert run(["merge", "-o", "x.spamnb"], home).returncode == 64
    assert run(["merge", "nothere", "-o", "x.spamnb"], home).returncode == 3
    assert not (home / "x.spamnb").exists()


def test_cli_prune(home):
    model = home / "model.spamnb"
    size = model.stat().st_size
    n = SpamFilter.load(model).vocabulary_.n_features
    assert run(["prune"], home).returncode == 64
    dry = run(["prune", "--target-size", n // 2, "-n"], home)
    assert dry.returncode == 0 and b"would drop" in dry.stdout and model.stat().st_size == size
    proc = run(["prune", "--target-size", n // 2], home)
    assert proc.returncode == 0, proc.stderr
    assert SpamFilter.load(model).vocabulary_.n_features == n // 2
    assert SpamFilter.load(home / "model.spamnb.bak").vocabulary_.n_features == n   # the model it replaced
    assert model.stat().st_size < 0.75 * size
    assert run(["prune", "--min-count", "-1"], home).returncode == 64


def test_cli_info_describes_size_age_and_pruning(home):
    proc = run(["info", "--tokens", "0"], home)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode()
    assert "hapaxes:" in out and "last seen:" in out and "--max-age 365 drops" in out


# ---------------------------------------------------------------------------- ages: last-seen days in the model
def test_fit_and_learn_set_last_seen_days(corpus, monkeypatch, tmp_path):
    from spamnb.estimator import ages

    monkeypatch.setattr(ages, "today", lambda: 20000)
    model = SpamFilter().fit(corpus[0][:100], corpus[1][:100])
    n_fit = model.vocabulary_.n_features
    assert list(model.ages_.last_seen) == [20000] * n_fit
    assert (model.ages_.created, model.ages_.last_learn) == (20000, 20000)
    model.save(tmp_path / "m.spamnb")
    monkeypatch.setattr(ages, "today", lambda: 20010)
    loaded = SpamFilter.load(tmp_path / "m.spamnb")
    assert list(loaded.ages_.last_seen) == [20000] * n_fit
    message = corpus[0][150]
    loaded.learn(message, spam=True)
    seen = set(loaded.vocabulary_.lookup(loaded.tokenizer_.stream(message).hashes))
    days = list(loaded.ages_.last_seen)
    assert len(days) == loaded.vocabulary_.n_features > n_fit
    assert all(day == (20010 if i in seen else 20000) for i, day in enumerate(days))
    assert (loaded.ages_.created, loaded.ages_.last_learn) == (20000, 20010)
    loaded.save(tmp_path / "m.spamnb")
    again = SpamFilter.load(tmp_path / "m.spamnb")
    assert list(again.ages_.last_seen) == days
    assert (again.ages_.created, again.ages_.last_learn) == (20000, 20010)
    # forget drops the tokens only that message had, and their days with them
    again.forget(message, spam=True)
    assert again.vocabulary_.n_features == n_fit
    assert len(again.ages_.last_seen) == n_fit


def test_a_model_of_an_older_schema_loads_with_unknown_days(tmp_path):
    import json

    old = REPO / "tests" / "data" / "models" / "corpora-658063e.spamnb"
    model = SpamFilter.load(old)
    assert model.ages_.last_seen is None and model.ages_.created == 0
    expected = json.loads((old.with_suffix(".json")).read_text())["log_odds"]
    relpath, value = next(iter(expected.items()))
    assert model.score((SAMPLE / relpath).read_bytes()).log_odds == float.fromhex(value)
    assert lifecycle.describe(model)["ages"][-1] == ("unknown", model.vocabulary_.n_features)
    assert lifecycle.prune(model, max_age=0, now=30000)[1] == 0     # unknown ages are kept
    model.save(tmp_path / "new.spamnb")                              # written in the current schema
    converted = SpamFilter.load(tmp_path / "new.spamnb")
    assert list(converted.ages_.last_seen) == [0] * model.vocabulary_.n_features
    assert converted.score((SAMPLE / relpath).read_bytes()).log_odds == float.fromhex(value)


def test_expire_prunes_past_the_limit_to_ninety_percent(fitted):
    n = fitted.vocabulary_.n_features
    assert lifecycle.expire(fitted) == (fitted, 0)                  # no limit: nothing happens
    fitted.ages_.max_tokens = n
    try:
        assert lifecycle.expire(fitted)[1] == 0
        fitted.ages_.max_tokens = n - 1
        expired, dropped = lifecycle.expire(fitted)
        assert expired.vocabulary_.n_features == int((n - 1) * 0.9) == n - dropped
        assert expired.ages_.max_tokens == n - 1
    finally:
        fitted.ages_.max_tokens = None


def test_cli_expire_at_bounds_the_model_through_learns(home):
    model = home / "model.spamnb"
    n = SpamFilter.load(model).vocabulary_.n_features
    limit = n - 100
    proc = run(["prune", "--expire-at", limit], home)
    assert proc.returncode == 0, proc.stderr
    assert SpamFilter.load(model).vocabulary_.n_features == int(limit * 0.9)
    assert SpamFilter.load(model).ages_.max_tokens == limit
    assert "expiry:      past" in run(["info", "--tokens", "0"], home).stdout.decode()
    new_mail = home / "new"
    new_mail.mkdir()
    for k in range(30):   # 30 messages of 60 words never seen before
        words = " ".join(f"w{k}x{j}" for j in range(60))
        (new_mail / f"{k}.eml").write_text(f"Subject: note {k}\n\n{words}\n")
    unbounded = SpamFilter.load(model)
    for path in sorted(new_mail.iterdir()):
        unbounded.learn(path.read_bytes(), spam=False)
    assert unbounded.vocabulary_.n_features > limit                  # without the limit it would grow past it
    assert run(["learn", "-q", "--ham", new_mail], home).returncode == 0
    after = SpamFilter.load(model)
    assert int(limit * 0.9) <= after.vocabulary_.n_features <= limit
    assert after.class_count_ == unbounded.class_count_
    assert run(["prune", "--expire-at", 0], home).returncode == 0
    assert SpamFilter.load(model).ages_.max_tokens is None


def test_cli_prune_by_age_through_an_edited_dump(home):
    dump = model_dump(home).split(b"\n")
    at = next(i for i, line in enumerate(dump) if line.startswith(b"ledger "))   # the trained mail's ledger
    n = int(dump[at].split()[1])
    assert n > 0 and len(dump) == at + n + 3   # ... token lines, "ledger N", N entries, "end ...", ""
    header, tokens, ledger = dump[:9], dump[9:at], dump[at:at + n + 1]
    old = [b"\t".join(line.split(b"\t")[:3] + [b"2001-01-01"]) for line in tokens[:50]]
    edited = b"\n".join(header + old + tokens[50:] + ledger + [b"end %d -" % len(tokens), b""])
    assert run(["load", "-"], home, stdin=edited).returncode == 0
    proc = run(["prune", "--max-age", "365"], home)
    assert proc.returncode == 0, proc.stderr
    kept = SpamFilter.load(home / "model.spamnb")
    assert kept.vocabulary_.n_features == len(tokens) - 50
    assert b"dropped 50 of" in proc.stdout


@pytest.mark.slow
def test_a_kill_at_any_moment_of_load_leaves_a_whole_model(home):
    """SIGKILL ``spamnb load`` (a dump 4x the model) at spread-out moments: the
    model is always the old one or the new one, whole."""
    import signal
    import time

    model = home / "model.spamnb"
    old = model.read_bytes()
    base = load_bytes(run(["dump"], home).stdout)
    bigger = lifecycle.merge([base, base, base, base])
    with open(home / "big.txt", "wb") as out:
        dumpfile.dump(bigger, out)
    new_counts = counts_of(bigger)
    env = dict(os.environ, PYTHONPATH=str(REPO), SPAMNB_HOME=str(home))
    outcomes = set()
    for delay in (0.05, 0.2, 0.4, 0.6, 0.8, 1.0, 1.3, 1.6, 2.0, 3.0):
        proc = subprocess.Popen([sys.executable, "-m", "spamnb", "load", "-q", "big.txt"], cwd=home, env=env)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        loaded = SpamFilter.load(model)                      # never damaged
        counts = counts_of(loaded)
        if model.read_bytes() == old:
            outcomes.add("old")
        else:
            assert np.array_equal(counts, new_counts)
            outcomes.add("new")
            model.write_bytes(old)
    assert outcomes == {"old", "new"}          # killed both before and after the rename


def test_cli_dump_file_is_as_private_as_the_model(home):
    (home / "model.spamnb").chmod(0o600)
    assert run(["dump", "-o", "d.txt"], home).returncode == 0
    assert (home / "d.txt").stat().st_mode & 0o777 == 0o600
    assert not [p for p in os.listdir(home) if p.endswith(".tmp")]


def test_a_model_with_message_features_round_trips(corpus):
    model = SpamFilter(feature_weight=0.1).fit(*corpus)
    data = dump_bytes(model)
    loaded = load_bytes(data)
    assert dump_bytes(loaded) == data
    assert loaded.features_.to_dict() == model.features_.to_dict()
    assert [loaded.score(m).log_odds for m in corpus[0][:40]] == [model.score(m).log_odds for m in corpus[0][:40]]
    with pytest.raises(ValueError, match="message features"):
        lifecycle.merge([model, loaded])



def test_the_ledger_goes_through_dump_load_and_merge():
    from spamnb.estimator import ledger as ledgers
    from spamnb.estimator import ledger_table

    messages = [m for m in labelled_messages([SAMPLE])][:40]
    base = SpamFilter().fit([m.data for m in messages], [m.is_spam for m in messages])
    base.ledger_ = None   # as fitted before fit recorded the messages it counts (issue 46)
    extra = [b"Subject: note %d\n\nzqx%d wombat fnord\n" % (k, k) for k in range(3)]
    for k, data in enumerate(extra):
        ledger = ledger_table.ledger_of(base)
        ledgers.learn(base, ledger, data, k % 2 == 0, ledgers.Tally())
        ledger_table.attach(base, ledger)
    data = dump_bytes(base)
    assert b"\nledger 3\n" in data
    loaded = load_bytes(data)
    assert loaded.ledger_.to_arrays() == base.ledger_.to_arrays()
    assert dump_bytes(loaded) == data
    # a version-1 dump (no ledger) still loads, with no ledger
    head, _, rest = data.partition(b"\n")
    tokens, _, _end = rest.rpartition(b"ledger 3\n")
    v1 = b"spamnb-dump 1\n" + tokens + b"end %d -\n" % base.vocabulary_.n_features
    assert load_bytes(v1).ledger_ is None
    # a damaged ledger line is refused with its line number
    bad = data.replace(b"\tspam\n", b"\tspma\n", 1)
    with pytest.raises(dumpfile.DumpError, match="line"):
        load_bytes(bad)
    # merge keeps the union
    other = SpamFilter().fit([m.data for m in messages], [m.is_spam for m in messages])
    other.ledger_ = None
    assert lifecycle.merge([other, base]).ledger_.to_arrays() == base.ledger_.to_arrays()
    assert lifecycle.merge([other, other]).ledger_ is None


def test_the_backup_keeps_the_learns_journaled_for_the_model_replaced(home):
    """prune / load / merge -o MODEL keep MODEL.bak with its journal beside it
    (MODEL.bak.journal): loading the backup gives the model replaced, learns included."""
    model = home / "model.spamnb"
    message = home / "m"
    message.write_bytes(b"Subject: kept\n\nnever seen zqzq words\n")
    assert run(["learn", "--spam", "-q", message], home).returncode == 0
    assert (home / "model.spamnb.journal").exists()
    learned = SpamFilter.load(model).class_count_
    assert run(["dump", "-o", "d.txt"], home).returncode == 0
    proc = run(["merge", "-q", "model.spamnb", "d.txt", "-o", "model.spamnb"], home)
    assert proc.returncode == 0, proc.stderr
    assert SpamFilter.load(home / "model.spamnb.bak").class_count_ == learned
    assert SpamFilter.load(model).class_count_ == tuple(2 * v for v in learned)
    assert journal_without_records(model)                    # the merged model's, without records
    assert run(["load", "-q", "--add", "d.txt"], home).returncode == 0
    assert SpamFilter.load(home / "model.spamnb.bak").class_count_ == tuple(2 * v for v in learned)
    # the older backup's journal went with it: the one beside the backup is the merged model's, without records
    assert journal_without_records(home / "model.spamnb.bak")


# ---------------------------------------------------------------------------- dumps as hostile input (issue 25, item 5)
def _edited_dump(home, old, new):
    """The model's dump with the header line starting ``old`` replaced by ``new`` (no checksum: hand-edited)."""
    lines = model_dump(home).split(b"\n")
    at = next(i for i, line in enumerate(lines) if line.startswith(old))
    lines[at] = new
    end = next(i for i, line in enumerate(lines) if line.startswith(b"end "))
    lines[end] = b" ".join(lines[end].split(b" ")[:2] + [b"-"])
    return b"\n".join(lines)


def _settings_line(home, **changes):
    import json

    line = next(l for l in model_dump(home).split(b"\n") if l.startswith(b"settings "))
    settings = json.loads(line[len(b"settings "):])
    settings.update(changes)
    return b"settings " + json.dumps(settings, sort_keys=True, separators=(",", ":")).encode()


@pytest.mark.parametrize("field, value", [
    (b"messages ", b"messages 1e308 1e308"),
    (b"messages ", b"messages 3.5 2"),
    (b"messages ", b"messages nan 2"),
    (b"max-tokens ", b"max-tokens 5"),
    (b"max-tokens ", b"max-tokens -1"),
    (b"settings ", {"length_norm": 1e308}),
    (b"settings ", {"alpha": 1e308}),
    (b"settings ", {"feature_weight": 1e300}),
    (b"settings ", {"spam_cutoff": None}),
])
@pytest.mark.slow   # several seconds: the default run stays near three minutes
def test_a_dump_that_would_wreck_the_model_is_refused_with_one_line(home, field, value):
    model = home / "model.spamnb"
    before = model.read_bytes()
    verdict = run(["classify"], home, b"Subject: hi\n\nhello\n")
    assert verdict.returncode == 2 and verdict.stdout.startswith(b"unsure "), verdict     # too little to go on
    if isinstance(value, dict):
        value = _settings_line(home, **value)
    (home / "bad.txt").write_bytes(_edited_dump(home, field, value))
    for args in (["load", "bad.txt"], ["load", "--add", "bad.txt"], ["merge", "bad.txt", "-o", "model.spamnb"]):
        proc = run(args, home)
        assert proc.returncode == 3, (args, proc.stderr)
        assert proc.stderr.decode().count("\n") == 1 and "line " in proc.stderr.decode(), proc.stderr
        assert model.read_bytes() == before
    after = run(["classify"], home, b"Subject: hi\n\nhello\n")     # the verdict of the model as it was
    assert (after.returncode, after.stdout) == (verdict.returncode, verdict.stdout), after.stderr


def test_a_dump_with_max_tokens_0_loads_with_expiry_off_and_a_learn_keeps_the_tokens(home):
    (home / "zero.txt").write_bytes(_edited_dump(home, b"max-tokens ", b"max-tokens 0"))
    assert run(["load", "-q", "zero.txt"], home).returncode == 0
    model = home / "model.spamnb"
    n = SpamFilter.load(model).vocabulary_.n_features
    assert SpamFilter.load(model).ages_.max_tokens is None
    (home / "m").write_bytes(b"Subject: new\n\nsome words\n")
    assert run(["learn", "-q", "--spam", "m"], home).returncode == 0
    assert SpamFilter.load(model).vocabulary_.n_features >= n


def test_a_model_file_with_a_tiny_token_limit_is_not_pruned_to_nothing(home):
    """A crafted (or old) model file whose expiry limit is below the minimum: a learn keeps its tokens."""
    model = home / "model.spamnb"
    sf = SpamFilter.load(model)
    n = sf.vocabulary_.n_features
    sf.ages_.max_tokens = 0
    sf.save(model)
    (home / "m").write_bytes(b"Subject: new\n\nsome words\n")
    assert run(["learn", "-q", "--spam", "m"], home).returncode == 0
    assert SpamFilter.load(model).vocabulary_.n_features >= n
    assert run(["prune", "--expire-at", 10], home).returncode == 64   # refused, one line
    assert SpamFilter.load(model).vocabulary_.n_features >= n


@pytest.mark.parametrize("name, value", [("length_norm", 1e308), ("alpha", 1e308), ("alpha", float("nan")),
                                         ("feature_weight", float("inf")), ("spam_cutoff", float("nan"))])
def test_settings_out_of_range_are_refused(name, value):
    with pytest.raises(ValueError, match=name.split("_")[0]):
        SpamFilter(**{name: value})
