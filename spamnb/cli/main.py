"""The ``spamnb`` command: a thin shell over :class:`spamnb.SpamFilter`.

Exit codes: :mod:`spamnb.cli.exitcodes` (one set for every command; also in the
README and ``spamnb --help``).  ``classify`` of one message follows
bogofilter's convention (0 spam, 1 ham, 2 unsure); with ``-p/--passthrough``
it exits 0 whatever the verdict (a mail filter that exits non-zero is a
failed filter to procmail and maildrop), and with several messages it exits
0 once every message got a verdict.  Every error is one line on stderr,
never a traceback (``SPAMNB_DEBUG=1`` shows it).  With ``-p`` the message is
written to stdout even when scoring fails (exit 3), so mail is never lost.

One module a command group: ``train``, ``classify`` (and ``tokens``),
``learn`` (and ``forget``), ``models`` (``info``, ``dump``, ``load``,
``merge``, ``prune``), ``evaluate``, ``serve``; ``common`` holds what they
share.  Nothing below the command line imports it.
"""

import gc
import posix   # os's calls without os.py (a cold classify never loads it: _array_without_collections)
import sys


def _array_without_collections():
    """Load the standard library's ``array`` (the buffers of the token hashes,
    the counts, the model's entries: on every command's path) without the
    ``collections`` package, in the ``spamnb`` command's process only (a
    program that imports spamnb has its own modules, and its ``sys.modules``
    is left alone).  ``array``'s init imports ``collections.abc`` only
    to register its type as a ``MutableSequence``, and ``import collections.abc``
    loads ``collections`` with ``operator``, ``reprlib``, ``keyword`` first: a
    twelfth of a cold ``spamnb classify``'s instructions, for nothing it uses.
    While ``array`` loads, ``collections.abc`` is ``_collections_abc`` (the
    module it re-exports) under a stand-in package; both names are taken out
    again after, so ``array`` is registered with the very same
    ``MutableSequence`` and a later ``import collections`` loads the real
    package.  When ``_collections_abc`` is not loaded either (bin/spamnb's
    ``-S``: no site, and a cold classify loads no ``os``, which imports it: a
    tenth of its instructions), array's init is given :data:`_UNREGISTERED`,
    which registers the type when ``_collections_abc`` is first imported.
    Skipped when ``array`` or ``collections`` is loaded already."""
    modules = sys.modules
    if "array" in modules or "collections" in modules or "collections.abc" in modules:
        return
    if "_collections_abc" in modules:
        import _collections_abc as abc
    else:
        abc = type(sys)("collections.abc")
        abc.MutableSequence = _UNREGISTERED
    modules["collections"] = type(sys)("collections")
    modules["collections.abc"] = abc
    try:
        import array  # noqa: F401
    finally:
        del modules["collections"], modules["collections.abc"]


def _register(kind):
    """``register`` of :data:`_UNREGISTERED`: ``kind`` noted, and :data:`_UNREGISTERED`
    put first on ``sys.meta_path`` (where its ``find_spec`` is :func:`_find_abc`)."""
    _UNREGISTERED.types.append(kind)
    if _UNREGISTERED not in sys.meta_path:
        sys.meta_path.insert(0, _UNREGISTERED)
    return kind


def _find_abc(name, path=None, target=None):
    """``find_spec`` of :data:`_UNREGISTERED` on ``sys.meta_path``: for
    ``_collections_abc`` alone, once (it takes itself off), its spec as the next
    finder gives it, loaded by :func:`_registering`'s class."""
    if name != "_collections_abc":
        return None
    sys.meta_path.remove(_UNREGISTERED)
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        spec = find(name, path, target) if find is not None else None
        if spec is not None:
            spec.loader = _registering()(spec.loader)
            return spec
    return None


# ``collections.abc.MutableSequence`` as array's init sees it when ``_collections_abc`` is not
# loaded: ``register`` (:func:`_register`) notes the type and puts this first on ``sys.meta_path``,
# where ``find_spec`` (:func:`_find_abc`) answers for ``_collections_abc`` alone, once: its spec
# as the next finder gives it, loaded by :func:`_registering`'s class, which registers the noted
# types with the module's ``MutableSequence`` (what array's init would have done) before anything
# can use it.  A namespace (types.SimpleNamespace, as sys.implementation is one), not a class: a
# class statement costs a cold classify about 0.1 million instructions.
_UNREGISTERED = type(sys.implementation)(types=[], register=_register, find_spec=_find_abc)


