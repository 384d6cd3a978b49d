"""Shared learning against whoever can write to Redis (issue 45, item 6): a
real redis-server and ``spamnb serve --shared`` hosts (tests/test_shared.py's
fixtures), the stream written to directly with redis-py as an attacker
would: entries far over a lesson's size, garbage in ``spamnb:trimmed``."""

import time

import pytest

from test_shared import (Host, base_model, needs_redis, needs_spamc, redis_server, unique_message,  # noqa: F401
                         _wait_converged)


def _peak_rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def _host(tmp_path, base_model, url, name="host"):
    import shutil

    home = tmp_path / name
    home.mkdir()
    shutil.copy(base_model, home / "model.spamnb")
    return Host(home, url, "--snapshot-interval", "0")


def _learned(host, message, kind="spam"):
    proc = host.spamc("-L", kind, stdin=message)
    assert proc.returncode == 0, proc
    return proc.stdout


def _wait_log(host, text, timeout=60):
    deadline = time.monotonic() + timeout
    while text not in host.log_text():
        assert time.monotonic() < deadline, host.log_text()
        time.sleep(0.1)


@pytest.mark.slow
@needs_redis
@needs_spamc
def test_oversized_stream_entries_are_skipped_unread_and_the_lessons_after_them_applied(tmp_path, base_model,
                                                                                       redis_server):
    host = _host(tmp_path, base_model, redis_server.url)
    _learned(host, unique_message("before"))
    _wait_converged(redis_server, [host])
    before = _peak_rss_mib(host.proc.pid)
    r = redis_server.client()
    body = b"x" * (60 << 20)
    for _ in range(8):                                  # each 60 MiB (Redis takes up to 512 MB)
        r.xadd("spamnb:lessons", {"r": body})
    del body
    assert b"successfully" in _learned(host, unique_message("after"))   # applied here, after the 8
    _wait_converged(redis_server, [host])
    log = host.log_text()
    assert log.count("bytes, over the") == 8, log       # each one said, and skipped
    peak = _peak_rss_mib(host.proc.pid)
    # today: each entry read whole, 64 at a time (peak 40 -> 470 MB)
    assert peak - before < 60, (before, peak)


@needs_redis
@needs_spamc
@pytest.mark.parametrize("garbage", ["string", "list"])
@pytest.mark.slow   # several seconds: the default run stays near three minutes
def test_garbage_in_the_trimmed_key_is_logged_once_and_the_host_goes_on(tmp_path, base_model, redis_server,
                                                                         garbage):
    host = _host(tmp_path, base_model, redis_server.url)
    r = redis_server.client()
    if garbage == "string":
        r.set("spamnb:trimmed", b"not-an-id\xff" * 100)
    else:
        r.rpush("spamnb:trimmed", b"x")
    for i in range(3):       # today: the follower stops (a ValueError a second) and TELL says "learned"
        assert b"successfully" in _learned(host, unique_message(f"garbage{garbage}{i}"))
    _wait_converged(redis_server, [host])
    _wait_log(host, "spamnb:trimmed holds")
    assert "not applied here within" not in host.log_text()
    time.sleep(2.5)          # a follower that failed every second would have said so again by now
    log = host.log_text()
    assert log.count("spamnb:trimmed holds") == 1, log
    assert "ValueError" not in log and "ResponseError" not in log, log
