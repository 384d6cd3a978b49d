"""The cold path of a mail filter's commands (issue 35): what ``spamnb
classify``, ``classify -p``, ``learn`` and ``forget`` of one message on stdin
import, run as installed (bin/spamnb, the launcher; measured as ``python -X
importtime`` measures it), and the fast reading of their command lines,
which must give what the parser gives."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, require_sre_codes

MESSAGE = sorted((REPO / "corpora" / "spam").iterdir())[0]

# Every spamnb module the cold path of one message imports.  A change that
# adds one to the path fails here: add it only when the command uses it.
COMMON = {
    # the compiled hash index and the model file's checks are built into _score; _count (training's and
    # learning's counting) is not on the path
    "spamnb", "spamnb.errors", "spamnb.bayes", "spamnb.bayes.checks",
    "spamnb.bayes._score", "spamnb.bayes.token_kernels", "spamnb.bayes.vocabulary",
    "spamnb.bayes.wordcounts",
    "spamnb.cli", "spamnb.cli.common", "spamnb.cli.exitcodes", "spamnb.cli.main", "spamnb.settings",
    "spamnb.options",   # the option table (its package; not spamnb.options.commands): the fast reading, the settings keys
    "spamnb.mail", "spamnb.mail._mail",   # the parser and the tokenizer's compiled code: one module
    "spamnb.mail.charsets", "spamnb.mail.lazy_re", "spamnb.mail.parser",
    "spamnb.mail._sre_codes",   # the build's compiled patterns, for a message that needs one (lazy_re): not re
    "spamnb.mail.records", "spamnb.mail.tokenizer",
    # one message's checked read (stdin's) and a name as output shows it; not the reader of folders and
    # mboxes (spamnb.mail.reader), nor the mbox cutter it imports for a file or -M
    "spamnb.mail.checked",
    "spamnb.model", "spamnb.estimator", "spamnb.persistence", "spamnb.estimator.ages", "spamnb.persistence.codec", "spamnb.estimator.defaults",
    "spamnb.persistence.attaching",   # the filter given its journal (none), counts in place: not the journal's records (deltas)
    "spamnb.estimator.guard",
    "spamnb.persistence.schema", "spamnb.estimator.scoring",
    "spamnb.model.spam_filter", "spamnb.persistence.store", "spamnb.estimator.verdict",
}
EXPECTED = {
    "classify": COMMON | {"spamnb.cli.classify", "spamnb.report", "spamnb.report.lines"},
    "classify -p": COMMON | {"spamnb.cli.classify", "spamnb.cli.passthrough", "spamnb.report", "spamnb.report.lines",
                             "spamnb.mail.status", "spamnb.mail.headers"},
    # a learn records the message's score before it was learned (the model's own cutoffs: prequential),
    # through the model file's and the journal's entries of its tokens (journal_view: the model is not read whole);
    # stderr not a terminal: no progress line, nor cli.progress imported; the message's bytes tokenized as they
    # are (no estimator.messages)
    # learn and forget: the one message on stdin and looks_like_mail from mail.checked, not the reader of folders
    # and mboxes (spamnb.mail.reader: 1.2 million instructions to import)
    # what a learn writes and its append (persistence.records), not the replay's module (deltas), nor the journal's
    # other writers (persistence.journal: a whole save's, a follower's read)
    "learn --spam": COMMON | {"spamnb.cli.learn", "spamnb.persistence.records", "spamnb.mail.status", "spamnb.mail.headers", "spamnb.estimator.labels",
                              "spamnb.model.learning", "spamnb.estimator.prequential", "spamnb.persistence.journal_view",
                              "spamnb.estimator.ledger",
                              "spamnb.bayes.arithmetic"},   # the journal view's norms and prior: no numpy (not a classify's)
    "forget --spam": COMMON | {"spamnb.cli.learn", "spamnb.persistence.deltas", "spamnb.persistence.records", "spamnb.mail.reader",   # estimator.messages' (a message's bytes)
                        "spamnb.estimator.messages", "spamnb.mail.status", "spamnb.mail.headers", "spamnb.estimator.labels",
                        "spamnb.model.learning", "spamnb.bayes._holes", "spamnb.bayes._count",   # the holes a forget leaves, its counts
                        "spamnb.estimator.ledger", "spamnb.persistence.journal",
                        "spamnb.model.whole_learning",   # the model read whole: its recorders (a learn has none of it)
                        "spamnb.bayes.priors",   # and saved whole: a forget is folded in at once (issue 51)
                        "spamnb.persistence.saving",   # by the model file's writer (codec is its reader)
                        "spamnb.bayes.arithmetic",   # the logs derived afresh
                        "spamnb.estimator.ledger_table"},   # and the ledger's table (a learn looks the file's up in place)
}
# A forget's commit is a whole save (the journal folded in, so that the classifies after it view the journal's
# learns, never replay a forget: issue 51): the numeric stack and json are on its path, as on a learn's that folds.
WHOLE_SAVE = {"forget --spam"}
# A classify never reads the ledger of learned messages (a mapped load makes it when first read): the model of
# these tests has one (train records every message it was trained on), and its module is not loaded; nor the
# journal's, for a model without a journal (the load looks for the file first).
assert not {"spamnb.estimator.ledger", "spamnb.persistence.journal", "spamnb.persistence.journal_view"} & (
    EXPECTED["classify"] | EXPECTED["classify -p"])
# Never on the cold path: the numeric stack, the training and server layers,
# the parser (argparse builds every option of a command to answer one),
# the email package, a TOML reader when there is no settings file, json
# (the model's header is read by json's compiled scanner alone), signal (its
# enums: the launcher's SIGINT handlers are set through _signal), runpy.
FORBIDDEN = ("numpy", "scipy", "argparse", "email", "tomllib", "spamnb.training", "spamnb.evaluation",
             "spamnb.server", "spamnb.bayes.multinomial", "spamnb.bayes.kernels", "spamnb.estimator.fitting",
             "spamnb.estimator.counting", "json", "signal", "runpy",
             # the model's lock and the ledger's digest are compiled into _score: no shared object of their own
             "fcntl", "_blake2", "hashlib",
             # the build's writer of _sre_codes (setup.py loads it by its path): not lazy_re's code at run time
             "spamnb.mail.sre_table", "ast")


@pytest.fixture(scope="module")
def model(tmp_path_factory, sample_model):
    home = tmp_path_factory.mktemp("cold")
    path = home / "model.spamnb"
    shutil.copyfile(sample_model, path)     # the model file of `spamnb train` of the sample, at any -j
    return path


def _env(home):
    env = dict(os.environ, SPAMNB_HOME=str(home))
    env.pop("SPAMNB_DEBUG", None)
    return env


@pytest.fixture(scope="module")
def launcher(tmp_path_factory):
    """bin/spamnb as installed in a venv without the system's packages:
    beside its ``python3`` (a link to this interpreter, as venv makes it),
    numpy in the venv's own site-packages (links to this interpreter's)."""
    return _venv(tmp_path_factory, system=False)


@pytest.fixture(scope="module")
def launcher_system(tmp_path_factory):
    """The same in a venv made with ``--system-site-packages`` (numpy may
    be the system's: site must run before anything)."""
    return _venv(tmp_path_factory, system=True)


def _venv(tmp_path_factory, system):
    import numpy

    root = tmp_path_factory.mktemp("venv")
    (root / "pyvenv.cfg").write_text(f"home = {Path(sys.executable).resolve().parent}\n"
                                     f"include-system-site-packages = {str(system).lower()}\n")
    (root / "bin").mkdir()
    shutil.copy2(REPO / "bin" / "spamnb", root / "bin" / "spamnb")
    (root / "bin" / "python3").symlink_to(Path(sys.executable).resolve())
    packages = root / "lib" / ("python%d.%d" % sys.version_info[:2]) / "site-packages"
    packages.mkdir(parents=True)
    if not system:
        base = Path(numpy.__file__).resolve().parent.parent
        for name in ("numpy", "numpy.libs", "scipy", "scipy.libs"):
            if (base / name).exists():
                (packages / name).symlink_to(base / name)
    return root / "bin" / "spamnb"


def _imports(args, model, tmp_path, launcher):
    path = tmp_path / "model.spamnb"
    shutil.copyfile(model, path)
    message = Path(MESSAGE)
    if args.startswith("learn"):   # a line of its own: a learn that learns (the model knows MESSAGE)
        message = tmp_path / "message.eml"
        message.write_bytes(Path(MESSAGE).read_bytes().rstrip(b"\n") + b"\n\nnot learned before\n")
    with open(message, "rb") as stdin:
        argv = [str(message) if arg == "FILE" else arg for arg in args.split() if arg != "--"]
        proc = subprocess.run([launcher, *argv, "-m", path], stdin=stdin, capture_output=True,
                              env=dict(_env(tmp_path), PYTHONPROFILEIMPORTTIME="1",
                                       PYTHONPATH=str(REPO)), cwd=tmp_path, timeout=60)
    lines = proc.stderr.decode().splitlines()
    errors = [line for line in lines if not line.startswith("import time:")]
    modules = {line.split("|")[-1].strip() for line in lines if line.startswith("import time:")}
    return proc, errors, modules - {"imported package"}


@pytest.mark.parametrize("args", sorted(EXPECTED))
def test_the_cold_path_imports_only_what_it_uses(args, model, tmp_path, launcher):
    proc, errors, modules = _imports(args, model, tmp_path, launcher)
    assert proc.returncode == 0 and not errors, errors   # a spam: classify's exit 0; learn, forget: done
    ours = {name for name in modules if name.split(".")[0] == "spamnb"}
    assert ours <= EXPECTED[args], sorted(ours - EXPECTED[args])
    forbidden = sorted(name for name in modules if name.startswith(FORBIDDEN) and (
        name in FORBIDDEN or name.startswith(tuple(f + "." for f in FORBIDDEN))))
    assert args in WHOLE_SAVE or not forbidden, forbidden
    if args.startswith(("classify", "learn")):   # the lock is a class; other context managers are contextlib's,
        #                                             made when first called
        names = [line.split("|")[-1].strip() for line in proc.stderr.decode().splitlines()
                 if line.startswith("import time:")]
        after_site = names[names.index("spamnb"):]   # site's .pth files may import them themselves
        assert not {"contextlib", "importlib", "spamnb.estimator.calibrate"} & set(after_site)
        # functools: re's own (a message that needs a regular expression; the launcher runs no site, whose .pth
        # files may have imported both before)
        assert "functools" not in after_site or "re" in after_site


FAST_FORMS = [
    ["classify"], ["classify", "-"], ["classify", "-p"], ["classify", "--passthrough", "-"], ["classify", "-M"],
    ["-m", "m.spamnb", "classify"], ["classify", "-m", "m.spamnb", "--settings", "s.toml"],
    ["--settings", "s.toml", "classify", "-p", "-m", "m"], ["classify", "msg.eml"],
    ["learn", "--spam"], ["learn", "--ham", "-q", "-"], ["learn", "-M", "--spam", "a", "b"],
    ["-m", "m", "learn", "--spam", "-m", "n"], ["forget"], ["forget", "--ham", "-M"], ["forget", "-q", "a.eml"],
]
SLOW_FORMS = [
    ["classify", "a", "b"], ["classify", "--json"], ["classify", "-h"], ["classify", "--model=m"],
    ["learn"], ["learn", "--spam", "--ham"], ["learn", "--spam", "--wait", "5"], ["classify", "-m"],
    ["train", "x"], ["info"], ["classify", "-pv"], ["--version"],
]


@pytest.mark.parametrize("argv", FAST_FORMS, ids=" ".join)
def test_the_fast_reading_gives_what_the_parser_gives(argv):
    from spamnb.cli import main

    fast = vars(main.fast_args(argv))
    parsed = vars(main.build_parser(main._command_of(argv)).parse_args(argv))
    # --batch's own options are left out of the fast reading (a batch is never read there)
    assert set(parsed) - set(fast) <= {"jobs", "partition_size"}, set(parsed) ^ set(fast)
    assert fast == {key: parsed[key] for key in fast}


@pytest.mark.parametrize("argv", SLOW_FORMS, ids=" ".join)
def test_other_forms_go_to_the_parser(argv):
    from spamnb.cli import main

    assert main.fast_args(argv) is None


# A message with a Message-ID and no URL, HTML, encoded word or damaged base64:
# its classify compiles no regular expression, so neither re nor enum (its
# flags) is imported (the patterns of spamnb.mail.lazy_re; a Message-ID's
# domain is found without re: tokenizer.message_id_domain).
PLAIN = REPO / "corpora" / "easy_ham" / "01412.c6d74476958fabc3a2a7572079a6ce8c"


ENTRY = "import sys; from spamnb.cli.main import entry; sys.exit(entry())"


def _bare_run(model, tmp_path, args, stdin, code=ENTRY):
    """``spamnb ARGS -m`` a copy of ``model``, run with -S (no site, whose .pth
    files may import re, warnings or collections themselves; spamnb from the
    checkout), ``stdin`` bytes on its stdin: the process and the modules it imported."""
    path = tmp_path / "model.spamnb"
    if not path.exists():
        shutil.copyfile(model, path)
    proc = subprocess.run([sys.executable, "-S", "-c", code, *args, "-m", path], input=stdin, capture_output=True,
                          env=dict(_env(tmp_path), PYTHONPROFILEIMPORTTIME="1", PYTHONPATH=str(REPO)),
                          cwd=tmp_path, timeout=60)
    lines = proc.stderr.decode().splitlines()
    return proc, {line.split("|")[-1].strip() for line in lines if line.startswith("import time:")}


def test_plain_mail_is_classified_without_re(model, tmp_path):
    assert b"\nMessage-Id: <" in PLAIN.read_bytes()
    proc, modules = _bare_run(model, tmp_path, ["classify"], PLAIN.read_bytes())
    assert proc.returncode in (0, 1, 2) and "spamnb.mail.tokenizer" in modules, proc.stderr[-300:]
    assert not {"re", "enum"} & modules
    # nor types (the fast reading's namespace is sys.implementation's type)
    assert "types" not in modules
    # nor the codec of the tokenizer's fallback charset (cp1252, the default: not looked up to be checked at load)
    assert "encodings.cp1252" not in modules


def test_a_passthrough_classify_loads_no_re(model, tmp_path):
    """``classify -p`` (procmail's pipe): the header found and edited with
    bytes methods and the parser's compiled run of fields (issue 51), its
    helpers plain tuples: no ``re``, ``enum`` or ``collections``, and the
    message out with the status header."""
    message = PLAIN.read_bytes()
    proc, modules = _bare_run(model, tmp_path, ["classify", "-p"], message)
    assert proc.returncode == 0 and "spamnb.mail.headers" in modules, proc.stderr[-300:]
    assert not {"re", "enum", "collections", "operator", "functools"} & modules, sorted(modules)
    assert b"\nX-Spamnb-Status: " in proc.stdout and proc.stdout.endswith(message.split(b"\n\n", 1)[1])


def test_a_warning_loads_warnings_and_is_one_line(model, tmp_path):
    """The one-line warning format is put in when a command first imports
    warnings (-S: no site, which imports it itself): a damaged journal's."""
    learned, _ = _bare_run(model, tmp_path, ["learn", "--spam", "-q"], PLAIN.read_bytes() + b"\nnot learned before\n")
    journal = tmp_path / "model.spamnb.journal"
    assert learned.returncode == 0 and journal.exists(), learned.stderr
    journal.write_bytes(journal.read_bytes()[:-3])
    proc, modules = _bare_run(model, tmp_path, ["classify"], PLAIN.read_bytes())
    lines = [line for line in proc.stderr.decode().splitlines() if not line.startswith("import time:")]
    assert proc.returncode in (0, 1, 2) and len(lines) == 1, lines   # not Python's warning with its source line
    assert lines[0].startswith("spamnb: warning: ") and "incomplete or damaged" in lines[0], lines
    assert "warnings" in modules


# The standard library's array (on every path: the token hashes, the counts)
# registers its type with collections.abc, whose import loads the collections
# package with operator, reprlib and keyword: spamnb/__init__.py loads array
# without it, and the path takes itemgetter from _operator.  Neither
# collections nor operator.py is loaded by a classify or a learn of a message
# that needs no regular expression, nor warnings (imported when a command
# warns: the one-line format put in then), nor __future__ (no module on the
# path has an annotation to postpone) (re loads functools, which loads
# collections; -S: no site, which loads collections itself).
@pytest.mark.parametrize("args", [["classify"], ["learn", "--spam", "-q"]], ids=" ".join)
def test_the_cold_path_loads_no_collections(args, model, tmp_path):
    code = ("import sys, _collections_abc; from spamnb.cli.main import entry; code = entry(); import array; "
            "sys.stdout.write(f'\\nregistered={issubclass(array.array, _collections_abc.MutableSequence)}'); "
            "sys.exit(code)")
    message = PLAIN.read_bytes().rstrip(b"\n") + b"\n\nnot learned before\n"
    proc, modules = _bare_run(model, tmp_path, args, message, code)
    assert proc.returncode in (0, 1, 2) and "array" in modules, proc.stderr[-300:]
    assert not {"collections", "collections.abc", "operator", "reprlib", "keyword", "warnings", "__future__"} & modules
    assert proc.stdout.decode().endswith("registered=True")   # array still a MutableSequence


# os.py imports _collections_abc (two dozen ABCs made and registered), posixpath and stat: a tenth of a
# cold classify's instructions, which site pays for `python -c pass` (bin/spamnb runs without it).  A
# classify calls the system through posix, the module os re-exports; array's registration as a
# MutableSequence waits for _collections_abc (spamnb.cli.main._UNREGISTERED).
# (A message that needs a regular expression loads re, and collections with it; classify -p does not.)
def test_a_cold_classify_loads_no_os(model, tmp_path):
    proc, modules = _bare_run(model, tmp_path, ["classify"], PLAIN.read_bytes())
    assert proc.returncode in (0, 1, 2) and "spamnb.model.spam_filter" in modules, proc.stderr[-300:]
    assert "array" in modules and "re" not in modules
    assert not {"os", "_collections_abc", "posixpath", "genericpath"} & modules
    # each standard shared object is an openat, mmaps and relocations (about 0.3 ms): the model file's
    # prefix is read with int.from_bytes, the journal's layouts made only for a journal; math's calls are _score's
    assert not {"_struct", "math"} & modules   # math's exp, log, isfinite: compiled into _score (token_kernels)
    assert "stat" not in modules   # a file's type tested with _stat's functions (stat.py's are the same): not stat.py


# Real mail (issue 51): HTML (the parser's patterns), URLs (the tokenizer's), an RFC 2047 encoded word in
# the header, a declared charset.  Its patterns are compiled from the build's table (lazy_re, _sre_codes)
# with _sre alone, and a charset name is checked against the codecs' folder listed with posix.listdir: no re
# (nor enum, functools, collections... with it), no os.
REAL_MAIL = [REPO / "corpora" / "spam_2" / "00088.34ca147ca21f4b3e966fe58bc054aaf6",   # HTML, links, a charset
             REPO / "corpora" / "spam" / "00311.9797029f3ee441b00f3b7521e573cb96"]     # an encoded word, URLs
NOT_FOR_MAIL = {"re", "enum", "functools", "collections", "operator", "os", "posixpath", "genericpath", "_collections_abc",
                "stat"}


@pytest.mark.parametrize("args", [["classify"], ["classify", "-p"], ["learn", "--spam", "-q"]], ids=" ".join)
@pytest.mark.parametrize("path", REAL_MAIL, ids=lambda path: path.name[:5])
def test_real_mail_is_classified_without_re_or_os(args, path, model, tmp_path):
    require_sre_codes()
    message = path.read_bytes() + (b"\nnot learned before\n" if args[0] == "learn" else b"")
    proc, modules = _bare_run(model, tmp_path, args, message)
    assert proc.returncode in (0, 1, 2) and "spamnb.mail._sre_codes" in modules, proc.stderr[-300:]
    assert not NOT_FOR_MAIL & modules, sorted(NOT_FOR_MAIL & modules)


def test_the_sample_corpus_is_tokenized_without_re_or_os():
    """Every message of corpora/ (300: HTML, URLs, encoded words, charsets,
    base64) tokenized in one process without site: no re or os imported
    (the tokenizer imported outside the cli loads collections itself).  Left
    out: an entity reference outside _html's table, decoded by html.unescape
    (the html package imports re; 41 messages of the 22,587 of both full
    corpora): html is a stand-in here."""
    require_sre_codes()
    code = ("import sys, posix\n"
            "class html: unescape = staticmethod(lambda entity: entity)\n"
            "sys.modules['html'] = html\n"
            "from spamnb.mail.tokenizer import Tokenizer; t = Tokenizer(); n = 0; before = set(sys.modules)\n"
            "for folder in sys.argv[1:]:\n"
            "    for name in sorted(posix.listdir(folder)):\n"
            "        with open(folder + '/' + name, 'rb') as f: n += len(t.tokens(f.read()))\n"
            f"print(n, *sorted((set(sys.modules) - before) & set({sorted(NOT_FOR_MAIL)!r})))")
    folders = sorted(str(p) for p in (REPO / "corpora").iterdir() if p.is_dir())
    proc = subprocess.run([sys.executable, "-S", "-c", code, *folders], capture_output=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(REPO)), cwd=REPO, text=True)
    assert proc.returncode == 0, proc.stderr[-500:]
    n, *loaded = proc.stdout.split()
    assert int(n) > 50_000 and not loaded, proc.stdout


