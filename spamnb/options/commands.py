"""The rows of the option table (:mod:`spamnb.options`) of the commands off
the mail filter's cold path: ``train``, ``evaluate``, ``info``, ``tokens``,
``dump``, ``load``, ``merge``, ``prune``, ``imap scan``/``imap learn`` and
``serve`` (whose options are its settings: the ``--config`` file's
``[serve]`` table).  A module of their own so that ``spamnb classify``
does not read them; :func:`spamnb.options.options` reads them when asked."""

from spamnb.options import MILTER_SPAM_ACTIONS, MILTER_TRUSTED_ACTIONS, MILTER_UNSURE_ACTIONS, Option, Ref, options

__all__ = ["ROWS"]

_PAIRS = "auto|0|W"


def _train():
    return [
        Option("dirs", nargs="*", metavar="DIR",
               help="folder tree: folders named spam* or junk* (and Maildir++ folders with such a part: "
                    ".Spam, .Junk.2023) hold spam, bulk* folders are skipped, others are ham; files may be "
                    "mboxes; devices, FIFOs and files over 64 MiB (not mboxes) are skipped"),
        Option("--spam", action="append", default=[], metavar="PATH", help="spam: folder, Maildir or mbox"),
        Option("--ham", action="append", default=[], metavar="PATH",
               help="ham: folder, Maildir or mbox (its spam and bulk folders are left out, said so)"),
        Option("--strict", action="store_true", default=False,
               help="fail on unreadable or non-mail files instead of skipping"),
        Option("--follow-links", action="store_true", default=False,
               help="read links to files outside the folders given (skipped by default)"),
        Option("--force", action="store_true", default=False,
               help="train on a corpus with no spam or no ham (refused by default: exit 65, the model unchanged)"),
        Option("--alpha", type="float", help="Dirichlet soft count"),
        Option("--counts", choices=("binary", "raw", "log"), help="per-message token weighting"),
        Option("--prior", choices=("mle", "map", "uniform"), help="class prior estimator"),
        Option("--length-norm", type="float", metavar="S",
               help="scale each message's token counts to this Euclidean length (default 5; 0: off)"),
        Option("--feature-weight", type="float", metavar="W",
               help="weight of the continuous message features (default 0: off; see docs/features.md)"),
        Option("--word-pairs", type="pairs", default="auto", metavar=_PAIRS,
               help="word pairs of window W as tokens too; auto (the default): train with and without "
                    "pairs of window 2 and keep what the cross-validation favours (see docs/accuracy.md)"),
        *options("cutoffs"),
        Option("--target-fpr", type="rate", default=0.001, metavar="RATE",
               help="choose the cutoffs by cross-validation for this false-positive rate "
                    "(default {default:g}; 0: keep the default cutoffs; see docs/accuracy.md)"),
        Option("-q", "--quiet", action="store_true", default=False, help="no progress and no summary"),
        *options("wait"),
        *options("model"),
        Option("-j", "--jobs", type="jobs", metavar="N",
               help="worker processes (default: the cores free, those available less those busy, at least 1; "
                    "1 with --feature-weight; 0: every core; 1: this process; the same model file whatever -j; "
                    "see docs/scale.md)"),
        Option("--partition-size", type="int", default=Ref("spamnb.training.planning", "DEFAULT_PARTITION_SIZE"),
               metavar="N", help="messages per partition with -j (default {default}; the model depends on it, "
                                 "not on -j)"),
        Option("--dask", metavar="ADDRESS", help="train on a Dask cluster (scheduler address; needs spamnb[dask])"),
    ]


