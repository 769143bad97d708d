"""The free-form metrics: each registers with ``METRICS`` (:mod:`evalcore.metrics.freeform_metric`, which loads
this package's modules on first use), the metrics' part of the run config, the lexical engine and the values the
stream stores."""
