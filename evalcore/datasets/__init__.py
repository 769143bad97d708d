"""Datasets: sources of item rows, registered by kind (see ``evalcore.registry.DATASETS``)."""

from evalcore.datasets import hummusqa, items_file, muchomusic, synthetic  # noqa: F401  (registration)
