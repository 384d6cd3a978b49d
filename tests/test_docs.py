"""The defaults the documentation states are the program's: each stated
value is parsed out of the page and compared with the code's, so a changed
default fails here until the page says it (issue 26, item 4)."""

import math
import re

import pytest

import spamnb
from conftest import REPO, run_spamnb
from spamnb.model import defaults
from spamnb.settings import SERVER_DEFAULTS
from spamnb.server.protocol import ScoreMap
from spamnb.model.verdict import Cutoffs

SERVE_MD = (REPO / "docs" / "serve.md").read_text()
CLI_MD = (REPO / "docs" / "cli.md").read_text()
README = (REPO / "README.md").read_text()


def _logit(p):
    return math.log(p / (1.0 - p))


def _blocks(text, language):
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


@pytest.mark.parametrize("text", [SERVE_MD, (REPO / "spamnb" / "server" / "protocol.py").read_text()],
                         ids=["docs/serve.md", "protocol.py"])
def test_score_mapping_states_the_cutoffs_and_points_of_the_code(text):
    text = " ".join(text.split())
    stated = re.findall(r"built-in defaults \(L_ham = (-?[\d.]+), L_spam = (-?[\d.]+)\)"
                        r"(?: and R = ([\d.]+), one (?:score )?point is ([\d.]+) units of log-odds)?", text)
    assert stated, "the page no longer states the default cutoffs as 'built-in defaults (L_ham = .., L_spam = ..)'"
    assert "(defaults 0 and 14)" not in text and "2.8 units" not in text
    for ham, spam, required, per_point in stated:
        assert float(ham) == defaults.DEFAULT_HAM_LOG_ODDS
        assert float(spam) == round(_logit(defaults.DEFAULT_SPAM_CUTOFF))
        if required:
            assert float(required) == SERVER_DEFAULTS["required_score"]
            score_map = ScoreMap.from_cutoffs(Cutoffs(defaults.DEFAULT_SPAM_CUTOFF, defaults.DEFAULT_HAM_CUTOFF),
                                              float(required))
            assert float(per_point) == round(1.0 / score_map.scale_, 1)
    assert any(required for _, _, required, _ in stated)


def test_serve_limits_are_the_servers_defaults():
    text = " ".join(SERVE_MD.split())
    d = SERVER_DEFAULTS
    assert f"`--max-size` ({d['max_size'] // 2**20} MiB)" in text
    assert f"`--max-connections` ({d['max_connections']})" in text
    assert f"`--timeout` ({d['timeout']:g} s)" in text
    assert f"`--max-models` ({d['max_models']})" in text
    assert f"`--socket-mode`, default {d['socket_mode']}" in text
    assert f"The default is `{d['listen'][0]}`" in text
    assert f"`--required-score` (default {d['required_score']:.1f})" in text
    assert f"X-Spam-Checker-Version: spamnb {spamnb.__version__}" in text


@pytest.mark.parametrize("text", [CLI_MD, (REPO / "spamnb" / "settings.py").read_text()],
                         ids=["docs/cli.md", "settings.py"])
def test_settings_example_states_the_built_in_defaults(text):
    from spamnb.settings import DEFAULT_HEADER_NAME

    found = dict(re.findall(r"^\s*(spam_cutoff|ham_cutoff|header_name) = \"?([^\"\s#]+)\"?", text, re.M))
    assert set(found) == {"spam_cutoff", "ham_cutoff", "header_name"}
    assert float(found["spam_cutoff"]) == defaults.DEFAULT_SPAM_CUTOFF
    assert float(found["ham_cutoff"]) == defaults.DEFAULT_HAM_CUTOFF
    assert found["header_name"] == DEFAULT_HEADER_NAME


def test_cli_reference_defaults():
    from spamnb.model.store import DEFAULT_WAIT
    from spamnb.training.planning import DEFAULT_PARTITION_SIZE

    text = " ".join(CLI_MD.split())
    assert f"at most `--wait` seconds (default {DEFAULT_WAIT:g})" in text
    assert f"partitions of `--partition-size` messages (default {DEFAULT_PARTITION_SIZE})" in text


def test_help_states_the_codes_cutoffs(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")   # one line per option
    out = run_spamnb(["classify", "--help"], tmp_path, text=True).stdout
    assert repr(defaults.DEFAULT_SPAM_CUTOFF) in out and repr(defaults.DEFAULT_HAM_CUTOFF) in out
    assert "0.5 as trained" not in out
    serve = run_spamnb(["serve", "--help"], tmp_path, text=True).stdout
    for key in ("max_connections", "max_models", "socket_mode"):
        assert f"(default {SERVER_DEFAULTS[key]})" in serve


def test_procmail_recipes_deliver_to_the_same_folders():
    def folders(text):
        return [re.findall(r"^\* \^X-Spam(?:nb)?-Status: (\w+)\n(\S+)$", block, re.M)
                for block in _blocks(text, "procmail")]

    readme, serve = folders(README), folders(SERVE_MD)
    assert readme and serve
    assert readme[0] == serve[0] == [("Yes", ".Spam/"), ("Unsure", ".Unsure/")]
