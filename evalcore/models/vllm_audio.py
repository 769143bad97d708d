"""Audio LMs on vLLM inside the run's Ray Data stream (``vllm_audio_lm``): one engine per model actor.

The model stage is the same actor pool as every backend's (:class:`evalcore.pipeline.stages.ModelRunner`);
each actor holds a ``vllm.LLM`` engine and answers a batch with one ``generate`` call (vLLM batches it
continuously inside). The actor runs in the interpreter that has vLLM (:func:`vllm_python`) through its Ray
``runtime_env`` (``py_executable``); the driver never imports vLLM.

evalcore prepares everything the engine sees: the decode stage fetches, decodes and resamples (soxr) the audio
to the checkpoint's rate and cuts it to its window; this backend renders the checkpoint's own chat template
(the same conversation as ``hf_audio_lm``) and hands the engine the prompt plus the audio array
(``multi_modal_data``), no base64 round trip. Each answer is checked:

* the audio reached the model: the engine's prompt must hold the audio placeholder expanded to audio features
  (more audio-token positions than the rendered prompt's one placeholder) for a request with audio, and no
  audio token for one without; otherwise the row is an error (:class:`AudioNotReceived`, class ``model``).
  Voxtral's mistral-common tokenizer places every audio position itself (the engine gets token ids): there the
  positions must be in the engine's prompt and the audio array must have gone with them;
* ``finish_reason == "length"`` (cut at ``max_new_tokens``): an ``incomplete`` error row, as for endpoints;
* audio shorter than its family needs for two audio positions never reaches the engine: an ``audio_too_short``
  error row (class ``input``), as on ``hf_audio_lm`` (:data:`evalcore.models.audio_chat.MIN_AUDIO_SAMPLES`, measured:
  with one position the prompt cannot show the placeholder was expanded, and shorter audio the engine refuses).

Why not ``ray.data.llm``: see docs/models.md ("vllm_audio_lm").
"""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Iterable, Literal, Mapping, Sequence

from pydantic import Field, field_validator

from evalcore.models.audio_chat import (AudioNotReceived, conversation, count, incomplete, mistral_conversation,
                                        stop_token_ids, too_short)
from evalcore.models.base import MODELS, AudioPrompt
from evalcore.models.checkpoint import read_checkpoint_json
from evalcore.models.checkpoint_lm import AudioLMParams, CheckpointLM, checkpoint_audio_spec, validated, window
from evalcore.core.packages import missing, missing_in


@dataclass(frozen=True)
class VLLMFamily:
    """An audio-LM family vLLM serves and evalcore has run."""

    name: str
    model_types: tuple[str, ...]  # config.json model_type values
    architecture: str  # vLLM's model class for it
    #: audio positions per second of audio (the prompt length check of check_files)
    positions_per_second: float = 25
    #: "template": the chat template's one placeholder, expanded by the engine; "mistral": mistral-common's
    #: tokenizer expands the audio into its positions itself and the engine gets token ids (Voxtral)
    chat: Literal["template", "mistral"] = "template"


FAMILIES: dict[str, VLLMFamily] = {f.name: f for f in (
    VLLMFamily("qwen2_audio", ("qwen2_audio",), "Qwen2AudioForConditionalGeneration"),
    VLLMFamily("audioflamingo3", ("audioflamingo3",), "AudioFlamingo3ForConditionalGeneration"),
    VLLMFamily("glmasr", ("glmasr",), "GlmAsrForConditionalGeneration", positions_per_second=12.5),
    VLLMFamily("voxtral", ("voxtral",), "VoxtralForConditionalGeneration", positions_per_second=12.5, chat="mistral"),
)}

