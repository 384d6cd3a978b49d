"""The maintenance commands: ``spamnb dump``, ``load``, ``merge``, ``prune``
(a thin shell over :mod:`spamnb.model.lifecycle`), and the lines they add to
``spamnb info``.

Every command that changes a model takes the learners' lock
(``spamnb.persistence.store.locked``) before it reads anything of the model it
will replace (``merge A B -o A`` included) and holds it until the model is
written, atomically (a new file renamed over the old one): a kill at any
moment leaves the old model or the new one, and no learn acknowledged
meanwhile is lost.  The model replaced is kept as ``MODEL.bak`` (with its
journal, as ``MODEL.bak.journal``).  A dump is read and checked whole
before the model is touched, so a damaged dump changes nothing.
"""

from __future__ import annotations

import os
import stat
import sys

from spamnb.cli.common import CommandError, UsageError, human_size, load_filter, model_path, settings_of
from spamnb.cli.parsing import add_options
from spamnb.cli.exitcodes import EXIT_OK

COMMANDS = ("info", "dump", "load", "merge", "prune")


def register(sub, wanted):
    """Add the subcommands that ``wanted(name)`` asks for to ``sub``; their
    options are the option table's (:mod:`spamnb.options`)."""
    from spamnb.options import options

    for name, text, handler in (
            ("dump", "write the model as text (a backup that 'load' reads)", cmd_dump),
            ("load", "replace the model by a dump (or add a dump's counts to it: --add)", cmd_load),
            ("merge", "combine models with the same settings (counts add)", cmd_merge),
            ("prune", "drop rare, old or weak tokens; rewrites the model smaller", cmd_prune)):
        if wanted(name):
            p = sub.add_parser(name, help=text)
            add_options(p, options(name))
            p.set_defaults(handler=handler)


def _read_model(path):
    """A model file or a dump, by its first bytes."""
    from spamnb.model import DUMP_FORMAT, SpamFilter

    with open(path, "rb") as f:
        is_dump = f.read(len(DUMP_FORMAT)) == DUMP_FORMAT.encode()
    return _read_dump(path) if is_dump else SpamFilter.load(path)


def _read_dump(name):
    from spamnb.model import DumpError, load_dump

    try:
        if name == "-":
            return load_dump(sys.stdin.buffer, "-")
        with open(name, "rb") as f:
            return load_dump(f, name)
    except DumpError as exc:
        raise CommandError(f"{exc}; nothing was changed") from None


def _write_atomically(path, write, like):
    """Write a file atomically (``spamnb.persistence.store.replace_file``); an existing
    file keeps its owner and mode, a new one gets the mode of ``like`` (a
    dump holds the model's tokens: as private as the model)."""
    from spamnb.model import replace_file, resolve, stat_existing

    path = resolve(path)
    mode = None
    try:
        mode = stat.S_IMODE(os.stat(like).st_mode) & 0o666
    except (OSError, TypeError):
        pass
    replace_file(path, write, stat_existing(path, path), mode=mode)


def cmd_dump(args):
    from spamnb.model import dump_model

    spam_filter = load_filter(args)
    if args.output and args.output != "-":
        _write_atomically(args.output, lambda f: dump_model(spam_filter, f), spam_filter.source_)
    else:
        dump_model(spam_filter, sys.stdout.buffer)
        sys.stdout.buffer.flush()
    return 0


def cmd_load(args):
    from spamnb.model import SpamFilter, locked, merge_models, save_whole

    loaded = _read_dump(args.file)    # read and checked whole before the model is touched
    path = model_path(args)
    with locked(path, wait=args.wait) as real:
        exists = os.path.exists(real)
        if args.add and exists:
            try:
                loaded = merge_models([SpamFilter.load(real), loaded])
            except ValueError as exc:
                raise CommandError(f"{args.file}: {exc}; nothing was changed") from None
        # the journal goes: folded in (--add: loaded with the model) or replaced
        save_whole(loaded, real, real + ".bak" if exists else None)
    if not args.quiet:
        print(f"{'added' if args.add else 'loaded'} {args.file}: model {path} now has {_size(loaded)}")
    return 0


def cmd_merge(args):
    from spamnb.model import locked, merge_models, save_whole

    # the output's lock first, then the inputs read: an input that is the output
    # (merge A B -o A) is read with every learn acknowledged before, and none after is lost
    with locked(args.output, wait=args.wait) as real:
        filters = [_read_model(path) for path in args.inputs]
        try:
            merged = merge_models(filters)
        except ValueError as exc:
            raise CommandError(f"{exc}; nothing was written") from None
        exists = os.path.exists(real)
        save_whole(merged, real, real + ".bak" if exists else None)
    if not args.quiet:
        print(f"merged {len(filters)} models into {args.output}: {_size(merged)}"
              + (f" (the model it replaced is kept as {real}.bak)" if exists else ""))
    return 0