def _registering():
    """The loader class of ``_collections_abc`` after :data:`_UNREGISTERED`
    (made here, when that module is first imported: a class statement costs a
    cold classify, which never imports it, 0.07 million instructions)."""

    class _Registering:
        """Its own loader's work, then the noted types registered (the
        module's loader put back in its attributes)."""

        def __init__(self, loader):
            self.loader = loader

        def create_module(self, spec):
            return self.loader.create_module(spec)

        def exec_module(self, module):
            module.__spec__.loader = module.__loader__ = self.loader
            self.loader.exec_module(module)
            while _UNREGISTERED.types:
                module.MutableSequence.register(_UNREGISTERED.types.pop())

    return _Registering


_array_without_collections()   # before the imports below and the commands' (array comes with them)

import _frozen_importlib_external as _bootstrap   # noqa: E402 -- importlib's own, loaded at start-up: no import here
import _frozen_importlib as _bootstrap_core   # noqa: E402 -- the same
import _stat as stat   # noqa: E402 -- built in: the S_IS* tests stat.py re-exports
import builtins   # noqa: E402 -- loaded at start-up
import marshal   # noqa: E402 -- loaded at start-up


class _Compiled(_bootstrap.SourceFileLoader):
    """The loader of a module of spamnb found by :data:`_FINDER`: the standard
    library's source loader (so ``__loader__`` serves ``get_source``, resources and
    the rest as importlib's does), given the code its finder read from the
    byte-compiled file already."""

    code = None

    def get_code(self, fullname):
        code, self.code = self.code, None
        if code is not None and fullname == self.name:
            return code
        return super().get_code(fullname)


