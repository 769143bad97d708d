"""CMI-Bench's released scoring rules, one module per task family, each registered with ``RULES``
(:mod:`evalcore.mir_rules.rules`), which loads this package's modules on first use."""
