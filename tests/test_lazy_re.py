"""spamnb.mail.lazy_re: a pattern compiled from the build's table (``_sre_codes``,
written by ``sre_table``; ``_sre.compile`` without the ``re`` package) is the one ``re.compile`` makes,
every pattern of the package is in the table, and without a table, or with one
made for another interpreter, a pattern falls back to ``re.compile``."""

import importlib
import re
import sys
import types

import _sre
import pytest

from conftest import REPO, require_sre_codes
from spamnb.mail import lazy_re, sre_table

# every module holding a lazy_re.pattern (_mail: _headers.pxi's and _text.pxi's)
MODULES = ("spamnb.mail.tokenizer", "spamnb.mail.headers", "spamnb.mail.mbox", "spamnb.mail.parser",
           "spamnb.mail._mail", "spamnb.mail.checked", "spamnb.mail.reader", "spamnb.settings")


def _instances():
    found = {}
    for name in MODULES:
        for attr, value in vars(importlib.import_module(name)).items():
            if isinstance(value, lazy_re.pattern):
                found[f"{name}.{attr}"] = value
    return found


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """The table the build writes, made from this tree's sources."""
    path = tmp_path_factory.mktemp("codes") / "_sre_codes.py"
    sre_table.write_codes(REPO / "spamnb", path, lazy_re.built_for())
    module = types.ModuleType("_sre_codes")
    exec(compile(path.read_text(encoding="ascii"), str(path), "exec"), vars(module))
    return module


def test_every_pattern_of_the_package_is_in_the_table(table):
    instances = _instances()
    assert len(instances) >= 22, sorted(instances)
    codes = lazy_re.codes_of(table)
    missing = [name for name, p in instances.items() if ((p._args + (0,))[:2]) not in codes]
    assert not missing, missing
    # the source scan finds each pattern once per definition (a multi-line call: settings' _SIMPLE_LINE)
    assert len(codes) == len({(p._args + (0,))[:2] for p in instances.values()})


def test_each_entry_is_the_pattern_re_compiles(table):
    for (source, flags), (all_flags, program, groups, groupindex, indexgroup) in table.CODES.items():
        made = _sre.compile(source, all_flags, list(program), groups, dict(groupindex), indexgroup)
        expected = re.compile(source, flags)
        # Pattern.__eq__ compares the pattern, the flags and the compiled code
        assert made == expected and made.groupindex == expected.groupindex and made.groups == expected.groups


def test_the_tree_s_table_is_the_build_s(table):
    """The table the build wrote into this tree (setup.py build_ext --inplace, an
    editable install) is current: a pattern changed without a build falls back."""
    _sre_codes = require_sre_codes()
    assert _sre_codes.BUILT_FOR == table.BUILT_FOR == lazy_re.built_for()
    assert _sre_codes.CODES == table.CODES


def test_a_pattern_from_the_table_matches_as_re_s(table, monkeypatch):
    monkeypatch.setattr(lazy_re, "_codes", lazy_re.codes_of(table))
    domain = lazy_re.pattern(r"(?://|^|@)(?:[\w-]+\.)*([a-z0-9-]+\.[a-z]{2,})\b", lazy_re.M | lazy_re.A)
    text = "see http://www.example.com/x and mail@a.b.org\nfoo.net"
    assert domain.compiled() is not re.compile(domain._args[0], domain._args[1])
    assert domain.findall(text) == re.compile(*domain._args).findall(text) == ["example.com", "b.org", "foo.net"]


def test_without_a_table_or_with_another_interpreter_s_a_pattern_is_re_s(table, monkeypatch):
    stale = types.SimpleNamespace(BUILT_FOR=(0,) + lazy_re.built_for()[1:], CODES=table.CODES)
    assert lazy_re.codes_of(stale) == {}
    for codes in ({}, lazy_re.codes_of(stale)):
        monkeypatch.setattr(lazy_re, "_codes", codes)
        p = lazy_re.pattern(r"[a-z]+", lazy_re.A)
        assert p.compiled() is re.compile(r"[a-z]+", re.A)   # re's own cache: it came from re.compile
        assert p.sub("a", "Hello, World") == "Ha, Wa"
    monkeypatch.setattr(lazy_re, "_codes", None)   # no module at all: the import fails, re.compile
    monkeypatch.setitem(sys.modules, "spamnb.mail._sre_codes", None)
    monkeypatch.delattr(sys.modules["spamnb.mail"], "_sre_codes", raising=False)
    assert lazy_re._table() == {}


def test_the_source_scan_reads_literals_and_flags_only():
    text = '''x = lazy_re.pattern(r"a)b", lazy_re.A | lazy_re.S)
y = lazy_re.pattern(
    rb"(c"
    rb")d")
z = lazy_re.pattern(name)   # not a literal: left to re.compile
"lazy_re.pattern(...)"
'''
    assert sre_table.patterns_in(text) == [("a)b", 272), (b"(c)d", 0)]
