"""The one option table (spamnb/options.py): ``--help`` of each command it
makes, the man page, the fast reading and the settings keys agree with it;
serve's ``--config`` is TOML (its ``[serve]`` table), the older ``key =
value`` file still read, with a one-line notice naming its TOML equivalent."""

import os
import subprocess
import sys
import tomllib

import pytest

from conftest import REPO
from spamnb.cli import main
from spamnb.errors import SettingsError
from spamnb.options import default_of, fast_defaults, options, setting_kinds
from spamnb.settings import KEYS, RELOADABLE, SERVER_DEFAULTS, ServerSettings, load_settings, read_config

# every command: each of its options is a row of the table
COMMANDS = ("train", "classify", "learn", "forget", "info", "tokens", "evaluate", "dump", "load", "merge", "prune",
            "serve", "imap scan", "imap learn")


def _spamnb(*args, **kw):
    env = dict(os.environ, COLUMNS="100", PYTHONPATH=str(REPO))
    env.pop("SPAMNB_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "spamnb", *args], capture_output=True, text=True, env=env,
                          timeout=120, **kw)


def _words(text):
    return " ".join(text.replace("%%", "%").split())


@pytest.fixture(scope="module")
def man_page():
    return _spamnb("--man").stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_the_parser_of_a_command_is_its_table(command):
    """Every option of the command's parser is a row of the table, and every row an option of the parser."""
    sub = main.build_parser(command.split()[0])
    for word in command.split():
        sub = next(a for a in sub._actions if a.dest in ("command", "imap_command")).choices[word]
    parsed = {tuple(a.option_strings) or (a.dest,) for a in sub._actions if a.dest != "help"}
    assert parsed == {option.flags for option in options(command)}
    for action in sub._actions:
        row = next((o for o in options(command) if o.flags == (tuple(action.option_strings) or (action.dest,))), None)
        if row is not None:
            assert action.dest == row.dest


@pytest.mark.parametrize("command", COMMANDS)
def test_help_and_man_page_say_what_the_table_says(command, man_page):
    """``spamnb CMD --help`` and the man page carry each row's flags and help, its default stated as the table's."""
    shown = _spamnb(*command.split(), "--help")
    assert shown.returncode == 0, shown.stderr
    text = _words(shown.stdout)
    man = _words(man_page.replace("\\-", "-").replace("\\fB", "").replace("\\fR", "").replace("\\fI", ""))
    for option in options(command):
        help_text = option.kw.get("help")
        if help_text is None:
            continue
        shown_as = option.flags if option.flags[0].startswith("-") else (option.kw.get("metavar", option.dest),)
        for flag in shown_as:
            assert flag in text and flag in man, (command, flag)
        head = _words(help_text.split("{")[0])[:40]   # up to the first value the help names
        assert head in text and head in man, (command, head)
        default = default_of(option)
        if "{default" in help_text and isinstance(default, float):
            assert f"default {default:g}" in text or f"default {default:.1f}" in text, (command, option)


def test_the_global_options_are_the_tables(man_page):
    parser = main.build_parser()
    assert {tuple(a.option_strings) for a in parser._actions if a.option_strings and a.dest != "help"} == {
        option.flags for option in options("global")}
    assert main.fast_args(["classify"]).settings is None and "\\-\\-completion" in man_page


def test_the_settings_keys_are_the_tables():
    """The settings file's keys are the commands' options marked as settings, of their type; each is an
    option of classify or learn, and tests/test_docs.py's settings example names them."""
    assert set(KEYS) == set(setting_kinds("file")) == {"model", "spam_cutoff", "ham_cutoff", "header_name",
                                                       "subject_tag", "shared"}
    assert KEYS["spam_cutoff"] is float and KEYS["header_name"] is str
    helps = _words(_spamnb("classify", "--help").stdout + _spamnb("learn", "--help").stdout)
    for key in KEYS:
        assert "--" + key.replace("_", "-") in helps, key


def test_serve_settings_are_the_tables():
    """SERVER_DEFAULTS, RELOADABLE and the [serve] table's keys: serve's rows marked as settings."""
    serve_rows = [o for o in options("serve") if o.setting == "serve"]
    assert SERVER_DEFAULTS == {o.dest: o.default for o in serve_rows}
    assert set(RELOADABLE) == {o.dest for o in serve_rows if o.reload} and set(RELOADABLE) <= set(SERVER_DEFAULTS)
    assert set(setting_kinds("serve")) == set(SERVER_DEFAULTS)
    # the options that are no settings: what serve does instead of serving, and the file itself
    assert {o.dest for o in options("serve")} - set(SERVER_DEFAULTS) == {
        "config", "ui_hash_password", "status", "check_config"}


def test_wait_is_written_once():
    """--wait's default is the engine's (spamnb.persistence.store.DEFAULT_WAIT) for classify and learn, fast or parsed."""
    from spamnb.persistence import store

    assert fast_defaults("classify")["wait"] == fast_defaults("learn")["wait"] == store.DEFAULT_WAIT
    for argv in (["classify", "--json"], ["learn", "--spam", "-q", "--follow-links"]):
        assert main.build_parser(argv[0]).parse_args(argv).wait == store.DEFAULT_WAIT
    assert main.fast_args(["classify"]).wait == main.fast_args(["learn", "--ham"]).wait == store.DEFAULT_WAIT


