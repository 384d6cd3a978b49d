"""A model file rewritten in place (``cp`` over it: truncated, then written)
while spamnb reads it: no reader may die by a signal (a mapped file cut short
faulted its reader with SIGBUS, and ``classify -p`` lost the message), ``-p``
always writes the message (scored, or with ``Unchecked`` in its status
header), and every exit code is one docs/cli.md lists.

The runs are forks of one process that imported spamnb once (a fresh
interpreter per run would be most of the time): each child runs the command
line (``spamnb.cli.main.main``) or the library on its own stdin and stdout,
as ``spamnb`` does.  Beside them a process copies two models over the model
file in turn, the shorter over the longer, and two CPU-bound loops keep
both cores busy."""

import json
import os
import subprocess
import sys

import pytest

from spamnb.model.spam_filter import SpamFilter

from conftest import REPO

SPAM = sorted((REPO / "corpora" / "spam").iterdir())
HAM = sorted((REPO / "corpora" / "easy_ham").iterdir())
SAMPLE = SPAM[5].read_bytes()

# cp: open with O_TRUNC (the file is empty from here), then write it whole; a short pause between copies
_REWRITER = r"""
import shutil, sys, time
sources, path = sys.argv[1:3], sys.argv[3]
while True:
    for source in sources:
        shutil.copyfile(source, path)
        time.sleep(0.001)
"""

_BUSY = "while True: pass"

# forks one child per run: argv[1] the model, argv[2] the message file, argv[3] the folder for outputs,
# argv[4] the number of runs, argv[5:] the kinds of run, taken in turn; prints one JSON line per run
_RUNNER = r"""
import json, os, sys
from spamnb.cli.main import main
from spamnb.model.spam_filter import SpamFilter
from spamnb.errors import ModelError
import spamnb.cli.classify, spamnb.cli.learn, spamnb.mail.status, spamnb.report.headers, spamnb.model.learning

model, message, folder, runs, kinds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5:]
ARGS = {"classify-p": ["classify", "-p", "-m", model], "classify": ["classify", "-m", model],
        "learn": ["learn", "--spam", "-m", model, message]}


def library():
    try:
        SpamFilter.load(model, mapped=True).classify(open(message, "rb").read())
        SpamFilter.load(model).classify(open(message, "rb").read())
    except (ModelError, ValueError) as exc:
        print(exc, file=sys.stderr)
        return 3
    except BaseException:
        import traceback
        traceback.print_exc()
        return 4
    return 0


out, err = os.path.join(folder, "out"), os.path.join(folder, "err")
for i in range(runs):
    kind = kinds[i % len(kinds)]
    pid = os.fork()
    if pid == 0:
        code = 70
        try:
            for fd, name, flags in ((0, message, os.O_RDONLY), (1, out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                                    (2, err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
                os.dup2(os.open(name, flags, 0o600), fd)
            code = library() if kind == "library" else main(ARGS[kind])
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    result = {"kind": kind}
    if os.WIFSIGNALED(status):
        result["signal"] = os.WTERMSIG(status)
    else:
        result["code"] = os.WEXITSTATUS(status)
    result["out"] = open(out, "rb").read().decode("latin-1")
    result["err"] = open(err, "rb").read().decode("latin-1")[-1500:]
    print(json.dumps(result), flush=True)
"""

EXIT_CODES = {"classify-p": {0, 3}, "classify": {0, 1, 2, 3}, "learn": {0, 3}, "library": {0, 3}}


def _env():
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("SPAMNB_DEBUG", None)
    return env


def _race(tmp_path, runs, kinds):
    """The results of ``runs`` runs (kinds in turn) against a model copied over in place meanwhile."""
    small, large = tmp_path / "small.spamnb", tmp_path / "large.spamnb"
    SpamFilter().fit([p.read_bytes() for p in SPAM[:3] + HAM[:3]], [True] * 3 + [False] * 3).save(small)
    SpamFilter().fit([p.read_bytes() for p in SPAM[:50] + HAM[:100]], [True] * 50 + [False] * 100).save(large)
    assert large.stat().st_size > 4 * small.stat().st_size
    path = tmp_path / "m.spamnb"
    path.write_bytes(large.read_bytes())
    message = tmp_path / "message.eml"
    message.write_bytes(SAMPLE)
    helpers = [subprocess.Popen([sys.executable, "-c", _REWRITER, str(large), str(small), str(path)])]
    helpers += [subprocess.Popen([sys.executable, "-c", _BUSY]) for _ in range(2)]
    try:
        proc = subprocess.run([sys.executable, "-c", _RUNNER, str(path), str(message), str(tmp_path), str(runs),
                               *kinds], capture_output=True, env=_env(), timeout=60 + 2 * runs)
    finally:
        for helper in helpers:
            helper.kill()
            helper.wait()
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(results) == runs
    return results


