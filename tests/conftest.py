"""Fixtures shared by the test files."""

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_CORPORA = Path(os.environ.get("SPAMNB_SHARED_CORPORA", REPO.parent / "shared" / "corpora"))


@pytest.fixture(scope="session")
def shared_corpus():
    """``shared_corpus(name)``: the folder of a shared corpus (``../shared/corpora/NAME``
    next to the repository, or under $SPAMNB_SHARED_CORPORA); the test is skipped,
    with the reason, when it is absent (the corpora are not in the repository)."""
    def find(name):
        path = SHARED_CORPORA / name
        if not path.is_dir():
            pytest.skip(f"shared corpus {name} not found at {path} (set SPAMNB_SHARED_CORPORA to its folder)")
        return path

    return find


@pytest.fixture(scope="session")
def sample_corpus():
    """The sample of the SpamAssassin corpus shipped in corpora/ (300 messages)."""
    return REPO / "corpora"