def cmd_prune(args):
    from spamnb.model import SpamFilter, expire_model, locked, prune_model, save_whole

    if args.min_count is None and args.max_age is None and args.target_size is None and args.expire_at is None:
        raise UsageError("spamnb prune: give --min-count, --max-age, --target-size and/or --expire-at")
    path = model_path(args)
    with locked(path, wait=args.wait) as real:
        spam_filter = SpamFilter.load(real)
        before = spam_filter.vocabulary_.n_features
        size_before = os.path.getsize(real)
        if args.expire_at is not None:
            spam_filter.set_max_tokens(args.expire_at or None)
        try:
            pruned, dropped = prune_model(spam_filter, min_count=args.min_count, max_age=args.max_age,
                                          target_size=args.target_size)
        except ValueError as exc:   # --min-count on a length-normalised model
            raise CommandError(f"{path}: {exc}; the model is unchanged") from None
        pruned, expired = expire_model(pruned)
        dropped += expired
        if (dropped or args.expire_at is not None) and not args.dry_run:
            save_whole(pruned, real, real + ".bak")   # loaded with the model: folded in
    if not args.quiet:
        if args.dry_run:
            print(f"would drop {dropped} of {before} tokens ({_share(dropped, before)}); nothing was changed")
        elif dropped:
            print(f"dropped {dropped} of {before} tokens ({_share(dropped, before)}), {before - dropped} kept; "
                  f"model {path}: {size_before} -> {os.path.getsize(real)} bytes (the old one is {real}.bak)")
        else:
            print(f"nothing to drop: {before} tokens kept")
        if args.expire_at is not None and not args.dry_run:
            print(f"automatic expiry: {f'past {args.expire_at} tokens' if args.expire_at else 'off'}")
    return 0


def _size(spam_filter):
    ham, spam = spam_filter.class_count_
    return f"{spam_filter.vocabulary_.n_features} tokens ({spam:.0f} spam, {ham:.0f} ham)"


def _share(part, whole):
    return f"{100.0 * part / whole:.1f} %" if whole else "0 %"


def info_lines(spam_filter):
    """Lines ``spamnb info`` prints about the model's size, age and what pruning would remove."""
    from spamnb.model import describe_model

    facts = describe_model(spam_filter)
    n = facts["tokens"]
    expiry = spam_filter.ages_.max_tokens
    lines = [f"dates:       created {facts['created']}, last learned {facts['last_learn']}",
             f"expiry:      {'off' if expiry is None else f'past {expiry} tokens, prune to 90 %'}",
             (f"hapaxes:     {facts['hapax']} tokens seen once ({_share(facts['hapax'], n)})"
              if facts["hapax"] is not None else
              "hapaxes:     not counted (the counts are length-normalised: length_norm > 0)"),
             "last seen:   " + ", ".join(f"{label} {count}" for label, count in facts["ages"]),
             "pruning:     " + ", ".join(f"{policy} drops {count} ({_share(count, n)})"
                                         for policy, count in facts["would_remove"].items())]
    return lines


# ---------------------------------------------------------------------------- info
def add_info_parser(sub):
    from spamnb.options import options

    p = sub.add_parser("info", help="describe a model and the settings in effect")
    add_options(p, options("info"))
    p.set_defaults(handler=cmd_info)


def _log_odds(p):
    from spamnb.model import logit

    return f"{logit(p):+.3f}"   # "+inf" / "-inf" at 1 and 0


def _probability(p):
    """A cutoff for reading: 4 significant digits of its distance from the nearer of 0 and 1
    (0.01799 for 0.01798620996209156, 1.367e-28, 0.9999992); the log-odds beside it are exact to 3 decimals."""
    if not 0.0 < p < 1.0:
        return repr(p)
    if p <= 0.5:
        return f"{p:.4g}"
    import math

    decimals = max(1, 3 - math.floor(math.log10(1.0 - p)))     # 4 significant digits of 1 - p
    return f"{p:.{decimals}f}".rstrip("0").rstrip(".")


def cutoffs_from(spam_filter):
    """One line: where the model's cutoffs came from, and the held-out evidence its learns gathered."""
    source = spam_filter.cutoffs_from
    text = {"train": "spamnb train (cross-validated on the training mail)",
            "held-out": "the scores learned messages had before each was learned",
            "given": "given when the model was made (or a model file older than spamnb's schema 5)",
            "defaults": "the defaults"}[source]
    if source == "train":
        from spamnb.model import SPAM_CUTOFF_FLOOR
        from spamnb.model import logit

        if logit(spam_filter.spam_cutoff) == SPAM_CUTOFF_FLOOR:
            text += (f"; the spam cutoff held at its floor, log-odds {SPAM_CUTOFF_FLOOR:g}: the held-out ham put it "
                     f"lower, where the model's own evidence says ham (copies of messages in the training mail "
                     f"that train did not take for near-duplicates?)")
    held = spam_filter.held_out_
    if held is not None:
        fitted = held.cutoffs()
        text += f"; held-out scores of learned mail: {held.total(False):.0f} ham, {held.total(True):.0f} spam"
        if fitted[2].startswith("thin") and source == "held-out":
            text += (" (too few ham to fit cutoffs, 1,000 needed: a wide unsure band that narrows as ham is counted, "
                     "the spam cutoff over every such ham)")
        elif fitted[2].startswith("thin") and source != "held-out":
            text += " (too few to fit cutoffs: 1,000 ham and 50 spam needed)"
    return text


