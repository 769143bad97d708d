"""CMI-Bench's released scoring rules, one module per task family, each registered with ``RULES``
(:mod:`evalcore.metrics.cmi.rules`), which loads this package's modules on first use."""
