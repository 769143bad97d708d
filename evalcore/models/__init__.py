"""Music LM backends (:class:`evalcore.models.base.MusicLM`); each registers with ``MODELS``
(:mod:`evalcore.models.base`), which loads this package's modules on first use."""

from evalcore.models.base import AudioPrompt, MusicLM

__all__ = ["AudioPrompt", "MusicLM"]
