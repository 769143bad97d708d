"""Tiny random-weight checkpoints of the audio-LM families, built offline from configs.

The same builder serves the tests and anyone who wants to dry-run a config (or a nightly) on a checkpoint of
the right family without real weights: ``build_tiny("qwen2_audio", "ckpt/")`` writes the model, its processor
and a byte-level BPE tokenizer trained here on a few sentences. Nothing is downloaded. Voxtral is written in
both of its checkpoint formats with a byte-level mistral-common tokenizer (``tekken.json``; building and loading
it needs the ``mistral-common`` package).

``head_dim`` sets the attention head size of the language model: vLLM's CPU attention needs 32 or more, the
transformers backend runs any. A random model's greedy answers rarely end: ``ends_answers`` makes every answer end
after its first token (``evalcore make-checkpoint --ends-answers``, for dry runs), ``some_end`` makes some end and others
run to the token limit (the tests' checkpoints); :mod:`evalcore.models.tiny_answers` says how.
``generation_config.json`` names the end-of-turn token as EOS.
"""

from __future__ import annotations

import base64
import json
import os
import re
from typing import Any

import numpy as np

from evalcore.models.audio_chat import mistral_conversation
from evalcore.models.tiny_answers import end_every_answer, end_some_answers

SR = 16_000
#: the families :func:`build_tiny` builds
FAMILIES = ("qwen2_audio", "audioflamingo3", "musicflamingo", "glmasr", "voxtral")
# a ChatML template with the audio placeholder of the family (Qwen2-Audio's processor brings its own)
TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{% if m['content'] is string %}{{ m['content'] }}"
            "{% else %}{% for c in m['content'] %}{% if c['type'] == 'audio' %}<|sound_bos|><sound><|sound_eos|>"
            "{% elif c['type'] == 'text' %}{{ c['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
#: GLM-ASR's audio placeholder (what vLLM's GlmAsrForConditionalGeneration.get_placeholder_str gives)
GLMASR_AUDIO = "<|begin_of_audio|><|pad|><|end_of_audio|>"


def _template(audio: str) -> str:
    """:data:`TEMPLATE` with another family's audio placeholder."""
    return TEMPLATE.replace("<|sound_bos|><sound><|sound_eos|>", audio)