# A learn calls the system through posix too: the lock, the journal's first write (a temporary file renamed
# into place, the folder fsynced) and an append to it (issue 48: a learn within 1.1x a classify).
def test_a_cold_learn_loads_no_os(model, tmp_path):
    journal = tmp_path / "model.spamnb.journal"
    # the journal's first write, then appends to it (the ham's refits the cutoffs: calibrate, and math with it)
    for k, label in enumerate(("--spam", "--ham", "--spam")):
        before = journal.stat().st_size if k else 0
        proc, modules = _bare_run(model, tmp_path, ["learn", label, "-q"],
                                  PLAIN.read_bytes() + f"\nnot learned before {k}\n".encode())
        assert proc.returncode == 0, proc.stderr[-300:]
        # the journal started, then appended to, by persistence.records: not persistence.journal (issue 48)
        assert "spamnb.persistence.journal" not in modules, k
        assert journal.stat().st_size > before
        assert not {"os", "posixpath", "genericpath"} & modules, (k, sorted(modules))
        # the records packed, the journal's head read, without _struct (a shared object: store.Layout)
        assert "_struct" not in modules, k
        # nor math unless the cutoffs are refitted (calibrate: the sample model refits on every append)
        assert "spamnb.estimator.calibrate" in modules or "math" not in modules, (k, sorted(modules))
        # _collections_abc only through the cutoffs refitted on the learns' held-out scores (calibrate's namedtuple)
        assert "spamnb.estimator.calibrate" in modules or "_collections_abc" not in modules, (k, sorted(modules))
        # the records written (persistence.records), none replayed: not the replay's module (issue 48)
        assert "spamnb.persistence.records" in modules and "spamnb.persistence.deltas" not in modules, k
        # nor the view's other half (the replay, the learns as objects, a token's text: persistence.journal_replay)
        assert "spamnb.persistence.journal_replay" not in modules, k
    assert "spamnb.persistence.journal_view" in modules   # the append: the journal of the first learn read