#: vLLM ``EngineArgs`` fields that ``engine_args`` may set (vLLM 0.32; ``tests/test_models_vllm_audio.py`` checks
#: each is still an EngineArgs field). The ones with params of their own are set through those.
ENGINE_ARGS = frozenset({
    "enforce_eager", "max_num_seqs", "max_num_batched_tokens", "enable_prefix_caching", "enable_chunked_prefill",
    "cpu_offload_gb", "kv_cache_dtype", "block_size", "quantization", "trust_remote_code",
    "tokenizer_mode", "mm_processor_kwargs", "disable_log_stats", "max_logprobs", "kv_cache_memory_bytes",
    "pipeline_parallel_size", "disable_custom_all_reduce", "mm_processor_cache_gb", "compilation_config",
    "hf_overrides", "override_generation_config", "load_format", "num_gpu_blocks_override",
})
#: ``vllm.SamplingParams`` fields that ``generation`` may set (``max_tokens`` is ``max_new_tokens``)
SAMPLING = frozenset({
    "temperature", "top_p", "top_k", "min_p", "min_tokens", "ignore_eos", "repetition_penalty", "presence_penalty",
    "frequency_penalty", "stop", "n", "seed", "logprobs", "skip_special_tokens",
})

#: environment of the engine actors: the engine runs in the actor's own process (no engine-core subprocess to
#: start inside a Ray worker), and vLLM's usage reporting stays off (the cluster reaches nothing outside)
ENGINE_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}


class VLLMAudioParams(AudioLMParams):
    """The ``params`` of a ``vllm_audio_lm`` model: the shared ones (``generation``: ``vllm.SamplingParams``
    settings, checked against SAMPLING; ``seed``: the engine's and the sampling's) and the engine's."""

    families: ClassVar[Mapping[str, Any]] = FAMILIES
    families_said: ClassVar[str] = "vllm_audio_lm runs"
    unsupported: ClassVar[str] = ("checkpoint model_type {model_type!r} is not a family vllm_audio_lm runs; it runs: "
                                  "{types} (docs/models.md)")

    max_model_len: int | None = Field(None, ge=16)  # None: the checkpoint's
    tensor_parallel_size: int = Field(1, ge=1)
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1)
    limit_mm_per_prompt: dict[str, int] = Field(default_factory=lambda: {"audio": 1})
    cpu_kv_cache_gb: float = Field(1.0, gt=0)  # KV cache of a CPU engine (VLLM_CPU_KVCACHE_SPACE); unused on GPUs
    engine_args: dict[str, Any] = Field(default_factory=dict)  # other vllm.EngineArgs, checked against ENGINE_ARGS

    @field_validator("generation")
    @classmethod
    def _sampling(cls, v: dict[str, Any]) -> dict[str, Any]:
        if "max_tokens" in v or "max_new_tokens" in v:
            raise ValueError("max_tokens: set it as the top-level param max_new_tokens")
        unknown = sorted(set(v) - SAMPLING)
        if unknown:
            raise ValueError(f"unknown vllm.SamplingParams setting(s) {', '.join(unknown)}; known: "
                             f"{', '.join(sorted(SAMPLING))}")
        return v

    @field_validator("engine_args")
    @classmethod
    def _engine(cls, v: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(v) - ENGINE_ARGS)
        if unknown:
            raise ValueError(f"unknown or not settable here: {', '.join(unknown)} (params of their own: "
                             "max_model_len, tensor_parallel_size, gpu_memory_utilization, limit_mm_per_prompt, "
                             f"dtype, seed); known: {', '.join(sorted(ENGINE_ARGS))}")
        return v

    @field_validator("limit_mm_per_prompt")
    @classmethod
    def _audio_allowed(cls, v: dict[str, int]) -> dict[str, int]:
        if v.get("audio", 0) < 1:
            raise ValueError("must allow at least one audio per prompt ({audio: 1})")
        return v


def parse_params(params: dict[str, Any]) -> VLLMAudioParams:
    """Validated ``vllm_audio_lm`` params; a mistake raises ``ValueError`` naming the field."""
    return validated(VLLMAudioLM, "vllm_audio_lm", params)


#: the clone evalcore runs from (what an interpreter without evalcore should install or put on its path)
REPO = Path(__file__).resolve().parents[2]


def vllm_python() -> str | None:
    """The interpreter the engine actors run in: ``$EVALCORE_VLLM_PYTHON``, else ``.venv-vllm/bin/python`` of the
    checkout, else this one if it imports vLLM (an image with vLLM installed); None if none has it."""
    given = os.environ.get("EVALCORE_VLLM_PYTHON")
    if given:
        return given
    local = Path(__file__).resolve().parents[2] / ".venv-vllm" / "bin" / "python"
    if local.exists():
        return str(local)
    return sys.executable if importlib.util.find_spec("vllm") is not None else None


