"""The registered free-form metrics, one module each (``@METRICS.register("name")``,
:data:`evalcore.textmetrics.freeform_metric.METRICS`, loads every module here on its first read; a module whose
name starts with ``_`` is a toy that only its test imports). Nothing but metric modules lives here, and this
``__init__`` imports nothing."""
