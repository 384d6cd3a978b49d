"""The README's procmail recipe and docs/mail.md's maildrop recipe, run by the real procmail, maildrop and formail.

Each test builds a temporary user's home with a ``spamnb`` command in
``bin`` (this checkout's package) and a model trained on the sample corpus
in ``.spamnb``, and the recipe as the README shows it (read from the README;
only the full paths of spamnb and of the model's folder changed to the
test's).  The mail program runs with another HOME, one with a Maildir and no
``.spamnb`` (procmail or maildrop run as root, or by a system account): the
recipe must name the model itself.  Its PATH does not hold the command, as
after an install into a virtual environment: the recipe must name it by its
full path.  Every message must land,
with the status header, in the folder its verdict says: ``.Spam`` (Yes),
``.Unsure`` (Unsure) or the inbox (No).
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import spamnb

from conftest import REPO, OneShotSpamd

PACKAGE_ROOT = Path(spamnb.__file__).resolve().parents[1]
SPAM = (REPO / "corpora" / "spam" / "00017.1a938ecddd047b93cbd7ed92c241e6d1").read_bytes()
HAM = sorted((REPO / "corpora" / "easy_ham").iterdir())[0].read_bytes()
UNSURE = b"From: offers@example.com\nSubject: your account statement\n\nclick here to see your free offer today\n"
FOLDER_OF = {b"Yes": ".Spam", b"Unsure": ".Unsure", b"No": ""}


README_SPAMNB = "/usr/local/bin/spamnb"      # the full path the README's recipes show
README_MODEL_HOME = "/home/alice/.spamnb"    # the model's folder they show


def _readme_block(language, page="README.md"):
    text = (REPO / page).read_text()
    blocks = re.findall(rf"```{language}\n(.*?)```", text, re.S)
    assert len(blocks) == 1, f"{page} should show one {language} recipe"
    return blocks[0]


def _recipe(language, home):
    """The recipe its page shows (procmail: the README; maildrop: docs/mail.md) with spamnb's full path pointed at the test's
    command and the model's folder at the test's."""
    block = _readme_block(language, "docs/mail.md" if language == "maildrop" else "README.md")
    assert README_SPAMNB in block and "command -v spamnb" in block, block
    assert README_MODEL_HOME in block, "the recipe should name the model's folder (SPAMNB_HOME), not rely on HOME"
    return block.replace(README_SPAMNB, str(home / "bin" / "spamnb")).replace(README_MODEL_HOME,
                                                                              str(home / ".spamnb"))


def _need(tool):
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed (Debian package {'procmail' if tool == 'formail' else tool})")


@pytest.fixture(scope="module")
def home(tmp_path_factory, sample_model):
    """The mail user's home: bin/spamnb (this tree's command) and .spamnb/ with the model
    `spamnb train -q corpora/` writes (a copy of the session's)."""
    home = tmp_path_factory.mktemp("home")
    bin_dir = home / "bin"
    bin_dir.mkdir()
    command = bin_dir / "spamnb"
    command.write_text(f"#!/bin/sh\nPYTHONPATH={PACKAGE_ROOT} exec {sys.executable} -m spamnb \"$@\"\n")
    command.chmod(0o755)
    (home / ".spamnb").mkdir(mode=0o700)
    shutil.copyfile(sample_model, home / ".spamnb" / "model.spamnb")
    return home


def _mail_home(home):
    """The HOME the mail program runs with: not the user's, whose ``.spamnb``
    holds the model (on main the recipes looked for the model there: procmail
    delivered unfiltered, maildrop deferred)."""
    return home / "root"


def _fresh_maildir(home):
    maildir = _mail_home(home) / "Maildir"
    shutil.rmtree(maildir, ignore_errors=True)
    for folder in ("", ".Spam", ".Unsure"):
        for sub in ("cur", "new", "tmp"):
            (maildir / folder / sub).mkdir(parents=True, exist_ok=True)
    return maildir


def _delivered(maildir):
    """{folder: [message bytes]} of every message delivered."""
    out = {}
    for folder in ("", ".Spam", ".Unsure"):
        for sub in ("new", "cur"):
            for path in sorted((maildir / folder / sub).iterdir()):
                out.setdefault(folder, []).append(path.read_bytes())
    return out


def _status(message):
    head = message.partition(b"\n\n")[0]
    found = re.findall(rb"^X-Spamnb-Status: (Yes|Unsure|No), log-odds=", head, re.M)
    assert len(found) == 1, head[:2000]
    return found[0]


MAIL_PATH = "/usr/bin:/bin"      # a mail program's PATH: no spamnb there


def _env(home):
    return {"HOME": str(_mail_home(home)), "PATH": MAIL_PATH}


def _procmailrc(home):
    rc = home / "procmailrc"
    rc.write_text(f"HOME={_mail_home(home)}\nPATH={MAIL_PATH}\n"
                  f"LOGFILE={home / 'procmail.log'}\n" + _recipe("procmail", home))
    return rc


def _mailfilter(home, model_home=None):
    rc = home / "mailfilter"
    recipe = _recipe("maildrop", home)
    if model_home is not None:
        recipe = recipe.replace(str(home / ".spamnb"), str(model_home))
    rc.write_text(f'HOME="{_mail_home(home)}"\nPATH="{MAIL_PATH}"\n' + recipe)
    rc.chmod(0o600)  # maildrop refuses a filter file others can read or write
    return rc


def _procmail(home, message):
    _need("procmail")
    proc = subprocess.run(["procmail", "-m", str(_procmailrc(home))], input=message, env=_env(home),
                          capture_output=True, timeout=300)
    return proc


def _maildrop(home, message):
    _need("maildrop")
    return subprocess.run(["maildrop", str(_mailfilter(home))], input=message, env=_env(home),
                          capture_output=True, timeout=300)


def _big_message():
    line = b"An ordinary line of a long newsletter, repeated to make twenty megabytes of text.\n"
    return b"From: big@example.com\nSubject: a big one\n\n" + line * (20 * 1024 * 1024 // len(line))


CASES = {"spam": (SPAM, ".Spam"), "ham": (HAM, ""), "unsure": (UNSURE, ".Unsure"), "empty": (b"", None),
         "20MB": (None, None)}


# each verdict and the 20 MB message once in the default run, both tools in it;
# the other tool of each case with -m slow
RECIPE_DEFAULT = {("spam", "procmail"), ("ham", "maildrop"), ("unsure", "maildrop"), ("empty", "procmail"),
                  ("20MB", "procmail")}


@pytest.mark.parametrize("case,deliver", [
    pytest.param(case, deliver, id=f"{case}-{name}",
                 marks=() if (case, name) in RECIPE_DEFAULT else pytest.mark.slow)
    for case in CASES for deliver, name in ((_procmail, "procmail"), (_maildrop, "maildrop"))])
def test_recipe_delivers_to_the_right_folder_with_the_header(home, deliver, case):
    message, folder = CASES[case]
    if message is None:
        message = _big_message()
    maildir = _fresh_maildir(home)
    (home / "procmail.log").unlink(missing_ok=True)
    proc = deliver(home, message)
    assert proc.returncode == 0, proc.stderr.decode()
    delivered = _delivered(maildir)
    assert sum(map(len, delivered.values())) == 1, delivered.keys()
    (where, (out,)), = delivered.items()
    word = _status(out)
    assert where == FOLDER_OF[word]
    if folder is not None:
        assert where == folder
    if message:  # every byte arrives (procmail may add a From_ line in front and a newline at the end)
        body = message.partition(b"\n\n")[2]
        assert out.rstrip(b"\n").endswith(body.rstrip(b"\n"))
    log = (home / "procmail.log").read_text() if (home / "procmail.log").exists() else ""
    assert "failure" not in log.lower() and "error" not in log.lower(), log


def test_formail_splits_an_mbox_through_the_procmail_recipe(home):
    _need("formail")
    _need("procmail")
    maildir = _fresh_maildir(home)
    rc = _procmailrc(home)
    # the sample files keep their own envelope line: one envelope line a message
    messages = (m.partition(b"\n")[2] if m.startswith(b"From ") else m for m in (SPAM, HAM, UNSURE))
    mbox = b"".join(b"From sender@example.com Mon Nov 23 10:40:20 2026\n" + m + b"\n" for m in messages)
    proc = subprocess.run(["formail", "-s", "procmail", "-m", str(rc)], input=mbox, env=_env(home),
                          capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()
    delivered = _delivered(maildir)
    assert {folder: len(messages) for folder, messages in delivered.items()} == {"": 1, ".Spam": 1, ".Unsure": 1}
    for folder, (out,) in delivered.items():
        assert FOLDER_OF[_status(out)] == folder


def test_without_a_model_procmail_delivers_the_message_as_it_came(home, tmp_path):
    _need("procmail")
    maildir = _fresh_maildir(home)
    rc = home / "procmailrc-nomodel"
    rc.write_text(_procmailrc(home).read_text().replace(f"SPAMNB_HOME={home / '.spamnb'}",
                                                         f"SPAMNB_HOME={tmp_path}"))
    assert f"SPAMNB_HOME={tmp_path}" in rc.read_text()
    proc = subprocess.run(["procmail", "-m", str(rc)], input=HAM, env=_env(home), capture_output=True, timeout=300)
    assert proc.returncode == 0
    (out,) = _delivered(maildir)[""]
    assert out.rstrip(b"\n").endswith(HAM.partition(b"\n\n")[2].rstrip(b"\n")) and b"X-Spamnb-Status" not in out


def test_without_a_model_maildrop_defers_the_message(home, tmp_path):
    _need("maildrop")
    _fresh_maildir(home)
    proc = subprocess.run(["maildrop", str(_mailfilter(home, model_home=tmp_path))], input=HAM, env=_env(home),
                          capture_output=True, timeout=300)
    assert proc.returncode == 75  # EX_TEMPFAIL: the MTA keeps the message and retries
    assert not any(_delivered(_mail_home(home) / "Maildir").values())


def test_a_bare_spamnb_on_the_mail_programs_path_filters_nothing(home):
    """Why the recipes give the full path: spamnb installed in a virtual
    environment is not on procmail's PATH; `| spamnb classify -p` then fails,
    procmail logs it and delivers the mail unfiltered."""
    _need("procmail")
    assert shutil.which("spamnb", path=MAIL_PATH) is None
    maildir = _fresh_maildir(home)
    (home / "procmail.log").unlink(missing_ok=True)
    rc = home / "procmailrc-bare"
    rc.write_text(_procmailrc(home).read_text().replace(f"{home / 'bin' / 'spamnb'} classify", "spamnb classify")
                  .replace("$SPAMNB classify", "spamnb classify"))
    proc = subprocess.run(["procmail", "-m", str(rc)], input=SPAM, env=_env(home), capture_output=True, timeout=300)
    assert proc.returncode == 0
    (out,) = _delivered(maildir)[""]
    assert b"X-Spamnb-Status" not in out
    assert "rescue of unfilter" in (home / "procmail.log").read_text().lower()    # procmail: "Rescue of unfiltered data"


def test_serve_page_procmail_recipe_with_spamc(home, tmp_path):
    """docs/serve.md's procmail recipe through the real spamc and `spamnb
    serve`, with a PATH that holds neither."""
    _need("procmail")
    from test_serve import SPAMC, Daemon
    if SPAMC is None:
        pytest.skip("spamc is not installed (Debian package spamc)")
    block = _readme_block("procmail", page="docs/serve.md")
    assert "SPAMC=/usr/bin/spamc" in block and "command -v spamc" in block
    serve_home = tmp_path / "serve"
    serve_home.mkdir()
    shutil.copy(home / ".spamnb" / "model.spamnb", serve_home / "model.spamnb")
    daemon = Daemon(serve_home)
    try:
        maildir = _fresh_maildir(home)
        rc = home / "procmailrc-spamc"
        rc.write_text(f"HOME={_mail_home(home)}\nPATH={MAIL_PATH}\nLOGFILE={home / 'procmail.log'}\n"
                      + block.replace("SPAMC=/usr/bin/spamc", f"SPAMC=\"{SPAMC} -d 127.0.0.1 -p {daemon.port}\""))
        for message in (SPAM, HAM, UNSURE):
            proc = subprocess.run(["procmail", "-m", str(rc)], input=message, env=_env(home), capture_output=True,
                                  timeout=300)
            assert proc.returncode == 0, proc.stderr.decode()
        delivered = _delivered(maildir)
        words = {"": b"No", ".Spam": b"Yes", ".Unsure": b"Unsure"}
        assert sum(map(len, delivered.values())) == 3 and ".Spam" in delivered and "" in delivered, delivered.keys()
        for folder, messages in delivered.items():
            for out in messages:
                head = out.partition(b"\n\n")[0]
                assert re.search(rb"^X-Spam-Status: " + words[folder] + b",", head, re.M), head[-500:]
    finally:
        daemon.stop()


# ---------------------------------------------------------------- contrib/spamnb-pipe, Postfix's content filter

WRAPPER = REPO / "contrib" / "spamnb-pipe"
SPAMC_PATH = "/usr/bin/spamc" if os.path.exists("/usr/bin/spamc") else shutil.which("spamc")


def _pipe(tmp_path, port, sendmail_status=0):
    """Run the wrapper as master.cf does, with a stand-in sendmail that keeps
    its input and arguments and exits ``sendmail_status``."""
    sendmail = tmp_path / "sendmail"
    sendmail.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {tmp_path}/args\ncat > {tmp_path}/queued\n"
                        f"exit {sendmail_status}\n")
    sendmail.chmod(0o755)
    (tmp_path / "queued").unlink(missing_ok=True)
    argv = [str(WRAPPER), SPAMC_PATH, "-d", "127.0.0.1", "-p", str(port), "-t", "10", "-x", "-u", "alice",
            "--", str(sendmail), "-G", "-oi", "-f", "sender@example.org", "--", "alice@example.org"]
    return subprocess.run(argv, input=HAM, capture_output=True, timeout=60, env={"PATH": MAIL_PATH})


@pytest.mark.skipif(SPAMC_PATH is None, reason="spamc is not installed (Debian package spamc)")
@pytest.mark.parametrize("fault", ["down", "error answer", "closed mid-request", "answer cut short"])
@pytest.mark.slow
def test_spamnb_pipe_defers_every_spamc_failure(tmp_path, fault):
    """Every way spamc -x can fail (it exits 69, 76, 74 ...) becomes 75, the
    status Postfix's pipe defers on, and sendmail never runs."""
    import socket
    server = None
    if fault == "down":
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    else:
        answer = {"error answer": b"SPAMD/1.5 69 EX_UNAVAILABLE\r\n\r\n", "closed mid-request": None,
                  "answer cut short": b"SPAMD/1.5 0 EX_OK\r\nContent-length: 5000\r\n\r\nX-Spam"}[fault]
        server = OneShotSpamd(answer)
        port = server.port
    try:
        proc = _pipe(tmp_path, port)
    finally:
        if server:
            server.close()
    assert proc.returncode == 75, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stdout.startswith(b"4.3.0 spamnb-pipe: ") and b"exit status" in proc.stdout
    assert not (tmp_path / "queued").exists()
    assert not list(tmp_path.glob("spamnb-pipe.*")) and not list(Path("/tmp").glob("spamnb-pipe.*"))


@pytest.mark.skipif(SPAMC_PATH is None, reason="spamc is not installed (Debian package spamc)")
@pytest.mark.parametrize("status", [0, 67, 75])
def test_spamnb_pipe_hands_the_checked_message_to_sendmail(home, tmp_path, status):
    """spamc succeeded: the checked message goes to sendmail with the
    arguments after "--", and sendmail's own status is the wrapper's."""
    from test_serve import Daemon
    serve_home = tmp_path / "serve"
    serve_home.mkdir()
    shutil.copy(home / ".spamnb" / "model.spamnb", serve_home / "model.spamnb")
    daemon = Daemon(serve_home)
    try:
        proc = _pipe(tmp_path, daemon.port, sendmail_status=status)
    finally:
        daemon.stop()
    assert proc.returncode == status, (proc.stdout, proc.stderr)
    queued = (tmp_path / "queued").read_bytes()
    assert re.search(rb"^X-Spam-Status: No, score=", queued.partition(b"\n\n")[0], re.M)
    assert queued.endswith(HAM.partition(b"\n\n")[2])
    assert (tmp_path / "args").read_text().split("\n")[:6] == ["-G", "-oi", "-f", "sender@example.org", "--",
                                                              "alice@example.org"]


def test_spamnb_pipe_defers_what_it_cannot_run(tmp_path):
    """A wrong path in master.cf defers (the shell's 126/127 would bounce)."""
    for argv in (["/nonexistent/spamc", "--", "/bin/cat"], ["/bin/cat", "--", "/nonexistent/sendmail"],
                 ["/bin/cat", "/bin/cat"]):
        proc = subprocess.run([str(WRAPPER), *argv], input=HAM, capture_output=True, timeout=30)
        assert proc.returncode == 75 and proc.stdout.startswith(b"4.3.0 "), (argv, proc.returncode, proc.stdout)
