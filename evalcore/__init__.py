"""evalcore: evaluation of Music Language Models that tells whether a model listens."""

__version__ = "0.1.0"
