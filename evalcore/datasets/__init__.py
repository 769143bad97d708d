"""Datasets: sources of item rows, registered by kind (see ``evalcore.registry.DATASETS``)."""

from evalcore.datasets import items_file, musicqa, synthetic  # noqa: F401  (registration)
