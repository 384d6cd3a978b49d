"""The milter's policy (spamnb.server.policy; docs/serve.md, "The milter's
policy"): the list files and the triplet table on their own; the server
driven through the milter protocol by the tests' own client
(tests/raw_milter.py) with the macros Postfix sends; ``serve
--check-config`` on the policy's files; and, marked slow, the real Postfix
(tests/postfix_private.py) with a real Dovecot for SASL: authenticated
submissions, a trusted network, the allow and block lists, the reject
score and unsure mail deferred once and accepted on the retry."""

import re
import shutil
import signal
import smtplib
import subprocess
import sys
import time

import pytest

from spamnb.errors import SettingsError
from spamnb.server.policy import (MAX_LIST_ENTRIES, AddressList, DomainPolicy, Policy, Triplets, read_domains,
                                  read_list)
from spamnb.settings import ServerSettings

pytest.importorskip("kilter.protocol")

from raw_milter import cstrings, packet, status as _status  # noqa: E402
from test_milter import Milter, _unsure_message, home  # noqa: E402,F401 - home: the module's fixture
from test_serve import MESSAGES, _env  # noqa: E402

from spamnb.model.spam_filter import SpamFilter  # noqa: E402


# ---------------------------------------------------------------------------- the lists, on their own
def test_a_list_file_reads_addresses_domains_and_networks_with_comments(tmp_path):
    path = tmp_path / "allow"
    path.write_text("# friends\nBoss@Example.ORG   # the boss\n@partner.example\nnews.example\n\n"
                    "192.0.2.0/24\n2001:db8::1\n")
    listed = read_list(path)
    assert listed.senders == {"boss@example.org"}
    assert listed.domains == {"partner.example", "news.example"}
    assert len(listed.networks) == 2 and len(listed) == 5
    assert listed.match("boss@example.org", None) == "sender"
    assert listed.match("other@example.org", None) is None
    assert listed.match("x@mail.partner.example", None) == "sender_domain"    # subdomains too
    assert listed.match("x@notpartner.example", None) is None
    assert listed.match("x@elsewhere.example", "192.0.2.77") == "client_network"
    assert listed.match("x@elsewhere.example", "IPv6:2001:db8::1") == "client_network"
    assert listed.match("x@elsewhere.example", "::ffff:192.0.2.9") == "client_network"
    assert listed.match("", "198.51.100.1") is None


@pytest.mark.parametrize("line, why", [
    ("bad@@example.org", "not an address or @domain"),
    ("two words", "one entry a line"),
    ("10.0.0.0/33", "not an address or network"),
    ("exa mple", "one entry a line"),
    ("-bad-.example!", "not a domain"),
])
def test_a_bad_line_is_one_line_naming_the_file_and_its_number(tmp_path, line, why):
    path = tmp_path / "block"
    path.write_text(f"# a comment\nok@example.org\n{line}\n")
    with pytest.raises(SettingsError) as info:
        read_list(path, "--milter-blocklist")
    text = str(info.value)
    assert text.startswith(f"--milter-blocklist {path}:3: {why}") and "\n" not in text, text


def test_list_files_are_bounded(tmp_path):
    path = tmp_path / "big"
    path.write_text("".join(f"u{i}@example.org\n" for i in range(MAX_LIST_ENTRIES + 1)))
    with pytest.raises(SettingsError, match=rf":{MAX_LIST_ENTRIES + 1}: more than {MAX_LIST_ENTRIES} entries"):
        read_list(path)
    path.write_bytes(b"#" * (4 * 1024 * 1024 + 1))
    with pytest.raises(SettingsError, match="larger than"):
        read_list(path)
    path.write_bytes(b"ok.example\n" + b"a" * 600 + b"\n")
    with pytest.raises(SettingsError, match=":2: a line longer than 512"):
        read_list(path)
    path.write_bytes(b"ok.example\n\xff.example\n")
    with pytest.raises(SettingsError, match=":2: not UTF-8"):
        read_list(path)
    with pytest.raises(SettingsError, match="No such file"):
        read_list(tmp_path / "missing")


