"""The defaults the documentation states are the program's: each stated
value is parsed out of the page and compared with the code's, so a changed
default fails here until the page says it (issue 26, item 4)."""

import math
import re

import pytest

import spamnb
from conftest import REPO, run_spamnb
from spamnb.estimator import defaults
from spamnb.settings import SERVER_DEFAULTS
from spamnb.report.scale import ScoreMap
from spamnb.estimator.verdict import Cutoffs

SERVE_MD = (REPO / "docs" / "serve.md").read_text()
CLI_MD = (REPO / "docs" / "cli.md").read_text()
README = (REPO / "README.md").read_text()


def _logit(p):
    return math.log(p / (1.0 - p))


def _blocks(text, language):
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


@pytest.mark.parametrize("text", [SERVE_MD, (REPO / "spamnb" / "report" / "scale.py").read_text()],
                         ids=["docs/serve.md", "scale.py"])
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
    from spamnb.persistence.store import DEFAULT_WAIT
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


# ---------------------------------------------------------------------------- reader pages, not history
DOCS = REPO / "docs"
_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.?"
HISTORY = {
    # "29 Nov 2026", "November 29, 2026", "2026-11-29" (not a date inside a file name: "0006.2003-12-18.GP")
    "a date": re.compile(rf"\b\d{{1,2}} {_MONTH} (?:19|20)\d\d\b|\b{_MONTH} \d{{1,2}},? (?:19|20)\d\d\b"
                         r"|(?<![\w./])(?!1970-01-01)(?:19|20)\d\d-[01]\d-[0-3]\d\b"),
    "an issue number": re.compile(r"\b[Ii]ssues? #?\d+|(?<![\w&/])#\d+\b|\bPR #?\d+"),
    "a round of work": re.compile(r"\b[Rr]ound (?:one|two|three|four|five|six|seven|eight|nine|ten|\d+)\b"),
    # a short commit hash: 7 to 12 hex digits with a digit and a letter in them, as a word of its own
    "a commit hash": re.compile(r"(?<![\w./:-])(?=[0-9a-f]{0,11}[a-f])(?=[0-9a-f]{0,11}[0-9])[0-9a-f]{7,12}(?![\w-])"),
}


def _reader_pages():
    """docs/*.md: the pages a reader comes to (docs/notes/ holds dated runs and history)."""
    return sorted(DOCS.glob("*.md"))


def _prose(text):
    """The page's lines with their numbers, fenced code blocks left out (an example's output may hold a date)."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


@pytest.mark.parametrize("page", [p.name for p in _reader_pages()] + ["../README.md"])
def test_reader_pages_carry_no_dates_issue_numbers_rounds_or_commits(page):
    """A reader page states the current figure, its command and what it
    means; when it was measured, on which commit, in which round of work or
    for which issue belongs in docs/notes/ (or the tracker)."""
    found = [f"{page}:{number}: {kind} ({match.group(0)!r})"
             for number, line in _prose((DOCS / page).read_text())
             for kind, pattern in HISTORY.items() for match in pattern.finditer(line)]
    assert not found, "\n".join(found[:20])


def test_the_history_patterns_find_history():
    text = ("measured on 29 Nov 2026; run of 2026-11-29 07:01 UTC; since issue 45; (#52); in round three; "
            "main as of 02ac66f; November 29, 2026")
    kinds = {kind for kind, pattern in HISTORY.items() if pattern.search(text)}
    assert kinds == set(HISTORY)
    for quiet in ("0006.2003-12-18.GP.spam.txt", "log-odds 4.5", "RFC 2822", "a 1234567 byte file",
                  "round to 0.1", "0x1f2e3d4c", "issue a TELL", "deadbeefcafe1234"):
        assert not any(pattern.search(quiet) for pattern in HISTORY.values()), quiet


def test_reference_pages_are_most_of_the_docs():
    """Reference and how-to (docs/*.md) are at least 60 % of the lines of
    docs/ (docs/notes/ the rest)."""
    reference = sum(len(p.read_text().splitlines()) for p in _reader_pages())
    notes = sum(len(p.read_text().splitlines()) for p in (DOCS / "notes").rglob("*.md"))
    assert reference / (reference + notes) >= 0.60, (reference, notes)


@pytest.mark.parametrize("page", [p.name for p in _reader_pages()])
def test_each_page_opens_with_a_paragraph(page):
    """A title, then a paragraph of prose (what a reader comes for), before any heading, table or list."""
    lines = [line for line in (DOCS / page).read_text().splitlines() if line.strip()]
    assert lines[0].startswith("# "), lines[0]
    assert not lines[1].startswith(("#", "|", "- ", "* ", "```", "    ")), lines[1]