# A classify through a journal of learns scores them through the view (persistence.journal_view) without its other
# half (persistence.journal_replay: the replay, the learns as objects); the evidence's names (--verbose) load it
# (the journal's tokens numbered), the verdict the same
def test_a_classify_through_a_journal_loads_the_view_not_its_replay(model, tmp_path):
    for k in range(2):   # two learns: a journal with records, one token the journal alone holds
        proc, _modules = _bare_run(model, tmp_path, ["learn", "--spam", "-q"],
                                   PLAIN.read_bytes() + f"\nzqxjournalword{k} learned\n".encode())
        assert proc.returncode == 0, proc.stderr[-300:]
    message = PLAIN.read_bytes() + b"\nzqxjournalword0\n"
    proc, modules = _bare_run(model, tmp_path, ["classify"], message)
    assert proc.returncode in (0, 1, 2), proc.stderr[-300:]
    assert "spamnb.persistence.journal_view" in modules and "spamnb.persistence.journal_replay" not in modules
    verbose, modules = _bare_run(model, tmp_path, ["classify", "--verbose"], message)
    assert verbose.returncode == proc.returncode, verbose.stderr[-300:]
    assert verbose.stdout.splitlines()[0] == proc.stdout.splitlines()[0]   # the same verdict, its evidence named
    assert len(verbose.stdout.splitlines()) > 1 and "spamnb.persistence.journal_replay" in modules