def _evaluate():
    protocol = ("protocol", False)
    return [
        Option("corpus", nargs="*", metavar="CORPUS", help="folder tree: folders named spam* hold spam, the others ham"),
        Option("--spam", action="append", default=[], metavar="PATH", help="spam: folder, Maildir or mbox"),
        Option("--ham", action="append", default=[], metavar="PATH", help="ham: folder, Maildir or mbox"),
        Option("--folds", type="int", default=10, metavar="K", group=protocol,
               help="stratified K-fold cross-validation (default {default})"),
        Option("--split", choices=("md5",), group=protocol, help="the fixed split: test when md5(relpath) %% 5 == 0"),
        Option("--online", action="store_true", default=False, group=protocol,
               help="TREC Spam Track protocol: classify, then learn, each message in order, "
                    "from an empty model (spamnb.evaluation.online)"),
        Option("--index", metavar="FILE",
               help="with --online: order and labels from lines 'spam|ham PATH' (TREC full/index)"),
        Option("--order", choices=("auto", "date", "name"), default="auto",
               help="with --online: by Date: header, by file name number, or auto (default)"),
        Option("--train-on-error", action="store_true", default=False,
               help="with --online: learn a message only when it was misclassified"),
        Option("--auto-learn", action="store_true", default=False,
               help="with --online --train-on-error: as classify --auto-learn and serve --auto-learn run: "
                    "a verdict 2 log-odds beyond its cutoff learned as itself (relabelled when wrong), "
                    "a wrong or unsure one learned with its label (scripts/bench/bench_online.py's "
                    "\"on error + auto-learn\")"),
        Option("--margin", type="float", default=0.0, metavar="LOGODDS",
               help="with --train-on-error: also learn when |log-odds| < LOGODDS (thick threshold)"),
        Option("--window", type="int", default=1000, metavar="N",
               help="with --online: messages per point of the learning curve (default {default})"),
        Option("--train", action="append", default=[], metavar="CORPUS",
               help="train on this corpus (with --test: no cross-validation)"),
        Option("--test", action="append", default=[], metavar="CORPUS", help="test on this corpus"),
        Option("--seed", type="int", default=0, help="seed of the fold assignment (default {default})"),
        Option("--alpha", type="float", help="Dirichlet soft count of the filter"),
        Option("--prior", choices=("mle", "map", "uniform"), help="class prior estimator"),
        Option("--counts", choices=Ref("spamnb.evaluation.crossval", "COMPARE_COUNTS"),
               help="per-message token weighting"),
        Option("--plain", action="store_true", default=False,
               help="evaluate the plain model: each fold's filter only counts (no word pairs unless "
                    "--word-pairs W), at the default cutoffs, instead of what spamnb train builds"),
        Option("--word-pairs", type="pairs", default="auto", metavar=_PAIRS,
               help="word pairs of window W as tokens too; auto (the default): each fold decides as "
                    "spamnb train does (none with --plain; with --online as a learned model has them, "
                    "window 2 at weight 0.5); 0: none"),
        Option("--target-fpr", type="rate", default=Ref("spamnb.estimator.calibrate", "DEFAULT_TARGET_FPR"),
               metavar="RATE", help="each fold chooses its cutoffs as spamnb train does, for this false-positive "
                                    "rate (default {default:g}; 0: the default cutoffs; not with --plain)"),
        Option("--compare", action="store_true", default=False,
               help="also kNN, MLE vs MAP priors, several alphas, binary vs raw counts on the same folds"),
        Option("--json", metavar="PATH", help="write all figures as JSON"),
        Option("--plot", metavar="PNG", help="ROC curve (log FPR axis) and score histograms (needs matplotlib)"),
        Option("--no-progress", action="store_true", default=False, help="no progress bar on stderr"),
        Option("-j", "--jobs", type="jobs", metavar="N",
               help="train and score the splits on N worker processes (default: every core "
                    "available; 1: this process); the same figures"),
    ]


def _info():
    return [
        Option("--tokens", type="int", default=10, metavar="N", help="strongest tokens to list"),
        Option("--check", action="store_true", default=False,
               help="check the model file whole (its checksum, every count, the hash index, the token "
                    "strings; classify and learn map it and check only its header and bounds) and the "
                    "journal beside it; exit 0 when whole, 3 with the reason when not"),
        *options("model"),
    ]


