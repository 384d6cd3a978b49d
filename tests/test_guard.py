"""The filter's read/write lock between threads (``spamnb.estimator.guard``):
a writer excludes readers and other writers, is reentrant, waits for the
readers in progress, and takes it without ``contextlib`` or ``threading``
when nothing waits (a relabel's cold path)."""

import subprocess
import sys
import threading
import time

import pytest

from spamnb.estimator.guard import ReadWriteLock


def _wait_for(condition, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.005)


def test_a_writer_is_reentrant_and_a_reader_cannot_write():
    lock = ReadWriteLock()
    with lock.writing():
        assert lock.writer_is_me()
        with lock.writing():           # its own write again: nothing to wait for
            with lock.reading():       # and a read within it
                assert lock.writer_is_me()
        assert lock.writer_is_me()     # the inner one left it held
    assert not lock.writer_is_me()
    with lock.reading():
        with pytest.raises(RuntimeError):
            with lock.writing():
                pass
    with lock.writing():   # free again after the refusal
        pass


def _held(context, events, label):
    """A thread holding ``context()`` until released: (the thread, its release event)."""
    held, release = threading.Event(), threading.Event()

    def hold():
        with context():
            held.set()
            release.wait(30)
            events.append(label)

    thread = threading.Thread(target=hold)
    thread.start()
    assert held.wait(30)
    return thread, release


def test_a_writer_waits_for_readers_and_writers_and_is_woken():
    lock = ReadWriteLock()
    events = []
    r, release = _held(lock.reading, events, "read done")

    def writer(name):
        with lock.writing():
            events.append(f"{name} in")
            time.sleep(0.01)
            events.append(f"{name} out")

    writers = [threading.Thread(target=writer, args=(f"w{i}",)) for i in range(3)]
    for w in writers:
        w.start()
    time.sleep(0.05)
    assert events == []          # every writer waits for the reader in progress
    release.set()
    for t in (r, *writers):
        t.join(30)
        assert not t.is_alive()
    assert events[0] == "read done"
    pairs = events[1:]           # one writer at a time: each in is followed by its own out
    assert len(pairs) == 6 and all(pairs[i].split()[0] == pairs[i + 1].split()[0] and pairs[i].endswith("in")
                                   for i in range(0, 6, 2))
    with lock.writing():         # and free again
        pass


def test_a_reader_waits_for_a_writer():
    lock = ReadWriteLock()
    events = []
    w, release = _held(lock.writing, events, "write done")

    def reader():
        with lock.reading():
            events.append("read")

    r = threading.Thread(target=reader)
    r.start()
    time.sleep(0.05)
    assert events == []
    release.set()
    for t in (w, r):
        t.join(30)
    _wait_for(lambda: len(events) == 2)
    assert events == ["write done", "read"]


def test_an_uncontended_write_imports_neither_contextlib_nor_threading():
    code = ("import sys\nfrom spamnb.estimator.guard import ReadWriteLock\nlock = ReadWriteLock()\n"
            "with lock.writing():\n    with lock.writing():\n        pass\n"
            "print(sorted({'contextlib', 'threading'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