# What an append that refits no cutoffs loads (a large model's usual learn): the journal's read side and the
# held-out histogram, without math (a standard shared object: prequential's isfinite is _score's and its floors
# // 1.0; journal_view's exp and log are _score's)
def test_the_journal_read_and_the_histogram_load_no_math():
    code = ("import sys; import spamnb.persistence.journal_view, spamnb.estimator.prequential; "
            "print(sorted({'math', '_struct', 'os'} & set(sys.modules)))")
    proc = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.returncode == 0, proc.stderr[-300:]
    assert proc.stdout.strip() == "[]", proc.stdout


def test_array_is_a_mutable_sequence_once_collections_abc_is_loaded(model, tmp_path):
    code = ("import sys; from spamnb.cli.main import entry; import array; "
            "before = '_collections_abc' in sys.modules; code = entry(); "
            "import os, _collections_abc, collections.abc; "
            "sys.stdout.write(f'\\nbefore={before} registered={issubclass(array.array, collections.abc.MutableSequence)} '"
            "f'finders={len(sys.meta_path)}'); sys.exit(code)")
    proc, modules = _bare_run(model, tmp_path, ["classify"], PLAIN.read_bytes(), code)
    assert proc.returncode in (0, 1, 2), proc.stderr[-300:]
    assert proc.stdout.decode().endswith("before=False registered=True finders=3"), proc.stdout[-200:]