def test_policy_order_trusted_then_block_then_allow():
    allow, block = AddressList(), AddressList()
    allow.senders.add("friend@example.org")
    block.domains.add("example.org")
    from ipaddress import ip_network

    policy = Policy(True, [ip_network("10.0.0.0/8")], "check", allow, block)
    assert policy.before("friend@example.org", "192.0.2.1", True) == ("check", "authenticated")
    assert policy.before("friend@example.org", "10.1.2.3", False) == ("check", "trusted_network")
    assert policy.before("friend@example.org", "192.0.2.1", False) == ("block", "sender_domain")
    block.domains.clear()
    assert policy.before("friend@example.org", "192.0.2.1", False) == ("allow", "sender")
    assert policy.before("stranger@example.net", "192.0.2.1", False) is None
    assert Policy(False).before("a@b.example", None, True) is None      # not skipped unless asked


def test_reject_score_and_unsure_action():
    plain = DomainPolicy("reject")
    assert plain.action("spam", 5.0) == "reject" and plain.action("ham", -3) == "tag"
    scored = DomainPolicy("reject", 12.0, "tempfail")
    assert scored.action("spam", 11.9) == "tag" and scored.action("spam", 12.0) == "reject"
    assert scored.action("unsure", 3.0) == "tempfail"
    assert DomainPolicy("quarantine", 12.0).action("spam", 6.0) == "quarantine"
    assert DomainPolicy(unsure_action="tag").action("unsure", 2.0) == "unsure-tag"
    assert DomainPolicy().action("unsure", 2.0) == "tag"


def test_reject_score_below_the_cutoff_is_refused_by_the_settings():
    with pytest.raises(SettingsError, match="--milter-reject-score 4.9 is below the spam cutoff's score 5"):
        ServerSettings({"milter_reject_score": 4.9})
    assert ServerSettings({"milter_reject_score": 5.0}).milter_reject_score == 5.0
    with pytest.raises(SettingsError, match="--trusted-networks: 'nowhere'"):
        ServerSettings({"trusted_networks": "10.0.0.0/8,nowhere"})


def test_the_policy_options_in_a_config_file(tmp_path):
    config = tmp_path / "serve.conf"
    config.write_text("milter_skip_authenticated = yes\ntrusted_networks = 192.0.2.0/24, 2001:db8::/32\n"
                      "milter-trusted-action = check\nmilter_allowlist = /etc/spamnb/allow.list\n"
                      "milter_reject_score = 12\nmilter_unsure_action = tempfail\n")
    settings = ServerSettings({}, config)
    assert settings.milter_skip_authenticated and len(settings.trusted_networks) == 2
    assert settings.milter_trusted_action == "check" and settings.milter_allowlist == "/etc/spamnb/allow.list"
    assert settings.milter_reject_score == 12.0 and settings.milter_unsure_action == "tempfail"
    assert ServerSettings({"milter_reject_score": 6}, config).milter_reject_score == 6.0   # the command line wins


def test_domain_tables(tmp_path):
    path = tmp_path / "settings.toml"
    path.write_text('spam_cutoff = 0.99\n[domain."shop.example"]\nspam_action = "reject"\nreject_score = 9\n'
                    '[domain."news.example"]\nunsure_action = "tempfail"\nmodel = "/m/news.spamnb"\n')
    base = DomainPolicy("tag", None, "accept")
    domains = read_domains(path, base, 5.0)
    assert domains["shop.example"].action("spam", 8.0) == "tag"
    assert domains["shop.example"].action("spam", 9.5) == "reject"
    assert domains["news.example"].model == "/m/news.spamnb" and domains["news.example"].spam_action == "tag"
    policy = Policy(base=base, domains=domains)
    assert policy.for_recipient("bob@shop.example") is domains["shop.example"]
    assert policy.for_recipient("bob@other.example") is base
    # the commands read the same file: its [domain] tables are serve's, not an unknown key
    from spamnb.settings import load_settings

    assert load_settings(path).spam_cutoff == 0.99
    path.write_text('[domain."shop.example"]\nreject_score = 4\n')
    with pytest.raises(SettingsError, match="reject_score 4 is below the spam cutoff's score 5"):
        read_domains(path, base, 5.0)
    path.write_text('[domain."shop.example"]\nrejectscore = 9\n')
    with pytest.raises(SettingsError, match="unknown key 'rejectscore'"):
        read_domains(path, base, 5.0)