def _window(p: VLLMAudioParams, spec: tuple[int, float | None]) -> tuple[int, float | None]:
    return window("vllm_audio_lm", p, spec)


#: the decoder head sizes vLLM's CPU attention runs (vLLM 0.32, ``vllm/v1/attention/backends/cpu_attn.py``,
#: ``CPUAttentionBackend.get_supported_head_sizes``); an engine on CPU refuses any other at start
CPU_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)


def head_size(checkpoint: str, family: VLLMFamily) -> int | None:
    """The checkpoint's decoder head size as vLLM reads it: Mistral's ``params.json`` ``head_dim`` (Voxtral), else
    ``config.json``'s text config ``head_dim`` or ``hidden_size / num_attention_heads``; None when it cannot say."""
    if family.chat == "mistral":
        return (read_checkpoint_json(checkpoint, "params.json") or {}).get("head_dim")
    config = read_checkpoint_json(checkpoint, "config.json") or {}
    text = config.get("text_config") or config
    if text.get("head_dim"):
        return int(text["head_dim"])
    if text.get("hidden_size") and text.get("num_attention_heads"):
        return int(text["hidden_size"]) // int(text["num_attention_heads"])
    return None


#: audio-token positions per second of audio of the Whisper-style encoders of most families (30 s → 750);
#: GLM-ASR and Voxtral merge 4 encoder frames into one position (12.5: VLLMFamily.positions_per_second)
POSITIONS_PER_SECOND = 25