def _find_spec(name, path=None, target=None):
    """``find_spec`` of :data:`_FINDER`, the finder of a short run's modules of spamnb
    (:func:`entry`, ``cold``): each submodule of spamnb whose source and byte-compiled
    file (as pip writes it on install, ``__pycache__/NAME.cpython-3X.pyc``, stamped with
    the source's time and size) are in its package's one folder, an absolute path, found
    and read in one step: what importlib's path finder and source loader do, without
    their generality (every entry of ``sys.meta_path`` asked, the folder's listing, four
    suffixes tried, the cache path worked out in pieces, ``spec_from_file_location``'s
    checks), about a third of each module's import: 0.1 million instructions of a cold
    ``spamnb classify``'s 40 modules.  Anything else is left to importlib, as a
    byte-compiled file that is missing, stale (the source's time or size not the ones it
    records), checked by hash (PEP 552) or unreadable, or a relative folder: it returns
    None.  A package is found before a module of the same name (as importlib finds it);
    spamnb's compiled modules have no source of the same name beside them
    (tests/test_cold_start.py)."""
    if path is None or len(path) != 1 or not name.startswith("spamnb."):
        return None
    folder = path[0]
    if folder[:1] != "/":
        return None
    tail = name.rpartition(".")[2]
    base = folder + "/" + tail
    package = posix.access(base + "/__init__.py", posix.F_OK)   # (a stat that fails raises: 5 times its cost)
    source = base + "/__init__.py" if package else base + ".py"
    try:
        st = posix.stat(source)
    except OSError:
        return None
    cached = base + "/__pycache__/__init__" + _TAG if package else folder + "/__pycache__/" + tail + _TAG
    try:
        fd = posix.open(cached, _READ_FLAGS)   # os calls: open's file object costs 9 system calls a file, these 4
        try:
            data = posix.read(fd, posix.fstat(fd).st_size)
        finally:
            posix.close(fd)
        if (data[:4] != _MAGIC or data[4:8] != b"\0\0\0\0"
                or data[8:12] != (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
                or data[12:16] != (st.st_size & 0xFFFFFFFF).to_bytes(4, "little")):
            return None
        code = marshal.loads(memoryview(data)[16:])
    except (OSError, ValueError, EOFError, TypeError):
        return None
    loader = _Compiled(name, source)
    loader.code = code
    # the spec spec_from_file_location gives for an absolute source and a loader (its attributes, not its steps)
    spec = _bootstrap_core.ModuleSpec(name, loader, origin=source)
    spec.has_location = True
    if package:
        spec.submodule_search_locations = [base]
    spec.cached = cached
    return spec


def _compiled_spec(name, folder):
    """The spec of the compiled module ``name`` of spamnb in ``folder`` (``_mail``, ``_score``:
    the file of this Python's first extension suffix, as importlib's file finder gives it) when
    neither a package nor a source of that name is there (:func:`_load`); else None."""
    base = folder + "/" + name.rpartition(".")[2]
    origin = base + _EXTENSION
    try:
        if not stat.S_ISREG(posix.stat(origin).st_mode):
            return None
    except OSError:
        return None
    if posix.access(base, posix.F_OK):   # a folder of that name: a package, importlib's
        return None
    return _bootstrap.spec_from_file_location(name, origin, loader=_bootstrap.ExtensionFileLoader(name, origin),
                                              submodule_search_locations=None)


_READ_FLAGS = posix.O_RDONLY | getattr(posix, "O_CLOEXEC", 0)
_TAG = ".%s.pyc" % sys.implementation.cache_tag
_MAGIC = _bootstrap.MAGIC_NUMBER
_EXTENSION = _bootstrap.EXTENSION_SUFFIXES[0]
# the finder of a short run's modules (:func:`_find_spec`), first on sys.meta_path in entry(cold=True): a namespace
# (types.SimpleNamespace), not a class (a class statement: 0.1 million instructions of a cold classify)
_FINDER = type(sys.implementation)(find_spec=_find_spec)


def _import(name, globals=None, locals=None, fromlist=(), level=0):
    """``builtins.__import__`` in a short run (:func:`entry`, ``cold``; :func:`_lean_imports`): a
    module of spamnb not loaded yet, and a submodule of spamnb named in ``fromlist``, are loaded by
    :func:`_load`, and what the standard import would return is returned (the module itself with a
    ``fromlist`` whose names it has, else its top package); anything else (another package's module, a
    relative import, ``*``, a name still missing) is the standard import's, which finds spamnb's modules
    in ``sys.modules``.  Each import of a module of spamnb through importlib's ``_find_and_load`` (its
    module lock, the spec asked of each finder, ``module_from_spec`` and its attribute checks, all in
    Python) costs about 0.1 million instructions more than its own code does: a cold classify imports
    35 of them; and each ``from`` import of a package, importlib's ``_handle_fromlist`` (Python) once more."""
    if not level and (name[:7] == "spamnb." or name == "spamnb"):
        modules = sys.modules
        module = modules.get(name)
        if module is None:
            _load(name)
            module = modules.get(name)
        if module is not None:
            if not fromlist:
                return module if "." not in name else modules.get("spamnb") or _STANDARD_IMPORT(name, globals, locals)
            if not hasattr(module, "__path__"):
                return module
            for item in fromlist:
                if item.__class__ is not str or item == "*":
                    break
                if not hasattr(module, item):
                    _load(name + "." + item)
                    if not hasattr(module, item):
                        break
            else:
                return module
    return _STANDARD_IMPORT(name, globals, locals, fromlist, level)


def _load(name):
    """Load the module ``name`` of spamnb (its parent package first) as importlib's
    ``_load_unlocked`` does (its attributes as ``module_from_spec`` sets them from the spec,
    in ``sys.modules`` while its code runs and taken out again if that fails, the module left
    there by its code returned, set on its parent), when :data:`_FINDER` finds it; else nothing
    (the standard import finds it, or says why not).  Not importlib's private mark on the spec
    while the code runs (``_initializing``: its module lock, and the words "most likely due to a
    circular import" in an ImportError's message)."""
    modules = sys.modules
    parent, _, tail = name.rpartition(".")
    if parent not in modules:
        if parent[:7] != "spamnb.":
            return
        _load(parent)
        if parent not in modules:
            return
    if name in modules:   # loaded by its parent's code
        return
    path = getattr(modules[parent], "__path__", None)
    if path is None or len(path) != 1:
        return
    spec = _find_spec(name, path) or _compiled_spec(name, path[0])
    if spec is None:
        return
    if spec.loader.__class__ is not _Compiled:   # an extension: its init run, its attributes set as importlib sets them
        module = _bootstrap_core.module_from_spec(spec)
    else:
        module = type(sys)(name)
        module.__loader__, module.__package__, module.__spec__ = spec.loader, spec.parent, spec
        if spec.submodule_search_locations is not None:
            module.__path__ = spec.submodule_search_locations
        module.__file__, module.__cached__ = spec.origin, spec.cached
    modules[name] = module
    try:
        spec.loader.exec_module(module)   # its code run in the module's namespace, or its compiled init
    except BaseException:
        modules.pop(name, None)
        raise
    module = modules.pop(name)
    modules[name] = module
    setattr(modules[parent], tail, module)


def _lean_imports(on):
    """:func:`_import` as ``builtins.__import__`` (``on``), or the standard one back.  Not while
    imports are being timed (``-X importtime``, ``PYTHONPROFILEIMPORTTIME``): importlib's own
    imports are the ones it reports."""
    if not on:
        if builtins.__import__ is _import:
            builtins.__import__ = _STANDARD_IMPORT
    elif "importtime" not in sys._xoptions and (sys.flags.ignore_environment
                                                or not posix.environ.get(b"PYTHONPROFILEIMPORTTIME")):
        builtins.__import__ = _import


_STANDARD_IMPORT = builtins.__import__

# spamnb.cli.common (with spamnb.errors) and spamnb.cli.exitcodes are imported where they are used, after
# entry(cold=True) has put _FINDER first on sys.meta_path and _import in builtins.__import__: found by it and
# loaded by _load, not by importlib's path finder and _find_and_load (0.1 million instructions each, a module)

COMMANDS = ("train", "classify", "learn", "forget", "info", "tokens", "evaluate", "dump", "load", "merge",
            "prune", "serve", "imap")


def _epilog():
    from spamnb.cli.exitcodes import TABLE

    codes = "\n".join(f"  {code:>3}  {text}" for code, text in TABLE)
    return (f"exit codes:\n{codes}\n\n"
            "environment:\n"
            "  SPAMNB_HOME   folder of the model (model.spamnb) and of the settings file\n"
            "                (settings.toml); default ~/.spamnb\n"
            "  SPAMNB_DEBUG  set: errors show their traceback\n\n"
            "Options -m and --settings go before or after the command.")


def build_parser(command=None, full=False):
    """The argument parser; with ``command``, only that subcommand's parser is
    built (the rest cost start-up time that ``spamnb classify`` cannot spare).
    ``full`` adds evaluate's options too (the man page)."""
    from spamnb.cli.parsing import Parser, add_options
    from spamnb.options import options

    parser = Parser(prog="spamnb", description="A Bayesian e-mail spam filter.", epilog=_epilog())
    add_options(parser, options("global"), top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)

    def wanted(name):
        return command is None or command == name

    if wanted("train"):
        from spamnb.cli import train

        train.add_parser(sub)
    if wanted("classify"):
        from spamnb.cli import classify

        classify.add_parser(sub)
    for name, text in (("learn", "add messages to the model (train on error)"),
                       ("forget", "remove messages learned before (exact undo)")):
        if wanted(name):
            from spamnb.cli import learn

            learn.add_parser(sub, name, learn.cmd_learn if name == "learn" else learn.cmd_forget, text)
    if wanted("info"):
        from spamnb.cli import models

        models.add_info_parser(sub)
    if wanted("tokens"):
        from spamnb.cli import classify

        classify.add_tokens_parser(sub)
    if wanted("evaluate"):
        from spamnb.cli import evaluate

        evaluate.add_parser(sub, full=command == "evaluate" or full)
    if command is None or command in ("dump", "load", "merge", "prune"):
        from spamnb.cli import models

        models.register(sub, wanted)
    if wanted("serve"):
        from spamnb.cli import serve

        serve.add_parser(sub)
    if wanted("imap"):
        from spamnb.cli import imap

        imap.add_parser(sub)
    return parser


def _command_of(argv):
    """The command word of ``argv`` (global options may come before it)."""
    from spamnb.options import options

    takes_value = {flag for option in options("global") if "action" not in option.kw for flag in option.flags}
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in takes_value:
            skip = True
        elif not arg.startswith("-"):
            return arg if arg in COMMANDS else None
    return None


# The common forms of a mail filter's commands, read without argparse (its
# import and the subcommand's parser cost a cold ``spamnb classify`` more
# than the classify itself): ``classify [-p] [-M] [-]``, ``learn --spam|--ham
# [-M] [-q] [FILE...]``, ``forget [--spam|--ham] [-M] [-q] [FILE...]``, each
# with ``-m PATH``/``--settings PATH`` before or after the command.  The
# flags read and the defaults given are the option table's (spamnb.options:
# ``fast=True``), as the parser's are.  Anything else (``--help``, any other
# option, ``--opt=value``) goes to the parser; tests/test_cold_start.py checks
# that both read these forms alike.
FAST_COMMANDS = ("classify", "learn", "forget")


def fast_args(argv):
    """The namespace the parser would give ``argv`` when it is one of the
    common forms above, else None (the caller builds the parser)."""
    from spamnb.options import fast_defaults, fast_flags, options

    values = fast_defaults("global")
    value_flags = {flag: option.dest for option in options("model") for flag in option.flags}
    command, files, given = None, [], set()
    flags = {}
    args = iter(argv)
    for arg in args:
        if arg in value_flags:
            value = next(args, None)
            if value is None or value.startswith("-") and value != "-":
                return None
            values[value_flags[arg]] = value
        elif command is None:
            if arg not in FAST_COMMANDS:
                return None
            command, flags = arg, fast_flags(arg)
            values.update(fast_defaults(command))
        elif arg in flags:
            name, value, exclusive = flags[arg]
            if name in given and exclusive:   # --spam --ham: the parser's error
                return None
            given.add(name)
            values[name] = value
        elif arg == "-" or not arg.startswith("-"):
            files.append(arg)
        else:
            return None
    if command is None or (command == "classify" and len(files) > 1) or any(
            option.group and option.group[1] and values[option.dest] is None for option in options(command)):
        return None
    if command == "classify":
        from spamnb.cli.classify import cmd_classify as handler
    else:
        from spamnb.cli import learn

        handler = learn.cmd_learn if command == "learn" else learn.cmd_forget
    # types.SimpleNamespace, without the types module's import (sys.implementation is one)
    return type(sys.implementation)(command=command, files=files, handler=handler, **values)


def entry(cold=False):
    """The ``spamnb`` command (``python -m spamnb`` too): :func:`main`, with
    the end of the process kept from a late Ctrl-C.  Once :func:`main` has
    returned, a SIGINT no longer raises ``KeyboardInterrupt`` (a traceback
    from whatever runs at exit) but is noted, and the process exits 130 with
    ``spamnb: interrupted``; from the last exit handler on it is ignored (the
    interpreter's own teardown sets SIGINT back to its default action, which
    would end the process by the signal itself).  The handlers are set with
    ``_signal``, the C module ``signal`` wraps: ``signal`` imports ``enum``
    to make its numbers enums, which a cold ``spamnb classify`` need not pay for.

    ``cold`` (the launcher, bin/spamnb, which turned the cyclic garbage
    collector off before the imports): a classify, learn or forget of the
    one message on stdin (:func:`short_run`) imports spamnb's modules by
    :func:`_import` (found by :data:`_FINDER`, loaded by :func:`_load`: a short
    run starts no thread, and takes no module lock), runs without the collector, and the process
    ends once stdout and stderr are flushed, without the interpreter's
    teardown (its modules freed one by one, a last collection: a quarter
    of a cold classify's instructions, for a process that is ending);
    every other command turns the collector back on and ends as usual.
    The launcher runs its Python by ``-c`` or from its byte-compiled file, so
    ``sys.argv[0]`` is ``-c`` or that file's path: nothing reads it (the
    parser's ``prog`` is ``spamnb``; tests/test_launcher_pyc.py compares the two)."""
    import _signal as signal
    import atexit

    global _COLD
    _COLD = cold
    if cold and not sys.flags.optimize and sys.pycache_prefix is None:   # a short run's modules (_find_spec)
        sys.meta_path.insert(0, _FINDER)
        _lean_imports(True)
    from spamnb.cli.exitcodes import EXIT_INTERRUPTED
    noted = []
    atexit.register(_exit_noted, noted)   # registered first: run last of the exit handlers
    _ENDED.clear()
    try:
        code = main()
        signal.signal(signal.SIGINT, lambda *_: noted.append(True))
    except KeyboardInterrupt:   # after main's own handler
        signal.signal(signal.SIGINT, lambda *_: noted.append(True))
        noted.append(True)
        code = EXIT_INTERRUPTED
    if cold and not gc.isenabled():   # a short run: ended here, its output flushed
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:   # noqa: BLE001 -- the usual end says what went wrong, as before
            return code
        _exit_noted(noted)   # exits 130 when a Ctrl-C came
        posix._exit(code)
    if _ENDED and code == 0:
        _end_at_once(code)
    return code


# The commands that, once they succeeded, end without the interpreter's teardown (``spamnb train``: freeing
# its arrays and modules one by one took 40-70 ms of its end): the model is written, fsynced, renamed and its
# lock let go before the command returns, its temporary files are unnamed, and its workers are joined.
# Not with --dask (the client's own exit handlers and threads).
ENDS_AT_ONCE = ("train",)
_ENDED = []   # [True] once such a command has succeeded (_run)


def _end_at_once(code):
    """End the process now with ``code``: its output flushed and the exit
    handlers run (``atexit``: the Ctrl-C noted, multiprocessing's), as the
    usual end runs them, then ``_exit``; the usual end when another thread
    still runs (the interpreter would wait for it) or the output cannot be
    flushed (the usual end says why)."""
    import atexit
    import threading

    if threading.active_count() > 1:
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:   # noqa: BLE001 -- the usual end says what went wrong, as before
        return
    atexit._run_exitfuncs()   # the Ctrl-C noted handler registered first: run last, it exits 130 after one
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:   # noqa: BLE001 -- an exit handler's output lost: not a success
        from spamnb.cli.exitcodes import EXIT_ERROR

        code = EXIT_ERROR
    posix._exit(code)


_COLD = False   # entry(cold=True): the launcher turned the collector off before the imports


def short_run(args):
    """Whether ``args`` (the fast reading's) is a run short and small enough
    to need neither the cyclic garbage collector nor the interpreter's
    teardown: a classify, learn or forget of the one message on stdin (a
    classify with or without ``-p``; not an mbox, not files, which may hold
    any number of messages).  A learn ends once its journal record is
    written, synced and its lock let go: nothing of it waits for the
    teardown."""
    return args.command in FAST_COMMANDS and not args.mbox and args.files in ([], ["-"])


def _exit_noted(noted):
    import _signal as signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if noted:
        from spamnb.cli.exitcodes import EXIT_INTERRUPTED

        print("spamnb: interrupted", file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        posix._exit(EXIT_INTERRUPTED)


def _debug():
    """``SPAMNB_DEBUG`` set: errors show their traceback (os.py loaded for it: an error's path)."""
    import os

    return os.environ.get("SPAMNB_DEBUG")


def main(argv=None):
    """Run the command line; returns the exit code."""
    from spamnb.cli.common import one_line_warnings

    argv = sys.argv[1:] if argv is None else list(argv)
    with one_line_warnings():
        return _run(argv)


def _run(argv):
    """Run one command; every error that ends it is mapped here, once: one
    line on stderr (``spamnb: ...``, or the command's own prefix, e.g.
    ``spamnb serve: ...``; a usage error as it is) and its exit code
    (:func:`spamnb.cli.common.exit_code`)."""
    from spamnb import errors   # UsageError: named where raised or caught, made then
    from spamnb.cli.common import exit_code, one_line
    from spamnb.cli.exitcodes import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK

    args = None
    try:
        args = fast_args(argv)
        if _COLD and (args is None or not short_run(args)):
            gc.enable()   # the launcher turned it off for a short run: this one is not
            if _FINDER in sys.meta_path:   # nor its finder and loader: importlib finds and loads this run's modules
                sys.meta_path.remove(_FINDER)
                _lean_imports(False)
            if sys.flags.no_site and "site" not in sys.modules:   # nor site (bin/spamnb's -S): run it now
                import site

                site.main()
        if args is None:
            args = build_parser(_command_of(argv)).parse_args(argv)
        if args.man or args.completion:
            from spamnb.cli import manpage

            parser = build_parser(full=True)
            sys.stdout.write(manpage.roff(parser) if args.man else manpage.bash_completion(parser))
            return EXIT_OK
        if getattr(args, "handler", None) is None:
            raise errors.UsageError("spamnb: give a command (train, classify, learn, forget, info, tokens, evaluate); "
                             "see spamnb --help")
        code = args.handler(args)
        if code == EXIT_OK and args.command in ENDS_AT_ONCE and not getattr(args, "dask", None):
            _ENDED[:] = [True]   # its work written, synced and closed: entry ends it without the teardown
        return code
    except KeyboardInterrupt:
        print("spamnb: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_ERROR
    except SystemExit:
        raise
    except BaseException as exc:  # one line, never a traceback
        if isinstance(exc, errors.UsageError):   # it names the command itself
            print(str(exc), file=sys.stderr)
        elif _debug():
            raise
        else:
            print(f"{getattr(args, 'error_prefix', 'spamnb')}: {one_line(exc)}", file=sys.stderr)
        return exit_code(exc)