def tiny_tokenizer(specials: list[str]) -> Any:
    """A byte-level BPE tokenizer trained here on a few sentences (vocabulary ~350)."""
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = ["What instruments are playing in this music clip?", "Describe the music in one sentence.",
              "The answer is guitar and drums.", "system You are a helpful assistant. user assistant Audio 1:"]
    tok.train_from_iterator(corpus * 4, trainers.BpeTrainer(
        vocab_size=350, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>", *specials],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>",
                                                pad_token="<|endoftext|>")


def build_tiny(family: str, out: str, seed: int = 0, head_dim: int = 8, ends_answers: bool = False,
               some_end: bool = False) -> str:
    """Save a tiny random checkpoint of ``family`` (model + processor + tokenizer) to ``out``; returns ``out``.
    ``ends_answers``: every greedy answer ends after its first token; ``some_end``: some end, others run to the limit."""
    import torch
    import transformers as T

    if family not in FAMILIES:
        raise ValueError(f"family: {family!r} is not one of {', '.join(FAMILIES)}")
    if family == "voxtral":
        return _build_voxtral(out, seed, head_dim, ends_answers, some_end)
    fe = T.WhisperFeatureExtractor(feature_size=128, sampling_rate=SR, chunk_length=30)
    heads = 4 if head_dim == 8 else 2
    text = dict(model_type="qwen2", hidden_size=heads * head_dim, intermediate_size=64, num_hidden_layers=2,
                num_attention_heads=heads, num_key_value_heads=heads // 2, max_position_embeddings=4096,
                initializer_range=0.2)
    torch.manual_seed(seed)
    if family == "qwen2_audio":
        tk = tiny_tokenizer(["<|AUDIO|>", "<|audio_bos|>", "<|audio_eos|>"])
        proc = T.Qwen2AudioProcessor(feature_extractor=fe, tokenizer=tk)
        cfg = T.Qwen2AudioConfig(
            audio_config=dict(model_type="qwen2_audio_encoder", d_model=16, encoder_layers=1, encoder_attention_heads=2,
                              encoder_ffn_dim=32, num_mel_bins=128, max_source_positions=1500),
            text_config={**text, "vocab_size": len(tk)}, audio_token_index=tk.convert_tokens_to_ids("<|AUDIO|>"))
        model = T.Qwen2AudioForConditionalGeneration(cfg)
    elif family == "glmasr":
        tk = tiny_tokenizer(["<|pad|>", "<|begin_of_audio|>", "<|end_of_audio|>"])
        proc = T.GlmAsrProcessor(feature_extractor=fe, tokenizer=tk, chat_template=_template(GLMASR_AUDIO),
                                 max_audio_len=60)
        # the encoder's MLP is 4× its width: the projector takes 4 merged frames (12.5 audio positions a second)
        model = T.GlmAsrForConditionalGeneration(T.GlmAsrConfig(
            audio_config=dict(model_type="glmasr_encoder", hidden_size=16, intermediate_size=64, num_hidden_layers=1,
                              num_attention_heads=2, num_mel_bins=128),
            text_config={**text, "model_type": "llama", "vocab_size": len(tk), "eos_token_id": None},
            audio_token_id=tk.convert_tokens_to_ids("<|pad|>"), tie_word_embeddings=False))
    else:
        tk = tiny_tokenizer(["<sound>", "<|sound_bos|>", "<|sound_eos|>"])
        enc = dict(model_type="audioflamingo3_encoder", hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                   intermediate_size=32, num_mel_bins=128, max_source_positions=1500)
        ids = dict(audio_token_id=tk.convert_tokens_to_ids("<sound>"))
        if family == "audioflamingo3":
            proc = T.AudioFlamingo3Processor(feature_extractor=fe, tokenizer=tk, chat_template=TEMPLATE, max_audio_len=60)
            model = T.AudioFlamingo3ForConditionalGeneration(T.AudioFlamingo3Config(
                audio_config=enc, text_config={**text, "vocab_size": len(tk)}, **ids))
        else:
            proc = T.MusicFlamingoProcessor(feature_extractor=fe, tokenizer=tk, chat_template=TEMPLATE, max_audio_len=90)
            model = T.MusicFlamingoForConditionalGeneration(T.MusicFlamingoConfig(
                audio_config=enc, text_config={**text, "vocab_size": len(tk)},
                audio_bos_token_id=tk.convert_tokens_to_ids("<|sound_bos|>"),
                audio_eos_token_id=tk.convert_tokens_to_ids("<|sound_eos|>"), **ids))
    eos = tk.convert_tokens_to_ids("<|im_end|>")
    if some_end:
        end_some_answers(model, proc, eos)
    if ends_answers:
        end_every_answer(model, proc, eos)
    model.generation_config.eos_token_id = eos
    model.generation_config.pad_token_id = tk.pad_token_id
    model.save_pretrained(out)
    proc.save_pretrained(out)
    return out


# ---------------------------------------------------------------------------------------------------- Voxtral

#: mistral-common's special tokens of a Voxtral tokenizer, by rank ([AUDIO] is 24: VoxtralProcessor's fixed id)
VOXTRAL_SPECIALS = ("<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]",
                    "[TOOL_RESULTS]", "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[IMG]", "<pad>", "[IMG_BREAK]", "[IMG_END]",
                    "[PREFIX]", "[MIDDLE]", "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[TOOL_CONTENT]",
                    "[ARGS]", "[CALL_ID]", "[THINK]", "[/THINK]", "[AUDIO]", "[BEGIN_AUDIO]", "[TRANSCRIBE]")
VOXTRAL_NUM_SPECIAL = 32
# tekken's pre-tokenizer pattern (tiktoken syntax)
TEKKEN_PATTERN = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
                  r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def tekken_tokenizer(path: str) -> int:
    """Write a byte-level tekken tokenizer (mistral-common's ``tekken.json``: the 256 bytes after 32 special tokens,
    with Voxtral's audio settings: 16 kHz, 128 mel bins, 12.5 audio positions a second, 30 s chunks); returns the
    vocabulary size."""
    data = {"config": {"pattern": TEKKEN_PATTERN, "num_vocab_tokens": 256, "version": "v7",
                       "default_vocab_size": 256 + VOXTRAL_NUM_SPECIAL,
                       "default_num_special_tokens": VOXTRAL_NUM_SPECIAL},
            "vocab": [{"rank": i, "token_bytes": base64.b64encode(bytes([i])).decode(), "token_str": None}
                      for i in range(256)],
            "special_tokens": [{"rank": i, "token_str": t, "is_control": True} for i, t in enumerate(VOXTRAL_SPECIALS)],
            "audio": {"sampling_rate": SR, "frame_rate": 12.5, "chunk_length_s": 30.0,
                      "audio_encoding_config": {"num_mel_bins": 128, "hop_length": 160, "window_size": 400}}}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f)
    return 256 + VOXTRAL_NUM_SPECIAL


