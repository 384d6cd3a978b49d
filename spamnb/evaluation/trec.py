"""An adapter for the TREC Spam Track jig: ``python -m spamnb.evaluation.trec COMMAND ...``.

The jig runs four commands of a filter, in its folder, one process per call:

=================================  ============================================
``initialize``                     start from an empty model (removes an old one)
``classify FILE``                  prints ``class=spam score=S tfile=*`` (or
                                   ``class=ham``); S is the log-odds, larger is
                                   spammier; the class is spam when S >= 0
``train JUDGEMENT FILE``           learns FILE as ``spam`` or ``ham`` (the jig
                                   calls it after every classify: full feedback)
``finalize``                       nothing to clean up (the model is kept)
=================================  ============================================

The model lives in ``$SPAMNB_TREC_DIR`` (default: ``spamnb-trec`` in the
current folder) as an ordinary model file (``model.spamnb``), written
atomically after every ``train`` (before both classes were seen, the
judgements are listed in ``trained`` and the model is fitted on them when
the second class comes).  ``scripts/trec/`` holds the four
executables the jig expects, each a one-line call of this module.  Exit
codes: 0, 3 on an error (one line on stderr), 64 on a usage error.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

USAGE = "usage: python -m spamnb.evaluation.trec initialize | classify FILE | train spam|ham FILE | finalize"


def state_dir():
    return os.environ.get("SPAMNB_TREC_DIR") or os.path.join(os.getcwd(), "spamnb-trec")


def model_path():
    return os.path.join(state_dir(), "model.spamnb")


def classify_line(path):
    """The jig's line for the message at ``path``."""
    from spamnb.model import SpamFilter

    model = model_path()
    log_odds = SpamFilter.load(model).score(Path(path)).log_odds if os.path.exists(model) else 0.0
    label = "spam" if log_odds >= 0 else "ham"
    return f"class={label} score={log_odds:.6f} tfile=*"


def index_path():
    return os.path.join(state_dir(), "trained")


def train(judgement, path):
    """Learn one message.  Until both classes have been seen there is no model
    (a one-class model has an infinite prior): the judgements are kept in
    the ``trained`` list, and the model is fitted on them when the second
    class first comes."""
    from spamnb.model import SpamFilter
    from spamnb.model import learned_model
    from spamnb.model import message_bytes
    from spamnb.model import save_whole
    from spamnb.model import locked

    path = Path(path)     # a file name, never the message's text
    message_bytes(path)   # unreadable: the error comes now, and nothing is recorded
    model = model_path()
    with locked(model):
        if os.path.exists(model):
            spam_filter = SpamFilter.load(model)
            spam_filter.learn(path, spam=judgement == "spam")
            save_whole(spam_filter, model)   # its journal, loaded with the model, folded in
            return
        with open(index_path(), "a", encoding="utf-8", errors="surrogateescape") as f:
            f.write(f"{judgement} {os.path.abspath(path)}\n")
        with open(index_path(), encoding="utf-8", errors="surrogateescape") as f:
            rows = [line.rstrip("\n").split(" ", 1) for line in f if line.strip()]
        labels = [label == "spam" for label, _ in rows]
        if any(labels) and not all(labels):
            learned_model().fit([Path(p) for _, p in rows], labels, tune=False).save(model)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    shape = {"initialize": 0, "classify": 1, "train": 2, "finalize": 0}
    if not argv or argv[0] not in shape or len(argv) - 1 != shape[argv[0]] or (
            argv[0] == "train" and argv[1].lower() not in ("spam", "ham")):
        print(USAGE, file=sys.stderr)
        return 64
    command = argv[0]
    try:
        if command == "initialize":
            os.makedirs(state_dir(), exist_ok=True)
            for path in (model_path(), index_path()):
                if os.path.exists(path):
                    os.remove(path)
        elif command == "classify":
            print(classify_line(argv[1]))
        elif command == "train":
            train(argv[1].lower(), argv[2])
        return 0
    except Exception as exc:  # one line, never a traceback
        print(f"spamnb.evaluation.trec {command}: {' '.join(str(exc).split()) or type(exc).__name__}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
