"""The estimator: a naive Bayes spam filter's counts and what is computed from
them, with no file in sight.  Counting messages (``counting``, ``fitting``:
the one training pipeline), the cross-validated cutoffs (``calibrate``) and
those of a model that grows by learning (``prequential``, ``variants``),
scoring one message or many (``scoring``, through ``spamnb.bayes``'
arithmetic and kernels), the verdict rule (``verdict``), the one ``Scorer``
interface of every form of a model (``forms``), the hyper-parameters and
their defaults (``defaults``), and the state a filter keeps besides its
counts: the tokens' ages (``ages``), the ledger of learned messages
(``ledger``), the message features (``message_features``).

It imports ``spamnb.bayes`` and ``spamnb.mail`` only: the model file and its
journal (``spamnb.persistence``) and the ``SpamFilter`` that joins them
(``spamnb.model``) stand above it (pyproject.toml's import contract).  Its
public modules are ``__all__``; the layers above ``spamnb.model`` use them
through ``spamnb.model``'s face.  Nothing is imported here, so importing one
module of the package costs that module alone (the ``classify`` cold path).
"""

__all__ = ["ages", "calibrate", "counting", "defaults", "fitting", "forms", "heap", "labels", "ledger",
           "message_features", "messages", "prequential", "scoring", "variants", "verdict"]
