"""Datasets: sources of item rows (:class:`evalcore.datasets.base.Dataset`); each registers with ``DATASETS``
(:mod:`evalcore.datasets.base`), which loads this package's modules on first use."""
