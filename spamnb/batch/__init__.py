"""Batch classification: ``spamnb classify --batch`` on worker processes
(:mod:`spamnb.batch.classify`) or a Dask cluster (:mod:`spamnb.batch.cluster`).
Above :mod:`spamnb.training`, whose corpus planning and worker pool it uses."""