def test_a_classify_after_learns_loads_neither_count_nor_collections(model, tmp_path):
    """Once messages were learned into the journal, a classify puts the
    journal's learns through for its message's own tokens in one compiled
    call of ``_score`` (``journal_rows``): no ``_count`` (whose typed
    memoryviews import ``collections.abc``, and so ``collections``, when it
    loads), no rows as long as the journal's tokens; and still no ledger.
    (Before: ``_count.add_counts_split`` for each learn over rows as long as
    the journal's distinct tokens.)"""
    for k in range(3):
        learned, _ = _bare_run(model, tmp_path, ["learn", "--spam" if k % 2 else "--ham", "-q"],
                               PLAIN.read_bytes() + f"\nlearned {k}\n".encode())
        assert learned.returncode == 0, learned.stderr[-300:]
    assert (tmp_path / "model.spamnb.journal").stat().st_size > 0
    proc, modules = _bare_run(model, tmp_path, ["classify"], PLAIN.read_bytes())
    assert proc.returncode in (0, 1, 2) and "spamnb.persistence.journal_view" in modules, proc.stderr[-300:]
    assert not {"spamnb.bayes._count", "spamnb.estimator.ledger"} & modules, sorted(modules)
    # the journal's read side alone (journal_view): not its writers' module (append, compaction, following),
    # nor the replay's (deltas: the records' layouts and codes are store's)
    assert not {"spamnb.persistence.journal", "spamnb.persistence.deltas"} & modules, sorted(modules)
    # collections only through the cutoffs refitted on the learns' held-out scores (this model's cutoffs follow
    # them: spamnb.estimator.calibrate's namedtuple); a model whose cutoffs train fitted loads neither
    assert "spamnb.estimator.calibrate" in modules or not {"collections", "collections.abc"} & modules