def test_the_triplet_table_defers_once_in_a_window_and_stays_bounded():
    now = [1000.0]
    table = Triplets(size=3, window=60, clock=lambda: now[0])
    assert table.defer("192.0.2.1", "a@x.example", "bob@y.example") is True
    assert table.defer("192.0.2.1", "a@x.example", "bob@y.example") is False      # the retry
    assert table.defer("192.0.2.2", "a@x.example", "bob@y.example") is True       # another client
    now[0] += 61
    assert table.defer("192.0.2.1", "a@x.example", "bob@y.example") is True       # the window is over
    for i in range(100):
        table.defer(f"192.0.2.{i}", "a" * 5000, "bob@y.example")
    assert len(table) == 3 and all(len(key) == 16 for key in table.seen)


# ---------------------------------------------------------------------------- the server, by the protocol
def _send(client, raw, sender="sender@client.example", rcpts=("alice@test.example",), auth=None, addr="192.0.2.50"):
    """One message as Postfix sends it: the MAIL stage's macros (``{auth_authen}``, ``{client_addr}``), the
    envelope, the header fields, the body; the filter's packets up to its final answer."""
    macros = ["i", "4ABC123", "{client_addr}", addr] + (["{auth_authen}", auth] if auth else [])
    client.send(packet("D", b"M" + cstrings(*macros)), packet("M", cstrings(f"<{sender}>")))
    for rcpt in rcpts:
        client.send(packet("R", cstrings(f"<{rcpt}>")))
    from raw_milter import split_message

    fields, body = split_message(raw)
    for name, value in fields:
        client.header(name, value)
    client.end_of_headers()
    client.body(body)
    return client.end()


def _kind(answers):
    final = answers[-1]
    return final.kind + (final.text[:3].decode() if final.kind == "y" else "")


