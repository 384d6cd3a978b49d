"""``spamnb train`` ends, once it succeeded, without the interpreter's
teardown (``spamnb.cli.main.ENDS_AT_ONCE``): its output and model complete,
the exit handlers run; a failed train ends as every command does."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import spamnb
from spamnb import SpamFilter

from conftest import REPO

PYTHONPATH = str(Path(spamnb.__file__).resolve().parents[1])

# an object freed only by the teardown (it says so), and an exit handler (it says so), around the command line
SCRIPT = """
import atexit, os, sys
class Mark:
    def __del__(self, write=os.write):
        write(2, b"teardown\\n")
mark = Mark()
atexit.register(lambda: os.write(1, b"exit handler\\n"))
from spamnb.cli.main import entry
sys.exit(entry())
"""


def _train(tmp_path, *args):
    env = dict(os.environ, SPAMNB_HOME=str(tmp_path), PYTHONPATH=PYTHONPATH)
    env.pop("SPAMNB_DEBUG", None)
    return subprocess.run([sys.executable, "-c", SCRIPT, "train", *map(str, args)], env=env,
                          capture_output=True, timeout=300, text=True)


@pytest.mark.parametrize("jobs", [1, 2])
def test_train_ends_without_teardown(tmp_path, jobs):
    model = tmp_path / "model.spamnb"
    proc = _train(tmp_path, "-j", jobs, "--partition-size", 50, "-m", model, REPO / "corpora")   # -j 2: workers
    assert proc.returncode == 0, proc.stderr
    assert "teardown" not in proc.stderr
    assert proc.stdout.endswith("exit handler\n")   # the command's output whole, then the handlers' own
    assert "trained on 300 messages" in proc.stdout and f"model: {model}" in proc.stdout
    assert sum(SpamFilter.load(model).class_count_) == 300


def test_failed_train_ends_as_usual(tmp_path):
    proc = _train(tmp_path, "-m", tmp_path / "model.spamnb", tmp_path / "no-such-folder")
    assert proc.returncode == 3
    assert "teardown" in proc.stderr and "exit handler" in proc.stdout
    assert not (tmp_path / "model.spamnb").exists()