def test_a_classify_by_the_launcher_runs_without_site_and_other_commands_with_it(model, tmp_path, launcher):
    """bin/spamnb runs the Python beside it with -S: a classify, learn or
    forget of one message on stdin imports no site (nor what its .pth files
    import); every other command runs site before its work."""
    path = tmp_path / "model.spamnb"
    shutil.copyfile(model, path)
    env = dict(_env(tmp_path), PYTHONPROFILEIMPORTTIME="1", PYTHONPATH=str(REPO))
    found = {}
    for args in (["classify"], ["info"]):
        with open(PLAIN, "rb") as stdin:
            proc = subprocess.run([launcher, *args, "-m", path], stdin=stdin, capture_output=True, env=env,
                                  cwd=tmp_path, timeout=60)
        lines = proc.stderr.decode().splitlines()
        assert proc.returncode in (0, 1, 2), lines[-5:]
        found[args[0]] = {line.split("|")[-1].strip() for line in lines if line.startswith("import time:")}
    assert "site" not in found["classify"] and "spamnb.cli.classify" in found["classify"]
    assert "site" in found["info"]


def test_in_a_venv_with_the_system_s_packages_the_launcher_runs_site_first(model, tmp_path, launcher_system):
    """A venv made with ``--system-site-packages`` (its pyvenv.cfg says so)
    may find numpy only among the system's packages, which site puts on
    sys.path: there the launcher runs site before a classify too."""
    path = tmp_path / "model.spamnb"
    shutil.copyfile(model, path)
    with open(PLAIN, "rb") as stdin:
        proc = subprocess.run([launcher_system, "classify", "-m", path], stdin=stdin, capture_output=True,
                              env=dict(_env(tmp_path), PYTHONPROFILEIMPORTTIME="1", PYTHONPATH=str(REPO)),
                              cwd=tmp_path, timeout=60)
    lines = proc.stderr.decode().splitlines()
    assert proc.returncode in (0, 1, 2), lines[-5:]
    modules = [line.split("|")[-1].strip() for line in lines if line.startswith("import time:")]
    assert "site" in modules and modules.index("site") < modules.index("spamnb")


