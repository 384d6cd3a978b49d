"""A regular expression compiled when first used (``pattern(...)`` takes
``re.compile``'s arguments): a module's patterns cost a cold ``spamnb
classify`` nothing until a message needs them (an HTML pattern is compiled
only for a message with HTML).

Compiled without the ``re`` package where the build left the code: ``re.compile``
is ``re._parser.parse`` and ``re._compiler._code`` (Python, with ``enum``,
``functools``, ``collections``... imported: ~23 modules) handing the pattern's
code to ``_sre.compile`` (built into the interpreter).  The build
(setup.py, ``write_codes``) runs that parse and compile for every
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


# -- at build time (setup.py): the table, from the sources -----------------------------

def sre_arguments(source, flags=0):
    """``_sre.compile``'s arguments after the pattern for ``re.compile(source,
    flags)``, as ``re._compiler.compile`` makes them (groupindex as pairs)."""
    from re import _compiler, _parser

    parsed = _parser.parse(source, flags)
    program = _compiler._code(parsed, flags)
    groupindex = parsed.state.groupdict
    indexgroup = [None] * parsed.state.groups
    for name, index in groupindex.items():
        indexgroup[index] = name
    return (flags | parsed.state.flags, tuple(int(op) for op in program), parsed.state.groups - 1,
            tuple(groupindex.items()), tuple(indexgroup))


def _literal(node, flags):
    """The value of a pattern's argument: a literal, a flag (``lazy_re.A``) or their ``|``."""
    import ast

    if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes, int)):
        return node.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "lazy_re":
        return flags[node.attr]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _literal(node.left, flags) | _literal(node.right, flags)
    raise ValueError(ast.dump(node))


def patterns_in(text):
    """The arguments of each ``lazy_re.pattern(...)`` of a module's source
    (Python or Cython) whose arguments are literals: (pattern, flags)."""
    import ast

    flags = {"A": A, "S": S, "M": M, "I": I}
    found, start = [], text.find("lazy_re.pattern(")
    while start >= 0:
        end = text.find(")", start)
        while end >= 0:   # the call ends at the first ")" after which it parses
            try:
                call = ast.parse(text[start:end + 1], mode="eval").body
            except SyntaxError:
                end = text.find(")", end + 1)
                continue
            try:
                args = tuple(_literal(arg, flags) for arg in call.args)
            except (ValueError, KeyError):
                break
            if not call.keywords and 1 <= len(args) <= 2 and isinstance(args[0], (str, bytes)):
                found.append((args + (0,))[:2])
            break
        start = text.find("lazy_re.pattern(", start + 1)
    return found


def write_codes(package, path):
    """Write the table of every pattern in ``package``'s sources (a folder:
    .py, .pyx, .pxi) to ``path``, a module: each entry checked against
    ``re.compile``; the patterns of ``re`` cannot take are left out (they
    fall back, and raise, at run time)."""
    import _sre
    import pathlib
    import re

    entries = {}
    for source_path in sorted(pathlib.Path(package).rglob("*")):
        if source_path.suffix in (".py", ".pyx", ".pxi"):
            for key in patterns_in(source_path.read_text(encoding="utf-8")):
                try:
                    args = sre_arguments(*key)
                    expected = re.compile(*key)
                except (re.error, TypeError, ValueError, OverflowError, RecursionError):
                    continue
                flags, program, groups, groupindex, indexgroup = args
                made = _sre.compile(key[0], flags, list(program), groups, dict(groupindex), indexgroup)
                if made == expected and made.groupindex == expected.groupindex and made.groups == expected.groups:
                    entries[key] = args
    lines = ["# Generated by the build (setup.py: spamnb.mail.lazy_re.write_codes): do not edit.",
             "# _sre.compile's arguments for each lazy_re.pattern of the package, for this interpreter.",
             f"BUILT_FOR = {built_for()!a}", "CODES = {"]
    lines += [f"    {key!a}: {entries[key]!a}," for key in sorted(entries, key=ascii)]
    lines.append("}")
    pathlib.Path(path).write_text("\n".join(lines) + "\n", encoding="ascii")
    return len(entries)
