"""Every figure of the README's headline speed rows has a source (issue 54).

A speed row of the README's table (its unit s, ms or messages/s) has a
source row in docs/notes/readme-sources.md (written by bench_readme.py), with the
same first cell, whose figures cell holds every number of the README row,
whose command cell names the script that measured it and whose date cell
says when: a README figure changed by hand, or re-measured without its
source row, fails here.  (The accuracy rows are measured by other scripts
and sourced in the table above that one; they are not checked here.)
"""

import re

from conftest import REPO

README = (REPO / "README.md").read_text()
BENCHMARKS = (REPO / "docs" / "notes" / "readme-sources.md").read_text()
BEGIN = "<!-- scripts/bench/bench_readme.py: source rows begin -->"
END = "<!-- scripts/bench/bench_readme.py: source rows end -->"
HEADLINE = "| SpamAssassin / Enron-Spam |"
SPEED = re.compile(r", (?:s|ms)\b|messages/s")
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")


def cells(line):
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def headline_rows(readme):
    """{first cell: [the other cells]} of the README's headline table's speed rows."""
    lines = readme.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(HEADLINE))
    rows = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        label, *rest = cells(line)
        if SPEED.search(label):
            rows[label] = rest
    return rows


def source_rows(benchmarks):
    """{README row: (figures, command, date)} of the source table (docs/notes/readme-sources.md)."""
    rows = {}
    if BEGIN not in benchmarks or END not in benchmarks:
        return rows
    begin, end = benchmarks.index(BEGIN), benchmarks.index(END)
    for line in benchmarks[begin + len(BEGIN):end].splitlines():
        if line.startswith("|"):
            label, figures, command, date = cells(line)
            rows[label] = (figures, command, date)
    return rows


def numbers(text):
    """The numbers of a cell, code spans left out (`spamc -d 127.0.0.1` is no figure), 1,058 read as 1058."""
    return [n.replace(",", "") for n in NUMBER.findall(re.sub(r"`[^`]*`", "", text))]


def problems(readme, benchmarks):
    found = []
    sources = source_rows(benchmarks)
    for label, rest in headline_rows(readme).items():
        if label not in sources:
            found.append(f"{label}: no source row in docs/notes/readme-sources.md")
            continue
        figures, command, date = sources[label]
        stated = set(numbers(figures))
        missing = [n for cell in rest for n in numbers(cell) if n not in stated]
        if missing:
            found.append(f"{label}: {', '.join(missing)} not in its source row's figures")
        if not re.search(r"scripts/bench/\w+\.py", command):
            found.append(f"{label}: its source row names no scripts/bench command: {command!r}")
        if not DATE.search(date):
            found.append(f"{label}: its source row has no date: {date!r}")
    return found


def test_the_headline_table_has_speed_rows():
    labels = list(headline_rows(README))
    assert any("spamnb train" in label for label in labels), labels
    assert any("messages/s" in label for label in labels), labels


def test_every_readme_speed_figure_has_a_source_row_with_command_and_date():
    assert problems(README, BENCHMARKS) == []


def test_a_figure_changed_without_its_source_row_fails():
    label, rest = next(iter(headline_rows(README).items()))
    figure = next(n for cell in rest for n in NUMBER.findall(re.sub(r"`[^`]*`", "", cell)))
    line = next(line for line in README.splitlines() if line.startswith(f"| {label} |"))
    prefix = f"| {label} |"
    changed = prefix + line[len(prefix):].replace(figure, figure + "1", 1)
    assert changed != line
    found = problems(README.replace(line, changed), BENCHMARKS)
    assert found and label in found[0]


def test_a_row_without_source_or_date_or_command_fails():
    sources = source_rows(BENCHMARKS)
    label = next(iter(headline_rows(README)))
    line = next(line for line in BENCHMARKS.splitlines() if line.startswith(f"| {label} |"))
    figures, command, date = sources[label]
    assert problems(README, BENCHMARKS.replace(line, "")) == [f"{label}: no source row in docs/notes/readme-sources.md"]
    no_date = line.replace(date, "re-measured later")
    assert any("no date" in p for p in problems(README, BENCHMARKS.replace(line, no_date)))
    no_command = line.replace(command, "`by hand`")
    assert any("no scripts/bench command" in p for p in problems(README, BENCHMARKS.replace(line, no_command)))
