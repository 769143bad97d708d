"""Audio LMs that ship with transformers, run locally (``hf_audio_lm``): Qwen2-Audio, Audio Flamingo 3,
Music Flamingo, GLM-ASR, Voxtral (see ``docs/models.md`` for the families that cannot run here and why).

Loads a checkpoint (local directory or ``s3://`` prefix, see :mod:`evalcore.models.checkpoint`)
once per model actor with ``AutoProcessor`` and the family's model class, then answers batches:

* prompts go through the checkpoint's own chat template (``processor.apply_chat_template``), one
  user turn of ``[audio, text]`` (text only when there is no audio), optional system prompt; Voxtral's
  mistral-common tokenizer takes the audio itself in that turn (a lossless float WAV) and tokenizes it;
* a batch is tokenized with **left padding** and its attention mask, so the last position of every
  row is its own last token and greedy generation of a row does not depend on its batch mates;
  rows with audio and text-only rows are generated as two sub-batches (several processors need
  exactly one audio per text);
* only the newly generated tokens are decoded;
* audio shorter than its family needs for two audio positions is an ``audio_too_short`` error row, as on
  ``vllm_audio_lm`` (:data:`evalcore.models.audio_chat.MIN_AUDIO_SAMPLES`, measured).

The sample rate is the feature extractor's; the longest window is the processor's ``max_audio_len``
(Audio Flamingo 3 / Music Flamingo / GLM-ASR split longer audio into 30 s windows internally up to it),
else the feature extractor's ``chunk_length`` (Whisper-style encoders: 30 s; the extractor truncates
anything longer; Voxtral's processor has no ``max_audio_len``: one 30 s encoder chunk, 375 audio positions).
The driver reads both from the checkpoint's processor config without loading the model
(:meth:`HFAudioLM.audio_spec`); a smaller ``max_audio_seconds`` may be configured.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Mapping, Sequence

import numpy as np
from pydantic import field_validator

from evalcore.models.audio_chat import conversation, incomplete, mistral_conversation, stop_token_ids, too_short
from evalcore.models.base import MODELS, AudioPrompt
from evalcore.models.checkpoint import read_checkpoint_json
from evalcore.models.checkpoint_lm import AudioLMParams, CheckpointLM, checkpoint_audio_spec, validated, window
from evalcore.core.packages import MODELS_EXTRA


@dataclass(frozen=True)
class Family:
    """How to load one family of transformers audio LMs."""

    name: str
    model_types: tuple[str, ...]  # config.json model_type values of this family
    model_class: str  # transformers class that generates text
    submodule: str | None = None  # generate with this attribute of the loaded model (e.g. a thinker)
    #: "template": the processor renders the chat template and expands its audio placeholder; "mistral": the
    #: tokenizer is mistral-common's and takes the audio in the conversation itself (Voxtral)
    chat: Literal["template", "mistral"] = "template"


FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("qwen2_audio", ("qwen2_audio",), "Qwen2AudioForConditionalGeneration"),
    Family("audioflamingo3", ("audioflamingo3",), "AudioFlamingo3ForConditionalGeneration"),
    Family("musicflamingo", ("musicflamingo",), "MusicFlamingoForConditionalGeneration"),
    Family("glmasr", ("glmasr",), "GlmAsrForConditionalGeneration"),
    Family("voxtral", ("voxtral",), "VoxtralForConditionalGeneration", chat="mistral"),
)}

DTYPES = ("float32", "bfloat16", "float16", "auto")


class HFAudioParams(AudioLMParams):
    """The ``params`` of an ``hf_audio_lm`` model: the shared ones (``generation``: other ``generate()`` settings;
    ``seed``: torch's, set before each batch) and where the model runs."""

    families: ClassVar[Mapping[str, Any]] = FAMILIES
    unsupported: ClassVar[str] = ("hf_audio_lm: checkpoint model_type {model_type!r} is not a supported family; "
                                  "supported: {types}")

    device: str = "auto"  # "auto" = cuda if available, else cpu; or "cpu", "cuda", "cuda:1"
    attn_implementation: str | None = None  # e.g. "sdpa", "eager"

    @field_validator("generation")
    @classmethod
    def _no_max_new_tokens(cls, v: dict[str, Any]) -> dict[str, Any]:
        if "max_new_tokens" in v:
            raise ValueError("max_new_tokens: set it as the top-level param max_new_tokens")
        return v


def parse_params(params: dict[str, Any]) -> HFAudioParams:
    """Validated ``hf_audio_lm`` params (:func:`validated`)."""
    return validated(HFAudioLM, "hf_audio_lm", params)


def check_checkpoint(p: HFAudioParams) -> None:
    """The checkpoint holds a ``config.json`` of a supported family and a processor config with the feature
    extractor's rate, read without loading weights; ``ValueError("checkpoint: reason")`` otherwise."""
    config = read_checkpoint_json(p.checkpoint, "config.json")
    if config is None:
        raise ValueError(f"checkpoint: {p.checkpoint!r} holds no config.json")
    try:
        p.family_for(config.get("model_type"))
        _window(p, checkpoint_audio_spec(p.checkpoint))
    except ValueError as e:  # CheckpointError included
        msg = str(e)
        if msg.startswith("hf_audio_lm params."):  # sample_rate / max_audio_seconds against the checkpoint's
            raise ValueError(msg.removeprefix("hf_audio_lm params.")) from None
        raise ValueError(f"checkpoint: {msg.removeprefix('hf_audio_lm: ')}") from None


def _window(p: HFAudioParams, spec: tuple[int, float | None]) -> tuple[int, float | None]:
    return window("hf_audio_lm", p, spec)


@MODELS.register("hf_audio_lm")
class HFAudioLM(CheckpointLM):
    """A transformers audio LM (Qwen2-Audio, Audio Flamingo 3, Music Flamingo, GLM-ASR, Voxtral; see FAMILIES)."""

    #: left: a decoder-only model continues every row from its own last token (the tests flip it to
    #: "right" as a negative control: answers then depend on the batch)
    padding_side = "left"
    Params = HFAudioParams
    requires = ("torch", "transformers")  # checked before any model runs (evalcore.core.packages)
    install_hint = MODELS_EXTRA

    @classmethod
    def check_files(cls, params: dict[str, Any]) -> None:
        check_checkpoint(parse_params(params))

    def __init__(self, **params: Any) -> None:
        import torch
        import transformers

        local, _ = self.open_checkpoint(params)
        p = self.params
        self.device = ("cuda" if torch.cuda.is_available() else "cpu") if p.device == "auto" else p.device
        dtype = "auto" if p.dtype == "auto" else getattr(torch, p.dtype)
        self.processor = transformers.AutoProcessor.from_pretrained(local, local_files_only=True)
        self.tokenizer = getattr(self.processor, "tokenizer", None)
        if self.tokenizer is None:
            raise ValueError(f"hf_audio_lm: the processor of {p.checkpoint} has no tokenizer")
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        #: an answer ends at one of these; one that reaches max_new_tokens without it is an incomplete error row
        self.stop_ids = stop_token_ids(self.tokenizer, read_checkpoint_json(local, "generation_config.json"))
        cls = getattr(transformers, self.family.model_class)
        kwargs: dict[str, Any] = {"dtype": dtype, "local_files_only": True}
        if p.attn_implementation:
            kwargs["attn_implementation"] = p.attn_implementation
        model = cls.from_pretrained(local, **kwargs)
        if self.family.submodule:
            model = getattr(model, self.family.submodule)
        self.model = model.to(self.device).eval()

    # ---------------------------------------------------------------- identity

    def generation_settings(self) -> dict[str, Any]:
        g = {"max_new_tokens": self.params.max_new_tokens, "do_sample": False, "num_beams": 1,
             **self.params.generation}
        if g.get("do_sample"):
            g["seed"] = self.params.seed
        return g

    def info(self) -> dict[str, Any]:
        import torch
        import transformers

        return {**super().info(), "checkpoint": self.ckpt.identity(), "family": self.family.name,
                "model_class": self.family.model_class, "dtype": str(self.model.dtype).removeprefix("torch."),
                "device": self.device, "system_prompt": self.params.system_prompt,
                "transformers": transformers.__version__, "torch": torch.__version__}

    # ---------------------------------------------------------------- generation

    def conversation(self, inp: AudioPrompt) -> list[dict]:
        """The chat of one input: optional system turn, then one user turn of [audio, text]."""
        return conversation(inp.prompt, inp.audio is not None, self.params.system_prompt)

    def encode(self, batch: Sequence[AudioPrompt]) -> Any:
        """Processor inputs of a batch (all with audio, or all text only), left-padded, as tensors."""
        if self.family.chat == "mistral":
            return self._encode_mistral(batch)
        texts = [self.processor.apply_chat_template([self.conversation(inp)], tokenize=False,
                                                    add_generation_prompt=True)[0] for inp in batch]
        # padding for the text only: audio features keep their extractor's own padding (Whisper: 30 s)
        kwargs: dict[str, Any] = {"text": texts, "return_tensors": "pt",
                                  "text_kwargs": {"padding": True, "padding_side": self.padding_side}}
        audios = [inp.audio for inp in batch if inp.audio is not None]
        if audios:
            for inp in batch:
                if inp.sample_rate != self.sample_rate:
                    raise ValueError(f"audio at {inp.sample_rate} Hz, the model takes {self.sample_rate} Hz")
            kwargs["audio"] = [np.asarray(a, dtype=np.float32) for a in audios]
            kwargs["sampling_rate"] = self.sample_rate
        return self.processor(**kwargs)

    def _encode_mistral(self, batch: Sequence[AudioPrompt]) -> Any:
        """Voxtral: mistral-common's tokenizer encodes each conversation with its audio (the audio positions are in
        its token ids), the processor adds the audio's mel features."""
        for inp in batch:
            if inp.audio is not None and inp.sample_rate != self.sample_rate:
                raise ValueError(f"audio at {inp.sample_rate} Hz, the model takes {self.sample_rate} Hz")
        convs = [mistral_conversation(inp.prompt, inp.audio, self.sample_rate, self.params.system_prompt)
                 for inp in batch]
        self.tokenizer.padding_side = self.padding_side  # the backend pads on its own side, not a call argument
        return self.processor.apply_chat_template(convs, tokenize=True, return_dict=True)

    def _generate(self, batch: Sequence[AudioPrompt]) -> list[str | Exception]:
        import torch

        enc = self.encode(batch)
        inputs = {k: (v.to(self.device, self.model.dtype) if v.is_floating_point() else v.to(self.device))
                  for k, v in enc.items() if isinstance(v, torch.Tensor)}
        settings = {k: v for k, v in self.generation_settings().items() if k != "seed"}
        if settings.get("do_sample"):
            torch.manual_seed(self.params.seed)
        with torch.inference_mode():
            out = self.model.generate(**inputs, **settings, pad_token_id=self.tokenizer.pad_token_id,
                                      eos_token_id=self.stop_ids or None)
        new = out[:, inputs["input_ids"].shape[1]:]  # only the new tokens (all rows' prompts end at this column)
        texts = [t.strip() for t in self.tokenizer.batch_decode(new, skip_special_tokens=True)]
        limit = settings["max_new_tokens"]
        # a row without a stop token ran to the limit (rows that stopped early are padded after theirs)
        return [t if any(i in self.stop_ids for i in row.tolist()) else incomplete(len(row), limit, t)
                for t, row in zip(texts, new)]

    def generate(self, batch: Sequence[AudioPrompt]) -> list[str | Exception]:  # type: ignore[override]
        out: list[str | Exception | None] = [too_short(self.family.name, inp.audio, self.sample_rate) for inp in batch]
        for want_audio in (True, False):
            idx = [i for i, inp in enumerate(batch) if (inp.audio is not None) == want_audio and out[i] is None]
            if idx:
                texts = self._generate([batch[i] for i in idx])
                for i, t in zip(idx, texts):
                    out[i] = t
        return [t if t is not None else "" for t in out]
