"""Music LM backends; importing this package registers them with ``MODELS``."""

from evalcore.models import dsp_listener, hf_audio, isolated, null, openai_audio, reference_rewrite, simulated, text_prior, vllm_audio  # noqa: F401
from evalcore.models.base import AudioPrompt, MusicLM

__all__ = ["AudioPrompt", "MusicLM"]
