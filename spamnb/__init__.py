"""spamnb: a Bayesian e-mail spam filter.

Public names are imported lazily (PEP 562), so ``import spamnb`` is cheap and
the ``spamnb classify`` cold path never imports numpy or scipy.

>>> import spamnb
>>> spamnb.SpamFilter, spamnb.MultinomialNB, spamnb.ClassPrior   # doctest: +SKIP
"""

__version__ = "0.1.0"

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