def _voxtral_encode(processor: Any, prompt: str, audio: Any) -> Any:
    return processor.apply_chat_template([mistral_conversation(prompt, audio, SR)], tokenize=True, return_dict=True)


# Voxtral's own (Mistral) names of the transformers weights (the audio ones under mm_whisper_embeddings.)
_MISTRAL_NAMES = [
    (r"lm_head\.weight", "output.weight"),
    (r"language_model\.norm\.weight", "norm.weight"),
    (r"language_model\.embed_tokens\.weight", "tok_embeddings.weight"),
    (r"language_model\.layers\.(\d+)\.input_layernorm\.weight", r"layers.\1.attention_norm.weight"),
    (r"language_model\.layers\.(\d+)\.post_attention_layernorm\.weight", r"layers.\1.ffn_norm.weight"),
    (r"language_model\.layers\.(\d+)\.self_attn\.([qkvo])_proj\.weight", r"layers.\1.attention.w\2.weight"),
    (r"language_model\.layers\.(\d+)\.mlp\.gate_proj\.weight", r"layers.\1.feed_forward.w1.weight"),
    (r"language_model\.layers\.(\d+)\.mlp\.down_proj\.weight", r"layers.\1.feed_forward.w2.weight"),
    (r"language_model\.layers\.(\d+)\.mlp\.up_proj\.weight", r"layers.\1.feed_forward.w3.weight"),
    (r"audio_tower\.conv1\.(weight|bias)", r"whisper_encoder.conv_layers.0.\1"),
    (r"audio_tower\.conv2\.(weight|bias)", r"whisper_encoder.conv_layers.1.\1"),
    (r"audio_tower\.layer_norm\.(weight|bias)", r"whisper_encoder.transformer.norm.\1"),
    (r"audio_tower\.layers\.(\d+)\.self_attn\.([qkv])_proj\.(weight|bias)",
     r"whisper_encoder.transformer.layers.\1.attention.w\2.\3"),
    (r"audio_tower\.layers\.(\d+)\.self_attn\.out_proj\.(weight|bias)",
     r"whisper_encoder.transformer.layers.\1.attention.wo.\2"),
    (r"audio_tower\.layers\.(\d+)\.self_attn_layer_norm\.(weight|bias)",
     r"whisper_encoder.transformer.layers.\1.attention_norm.\2"),
    (r"audio_tower\.layers\.(\d+)\.fc([12])\.(weight|bias)",
     r"whisper_encoder.transformer.layers.\1.feed_forward.w\2.\3"),
    (r"audio_tower\.layers\.(\d+)\.final_layer_norm\.(weight|bias)",
     r"whisper_encoder.transformer.layers.\1.ffn_norm.\2"),
    (r"multi_modal_projector\.linear_1\.weight", "audio_language_projection.0.weight"),
    (r"multi_modal_projector\.linear_2\.weight", "audio_language_projection.2.weight"),
]


def _mistral_name(name: str) -> str | None:
    """The Mistral-format name of a transformers Voxtral weight; None for the encoder's sinusoidal positions (not
    stored there: vLLM computes them)."""
    name = name.removeprefix("model.")
    if name.startswith("audio_tower.embed_positions"):
        return None
    for pattern, new in _MISTRAL_NAMES:
        m = re.fullmatch(pattern, name)
        if m:
            audio = name.startswith(("audio_tower.", "multi_modal_projector."))
            return ("mm_whisper_embeddings." if audio else "") + m.expand(new)
    raise ValueError(f"no Mistral name for the Voxtral weight {name!r}")