def _check(results):
    deaths = [r for r in results if "signal" in r]
    assert not deaths, f"{len(deaths)} of {len(results)} runs died by a signal: {deaths[:3]}"
    wrong = [r for r in results if r["code"] not in EXIT_CODES[r["kind"]]]
    assert not wrong, wrong[:3]
    body = SAMPLE.split(b"\n\n", 1)[1].decode("latin-1")
    for r in (r for r in results if r["kind"] == "classify-p"):
        assert body in r["out"], f"the message was not passed on: {r}"
        status = [line for line in r["out"].split("\n\n", 1)[0].splitlines() if line.startswith("X-Spamnb-Status:")]
        assert len(status) == 1, r
        if r["code"] == 0:
            assert status[0].split()[1] in ("Yes,", "No,", "Unsure,"), r
        else:
            assert status[0].startswith("X-Spamnb-Status: Unchecked, reason="), r
    return {kind: sum(r["code"] == 0 for r in results if r["kind"] == kind) for kind in EXIT_CODES}


def test_classify_p_survives_a_model_copied_over_in_place(tmp_path):
    """The default suite's short run: 50 of ``classify -p``."""
    scored = _check(_race(tmp_path, 50, ["classify-p"]))
    print(scored)


@pytest.mark.slow
def test_classify_p_survives_a_thousand_rewrites_in_place(tmp_path):
    scored = _check(_race(tmp_path, 1000, ["classify-p"]))
    print(scored)


@pytest.mark.slow
def test_classify_learn_and_the_library_survive_rewrites_in_place(tmp_path):
    scored = _check(_race(tmp_path, 999, ["classify", "learn", "library"]))
    print(scored)


def test_unchecked_status_replaces_a_forged_one(tmp_path):
    """``-p`` with no model to read: the message with our header saying so
    (a status header it came with, forged, removed), exit 3."""
    from conftest import run_spamnb

    forged = b"X-Spamnb-Status: No, log-odds=-30.000\n" + SAMPLE
    out = run_spamnb(["classify", "-p", "-m", tmp_path / "none.spamnb"], tmp_path, stdin=forged)
    assert out.returncode == 3, out.stderr
    head, body = out.stdout.split(b"\n\n", 1)
    assert b"X-Spamnb-Status: Unchecked, reason=model-unreadable" in head.splitlines()
    assert b"log-odds=-30" not in head
    assert body == SAMPLE.split(b"\n\n", 1)[1]


def test_a_model_read_in_part_reads_the_rest_only_when_needed(tmp_path):
    """``SpamFilter.load(mapped=True)`` reads no large array until something
    needs it whole; the verdict and its evidence equal a whole load's; once
    the file is rewritten in place, reading the rest is refused (ModelError),
    never zeros taken for counts."""
    from spamnb.errors import ModelError

    path = tmp_path / "m.spamnb"
    SpamFilter().fit([p.read_bytes() for p in SPAM[:20] + HAM[:20]], [True] * 20 + [False] * 20).save(path)
    whole = SpamFilter.load(path)
    part = SpamFilter.load(path, mapped=True)
    assert {"keys", "values", "strings", "log_count"} <= part.unread_.unread
    assert part.classify(SAMPLE) == whole.classify(SAMPLE) and part.classify(SAMPLE).evidence
    assert part.unread_ is not None   # the verdict and its evidence's names read nothing whole
    assert part.vocabulary_.tokens() == whole.vocabulary_.tokens()   # the library's attribute: read whole
    assert part.unread_ is None
    again = SpamFilter.load(path, mapped=True)
    other = tmp_path / "other.spamnb"
    SpamFilter().fit([p.read_bytes() for p in SPAM[:3] + HAM[:3]], [True] * 3 + [False] * 3).save(other)
    path.write_bytes(other.read_bytes())   # in place: truncated, then written
    with pytest.raises(ModelError, match="in place|cut short"):
        again.learn(SAMPLE, spam=True)


def test_a_writer_reads_a_model_read_in_part_whole(tmp_path):
    """Under the model's lock (a learn) ``map_model`` reads the small arrays,
    leaves the ledger's to its readers (``fill_unread``, as the file has them:
    once read as zeros, a second learn of the same messages found its digests
    'recorded twice') and the large ones to ``fill``, which reads them whole, as the file has them (a learn of a
    new message reads none: ``spamnb.model.learning``'s light session)."""
    from conftest import run_spamnb
    from spamnb.persistence import store

    path = tmp_path / "m.spamnb"
    SpamFilter().fit([p.read_bytes() for p in SPAM[:5] + HAM[:5]], [True] * 5 + [False] * 5).save(path)
    for _ in range(2):
        out = run_spamnb(["learn", "--spam", "-m", path, *SPAM[30:33]], tmp_path)
        assert out.returncode == 0, out.stderr
    SpamFilter.load(path).save(path)   # the journal folded in: the ledger in the file
    _, whole = store.read_model(path)
    assert len(whole["ledger_labels"]) == 10 + 3   # the ten fitted (fit records its mail) and the three learned
    with store.locked(path):
        _, part = store.map_model(path)
        assert part.unread == (store.ON_DEMAND | store.LEDGER) & set(whole)
        small = [name for name in whole if name not in part.unread]
        assert {name: bytes(part[name]) for name in small} == {name: bytes(whole[name]) for name in small}
        part.fill_unread(store.LEDGER)
        assert part.unread == store.ON_DEMAND & set(whole)
        assert {name: bytes(part[name]) for name in store.LEDGER} == {name: bytes(whole[name]) for name in store.LEDGER}
        part.fill()
    assert not part.unread
    assert {name: bytes(part[name]) for name in whole} == {name: bytes(whole[name]) for name in whole}
