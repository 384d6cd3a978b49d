"""Ctrl-C during ``spamnb train``: the SIGINT a terminal sends to the whole
process group (the parent and its workers) ends the training at once, with
exit 130, one line and no traceback, no worker left, and the model and its
``.bak`` as they were (issue 34; the figures on the shared Enron-Spam corpus
come from scripts/check/interrupt_train.py, docs/reliability.md)."""

import hashlib
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import SAMPLE_CORPUS, run_spamnb

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups, /proc")


def _as_from_a_terminal():
    """In the child, before it runs: SIGINT's default action, as a shell with job control
    gives a command it starts (a suite run from a background job inherits SIGINT ignored,
    and so would the process under test)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _children(pid):
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return found


def _catches_sigint(pid):
    """Whether process ``pid`` has a SIGINT handler yet (``SigCgt`` of its
    status): before the interpreter installs its own, early in its start-up,
    a SIGINT ends it as any program (exit -2), before any of spamnb runs."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) & (1 << (2 - 1)))   # SIGINT is 2
    except OSError:
        pass
    return False


def _spamnb_runs(pid):
    """Whether process ``pid``'s interpreter has started and runs spamnb: it
    catches SIGINT (:func:`_catches_sigint`) and has loaded spamnb's compiled
    tokenizer (``/proc/PID/maps``): a SIGINT during the interpreter's own
    start-up (``site`` imported) ends it there, exit 1, before any of spamnb runs."""
    if not _catches_sigint(pid):
        return False
    try:
        return "spamnb/mail/_mail" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def _digest(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest() if Path(path).exists() else None


def _group_alive(pgid):
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def _sigint_and_wait(proc, timeout=5.0):
    """SIGINT to the group of ``proc`` (a session of its own): its exit code
    (None when still running ``timeout`` s later), the seconds it took, and
    whether a process of the group outlived it."""
    started = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    try:
        code = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        code = None
    took = time.monotonic() - started
    time.sleep(0.05)
    return code, took, _group_alive(proc.pid)


def _end_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _interrupt(command, env, rng, after_workers=(0.0, 0.6), timeout=5.0, from_start=False):
    """Run ``command`` in a session of its own; once its workers are up (with
    ``from_start``: once spamnb runs, workers or not: :func:`_spamnb_runs`), after a random moment,
    SIGINT to the group.  Returns (exit code or None when still running
    ``timeout`` s later, seconds to exit, stderr, whether a process of the
    group outlived the parent); None when the training ended before the
    moment came."""
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_as_from_a_terminal)
    try:
        deadline = time.monotonic() + 60
        while (not (_spamnb_runs(proc.pid) if from_start else _children(proc.pid)) and proc.poll() is None
               and time.monotonic() < deadline):
            time.sleep(0.001 if from_start else 0.01)
        time.sleep(rng.uniform(*after_workers))
        if proc.poll() is not None:   # the training ended first (a fast moment of the machine)
            return None
        code, took, left = _sigint_and_wait(proc, timeout)
        return code, took, proc.stderr.read().decode("utf-8", "replace") if code is not None else "", left
    finally:
        _end_group(proc)
        proc.stderr.close()


def _check_interrupts(corpus, tmp_path, runs, options, after_workers, seed, from_start=False):
    import spamnb

    model = tmp_path / "model.spamnb"
    for _ in range(2):   # the model, then the model and its .bak (the same bytes: training is deterministic)
        started = time.monotonic()
        done = run_spamnb(["train", "-q", *options, "-m", model, corpus], home=tmp_path / "home")
        assert done.returncode == 0, done.stderr
    # The moments fall within the part of a training this machine, now, leaves after its start: a fixed
    # window longer than a quiet machine's training ends most trainings before their SIGINT.
    lasted = time.monotonic() - started
    after_workers = (after_workers[0], max(after_workers[0], min(after_workers[1], 0.6 * lasted)))
    reference = _digest(model)
    assert _digest(str(model) + ".bak") == reference
    # the model's files as the two trainings left them: the model, its .bak, the lock, and the journals
    # without records a whole save leaves beside the model and its backup (docs/lifecycle.md)
    files = {p.name: _digest(p) for p in tmp_path.iterdir() if p.name.startswith("model.spamnb")}
    assert sorted(files) == ["model.spamnb", "model.spamnb.bak", "model.spamnb.bak.journal", "model.spamnb.journal",
                             "model.spamnb.lock"], sorted(files)
    env = dict(os.environ, PYTHONPATH=str(Path(spamnb.__file__).resolve().parents[1]),
               SPAMNB_HOME=str(tmp_path / "home"))
    env.pop("SPAMNB_DEBUG", None)
    command = [sys.executable, "-m", "spamnb", "train", *options, "-m", str(model), str(corpus)]
    rng = random.Random(seed)
    run = attempts = 0
    while run < runs:
        attempts += 1
        assert attempts <= 3 * runs, "the trainings ended before their SIGINT: make the corpus larger"
        outcome = _interrupt(command, env, rng, after_workers, from_start=from_start)
        if outcome is None:
            continue
        code, took, stderr, left = outcome
        run += 1
        where = f"run {run} of {runs} (seed {seed})"
        # 130 (before issue 34's fix also -2, ended by the SIGINT itself as the interpreter ended, and
        # "Exception in thread ..." from the executor's thread)
        assert code == 130, f"{where}: exit {code} {took:.2f} s after the SIGINT; stderr: {stderr[-2000:]}"
        assert took <= 5.0, f"{where}: exit after {took:.2f} s"
        assert "Traceback" not in stderr and "Exception" not in stderr, f"{where}: {stderr[-3000:]}"
        assert stderr.strip().splitlines()[-1] == "spamnb: interrupted"
        assert not left, f"{where}: a process of the training outlived it"
        assert _digest(model) == reference and _digest(str(model) + ".bak") == reference, f"{where}: model changed"
        beside = {p.name: _digest(p) for p in tmp_path.iterdir() if p.name.startswith("model.spamnb")}
        assert beside == files, f"{where}: {sorted(beside)}"   # no file left, none changed


