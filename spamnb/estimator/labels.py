"""Class labels: the one rule that reads a label as spam or ham."""

__all__ = ["is_spam_label"]


def is_spam_label(label):
    """True for spam: a label is True/False or "spam"/"ham" (any case)."""
    if isinstance(label, str):
        lowered = label.lower()
        if lowered in ("spam", "ham"):
            return lowered == "spam"
        raise ValueError(f"a label must be True/False or 'spam'/'ham', not {label!r}")
    return bool(label)
