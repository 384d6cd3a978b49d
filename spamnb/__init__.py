"""spamnb: a Bayesian e-mail spam filter.

Public names are imported lazily (PEP 562), so ``import spamnb`` is cheap and
the ``spamnb classify`` cold path never imports numpy or scipy.

>>> import spamnb
>>> spamnb.SpamFilter, spamnb.MultinomialNB, spamnb.ClassPrior   # doctest: +SKIP
"""

__version__ = "0.1.0"


def _array_without_collections():
    """Load the standard library's ``array`` (the buffers of the token hashes,
    the counts, the model's entries: on every command's path) without the
    ``collections`` package.  ``array``'s init imports ``collections.abc`` only
    to register its type as a ``MutableSequence``, and ``import collections.abc``
    loads ``collections`` with ``operator``, ``reprlib``, ``keyword`` first: a
    twelfth of a cold ``spamnb classify``'s instructions, for nothing it uses.
    While ``array`` loads, ``collections.abc`` is ``_collections_abc`` (the
    module it re-exports, loaded by ``os`` at start-up) under a stand-in
    package; both names are taken out again after, so ``array`` is registered
    with the very same ``MutableSequence`` and a later ``import collections``
    loads the real package.  Skipped when either is loaded already."""
    import sys

    modules = sys.modules
    if "array" in modules or "collections" in modules or "collections.abc" in modules:
        return
    import _collections_abc

    modules["collections"] = type(sys)("collections")
    modules["collections.abc"] = _collections_abc
    try:
        import array  # noqa: F401
    finally:
        del modules["collections"], modules["collections.abc"]


_array_without_collections()
del _array_without_collections

_EXPORTS = {
    "ClassPrior": "spamnb.bayes.priors",
    "MultinomialNB": "spamnb.bayes.multinomial",
    "GaussianNB": "spamnb.bayes.gaussian",
    "GaussianBayes": "spamnb.bayes.gaussian",
    "Tokenizer": "spamnb.mail.tokenizer",
    "Vocabulary": "spamnb.bayes.vocabulary",
    "SpamFilter": "spamnb.model.spam_filter",
    "Verdict": "spamnb.model.spam_filter",
    "ModelError": "spamnb.errors",
    "SpamnbError": "spamnb.errors",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name):
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'spamnb' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
