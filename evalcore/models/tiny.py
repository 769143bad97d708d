"""Tiny random-weight checkpoints of the audio-LM families, built offline from configs.

The same builder serves the tests and anyone who wants to dry-run a config (or a nightly) on a checkpoint of
the right family without real weights: ``build_tiny("qwen2_audio", "ckpt/")`` writes the model, its processor
and a byte-level BPE tokenizer trained here on a few sentences. Nothing is downloaded.

``head_dim`` sets the attention head size of the language model: vLLM's CPU attention needs 32 or more, the
transformers backend runs any. ``ends_answers`` makes greedy answers end: the end-of-turn token's output row
becomes a slightly larger copy of the row of a token the random model likes to emit, so an answer ends wherever
that token would have come (some answers end within a few tokens, others run to the token limit), which gives
tests both finished and cut-off answers. ``generation_config.json`` names the end-of-turn token as EOS.
"""

from __future__ import annotations

from typing import Any

SR = 16_000
#: the families :func:`build_tiny` builds
FAMILIES = ("qwen2_audio", "audioflamingo3", "musicflamingo")
# a ChatML template with the audio placeholder of the family (Qwen2-Audio's processor brings its own)
TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{% if m['content'] is string %}{{ m['content'] }}"
            "{% else %}{% for c in m['content'] %}{% if c['type'] == 'audio' %}<|sound_bos|><sound><|sound_eos|>"
            "{% elif c['type'] == 'text' %}{{ c['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


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


def build_tiny(family: str, out: str, seed: int = 0, head_dim: int = 8, ends_answers: bool = False) -> str:
    """Save a tiny random checkpoint of ``family`` (model + processor + tokenizer) to ``out``; returns ``out``."""
    import torch
    import transformers as T

    if family not in FAMILIES:
        raise ValueError(f"family: {family!r} is not one of {', '.join(FAMILIES)}")
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
    if ends_answers:
        _end_answers(model, proc, eos)
    model.generation_config.eos_token_id = eos
    model.generation_config.pad_token_id = tk.pad_token_id
    model.save_pretrained(out)
    proc.save_pretrained(out)
    return out


def _end_answers(model: Any, processor: Any, eos: int) -> None:
    """Make the EOS row of the output layer a 1.05× copy of the row of the token greedy decoding emits most often
    on a few probe requests (text only and with noise as audio): wherever that token would win with a positive
    logit, EOS wins instead."""
    import numpy as np
    import torch

    rng = np.random.default_rng(0)
    seen: dict[int, int] = {}
    for i, prompt in enumerate(["Describe the music in one sentence.", "What instruments are playing?"] * 2):
        audio = (0.3 * rng.standard_normal(SR * (i + 1))).astype(np.float32) if i >= 2 else None
        content = ([{"type": "audio"}] if audio is not None else []) + [{"type": "text", "text": prompt}]
        text = processor.apply_chat_template([[{"role": "user", "content": content}]], tokenize=False,
                                             add_generation_prompt=True)[0]
        kwargs: dict[str, Any] = {"text": [text], "return_tensors": "pt"}
        if audio is not None:
            kwargs.update(audio=[audio], sampling_rate=SR)
        enc = processor(**kwargs)
        with torch.inference_mode():
            out = model.generate(**enc, max_new_tokens=16, do_sample=False, eos_token_id=None,
                                 pad_token_id=processor.tokenizer.pad_token_id)
        for t in out[0, enc["input_ids"].shape[1]:].tolist():
            seen[t] = seen.get(t, 0) + 1
    liked = max(sorted(seen), key=lambda t: seen[t])
    head = model.get_output_embeddings().weight
    with torch.no_grad():
        head[eos] = head[liked] * 1.05
