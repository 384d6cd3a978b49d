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
EXIT_CANNOT_LISTEN = 71     # sysexits' EX_OSERR
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
    (EXIT_CANNOT_LISTEN, "serve: cannot listen (address in use, privileged port without the right to it, ...)"),
    (EXIT_INTERRUPTED, "interrupted"),
)