def _tokens():
    return [Option("file", nargs="?", default="-", metavar="FILE")]


def _quiet():
    return Option("-q", "--quiet", action="store_true", default=False)


def _dump():
    return [Option("-o", "--output", metavar="FILE", help="write to FILE (atomically) instead of stdout"),
            *options("model")]


def _load():
    return [
        Option("file", metavar="FILE", help="a dump ('spamnb dump'), or - for stdin"),
        Option("--add", action="store_true", default=False,
               help="add the dump's counts to the model instead of replacing it"),
        _quiet(),
        *options("model"),
        *options("wait"),
    ]


def _merge():
    return [
        Option("inputs", nargs="+", metavar="MODEL", help="model files or dumps"),
        Option("-o", "--output", required=True, metavar="OUT", help="the merged model file"),
        _quiet(),
        *options("wait"),
    ]


def _prune():
    return [
        Option("--min-count", type="non_negative_float", metavar="N",
               help="drop tokens seen fewer than N times in all; refused (exit 3, the model unchanged) "
                    "for a model trained with length normalisation (--length-norm > 0, the default), "
                    "whose counts are not occurrences: prune it with --target-size or --max-age"),
        Option("--max-age", type="non_negative_int", metavar="DAYS",
               help="drop tokens not seen in a learned message for more than DAYS days"),
        Option("--target-size", type="non_negative_int", metavar="N", help="keep at most the N most useful tokens"),
        Option("--expire-at", type="token_limit", metavar="N",
               help="automatic expiry: when a learn leaves more than N tokens (N >= 1000), prune to "
                    "90 %% of N (0: off); prunes now too if the model is past N"),
        Option("-n", "--dry-run", action="store_true", default=False, help="say what would go, change nothing"),
        _quiet(),
        *options("model"),
        *options("wait"),
    ]


def _imap_job():
    """What both jobs of ``spamnb imap`` take."""
    return [
        Option("--cafile", metavar="FILE", help="the CA certificates to trust for the server (PEM)"),
        Option("-q", "--quiet", action="store_true", default=False, help="no progress and no summary"),
        Option("--timeout", type="positive_float", default=Ref("spamnb.imap", "DEADLINE"), metavar="SECONDS",
               help="give up (exit 69) when the run has not ended after SECONDS (default {default:g})"),
        Option("--max-size", type="positive_int", default=Ref("spamnb.imap", "MAX_SIZE"), metavar="BYTES",
               help="leave a message larger than BYTES where it is, unread (default {default})"),
        *options("model"),
    ]


def _imap_scan():
    return [
        Option("--flag-only", action="store_true", default=False,
               help="set the $Junk keyword on spam instead of moving it"),
        Option("--add-header", action="store_true", default=False,
               help="re-append each message with the verdict header (and subject tag) in place of the original"),
        *_imap_job(),
    ]


def _imap_learn():
    return [
        Option("--ham", action="append", metavar="FOLDER",
               help="a folder to learn as ham (repeatable; default: the [imap] ham setting, INBOX)"),
        *options("wait"),
        *_imap_job(),
    ]


# spamnb serve: its options are its settings (the --config file's [serve] table)