def _build_voxtral(out: str, seed: int, head_dim: int, ends_answers: bool, some_end: bool) -> str:
    """Voxtral in both of its checkpoint formats, as Mistral publishes it: transformers' (``config.json``,
    ``model.safetensors``) for ``hf_audio_lm`` and Mistral's own (``params.json``, ``consolidated.safetensors``:
    the only one vLLM's Voxtral reads), the same weights in both, and one mistral-common tokenizer (``tekken.json``)."""
    import torch
    import transformers as T
    from safetensors.torch import save_file
    from transformers.models.whisper.modeling_whisper import sinusoids

    os.makedirs(out, exist_ok=True)
    vocab = tekken_tokenizer(os.path.join(out, "tekken.json"))
    heads = 4 if head_dim == 8 else 2
    torch.manual_seed(seed)
    enc = dict(hidden_size=16, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, num_mel_bins=128,
               max_source_positions=1500, vocab_size=vocab)
    text = dict(model_type="llama", hidden_size=heads * head_dim, intermediate_size=64, num_hidden_layers=2,
                num_attention_heads=heads, num_key_value_heads=heads // 2, head_dim=head_dim,
                max_position_embeddings=4096, initializer_range=0.2, vocab_size=vocab, rms_norm_eps=1e-5)
    cfg = T.VoxtralConfig(audio_config=enc, text_config=text, audio_token_id=VOXTRAL_SPECIALS.index("[AUDIO]"))
    model = T.VoxtralForConditionalGeneration(cfg)
    with torch.no_grad():  # Whisper's sinusoidal positions (Mistral's checkpoints have none: vLLM computes them)
        model.model.audio_tower.embed_positions.weight.copy_(sinusoids(enc["max_source_positions"], enc["hidden_size"]))
    fe = T.WhisperFeatureExtractor(feature_size=128, sampling_rate=SR, chunk_length=30)
    proc = T.VoxtralProcessor(feature_extractor=fe, tokenizer=T.MistralCommonBackend(
        tokenizer_path=os.path.join(out, "tekken.json")))
    eos, pad = VOXTRAL_SPECIALS.index("</s>"), VOXTRAL_SPECIALS.index("<pad>")
    if some_end:
        end_some_answers(model, proc, eos, encode=_voxtral_encode)
    if ends_answers:
        end_every_answer(model, proc, eos, encode=_voxtral_encode)
    model.generation_config.eos_token_id = eos
    model.generation_config.pad_token_id = pad
    model.save_pretrained(out)
    proc.save_pretrained(out)

    tc = cfg.text_config
    weights = {}
    for name, w in model.state_dict().items():
        new = _mistral_name(name)
        if new is None:
            continue
        w = w.detach().clone()
        if new.startswith("layers.") and new.endswith((".wq.weight", ".wk.weight")):
            # transformers' rotary layout (halves) back to Mistral's (interleaved pairs)
            n = tc.num_attention_heads if new.endswith(".wq.weight") else tc.num_key_value_heads
            w = w.view(n, 2, w.shape[0] // n // 2, w.shape[1]).transpose(1, 2).reshape(w.shape)
        weights[new] = w.contiguous()
    save_file(weights, os.path.join(out, "consolidated.safetensors"))
    rope = (tc.rope_parameters or {}).get("rope_theta", 10000.0)
    params = {"dim": tc.hidden_size, "n_layers": tc.num_hidden_layers, "head_dim": tc.head_dim,
              "hidden_dim": tc.intermediate_size, "n_heads": tc.num_attention_heads,
              "n_kv_heads": tc.num_key_value_heads, "rope_theta": rope, "norm_eps": tc.rms_norm_eps,
              "vocab_size": vocab, "max_seq_len": tc.max_position_embeddings,
              "max_position_embeddings": tc.max_position_embeddings,
              "multimodal": {"whisper_model_args": {
                  "encoder_args": {"audio_encoding_args": {"sampling_rate": SR, "num_mel_bins": 128, "hop_length": 160,
                                                           "window_size": 400},
                                   "dim": enc["hidden_size"], "n_layers": enc["num_hidden_layers"],
                                   "head_dim": enc["hidden_size"] // enc["num_attention_heads"],
                                   "hidden_dim": enc["intermediate_size"], "n_heads": enc["num_attention_heads"],
                                   "vocab_size": vocab, "max_source_positions": enc["max_source_positions"]},
                  "downsample_args": {"downsample_factor": enc["intermediate_size"] // enc["hidden_size"]}}}}
    with open(os.path.join(out, "params.json"), "w") as f:
        json.dump(params, f, indent=1)
    return out