def ledger_line(spam_filter):
    """One line: which of the messages counted the ledger knows, so which a
    ``learn`` relabels exactly (or leaves alone) and which it would count again."""
    from spamnb.model import DEFAULT_LEDGER_CAPACITY as DEFAULT_CAPACITY

    ham, spam = (int(round(v)) for v in spam_filter.class_count_)
    ledger = spam_filter.ledger_
    labels = ledger.to_arrays()[1] if ledger is not None else b""
    known_spam = labels.count(1)
    known_ham = len(labels) - known_spam
    text = f"{len(labels)} of the {spam + ham} messages counted ({known_spam} spam, {known_ham} ham)"
    other_spam, other_ham = max(spam - known_spam, 0), max(ham - known_ham, 0)
    if not other_spam and not other_ham:
        return text + ": learning one again is a no-op, with the other label an exact relabel"
    return (text + f"; the other {other_spam} spam and {other_ham} ham are not in it (trained or learned before "
            f"spamnb recorded trained mail, counted more than once, or past the ledger's "
            f"{ledger.capacity if ledger is not None else DEFAULT_CAPACITY:,}): learning one of them counts it again "
            f"(forget it first with forget --spam/--ham, or train the model again)")


def cmd_info(args):
    settings = settings_of(args)
    spam_filter = load_filter(args, settings)   # read whole and checked (not mapped): ModelError when damaged
    path = spam_filter.source_
    if args.check:
        journal = spam_filter.journal_
        records = len(journal.payloads) if journal is not None and journal.status == "ok" else 0
        print(f"{path}: checked whole (checksum, header, counts, hash index, token strings): ok; "
              f"journal: {records} record{'s' if records != 1 else ''} applied")
        return EXIT_OK
    ham, spam = spam_filter.class_count_
    print(f"model:          {path} ({human_size(os.path.getsize(path))})")
    print(f"messages:       {spam + ham:.0f} ({spam:.0f} spam, {ham:.0f} ham)")
    print(f"ledger:         {ledger_line(spam_filter)}")
    print(f"vocabulary:     {spam_filter.vocabulary_.n_features} tokens")
    print(f"spam cutoff:    P(spam) >= {_probability(spam_filter.spam_cutoff)} "
          f"(log-odds >= {_log_odds(spam_filter.spam_cutoff)})")
    print(f"ham cutoff:     P(spam) <= {_probability(spam_filter.ham_cutoff)} "
          f"(log-odds <= {_log_odds(spam_filter.ham_cutoff)})")
    print(f"cutoffs from:   {cutoffs_from(spam_filter)}")
    print(f"header:         {settings.header}" + (f"; subject tag {settings.subject_tag!r}" if settings.subject_tag
                                                   else "; no subject tag"))
    print(f"settings file:  {settings.path or '(none)'}")
    print(f"model settings: alpha {spam_filter.alpha!r}, prior {spam_filter.prior}, counts {spam_filter.counts}, "
          f"feature weight {spam_filter.feature_weight!r}, length norm {spam_filter.length_norm!r}, "
          f"pair weight {spam_filter.pair_weight!r}")
    if spam_filter.pair_mixture_ is not None:   # a learned model's pair weight, chosen on its own mail
        print(f"pair weight:    {spam_filter.pair_mixture_.describe()}")
    tokenizer = spam_filter.tokenizer_
    print(f"tokenizer:      " + ", ".join(f"{key} {value!r}" for key, value in sorted(tokenizer.settings.items())))
    if tokenizer.version < tokenizer.VERSION:
        print(f"note:           this model uses the older tokenizer version {tokenizer.version}; retraining it "
              f"(spamnb train) brings version {tokenizer.VERSION}'s attack hardening")
    print("\n".join(info_lines(spam_filter)))
    if args.tokens > 0 and spam_filter.vocabulary_.n_features:
        spammy, hammy = spam_filter.strongest_tokens(args.tokens)
        for title, rows in (("strongest spam tokens", spammy), ("strongest ham tokens", hammy)):
            print(f"{title} (log-ratio, ham count, spam count):")
            for token, weight, n_ham, n_spam in rows:
                print(f"  {weight:+8.3f}  {n_ham:7.0f} {n_spam:7.0f}  {token}")
    return EXIT_OK