def _serve():
    s = "serve"
    return [
        Option("-l", "--listen", action="append", metavar="ADDR", setting=s, default=["127.0.0.1:783"],
               help="HOST:PORT or a Unix socket path (repeatable; default {listen_text})"),
        Option("-m", "--model", metavar="PATH", setting=s, reload=True,
               help="site model (default: $SPAMNB_HOME/model.spamnb)"),
        Option("--models-dir", metavar="DIR", setting=s, reload=True,
               help="per-user models: DIR/<user>/model.spamnb"),
        Option("--allowed-ips", metavar="NETS", setting=s, reload=True,
               help="comma-separated addresses/networks allowed to connect over TCP (default loopback)"),
        Option("--allow-tell", action="store_const", const=True, setting=s, default=False, reload=True,
               help="accept TELL (learning; spamc -L)"),
        Option("--auto-learn", action="store_const", const=True, setting=s, default=False, reload=True,
               help="learn the verdicts the checking model is sure of (2 log-odds beyond its cutoff; "
                    "never unsure mail), marked in its ledger so a later TELL or learn relabels them, "
                    "at most 120 a model and hour; the user's own model, the site model only "
                    "without --models-dir (default: off)"),
        Option("--create-user-models", action="store_const", const=True, setting=s, default=False, reload=True,
               help="let TELL create a model for a user without one (a copy of the site model; "
                    "default: refused)"),
        Option("--max-user-models", type="int", metavar="N", setting=s, default=1000, reload=True,
               help="TELL creates no user model past N of them (default {default})"),
        Option("--max-user-models-bytes", type="int", metavar="BYTES", setting=s, default=10 * 1024 ** 3,
               reload=True, help="TELL creates no user model past BYTES in all user models "
                                 "(default {default_gib:g} GiB)"),
        Option("--max-size", type="int", metavar="BYTES", setting=s, default=4 * 1024 * 1024, reload=True,
               help="largest message checked (default {default} = {default_mib:g} MiB)"),
        Option("--max-connections", type="int", metavar="N", setting=s, default=64, reload=True,
               help="connections at once; past it new ones wait in the listen backlog "
                    "(default {default})"),
        Option("--max-models", type="int", metavar="N", setting=s, default=1000, reload=True,
               help="models kept loaded (default {default})"),
        Option("--max-models-bytes", type="int", metavar="BYTES", setting=s, default=64 * 1024 ** 2, reload=True,
               help="bytes of user models kept loaded per worker, least recently used out first; the site "
                    "model apart (default {default_mib:.0f} MiB)"),
        Option("--timeout", type="float", metavar="SECONDS", setting=s, default=30.0, reload=True,
               help="time to receive a request from its first byte / send a response (default {default:g})"),
        Option("--idle-timeout", type="float", metavar="SECONDS", setting=s, default=5.0, reload=True,
               help="a connection silent this long before a request is closed (default {default:g})"),
        Option("--required-score", type="float", metavar="R", setting=s, default=5.0, reload=True,
               help="score the spam cutoff maps to (default {default:.1f})"),
        Option("--socket-mode", metavar="OCTAL", setting=s, default="0660",
               help="permissions of a Unix socket (default {default})"),
        Option("--syslog", action="store_const", const=True, setting=s, default=False, reload=True,
               help="log to syslog (mail facility)"),
        Option("--report", action="store_const", const=True, setting=s, default=False, reload=True,
               help="PROCESS/HEADERS also add X-Spam-Report (the report, folded; default off)"),
        Option("--subject-tag", metavar="TAG", setting=s, reload=True,
               help="PROCESS/HEADERS put TAG before the Subject of spam, once (default: none)"),
        Option("--config", metavar="FILE",
               help="settings file (TOML: its [serve] table, keys as the long options), re-read on SIGHUP"),
        Option("-v", "--verbose", action="store_const", const=True, setting=s, default=False, reload=True,
               help="log one line per request (errors, reloads, start and stop are always logged)"),
        Option("-w", "--workers", metavar="N", setting=s,
               help="worker processes sharing the sockets (default: one per core; 1: a single process)"),
        Option("-u", "--username", "--user", dest="user", metavar="USER", setting=s,
               help="when started as root: bind, then run as USER (and its groups)"),
        Option("-g", "--groupname", "--group", dest="group", metavar="GROUP", setting=s,
               help="with -u: run with this group instead of USER's own"),
        Option("-r", "--pidfile", metavar="PATH", setting=s,
               help="write the process id there (refused while another live server holds it)"),
        Option("--ssl-listen", action="append", metavar="HOST:PORT", setting=s,
               help="also listen for TLS connections (spamc -S) there (repeatable)"),
        Option("--ssl-cert", "--server-cert", dest="ssl_cert", metavar="FILE", setting=s,
               help="TLS certificate (PEM, may hold the key too)"),
        Option("--ssl-key", "--server-key", dest="ssl_key", metavar="FILE", setting=s,
               help="TLS private key (PEM)"),
        Option("--metrics", metavar="[HOST:]PORT", setting=s,
               help="serve Prometheus /metrics and a /status report there (host: loopback by default)"),
        Option("--milter", action="append", metavar="ADDR", setting=s,
               help="also (or, without -l, only) speak the milter protocol (Postfix smtpd_milters) on "
                    "HOST:PORT or a Unix socket path (repeatable; needs pip install 'spamnb[milter]')"),
        Option("--milter-spam-action", choices=MILTER_SPAM_ACTIONS, setting=s, default="tag", reload=True,
               help="milter: what to do with spam: add the X-Spam-* fields, refuse it with 550 5.7.1 at the "
                    "end of DATA, or tag it and ask the MTA to hold it (default {default})"),
        Option("--milter-on-error", choices=("accept", "tempfail"), setting=s, default="accept", reload=True,
               help="milter: the answer for a message that cannot be checked (over --max-size, no usable "
                    "model, an internal error): pass it unchanged or defer it (default {default})"),
        Option("--milter-user", choices=("local", "address"), setting=s, default="local", reload=True,
               help="milter: the user name of a message's one recipient, for --models-dir: its local part "
                    "without a +extension, or its whole address; lower case (default {default})"),
        Option("--milter-timeout", type="float", metavar="SECONDS", setting=s, default=300.0, reload=True,
               help="milter: seconds a milter connection may stay silent (an MTA waits on its SMTP "
                    "client meanwhile; default {default:g})"),
        # None: --max-size / 2 + 4096 (more than an MTA sends for such a message)
        Option("--milter-max-packets", type="int", metavar="N", setting=s, reload=True,
               help="milter: packets one message may take; past it the message is refused with a temporary "
                    "failure, unchecked (default: --max-size / 2 + 4096, more than an MTA sends for a message "
                    "of --max-size)"),
        Option("--milter-skip-authenticated", action="store_const", const=True, setting=s, default=False,
               reload=True,
               help="milter: mail whose MAIL command came with the {auth_authen} macro (a SASL-authenticated "
                    "submission) gets --milter-trusted-action (default: checked as any other)"),
        Option("--trusted-networks", metavar="NETS", setting=s, reload=True,
               help="milter: comma-separated client addresses/networks whose mail gets --milter-trusted-action "
                    "(the {client_addr} macro; default none)"),
        Option("--milter-trusted-action", choices=MILTER_TRUSTED_ACTIONS, setting=s, default="accept", reload=True,
               help="milter: authenticated and trusted-network mail is passed untouched, not checked (accept), "
                    "or checked and logged, passed untouched (check) (default {default})"),
        Option("--milter-allowlist", metavar="FILE", setting=s, reload=True,
               help="milter: senders, @domains and client networks (one a line, # comments) whose mail is "
                    "delivered unchecked, its X-Spam-Status saying allowlisted=KIND; re-read on SIGHUP"),
        Option("--milter-blocklist", metavar="FILE", setting=s, reload=True,
               help="milter: senders, @domains and client networks (the same format) whose mail is refused "
                    "with 550 5.7.1 (the MTA refuses it during SMTP); re-read on SIGHUP"),
        # None: --milter-spam-action for all spam
        Option("--milter-reject-score", type="float", metavar="SCORE", setting=s, reload=True,
               help="milter: spam scoring SCORE or more is refused (550 5.7.1), spam below it gets "
                    "--milter-spam-action (tag for reject); at least the spam cutoff's score "
                    "(--required-score; default: none, --milter-spam-action for all spam)"),
        Option("--milter-unsure-action", choices=MILTER_UNSURE_ACTIONS, setting=s, default="accept", reload=True,
               help="milter: unsure mail is delivered with its fields (accept), its Subject tagged too (tag), "
                    "or deferred with 451 4.7.1 once per client, sender and first recipient in 4 hours, "
                    "accepted on the retry (tempfail) (default {default})"),
        Option("--milter-domains", metavar="FILE", setting=s, reload=True,
               help="milter: a TOML file (settings.toml may be it) of [domain.\"NAME\"] tables: spam_action, "
                    "reject_score, unsure_action, model for mail to that domain (the first recipient's); "
                    "re-read on SIGHUP"),
        Option("--shared", metavar="redis://HOST:PORT/DB", setting=s,
               help="share learning with other hosts through this Redis: TELLs go to a stream every host "
                    "follows and learns from; scoring stays local (needs pip install 'spamnb[shared]'; "
                    "docs/serve.md)"),
        Option("--shared-state", metavar="DIR", setting=s,
               help="with --shared: this host's outbox and stream position (default: MODEL.shared/ "
                    "beside the site model)"),
        Option("--snapshot-interval", type="float", metavar="SECONDS", setting=s, default=300.0,
               help="with --shared: publish a snapshot of the models this often, and trim the stream "
                    "behind it; 0: never (default {default:g})"),
        # the web console (spamnb.console; docs/ui.md)
        Option("--ui", metavar="[HOST:]PORT", setting=s,
               help="serve the web console there (history, evidence, learning; host: loopback by default, "
                    "another only with --ui-tls and --allowed-ips; needs pip install 'spamnb[ui]')"),
        Option("--ui-users", metavar="FILE", setting=s,
               help="the console's users: 'name role scrypt$...' a line, role viewer, trainer, admin or user "
                    "(a user sees only their own mail); lines from --ui-hash-password"),
        Option("--ui-tls", action="store_const", const=True, setting=s, default=False,
               help="serve the console over HTTPS with --ssl-cert/--ssl-key (cookies then Secure)"),
        Option("--ui-origin", metavar="URL", setting=s,
               help="the console's address as browsers see it behind a reverse proxy (https://host), "
                    "the one Origin its POSTs may come from"),
        # None: history.sqlite beside the site model
        Option("--ui-history", metavar="FILE", setting=s,
               help="the history's SQLite file (default: history.sqlite beside the site model)"),
        Option("--ui-history-rows", type="int", metavar="N", setting=s, default=100_000,
               help="checks kept in the history, the oldest out first (default {default})"),
        Option("--ui-history-days", type="float", metavar="DAYS", setting=s, default=30.0,
               help="checks older than this leave the history (default {default:g})"),
        # messages kept for learning from the history; 0: none (they are mail content)
        Option("--ui-keep-messages", type="int", metavar="N", setting=s, default=0,
               help="keep the last N messages (each up to 1 MiB) so the console can learn from the history; "
                    "they are mail content: off by default (0)"),
        Option("--ui-hash-password", action="store_true", default=False,
               help="read a password on stdin, print its scrypt hash for --ui-users, and exit"),
        Option("--status", action="store_true", default=False,
               help="print the running server's figures (from its --metrics address) and exit"),
        Option("--check-config", action="store_true", default=False,
               help="check, without starting, every file, listener, model, user and permission these "
                    "options and --config need (files as -u USER); one line on stderr per problem, "
                    "exit 78 if any, else 0"),
    ]


ROWS = {"train": _train, "evaluate": _evaluate, "info": _info, "tokens": _tokens, "dump": _dump, "load": _load,
        "merge": _merge, "prune": _prune, "imap scan": _imap_scan, "imap learn": _imap_learn, "serve": _serve}