@MODELS.register("vllm_audio_lm")
class VLLMAudioLM(CheckpointLM):
    """An audio LM on a vLLM engine (Qwen2-Audio, Audio Flamingo 3, GLM-ASR, Voxtral; see FAMILIES and
    docs/models.md)."""

    Params = VLLMAudioParams

    @classmethod
    def check_files(cls, params: dict[str, Any]) -> None:
        p = parse_params(params)
        config = read_checkpoint_json(p.checkpoint, "config.json")
        if config is None:
            raise ValueError(f"checkpoint: {p.checkpoint!r} holds no config.json")
        try:
            family = p.family_for(config.get("model_type"))
            sr, window = _window(p, checkpoint_audio_spec(p.checkpoint))
        except ValueError as e:
            msg = str(e)
            if msg.startswith("vllm_audio_lm params."):
                raise ValueError(msg.removeprefix("vllm_audio_lm params.")) from None
            raise ValueError(f"checkpoint: {msg}") from None
        longest = config.get("max_position_embeddings") or (config.get("text_config") or {}).get(
            "max_position_embeddings")
        if p.max_model_len is not None and longest and p.max_model_len > longest:
            raise ValueError(f"max_model_len: {p.max_model_len} is longer than the checkpoint's "
                             f"max_position_embeddings {longest}")
        if p.max_model_len is not None and window is not None:
            positions = int(window * family.positions_per_second)
            need = positions * p.limit_mm_per_prompt.get("audio", 1) + p.max_new_tokens
            if p.max_model_len < need:
                raise ValueError(f"max_model_len: {p.max_model_len} tokens cannot hold a prompt with a full "
                                 f"{window:g} s audio window ({positions} audio positions) "
                                 f"plus max_new_tokens {p.max_new_tokens}; at least {need} plus the prompt's text")

    @classmethod
    def placement_problem(cls, params: dict[str, Any], num_gpus: float) -> tuple[str, str] | None:
        """(field, reason) when the engine cannot run where the model is placed: an actor asking no GPU runs vLLM on
        CPU, whose attention runs only :data:`CPU_HEAD_SIZES` (read from the checkpoint, no weights loaded)."""
        if num_gpus:
            return None
        p = parse_params(params)
        config = read_checkpoint_json(p.checkpoint, "config.json")
        if config is None:
            return None  # check_files names the checkpoint
        try:
            family = p.family_for(config.get("model_type"))
        except ValueError:
            return None
        size = head_size(p.checkpoint, family)
        if size is None or size in CPU_HEAD_SIZES:
            return None
        return "params.checkpoint", (f"decoder head size {size} is not one vLLM's CPU attention runs "
                                     f"({', '.join(map(str, CPU_HEAD_SIZES))}), and the model asks no GPU "
                                     "(resources.num_gpus: 0); give it a GPU or run it with hf_audio_lm")

    @classmethod
    def prompt_problem(cls, params: dict[str, Any], prompts: Iterable[str]) -> tuple[str, str] | None:
        """(field, reason) when a set ``max_model_len`` cannot hold the longest of the run's ``prompts`` through the
        checkpoint's chat template, with a full audio window and ``max_new_tokens`` (the tokenizer is read, no
        weights); None when it can, when ``max_model_len`` is not set or transformers is not here."""
        p = parse_params(params)
        if p.max_model_len is None:
            return None
        try:
            import transformers
        except ImportError:
            return None
        config = read_checkpoint_json(p.checkpoint, "config.json") or {}
        family = p.family_for(config.get("model_type"))
        window = _window(p, checkpoint_audio_spec(p.checkpoint))[1]
        positions = int((window or 0) * family.positions_per_second) * p.limit_mm_per_prompt.get("audio", 1)
        proc = transformers.AutoProcessor.from_pretrained(p.checkpoint, local_files_only=True)
        tok = proc.tokenizer

        def tokens(prompt: str) -> int:  # the prompt's text through the chat template (placeholders aside)
            if family.chat == "mistral":
                return len(tok.apply_chat_template(conversation(prompt, False, p.system_prompt), tokenize=True))
            text = proc.apply_chat_template([conversation(prompt, False, p.system_prompt)], tokenize=False,
                                            add_generation_prompt=True)[0]
            return len(tok(text, add_special_tokens=False)["input_ids"])

        longest = max(((tokens(q), q) for q in prompts), default=None)
        if longest is None or longest[0] + positions + p.max_new_tokens <= p.max_model_len:
            return None
        return "params.max_model_len", (f"{p.max_model_len} tokens cannot hold the run's longest prompt: {longest[0]} "
                                        f"tokens of text ({longest[1][:60]!r}…) + {positions} audio positions (a "
                                        f"full {window:g} s window) + max_new_tokens {p.max_new_tokens}; at least "
                                        f"{longest[0] + positions + p.max_new_tokens}")

    @classmethod
    def packages_problem(cls, params: dict[str, Any]) -> str | None:
        """vLLM and evalcore import in the interpreter the engine actors will run in (:func:`vllm_python`; a subprocess
        asks another interpreter, nothing is imported), else why not and how to get one (evalcore.core.packages)."""
        python = vllm_python()
        if python is None:
            return ("needs vllm, and no Python here imports it; build .venv-vllm: bash scripts/build_vllm_venv.sh "
                    "(docs/models.md), or set EVALCORE_VLLM_PYTHON to an interpreter that imports vllm")
        gone = missing(["vllm", "evalcore"]) if os.path.abspath(python) == os.path.abspath(sys.executable) \
            else missing_in(python, ["vllm", "evalcore"])
        if isinstance(gone, str):
            return f"needs vllm in {python}, which cannot be asked: {gone}"
        if "vllm" in gone:
            return (f"needs vllm in {python}, which does not import it; rebuild .venv-vllm: "
                    "bash scripts/build_vllm_venv.sh, or set EVALCORE_VLLM_PYTHON to an interpreter that imports vllm")
        if gone:  # the engine actors run evalcore's model stage in that interpreter
            return (f"needs evalcore in {python} too (the engine actors run evalcore's model stage there), which does "
                    f"not import it: pip install -e {REPO} there, or put {REPO} on PYTHONPATH")
        return None

    @classmethod
    def check_resources(cls, params: dict[str, Any], num_gpus: float) -> None:
        """``tensor_parallel_size`` fits the GPUs each actor asks (``resources.num_gpus``, when it asks any)."""
        tp = int(params.get("tensor_parallel_size", 1) or 1)
        if num_gpus and tp > num_gpus:
            raise ValueError(f"params.tensor_parallel_size: {tp} is more than the {num_gpus:g} GPU(s) each actor "
                             "asks (resources.num_gpus)")

    @classmethod
    def runtime_env(cls, params: dict[str, Any]) -> dict[str, Any]:
        """The Ray runtime_env of this model's actors: the interpreter with vLLM and the engine's environment."""
        p = parse_params(params)
        env = {**ENGINE_ENV, "VLLM_CPU_KVCACHE_SPACE": f"{p.cpu_kv_cache_gb:g}"}
        python = vllm_python()
        out: dict[str, Any] = {"env_vars": env}
        # a venv's python is a symlink to the base interpreter: compare the paths themselves, not their targets
        if python is not None and os.path.abspath(python) != os.path.abspath(sys.executable):
            out["py_executable"] = python
        return out

    def __init__(self, **params: Any) -> None:
        import transformers
        import vllm

        local, config = self.open_checkpoint(params)
        p = self.params
        self.processor = transformers.AutoProcessor.from_pretrained(local, local_files_only=True)
        self.tokenizer = self.processor.tokenizer
        self.stop_ids = stop_token_ids(self.tokenizer, read_checkpoint_json(local, "generation_config.json"))
        token = getattr(self.processor, "audio_token", None)
        self.audio_token_id = (self.tokenizer.convert_tokens_to_ids(token) if token else
                               config.get("audio_token_id", config.get("audio_token_index")))
        if self.audio_token_id is None:
            raise ValueError(f"vllm_audio_lm: the checkpoint {p.checkpoint} names no audio token")
        import torch

        on_cpu = not torch.cuda.is_available()
        self.engine_args: dict[str, Any] = {
            "dtype": p.dtype, "seed": p.seed, "max_model_len": p.max_model_len,
            "tensor_parallel_size": p.tensor_parallel_size, "gpu_memory_utilization": p.gpu_memory_utilization,
            "limit_mm_per_prompt": p.limit_mm_per_prompt,
            # one engine in this actor's process; several GPUs: vLLM's own worker processes on this node
            "distributed_executor_backend": "uni" if p.tensor_parallel_size == 1 else "mp",
            **({"enforce_eager": True} if on_cpu else {}), **p.engine_args}
        self.llm = vllm.LLM(model=local, tokenizer=local, **self.engine_args)
        self.device = "cpu" if on_cpu else "cuda"
        self.vllm_version = vllm.__version__
        self.sampling = vllm.SamplingParams(**self._sampling())

    # ---------------------------------------------------------------- identity

    def _sampling(self) -> dict[str, Any]:
        s: dict[str, Any] = {"max_tokens": self.params.max_new_tokens, "temperature": 0.0,
                             "stop_token_ids": self.stop_ids, **self.params.generation}
        if s.get("temperature", 0.0) > 0 and "seed" not in s:
            s["seed"] = self.params.seed
        return s

    def generation_settings(self) -> dict[str, Any]:
        g = {"max_new_tokens": self.params.max_new_tokens, "temperature": 0.0, **self.params.generation}
        if g.get("temperature", 0.0) > 0:
            g.setdefault("seed", self.params.seed)
        return g

    def info(self) -> dict[str, Any]:
        import torch
        import transformers

        return {**super().info(), "checkpoint": self.ckpt.identity(), "family": self.family.name,
                "architecture": self.family.architecture, "dtype": self.params.dtype, "device": self.device,
                "system_prompt": self.params.system_prompt, "vllm": self.vllm_version,
                "engine_args": {k: v for k, v in self.engine_args.items() if k != "seed"},
                "transformers": transformers.__version__, "torch": torch.__version__}

    # ---------------------------------------------------------------- generation

    def render(self, inp: AudioPrompt) -> str:
        """The prompt text of one request through the checkpoint's chat template (audio placeholder included)."""
        conv = conversation(inp.prompt, inp.audio is not None, self.params.system_prompt)
        return self.processor.apply_chat_template([conv], tokenize=False, add_generation_prompt=True)[0]

    def engine_prompts(self, batch: Sequence[AudioPrompt]) -> list[dict[str, Any]]:
        """What the engine gets per request: the rendered prompt and, with audio, the array at the model's rate.
        A mistral-common family (Voxtral) gets the token ids of its tokenizer instead of text, the audio positions
        already in them, and the audio as the tokenizer padded it (whole 30 s chunks, which those positions cover)."""
        out = []
        for inp in batch:
            if inp.audio is not None and inp.sample_rate != self.sample_rate:
                raise ValueError(f"audio at {inp.sample_rate} Hz, the model takes {self.sample_rate} Hz")
            if self.family.chat == "mistral":
                enc = self.tokenizer.apply_chat_template(
                    mistral_conversation(inp.prompt, inp.audio, self.sample_rate, self.params.system_prompt),
                    tokenize=True, return_dict=True)
                prompt: dict[str, Any] = {"prompt_token_ids": list(enc["input_ids"])}
                if inp.audio is not None:
                    prompt["multi_modal_data"] = {"audio": [(a, self.sample_rate) for a in enc["audio"]]}
            else:
                prompt = {"prompt": self.render(inp)}
                if inp.audio is not None:
                    prompt["multi_modal_data"] = {"audio": [(inp.audio, self.sample_rate)]}
            out.append(prompt)
        return out

    def check_audio(self, inp: AudioPrompt, sent: dict[str, Any], engine_ids: Sequence[int]) -> AudioNotReceived | None:
        """None when the engine's prompt holds what the request had: its audio expanded to features (more audio
        positions than the rendered prompt's placeholders), or no audio token at all for a text-only request.
        ``sent`` is the request's engine prompt (:meth:`engine_prompts`). A mistral-common family's prompt holds
        every audio position before the engine sees it: there the audio array must have gone with them."""
        received = count(engine_ids, self.audio_token_id)
        if inp.audio is None:
            if received:
                return AudioNotReceived(f"audio_unexpected: a text-only request reached the model with "
                                        f"{received} audio positions")
            return None
        if self.family.chat == "mistral":
            if received < 1:
                return AudioNotReceived("audio_not_in_prompt: the tokenizer placed no audio positions")
            if not (sent.get("multi_modal_data") or {}).get("audio"):
                return AudioNotReceived(f"audio_not_received: the engine's prompt holds {received} audio positions "
                                        "but no audio went with them: the audio features never reached the model")
            return None
        rendered = count(self.tokenizer(sent["prompt"], add_special_tokens=False)["input_ids"], self.audio_token_id)
        if rendered < 1:
            return AudioNotReceived("audio_not_in_prompt: the chat template placed no audio placeholder")
        if received <= rendered:
            return AudioNotReceived(f"audio_not_received: the engine's prompt holds {received} audio position(s) "
                                    f"for {rendered} placeholder(s): the audio features never reached the model")
        return None

    def generate(self, batch: Sequence[AudioPrompt]) -> list[str | Exception]:  # type: ignore[override]
        short: list[Exception | None] = [too_short(self.family.name, inp.audio, self.sample_rate) for inp in batch]
        keep = [inp for inp, e in zip(batch, short) if e is None]
        answers = iter(self._generate(keep) if keep else [])
        return [e if e is not None else next(answers) for e in short]

    def _generate(self, batch: Sequence[AudioPrompt]) -> list[str | Exception]:
        prompts = self.engine_prompts(batch)
        outs = self.llm.generate(prompts, self.sampling, use_tqdm=False)
        answers: list[str | Exception] = []
        for inp, sent, out in zip(batch, prompts, outs):
            problem = self.check_audio(inp, sent, out.prompt_token_ids or [])
            done = out.outputs[0]
            # decoded as hf_audio_lm decodes (vLLM's incremental text may hold back a partial character)
            text = self.tokenizer.decode(list(done.token_ids), skip_special_tokens=True).strip()
            if problem is not None:
                answers.append(problem)
            elif done.finish_reason == "length":
                answers.append(incomplete(len(done.token_ids), self.params.max_new_tokens, text))
            else:
                answers.append(text)
        return answers