def test_the_lazy_flags_are_re_s_own_and_a_message_id_domain_is_re_s():
    import random
    import re

    from spamnb.mail import lazy_re
    from spamnb.mail.tokenizer import message_id_domain

    assert (lazy_re.A, lazy_re.S, lazy_re.M, lazy_re.I) == (re.A, re.S, re.M, re.I)
    pattern = re.compile(r"@([^>\s]+)", re.A)
    rng = random.Random(5)
    letters = "@> \t\n\r\f\v\x1c\x85\xa0\u2028ab.<"
    for _ in range(20000):
        text = "".join(rng.choice(letters) for _ in range(rng.randint(0, 12)))
        match = pattern.search(text)
        assert message_id_domain(text) == (match.group(1) if match else None), repr(text)


# What the launcher's process does after the command: a sitecustomize module
# (imported by site before the launcher's own code: a venv with the system's packages,
# where site runs first) notes whether the cyclic
# garbage collector is on when the interpreter's teardown runs its exit handlers.
HOOK = '''import atexit, gc, os
atexit.register(lambda: open(os.environ["SPAMNB_TEST_TEARDOWN"], "w").write(f"gc={gc.isenabled()}"))
'''


@pytest.mark.parametrize("args, short", [("classify", True), ("classify -p", True), ("classify --json", False),
                                         ("classify -M", False), ("learn --spam", True),
                                         ("learn --spam -- FILE", False)])
def test_a_short_classify_ends_without_the_teardown(args, short, model, tmp_path, launcher_system):
    """The launcher turns the collector off before the imports; a classify
    or learn of the one message on stdin runs without it and ends without the
    interpreter's teardown (no exit handler runs), with the verdict and exit
    code of the usual end; every other command turns it back on and ends as usual."""
    path = tmp_path / "model.spamnb"
    shutil.copyfile(model, path)
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(HOOK)
    noted = tmp_path / "teardown"
    message = tmp_path / "message.eml"   # a line of its own: a message the model has not learned
    message.write_bytes(Path(MESSAGE).read_bytes().rstrip(b"\n") + b"\n\nnot learned before\n")
    with open(message, "rb") as stdin:
        argv = [str(message) if arg == "FILE" else arg for arg in args.split() if arg != "--"]
        proc = subprocess.run([launcher_system, *argv, "-m", path], stdin=stdin, capture_output=True,
                              env=dict(_env(tmp_path), PYTHONPATH=f"{hooks}{os.pathsep}{REPO}",
                                       SPAMNB_TEST_TEARDOWN=str(noted)), cwd=tmp_path, timeout=60)
    assert proc.returncode == 0 and not proc.stderr, proc
    if args.startswith("classify"):
        assert proc.stdout.startswith(b"spam " if args == "classify" else b"{" if "--json" in args else b"") and (
            b"X-Spamnb-Status: Yes" in proc.stdout if "-p" in args else True), proc.stdout[:200]
    else:   # the learn's record is in the journal, whole, when the process has ended
        learned = subprocess.run([launcher_system, "info", "-m", path], capture_output=True, env=_env(tmp_path),
                                 cwd=tmp_path, timeout=60)
        assert learned.returncode == 0 and Path(str(path) + ".journal").stat().st_size > 0, learned
    if short:
        assert not noted.exists()
    else:
        assert noted.read_text() == "gc=True"


def test_the_compiled_modules_of_the_cold_path_make_no_memoryview_types():
    """The compiled modules a cold classify loads (``spamnb.bayes._score``,
    ``spamnb.mail._mail``) take their buffers with ``spamnb/buffers.pxd``:
    none has Cython's typed-memoryview code, which makes four types in each
    module that has it and registers two with ``collections.abc.Sequence``
    when the module loads.  Checked by that registry (``_abc._get_dump``),
    against ``_count``, which has the code (training's counting)."""
    code = """if True:
        import collections.abc, _abc
        import spamnb.bayes._score, spamnb.mail._mail, spamnb.mail.tokenizer, spamnb.bayes.token_kernels
        def registered():
            return sorted({r().__module__ for r in _abc._get_dump(collections.abc.Sequence)[0]
                           if r() is not None and r().__module__.startswith("spamnb")})
        print(registered())
        import spamnb.bayes._count
        print(registered())
    """
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    cold, with_count = out.stdout.splitlines()
    assert cold == "[]", cold
    assert with_count == "['spamnb.bayes._count']", with_count   # the check sees the code where it is


