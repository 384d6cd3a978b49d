"""The exit codes of every ``spamnb`` command (one set; also in the README and ``spamnb --help``).

``classify`` of one message follows bogofilter's convention (0 spam, 1 ham,
2 unsure) so scripts written for it carry over; with ``-p`` (passthrough), or
several messages, it exits 0 once every message got a verdict.
"""

EXIT_OK = 0
EXIT_SPAM = 0
EXIT_HAM = 1
EXIT_UNSURE = 2
EXIT_ERROR = 3
EXIT_ONE_CLASS = 65    # EX_DATAERR: train given a corpus with no spam or no ham (without --force)
EXIT_USAGE = 64
EXIT_NO_TLS = 66            # sysexits' EX_NOINPUT: serve's TLS certificate or key cannot be read
EXIT_NO_SERVER = 69         # EX_UNAVAILABLE: serve --status found no server
EXIT_IMAP_UNREACHABLE = 69  # EX_UNAVAILABLE: imap: no connection, or the server's certificate not trusted
EXIT_CANNOT_LISTEN = 71     # sysexits' EX_OSERR
EXIT_PIDFILE_BAD = 73       # EX_CANTCREAT: serve's --pidfile cannot be used (a symbolic link, no such folder, ...)
EXIT_PIDFILE_HELD = 75      # EX_TEMPFAIL: serve's --pidfile is held by a running server
EXIT_NO_PRIVILEGES = 77     # EX_NOPERM: serve cannot become -u USER
EXIT_IMAP_LOGIN = 77        # EX_NOPERM: imap: the server refused the user or password
EXIT_CONFIG = 78            # EX_CONFIG: serve --check-config found problems (one line each)
EXIT_INTERRUPTED = 130

VERDICT_EXIT = {"spam": EXIT_SPAM, "ham": EXIT_HAM, "unsure": EXIT_UNSURE}

TABLE = (
    (EXIT_OK, "success; classify of one message: spam"),
    (EXIT_HAM, "classify of one message (without -p): ham"),
    (EXIT_UNSURE, "classify of one message (without -p): unsure"),
    (EXIT_ERROR, "error: no model, unreadable input or settings, damaged model, ... (one line on stderr);"
                 " serve: no usable site model"),
    (EXIT_USAGE, "usage error: unknown command or option, bad value"),
    (EXIT_ONE_CLASS, "train: the corpus holds no spam or no ham (--force trains it anyway); the model unchanged"),
    (EXIT_NO_TLS, "serve: the TLS certificate or key cannot be read"),
    (EXIT_NO_SERVER, "serve --status: no server answers at the --metrics address; imap: the server cannot be"
                     " reached (host, port, TLS certificate not trusted)"),
    (EXIT_CANNOT_LISTEN, "serve: cannot listen (address in use, privileged port without the right to it, ...)"),
    (EXIT_PIDFILE_BAD, "serve: the --pidfile cannot be used (a symbolic link, no such folder, no permission)"),
    (EXIT_PIDFILE_HELD, "serve: the --pidfile is held by a running server"),
    (EXIT_NO_PRIVILEGES, "serve: cannot become -u USER (--group); imap: the server refused the login"),
    (EXIT_CONFIG, "serve --check-config: the set-up would not serve (one line on stderr per problem)"),
    (EXIT_INTERRUPTED, "interrupted"),
)