_POOL_JOB = """
import sys, time
from spamnb.training.workers import Workers

def job(seconds):
    time.sleep(seconds)
    return seconds

try:
    with Workers(2) as workers:
        assert list(workers.run_ordered(job, [(0.01,), (0.01,)])) == [0.01, 0.01]   # the workers are up
        print("ready", flush=True)
        if sys.argv[1] == "idle":   # between two passes: the workers wait for a job
            time.sleep(60)
        else:                       # the workers on long jobs, more queued
            list(workers.run_ordered(job, [(60,)] * 6))
except KeyboardInterrupt:
    print("interrupted", file=sys.stderr)
    sys.exit(130)
"""


@pytest.mark.parametrize("state", ["idle", "busy"])
def test_ctrl_c_to_the_group_ends_the_workers_pool_at_once(state):
    """The mechanism, at the two moments that failed on main: SIGINT to the
    group while the workers wait for a job (each died with a multiprocessing
    traceback) and while they run long jobs with more queued (each job got
    KeyboardInterrupt, the parent then waited for the queued jobs: a minute
    here, for ever when the pool had broken)."""
    import spamnb

    env = dict(os.environ, PYTHONPATH=str(Path(spamnb.__file__).resolve().parents[1]))
    proc = subprocess.Popen([sys.executable, "-c", _POOL_JOB, state], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True, preexec_fn=_as_from_a_terminal)
    try:
        assert proc.stdout.readline() == b"ready\n"
        time.sleep(0.3)
        code, took, left = _sigint_and_wait(proc)
        assert code is not None, f"still running 5 s after the SIGINT ({state} workers)"
        stderr = proc.stderr.read().decode("utf-8", "replace")
        assert (code, stderr) == (130, "interrupted\n"), stderr
        assert took < 5.0
        assert not left, "a worker outlived the job"
    finally:
        _end_group(proc)
        proc.stdout.close()
        proc.stderr.close()


def _larger_sample(tmp_path, copies):
    """corpora/ copied ``copies`` times over (each copy a tree of its own, each message's body ending with
    its copy's number: train counts a near-duplicate once): more partitions to interrupt."""
    root = tmp_path / "corpus"
    for folder in sorted(p for p in SAMPLE_CORPUS.iterdir() if p.is_dir()):
        for c in range(copies):
            target = root / folder.name / f"copy{c}"
            target.mkdir(parents=True)
            for f in folder.iterdir():
                if f.is_file():
                    (target / f.name).write_bytes(f.read_bytes() + f"\ncopy {c}\n".encode())
    return root


@pytest.mark.slow
def test_ctrl_c_ends_a_training_with_workers_at_once(tmp_path):
    """Three SIGINTs to the group while the workers count small partitions
    (idle workers waiting for a job and busy ones both get it): on main the
    workers died with multiprocessing tracebacks (and a pool left with a
    cancelled job could hang the parent for ever)."""
    corpus = _larger_sample(tmp_path, 8)    # long enough that a quiet machine does not finish before the SIGINT
    _check_interrupts(corpus, tmp_path, 3, ["-j", "2", "--partition-size", "10"], (0.0, 1.5),
                      seed=random.randrange(1 << 30))


@pytest.mark.slow
def test_ctrl_c_at_random_moments_of_a_shared_corpus_training(tmp_path, shared_corpus):
    """SIGINTs at random moments of the default training of Enron-Spam (the
    counting pass, the calibration's scoring pass, the save), counted from
    the training's start: the default ``-j`` is 1 on cores other jobs keep
    busy, and then no worker ever comes up to count from."""
    corpus = shared_corpus("enron-spam")
    _check_interrupts(corpus, tmp_path, 5, [], (0.0, 4.0), seed=random.randrange(1 << 30), from_start=True)