def test_policy_through_the_milter_protocol_and_reloaded_on_sighup(home, tmp_path):
    """One server: authenticated and trusted-network mail passed untouched
    (no field), the same spam from outside refused; a block-listed
    sender's ham refused, an allow-listed sender's spam delivered with
    allowlisted=sender; unsure mail deferred once (451) and accepted on the
    retry, deferred again for another client; a bad list on SIGHUP keeps
    the old lists and says so in one line, a good one takes effect."""
    allow, block = tmp_path / "allow", tmp_path / "block"
    allow.write_text("friend@partner.example\n")
    block.write_text("# spammers\n@bad.example\n")
    model = SpamFilter.load(home / "model.spamnb")
    spam, ham = MESSAGES[0].read_bytes(), MESSAGES[-1].read_bytes()
    unsure = _unsure_message(model)
    assert model.classify(spam).label == "spam" and model.classify(ham).label == "ham"
    assert model.classify(unsure).label == "unsure"
    d = Milter(home, "--milter-spam-action", "reject", "--milter-skip-authenticated",
               "--trusted-networks", "10.0.0.0/8", "--milter-allowlist", allow, "--milter-blocklist", block,
               "--milter-unsure-action", "tempfail")
    try:
        c = d.client()
        assert c.agreed.protocol & 0x4000 and not c.agreed.protocol & 0x4    # MAIL seen, not answered
        assert "{auth_authen}" in c.agreed.macros[2] and "{client_addr}" in c.agreed.macros[2]
        assert _kind(_send(c, spam)) == "y550"
        answers = _send(c, spam, auth="alice")
        assert [a.kind for a in answers] == ["c"], answers                     # untouched: no edit at all
        answers = _send(c, spam, addr="10.20.30.40")
        assert [a.kind for a in answers] == ["c"], answers
        answers = _send(c, ham, sender="someone@bad.example")
        assert _kind(answers) == "y550" and b"block list" in answers[-1].text
        answers = _send(c, spam, sender="friend@partner.example")
        assert answers[-1].kind == "c"
        assert _status(answers).startswith("No, score=0.0 required=5.0 tests=ALLOWLISTED allowlisted=sender")
        assert _kind(_send(c, unsure, sender="u@client.example")) == "y451"
        answers = _send(c, unsure, sender="u@client.example")                   # the MTA's retry
        assert answers[-1].kind == "c" and _status(answers).startswith("Unsure,")
        assert _kind(_send(c, unsure, sender="u@client.example", addr="192.0.2.51")) == "y451"
        _until(lambda: d.log_text().count("action=tempfail") == 2, d)     # (logged once answered)
        log = d.log_text()
        assert "not checked trusted=authenticated" in log and "not checked trusted=trusted_network" in log
        assert "blocklisted=sender_domain" in log and "allowlisted=sender" in log
        # a bad block list on SIGHUP: the old lists stay
        block.write_text("@bad.example\nnot an entry\n")
        d.proc.send_signal(signal.SIGHUP)
        _until(lambda: "SIGHUP: settings reloaded" in d.log_text(), d)
        assert re.search(r"SIGHUP: the milter's policy not reloaded \(the old lists kept\): --milter-blocklist "
                         r"\S+:2: ", d.log_text()), d.log_text()[-2000:]
        c = d.client()
        assert _kind(_send(c, ham, sender="someone@bad.example")) == "y550"
        block.write_text("@worse.example\n")
        d.proc.send_signal(signal.SIGHUP)
        _until(lambda: d.log_text().count("SIGHUP: settings reloaded") == 2, d)
        c = d.client()
        assert _send(c, ham, sender="someone@bad.example")[-1].kind == "c"
        assert _kind(_send(c, ham, sender="x@worse.example")) == "y550"
        c.close()
    finally:
        d.stop()


def test_trusted_check_scores_and_logs_but_passes_untouched(home):
    d = Milter(home, "--milter-spam-action", "reject", "--trusted-networks", "10.0.0.0/8",
               "--milter-trusted-action", "check")
    try:
        c = d.client()
        answers = _send(c, MESSAGES[0].read_bytes(), addr="10.0.0.1")
        assert [a.kind for a in answers] == ["c"], answers
        c.close()
        _until(lambda: re.search(r"spam [0-9.]+/5\.0 .*trusted=trusted_network .*action=accept", d.log_text()), d)
    finally:
        d.stop()


def test_per_domain_policy_by_the_first_recipient(home, tmp_path):
    """shop.example refuses spam, flip.example's recipients get bob's model
    (labels the other way round); other domains the server's own options
    (tag); a message for several domains the first recipient's policy."""
    domains = tmp_path / "settings.toml"
    domains.write_text(f'[domain."shop.example"]\nspam_action = "reject"\n'
                       f'[domain."flip.example"]\nmodel = "{home / "users" / "bob" / "model.spamnb"}"\n')
    spam = MESSAGES[0].read_bytes()
    d = Milter(home, "--milter-domains", domains)
    try:
        c = d.client()
        assert _kind(_send(c, spam, rcpts=("bob@shop.example",))) == "y550"
        assert _status(_send(c, spam, rcpts=("bob@other.example",))).startswith("Yes,")
        assert _status(_send(c, spam, rcpts=("bob@other.example", "bob@shop.example"))).startswith("Yes,")
        assert _kind(_send(c, spam, rcpts=("bob@shop.example", "bob@other.example"))) == "y550"
        assert _status(_send(c, spam, rcpts=("carol@flip.example",))).startswith("No,")
        c.close()
    finally:
        d.stop()


