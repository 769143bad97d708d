"""Score existing model outputs without running a model (``evalcore score PROTOCOL INPUT --out DIR``)."""
