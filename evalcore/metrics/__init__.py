"""Metrics: one scorer per protocol kind (:class:`evalcore.metrics.base.Scorer`; the scoring stage's
:data:`evalcore.scoring.requests.SCORERS`), the free-form metrics (each registers with ``METRICS``,
:mod:`evalcore.metrics.freeform_metric`, which loads this package's modules on first use), aggregates and the
bootstrap."""
