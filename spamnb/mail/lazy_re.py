"""A regular expression compiled when first used (``pattern(...)`` takes
``re.compile``'s arguments): a module's patterns cost a cold ``spamnb
classify`` nothing until a message needs them (an HTML pattern is compiled
only for a message with HTML)."""

from __future__ import annotations

import re

__all__ = ["pattern"]


class pattern:
    """Stands for ``re.compile(*args)``: the first method looked up compiles
    it, and each method is then an attribute of this object (looked up as
    fast as a module-level pattern's)."""

    def __init__(self, *args):
        self._args = args

    def compiled(self):
        """The ``re.Pattern`` (compiled now if it was not yet)."""
        return re.compile(*self._args)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = getattr(re.compile(*self._args), name)
        setattr(self, name, value)
        return value