def test_a_short_run_s_finder_gives_importlib_s_spec_and_leaves_it_what_it_cannot_vouch_for(tmp_path):
    """spamnb.cli.main's finder of a short run's modules (``entry(cold=True)``):
    for a module and a package with byte-compiled files stamped with their
    source's time and size, the spec importlib's path finder gives (origin,
    cached file, package path, a source loader) and the same module; None
    (importlib's then) for a source changed since, a file checked by hash, a
    missing byte-compiled file or a name outside spamnb.  And none of
    spamnb's compiled modules has a source of the same name beside it (which
    importlib would pass over for the compiled one, and the finder would not)."""
    import importlib.machinery
    import importlib.util
    import py_compile

    from spamnb.cli import main

    (tmp_path / "sub").mkdir()
    module, package = tmp_path / "fake.py", tmp_path / "sub" / "__init__.py"
    module.write_text("VALUE = 41 + 1\n")
    package.write_text("VALUE = 'package'\n")
    for source in (module, package):
        py_compile.compile(str(source), cfile=importlib.util.cache_from_source(str(source)), doraise=True,
                           invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)
    finder = main._FINDER  # noqa: SLF001 -- the module's own finder, read by its test
    for name, value in (("spamnb.fake", 42), ("spamnb.sub", "package")):
        ours = finder.find_spec(name, [str(tmp_path)])
        theirs = importlib.machinery.PathFinder.find_spec(name, [str(tmp_path)])
        assert ours is not None and theirs is not None
        assert (ours.origin, ours.cached, ours.submodule_search_locations, ours.has_location, ours.parent) == (
            theirs.origin, theirs.cached, theirs.submodule_search_locations, theirs.has_location, theirs.parent)
        assert isinstance(ours.loader, importlib.machinery.SourceFileLoader) and ours.loader.path == theirs.origin
        made = importlib.util.module_from_spec(ours)
        ours.loader.exec_module(made)
        assert made.VALUE == value and made.__file__ == theirs.origin and made.__cached__ == theirs.cached
    assert finder.find_spec("other.fake", [str(tmp_path)]) is None
    assert finder.find_spec("spamnb.missing", [str(tmp_path)]) is None
    module.write_text("VALUE = 41 + 2\n# changed\n")   # another size: the byte-compiled file is stale
    assert finder.find_spec("spamnb.fake", [str(tmp_path)]) is None
    py_compile.compile(str(module), cfile=importlib.util.cache_from_source(str(module)), doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
    assert finder.find_spec("spamnb.fake", [str(tmp_path)]) is None
    os.remove(importlib.util.cache_from_source(str(package)))
    assert finder.find_spec("spamnb.sub", [str(tmp_path)]) is None
    package_dir = REPO / "spamnb"
    twins = [str(p) for p in package_dir.rglob("*.pyx") if p.with_suffix(".py").exists()]
    assert twins == []


# A short run (entry(cold=True)) reports, as it ends, spamnb's modules in the order loaded: their specs, attributes
# and globals' names, and which of them cli.main._load loaded (builtins.__import__ its _import)
_SHORT_RUN = """import gc, posix, sys
gc.disable()
from spamnb.cli import main
loaded, load, end = [], main._load, posix._exit
def counted(name):
    load(name)
    loaded.append(name)
def report(code):
    rows = []
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] == "spamnb":
            spec = module.__spec__
            rows.append((name, spec.name, spec.origin, spec.cached, spec.parent, spec.submodule_search_locations,
                         spec.has_location, getattr(spec, "_initializing", False), type(spec.loader).__name__,
                         module.__loader__ is spec.loader,
                         module.__package__, getattr(module, "__path__", None), module.__file__,
                         getattr(module, "__cached__", None), list(vars(module))))
    sys.stderr.write("REPORT " + repr((rows, sorted(set(loaded) & set(sys.modules)))) + "\\n")
    end(code)
main._load, posix._exit = counted, report
main.entry(cold=True)
"""


def test_a_short_run_loads_spamnb_s_modules_as_importlib_does(model, tmp_path):
    """A short run loads the modules of spamnb by cli.main._load (its own ``__import__``), not by importlib's
    ``_find_and_load`` (about 0.1 million instructions a module less): the same modules, in the same order,
    with the same specs, attributes and globals as importlib gives them (the same run with its imports timed,
    ``PYTHONPROFILEIMPORTTIME``, where importlib loads them), the compiled ones (``_mail``, ``_score``) too.
    Run from a copy of the package byte-compiled as pip compiles it (the finder reads those files)."""
    import compileall

    package = tmp_path / "tree" / "spamnb"
    shutil.copytree(REPO / "spamnb", package, ignore=shutil.ignore_patterns("__pycache__", "*.c", "*.pyx"))
    assert compileall.compile_dir(str(package), quiet=1)
    reports = []
    for timed in (False, True):
        env = dict(_env(tmp_path), PYTHONPATH=str(package.parent))
        if timed:
            env["PYTHONPROFILEIMPORTTIME"] = "1"
        proc = subprocess.run([sys.executable, "-S", "-c", _SHORT_RUN, "classify", "-m", str(model)],
                              input=PLAIN.read_bytes(), capture_output=True, env=env, cwd=tmp_path, timeout=120)
        lines = [line for line in proc.stderr.decode().splitlines() if line.startswith("REPORT ")]
        assert proc.returncode in (0, 1, 2) and len(lines) == 1, proc.stderr[-500:]
        reports.append(eval(lines[0][len("REPORT "):]))   # noqa: S307 -- the repr this test's own code wrote
    (rows, loaded), (timed_rows, timed_loaded) = reports
    names = [row[0] for row in rows]
    assert "spamnb.cli.classify" in names and "spamnb.mail._mail" in names and "spamnb.bayes._score" in names
    assert rows == timed_rows
    assert timed_loaded == [] and {"spamnb.cli.classify", "spamnb.mail._mail", "spamnb.bayes._score"} <= set(loaded)
    # all but the launcher's (imported before entry) and those _mail's init imports (in C, not by __import__)
    assert len(loaded) >= 30 and not {"spamnb", "spamnb.cli", "spamnb.cli.main"} & set(loaded), loaded
