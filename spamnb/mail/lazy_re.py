"""A regular expression compiled when first used (``pattern(...)`` takes
``re.compile``'s arguments): a module's patterns cost a cold ``spamnb
classify`` nothing until a message needs them (an HTML pattern is compiled
only for a message with HTML).  ``re`` itself is imported then too (with
``enum``, which its flags are made of): the flags a module's patterns take
are the plain numbers here, ``re``'s own values (tests/test_cold_start.py)."""

__all__ = ["pattern", "A", "S", "M", "I"]

# re.ASCII, re.DOTALL, re.MULTILINE, re.IGNORECASE as numbers
A, S, M, I = 256, 16, 8, 2


class pattern:
    """Stands for ``re.compile(*args)``: the first method looked up compiles
    it, and each method is then an attribute of this object (looked up as
    fast as a module-level pattern's)."""

    def __init__(self, *args):
        self._args = args

    def compiled(self):
        """The ``re.Pattern`` (compiled now if it was not yet)."""
        import re

        return re.compile(*self._args)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = getattr(self.compiled(), name)
        setattr(self, name, value)
        return value
