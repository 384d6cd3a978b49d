"""The persistence: a filter's state to and from files.  The model file's
container, atomic write and writers' lock (``store``), its versioned fields
and arrays (``schema``), a filter mapped to and from them (``codec``); the
journal of learns and forgets beside it (``journal``), the operations it
records and their replay onto a loaded filter (``deltas``), and a journal of
learns scored without a replay (``journal_view``).

It imports the estimator (``spamnb.estimator``: what a file holds is its
state) and ``spamnb.bayes``/``spamnb.mail``, never ``spamnb.model``, which
joins the two (pyproject.toml's import contract).  Its public modules are
``__all__``; the layers above ``spamnb.model`` use them through
``spamnb.model``'s face.  Nothing is imported here.
"""

__all__ = ["codec", "deltas", "journal", "journal_view", "schema", "store"]
