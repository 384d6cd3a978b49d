"""A regular expression compiled when first used (``pattern(...)`` takes
``re.compile``'s arguments): a module's patterns cost a cold ``spamnb
classify`` nothing until a message needs them (an HTML pattern is compiled
only for a message with HTML).

Compiled without the ``re`` package where the build left the code: ``re.compile``
is ``re._parser.parse`` and ``re._compiler._code`` (Python, with ``enum``,
``functools``, ``collections``... imported: ~23 modules) handing the pattern's
code to ``_sre.compile`` (built into the interpreter).  The build
(setup.py, ``spamnb.mail.sre_table.write_codes``: a module of its own, never
imported at run time) runs that parse and compile for every
``lazy_re.pattern(...)`` of the package's sources and writes the arguments of
``_sre.compile`` into the generated module ``_sre_codes``, with the interpreter
they were made for (``built_for``): here ``_sre.compile`` takes them as they
are, so a pattern is the one ``re.compile`` makes (``re.Pattern.__eq__``
compares the code; the build checks every entry so, tests/test_lazy_re.py
again).  A pattern missing from the table, a table made for another
interpreter (version, ``_sre.MAGIC``), or no table (a tree not built) falls
back to ``re.compile``.  What still imports ``re`` on a compiled pattern: a
``sub``/``subn`` template with a backslash (the template is parsed by
``re``), ``Match.expand``, and copying or pickling a pattern; the mail path
uses none (a literal or a function as the replacement).

The flags a module's patterns take are the plain numbers here, ``re``'s own
values (tests/test_cold_start.py)."""

__all__ = ["pattern", "A", "S", "M", "I"]

# re.ASCII, re.DOTALL, re.MULTILINE, re.IGNORECASE as numbers
A, S, M, I = 256, 16, 8, 2

_codes = None    # (pattern, flags) -> _sre.compile's other arguments, read from _sre_codes once


def built_for():
    """What the compiled code depends on: the interpreter's exact version and its engine's constants."""
    import _sre
    import sys

    return (sys.hexversion, _sre.MAGIC, _sre.CODESIZE, _sre.MAXREPEAT, _sre.MAXGROUPS)


def codes_of(module):
    """The table of a generated module, or {} when it was made for another interpreter."""
    return module.CODES if getattr(module, "BUILT_FOR", None) == built_for() else {}


def _table():
    global _codes
    if _codes is None:
        try:
            from spamnb.mail import _sre_codes
        except ImportError:    # a tree whose build did not write it: re.compile
            _codes = {}
        else:
            _codes = codes_of(_sre_codes)
    return _codes


class pattern:
    """Stands for ``re.compile(*args)``: the first method looked up compiles
    it, and each method is then an attribute of this object (looked up as
    fast as a module-level pattern's)."""

    def __init__(self, *args):
        self._args = args

    def compiled(self):
        """The ``re.Pattern`` (compiled now if it was not yet)."""
        source, flags = (self._args + (0,))[:2]
        code = _table().get((source, flags)) if len(self._args) <= 2 else None
        if code is None:
            import re

            return re.compile(*self._args)
        import _sre

        all_flags, program, groups, groupindex, indexgroup = code
        return _sre.compile(source, all_flags, list(program), groups, dict(groupindex), indexgroup)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = getattr(self.compiled(), name)
        setattr(self, name, value)
        return value