# ---------------------------------------------------------------------------- serve's --config: TOML

EVERY_KIND = {   # one setting of each kind, and the values of a file in the older form
    "listen": ["127.0.0.1:7830", "/run/spamnb.sock"], "allow_tell": "yes", "max_size": "1000000",
    "timeout": "12.5", "subject_tag": "[SPAM] \"x\"", "trusted_networks": "192.0.2.0/24, 2001:db8::/32",
    "milter_unsure_action": "tempfail", "workers": "2",
}


def _old_file(path):
    lines = ["# the older form", ""]
    for key, value in EVERY_KIND.items():
        for one in value if isinstance(value, list) else [value]:
            lines.append(f"{key.replace('_', '-') if key == 'max_size' else key} = {one}")
    path.write_text("\n".join(lines) + "\n")
    return path


def _attributes(settings):
    return {key: getattr(settings, key) for key in vars(settings)}


def test_a_serve_table(tmp_path):
    config = tmp_path / "settings.toml"
    config.write_text('spam_cutoff = 0.99\n[serve]\nlisten = "127.0.0.1:7830"\nallow-tell = true\n'
                      'max_size = 1000\ntimeout = 3\nallowed_ips = ["127.0.0.1", "::1"]\n'
                      '[imap]\nhost = "imap.example"\n')
    settings = ServerSettings({"timeout": 4.0}, config)
    assert settings.listen == [("tcp", "127.0.0.1", 7830)] and settings.allow_tell and settings.max_size == 1000
    assert settings.timeout == 4.0 and len(settings.allowed) == 2   # the command line wins over the file
    assert load_settings(config).spam_cutoff == 0.99    # the commands read the same file, [serve] left to serve


@pytest.mark.parametrize("text, error", [
    ('[serve]\nmax_size = "big"\n', r"\[serve\]: max_size must be an integer"),
    ("[serve]\nallow_tell = 1\n", r"allow_tell must be true or false"),
    ("[serve]\nlisten = [1]\n", r"listen must be a string or a list of strings"),
    ("[serve]\nnope = 1\n", r"\[serve\]: unknown setting 'nope'"),
    ("serve = 3\n", r"serve must be a table"),
    ('spam_cutoff = 0.9\n[imap]\nhost = "x"\n', r"no \[serve\] table"),
    ("what is this\n", r"serve.toml:1: unknown setting 'what is this'"),   # neither TOML nor key = value lines
])
def test_a_bad_config_file_is_one_line(tmp_path, text, error):
    config = tmp_path / "serve.toml"
    config.write_text(text)
    with pytest.raises(SettingsError, match=error):
        read_config(config)


def test_the_older_form_reads_as_its_toml_equivalent(tmp_path, capsys):
    old = _old_file(tmp_path / "serve.conf")
    from_old = ServerSettings({}, old)
    notice = capsys.readouterr().err
    assert notice.count("\n") == 1 and str(old) in notice and "docs/serve.md" in notice
    equivalent = notice.split("they are: ", 1)[1].strip()
    assert tomllib.loads(equivalent)["serve"]["allow_tell"] is True
    new = tmp_path / "serve.toml"
    new.write_text(equivalent + "\n")
    assert _attributes(ServerSettings({}, new)) == _attributes(from_old)
    ServerSettings({}, old)     # read again (a SIGHUP): no second notice
    assert capsys.readouterr().err == ""


def test_the_notice_through_the_command(tmp_path):
    """``spamnb serve`` with an older --config: one notice line, then what the command does (here: no server)."""
    config = tmp_path / "serve.conf"
    config.write_text("metrics = 127.0.0.1:1\nmax-size = 1000\n")
    proc = _spamnb("serve", "--status", "--config", str(config))
    lines = proc.stderr.splitlines()
    assert proc.returncode == 69 and len(lines) == 2, proc.stderr
    assert lines[0] == (f"spamnb serve: {config}: key = value lines are still read; in TOML (docs/serve.md) they "
                        'are: serve = { metrics = "127.0.0.1:1", max_size = 1000 }')
    assert lines[1].startswith("spamnb serve: no server answers at http://127.0.0.1:1/status")
    config.write_text('[serve]\nmetrics = "127.0.0.1:1"\n')
    proc = _spamnb("serve", "--status", "--config", str(config))
    assert proc.returncode == 69 and len(proc.stderr.splitlines()) == 1, proc.stderr


def test_the_config_example_in_the_docs_reads(tmp_path):
    """docs/serve.md's ``[serve]`` example is a file serve reads, and its older-form notice is the code's."""
    text = (REPO / "docs" / "serve.md").read_text()
    section = text.split("### The `--config` file", 1)[1]
    example = section.split("```toml\n", 1)[1].split("```", 1)[0]
    config = tmp_path / "serve.toml"
    config.write_text(example)
    values = read_config(config)
    assert values["allow_tell"] is True and values["milter"] == ["127.0.0.1:11332"]
    notice = next(line.strip() for line in section.splitlines() if "key = value lines are still read" in line)
    from spamnb.settings import toml_equivalent

    assert notice.endswith(toml_equivalent({"listen": ["127.0.0.1:783"], "allow_tell": "yes", "max_size": "4194304"}))
