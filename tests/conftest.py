"""Tests marked ``slow`` run only with ``pytest -m slow`` or ``SPAMNB_SLOW=1``
(CI sets one of them), so a default ``pytest`` stays short."""

import os

import pytest


def pytest_collection_modifyitems(config, items):
    if os.environ.get("SPAMNB_SLOW") or "slow" in (config.option.markexpr or ""):
        return
    skip = pytest.mark.skip(reason="slow: run with -m slow or SPAMNB_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
