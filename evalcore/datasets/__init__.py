"""Datasets: sources of item rows, registered by kind (see ``evalcore.registry.DATASETS``)."""

from evalcore.datasets import fma, hummusqa, items_file, muchomusic, musicnet, musicqa, rul_muchomusic, synthetic  # noqa: F401  (registration)
from evalcore.datasets import cmi_bench, mmar, mmau, mmau_pro  # noqa: F401  (registration)