def _until(condition, d, seconds=60):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, d.log_text()[-2000:]
        time.sleep(0.05)


def test_check_config_finds_each_policy_problem(home, tmp_path):
    """Each problem one line, exit 78; the good files pass."""
    good, bad = tmp_path / "good", tmp_path / "bad"
    good.write_text("@ok.example\n10.0.0.0/8\n")
    bad.write_text("ok@example.org\nnot/a/network\n")
    domains = tmp_path / "domains.toml"
    domains.write_text('[domain."a.example"]\nreject_score = 3\n')
    (tmp_path / "settings.toml").write_text("spam_cutoff = 2\n")
    args = [sys.executable, "-m", "spamnb", "serve", "--check-config", "-m", str(home / "model.spamnb"),
            "-l", str(tmp_path / "spamd.sock")]
    env = _env(tmp_path)
    result = subprocess.run([*args, "--milter-allowlist", good, "--milter-blocklist", bad, "--milter-domains",
                             domains], env=env, capture_output=True, text=True, timeout=60)
    lines = result.stderr.splitlines()
    assert result.returncode == 78, result
    assert len(lines) == 3, lines
    assert re.fullmatch(rf"spamnb serve: --milter-blocklist {bad}:2: not an address or network: 'not/a/network'",
                        lines[0]), lines
    assert "reject_score 3 is below the spam cutoff's score 5" in lines[1]
    assert lines[2].startswith("spamnb serve: settings file: ") and "spam_cutoff" in lines[2]
    result = subprocess.run([*args, "--milter-reject-score", "4"], env=env, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 78 and "--milter-reject-score 4 is below" in result.stderr
    (tmp_path / "settings.toml").write_text('[domain."a.example"]\nreject_score = 7\n')
    domains.write_text('[domain."a.example"]\nreject_score = 7\n')
    result = subprocess.run([*args, "--milter-allowlist", good, "--milter-domains", domains,
                             "--milter-reject-score", "9"], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


# ---------------------------------------------------------------------------- the real Postfix
def _postfix_skip():
    from postfix_private import skip_reason

    return skip_reason()


def _sender_sasl(dovecot_base):
    """Dovecot's auth socket for Postfix's smtpd (SASL as docs/serve.md's recipe gives it to the milter)."""
    return (f"service auth {{\n  unix_listener {dovecot_base}/auth-postfix {{\n    mode = 0666\n  }}\n}}\n",
            f"smtpd_sasl_auth_enable = yes\nsmtpd_sasl_type = dovecot\nsmtpd_sasl_path = {dovecot_base}/auth-postfix\n")


def _smtp(port, message, rcpt, sender="sender@client.example", source="127.0.0.1", login=None):
    """One SMTP transaction, no retry: (code, reply) of the end of DATA (or of the refused RCPT)."""
    with smtplib.SMTP("127.0.0.1", port, timeout=120, source_address=(source, 0)) as smtp:
        smtp.ehlo("client.example")
        if login:
            smtp.login(*login)
        code, reply = smtp.mail(sender)
        assert code == 250, (code, reply)
        code, reply = smtp.rcpt(rcpt)
        if code != 250:
            return code, reply
        return smtp.data(message)


@pytest.fixture
def policy_postfix(request):
    """``make(milter_port, extra_main="")``: tests/test_postfix_milter.py's Postfix with the docs' milter lines."""
    if _postfix_skip():
        pytest.skip(_postfix_skip())
    return request.getfixturevalue("milter_postfix")


from test_postfix_milter import milter_postfix  # noqa: E402,F401 - the fixture, used through policy_postfix
from postfix_private import pf_root, postfixes, wait_for, work  # noqa: E402,F401 - fixtures
from mailchain import DOMAIN, header, messages, serving, free_port  # noqa: E402,F401


@pytest.mark.slow
def test_postfix_authenticated_trusted_allowed_and_blocked(work, policy_postfix, serving, tmp_path):
    """Through the real Postfix, --milter-spam-action reject: the same spam is
    refused from outside, delivered untouched when submitted with SASL (a
    real Dovecot's auth socket) and from the trusted network (127.0.0.2);
    an allow-listed sender's spam is delivered with allowlisted=sender, a
    block-listed sender's ham refused with 550 5.7.1 during the session."""
    import dovecot_private

    if dovecot_private.missing():
        pytest.skip(dovecot_private.missing())
    base = dovecot_private.base_folder(tmp_path)
    dovecot_conf, sasl_main = _sender_sasl(base)
    dovecot = dovecot_private.Dovecot(base, {"alice": "s3cret"}, dovecot_conf)
    try:
        allow, block = work.root / "allow.list", work.root / "block.list"
        allow.write_text("friend@partner.example\n")
        block.write_text("@bad.example\n")
        milter_port = free_port()
        serve = serving(work, None, "--milter", f"127.0.0.1:{milter_port}", "-v", "--workers", "1",
                        "--milter-spam-action", "reject", "--milter-skip-authenticated",
                        "--trusted-networks", "127.0.0.2/32", "--milter-allowlist", allow,
                        "--milter-blocklist", block)
        pf = policy_postfix(milter_port, sasl_main)
        batch = messages(work.site, 8)
        spams = [m for m in batch if m[2] == "spam"]
        hams = [m for m in batch if m[2] == "ham"]
        rcpt = f"alice@{DOMAIN}"

        def tagged(tag, n):
            head, _, body = spams[n][1].partition(b"\n")
            return f"Message-ID: <{tag}@{DOMAIN}>\n".encode() + body

        code, reply = _smtp(pf.smtp_port, tagged("outside", 0), rcpt)
        assert code == 550 and b"5.7.1" in reply, (code, reply)
        assert _smtp(pf.smtp_port, tagged("authed", 0), rcpt, login=("alice", "s3cret"))[0] == 250
        assert _smtp(pf.smtp_port, tagged("trusted", 0), rcpt, source="127.0.0.2")[0] == 250
        assert _smtp(pf.smtp_port, tagged("allowed", 1), rcpt, sender="friend@partner.example")[0] == 250
        code, reply = _smtp(pf.smtp_port, hams[0][1], rcpt, sender="someone@bad.example")
        assert code == 550 and b"5.7.1" in reply and b"block list" in reply, (code, reply)
        got = wait_for(pf, {(t, "alice"): 1 for t in ("authed", "trusted", "allowed")}, time.monotonic() + 120)
        assert sorted(got) == [(t, "alice") for t in ("allowed", "authed", "trusted")], sorted(got)
        for t in ("authed", "trusted"):
            delivered = got[(t, "alice")]
            assert len(delivered) == 1 and header(delivered[0], "X-Spam-Status") == [] \
                and header(delivered[0], "X-Spam-Flag") == [], delivered[0][:2000]
        status = header(got[("allowed", "alice")][0], "X-Spam-Status")
        assert len(status) == 1 and status[0].startswith("No, score=0.0") and "allowlisted=sender" in status[0]
        # the milter logs a message once it has answered it: the last one's line may come after its 550
        _until_logged(serve, lambda log: all(text in log for text in (
            "trusted=authenticated", "trusted=trusted_network", "blocklisted=sender_domain", "allowlisted=sender")))
        assert "sasl_username=alice" in pf.log_text()
        assert not [line for line in pf.log_text().splitlines() if "warning" in line and "milter" in line.lower()]
    finally:
        dovecot.stop()
        if base != tmp_path:
            shutil.rmtree(base, ignore_errors=True)


def _until_logged(serve, condition, seconds=60):
    deadline = time.monotonic() + seconds
    while not condition(serve.log_text()):
        assert time.monotonic() < deadline, serve.log_text()[-3000:]
        time.sleep(0.1)


def _spamd_score(serve, message):
    from mailchain import SPAMC

    out = subprocess.run([SPAMC, "-d", "127.0.0.1", "-p", str(serve.port), "-c"], input=message,
                         capture_output=True, timeout=60).stdout
    return float(out.split(b"/")[0])


@pytest.mark.slow
def test_postfix_reject_score_and_unsure_deferred_once(work, policy_postfix, serving):
    """Through the real Postfix: with --milter-reject-score between two
    spams' scores, the lower one is tagged and delivered, the higher one
    refused; unsure mail under tempfail is answered 451 4.7.1 by Postfix,
    accepted on the sender's retry and delivered once; the same message
    from another client is deferred again."""
    config = work.root / "policy.conf"
    config.write_text("milter_reject_score = 900\n")
    milter_port = free_port()
    serve = serving(work, None, "--milter", f"127.0.0.1:{milter_port}", "-v", "--workers", "1",
                    "--milter-spam-action", "reject", "--milter-unsure-action", "tempfail", "--config", config)
    spams = [m for m in messages(work.site, 20) if m[2] == "spam"]
    scored = sorted(((_spamd_score(serve, m[1]), m) for m in spams), key=lambda x: x[0])
    gaps = [(b[0] - a[0], a, b) for a, b in zip(scored, scored[1:]) if a[0] >= 6]
    gap, (low_score, low), (high_score, high) = max(gaps, key=lambda g: g[0])
    assert gap >= 1.0, scored
    reject = round((low_score + high_score) / 2, 1)
    config.write_text(f"milter_reject_score = {reject}\n")
    serve.reload()
    _until_logged(serve, lambda log: "SIGHUP: settings reloaded" in log)
    pf = policy_postfix(milter_port)
    rcpt = f"alice@{DOMAIN}"
    assert _smtp(pf.smtp_port, low[1], rcpt)[0] == 250
    code, reply = _smtp(pf.smtp_port, high[1], rcpt)
    assert code == 550 and b"5.7.1" in reply, (code, reply, low_score, high_score, reject)
    # unsure mail: 451 to the sending client, its retry (a new transaction, as a sending MTA makes) accepted,
    # another client's copy deferred again
    from test_milter import _unsure_message

    unsure = b"Message-ID: <policy-unsure@test.example>\n" + _unsure_message(SpamFilter.load(work.site))
    code, reply = _smtp(pf.smtp_port, unsure, rcpt)
    assert code == 451 and b"4.7.1" in reply, (code, reply)
    assert _smtp(pf.smtp_port, unsure, rcpt)[0] == 250                  # the retry
    assert _smtp(pf.smtp_port, unsure, rcpt, source="127.0.0.3")[0] == 451
    got = wait_for(pf, {("policy-unsure", "alice"): 1, (low[0], "alice"): 1}, time.monotonic() + 120)
    assert len(got[("policy-unsure", "alice")]) == 1
    assert header(got[("policy-unsure", "alice")][0], "X-Spam-Status")[0].startswith("Unsure,")
    tagged = got[(low[0], "alice")]
    assert len(tagged) == 1 and header(tagged[0], "X-Spam-Status")[0].startswith("Yes,")
    assert (high[0], "alice") not in got
    deadline = time.monotonic() + 60
    while pf.queued():                                                  # nothing kept, nothing bounced
        assert time.monotonic() < deadline, pf.queued()
        time.sleep(0.2)
    _until_logged(serve, lambda log: log.count("action=tempfail") == 2)
    rejected = [line for line in pf.log_text().splitlines() if "milter-reject: END-OF-MESSAGE" in line]
    assert len(rejected) == 3 and sum("4.7.1 Message deferred: unsure" in line for line in rejected) == 2, rejected
