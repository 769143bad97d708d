"""The paper configs run the papers' models as the papers describe them, held to the papers' own sentences:
the factual paper's SALMONN is the Vicuna-7B one, and gemini-2.5-flash has room for its thinking tokens."""

from __future__ import annotations

import pathlib
import re

import yaml

from paper_text import FACTUAL, flat, paper

REPO = pathlib.Path(__file__).resolve().parents[1]


def _models(pattern: str) -> list[tuple[str, dict]]:
    return [(p.name, m) for p in sorted((REPO / "configs" / "paper").glob(pattern))
            for m in yaml.safe_load(p.read_text())["models"]]


def test_the_factual_papers_salmonn_is_the_vicuna_7b_one() -> None:
    assert "SALMONN is derived from the Vicuna-7B fine-tuned variant of LLaMA-2 7B" in flat(paper(FACTUAL))
    found = [(name, m["params"]["checkpoint"]) for name, m in _models("factual-*.yaml") if m["name"] == "salmonn"]
    assert len(found) >= 5
    assert all(ck.rstrip("/").endswith("salmonn-7b") for _, ck in found), found


def test_gemini_has_room_for_its_thinking_tokens() -> None:
    found = [(name, m["params"]) for name, m in _models("hummusqa-*.yaml") if m["name"] == "gemini-2.5-flash"]
    assert found and all(p.get("max_tokens", 256) >= 8192 for _, p in found), found


# ------------------------------------------------------------------------------------------- HumMusQA
# Strings taken from the released sources, quoted with where they stand (the source's own text, not ours):
#: github.com/QwenLM/Qwen2.5-Omni, cookbooks/universal_audio_understanding.ipynb, the sys_prompt of each task
#: (identical at e4d1fe8f916ed28556b3a464072f30ef48c5931c, 2025-03-29, and at its last change
#: 960ce9a6f134644ce995abde778a28108929235b, 2025-04-29 "update transformers")
QWEN_COOKBOOK_SYSTEM_PROMPTS = ("You are a speech recognition model.", "You are a speech translation model.",
                                "You are a vocal sound classification model.")
#: github.com/GLJS/AudSemThinker at c1e125b0de17e201834cd9f619294c9054db0db8: the system turn of every
#: conversation in training/main_omni.py (training), training/evaluate/mmau_mini_omni.py (its multiple-choice
#: evaluation) and training/AudioBench/src/model_src/audsemthinker.py (its AudioBench model)
AUDSEMTHINKER_SYSTEM_PROMPT = ("You are Qwen, a virtual human developed by the Qwen Team, Alibaba Group, capable of "
                               "perceiving auditory and visual inputs, as well as generating text and speech.")
HUMMUSQA = "hummusqa-benchmark.txt"


def _hummusqa_model(name: str) -> list[tuple[str, dict]]:
    return [(cfg, m) for cfg, m in _models("hummusqa-*.yaml") if m["name"] == name]


def test_qwen_omni_has_a_system_prompt_of_the_cookbooks_form_in_the_papers_words() -> None:
    text = flat(paper(HUMMUSQA))
    assert "We use a system prompt based on the audio understanding cookbook provided by the authors." in text
    assert "Qwen2.5-Omni/blob/main/cookbooks/universal_audio_understanding.ipynb" in text
    form = re.compile(r"You are a ([a-z][a-z ]*) model\.")
    assert all(form.fullmatch(p) for p in QWEN_COOKBOOK_SYSTEM_PROMPTS)  # the cookbook's one form
    # the task in the paper's words: the first line of its qwen2.5-omni-7b template
    (first_line,) = re.findall(r'\*\*qwen2\.5-omni-7b\*\*.*?prompt = f"""(You are a [^.]* model\.)', text)
    found = _hummusqa_model("qwen2.5-omni-7b")
    assert len(found) == 2, found  # Tables 1 and 2
    for cfg, m in found:
        assert m["kind"] == "openai_audio_chat" and m["params"]["model"] == "Qwen/Qwen2.5-Omni-7B", cfg
        assert form.fullmatch(m["params"]["system_prompt"]) and m["params"]["system_prompt"] == first_line, cfg


def test_audsemthinker_is_the_papers_think_plus_semantics_variant_with_the_released_system_prompt() -> None:
    text = flat(paper(HUMMUSQA))
    assert "model variant = 'Think + Semantics'" in text
    assert "Think + Semantic - <think> <semantic_elements> <answer>" in text
    assert re.search(r'\*\*audsemthinker\*\* ``` model variant = \'Think \+ Semantics\' prompt = '
                     r'f"\{question\}\\n\{answer_str\}"', text)
    (cfg, m), = _hummusqa_model("audsemthinker")
    assert m["params"]["model"] == "gijs/audsemthinker"
    assert m["params"]["system_prompt"] == AUDSEMTHINKER_SYSTEM_PROMPT
    assert m["params"]["max_tokens"] >= 512  # the released cap: think and semantic phases before the answer
    protocol = yaml.safe_load((REPO / "configs" / "paper" / cfg).read_text())["protocols"][0]
    assert protocol["templates"].get("audsemthinker", protocol["templates"]["default"]) == "hummusqa-plain"


def test_the_endpoint_sends_the_configs_system_prompt_first() -> None:
    import numpy as np

    from evalcore.models.base import AudioPrompt
    from evalcore.models.openai_audio import OpenAIAudioChat

    for _, m in _hummusqa_model("qwen2.5-omni-7b") + _hummusqa_model("audsemthinker"):
        model = OpenAIAudioChat(**m["params"])
        msgs = model.messages(AudioPrompt(audio=np.zeros(1600, dtype=np.float32), sample_rate=16_000, prompt="Q?"))
        assert msgs[0] == {"role": "system", "content": m["params"]["system_prompt"]}
        assert [p["type"] for p in msgs[1]["content"]] == ["input_audio", "text"]  # audio, then the prompt
        assert model.info()["system_prompt"] == m["params"]["system_prompt"]


# ------------------------------------------------------------------------------------------ MuChoMusic
#: github.com/bytedance/SALMONN README.md at b82a490f8f860e9454de295eea4317a8b6d9d558 (2024-05-28, the README
#: when MuChoMusic ran): the released inference setup ("How to inference in CLI") is the 13B one
SALMONN_README_INFERENCE = ("For SALMONN-13B v1, you need to use the following dependencies:",
                            "Download [vicuna 13B v1.1](https://huggingface.co/lmsys/vicuna-13b-v1.1/tree/main)")


def test_muchomusics_salmonn_is_the_official_default_13b_one() -> None:
    # the paper does not print SALMONN's size (its supplementary Table 1 says "Vicuna (LoRA)"); it runs the
    # official implementation with its default inference settings, which the released README sets up for 13B
    text = flat(paper("muchomusic-benchmark.txt"))
    assert "For all models, we follow the official implementation and use default inference settings." in text
    assert all("13B" in s for s in SALMONN_README_INFERENCE)
    found = [(name, m["params"]["checkpoint"]) for name, m in _models("muchomusic-*.yaml") if m["name"] == "salmonn"]
    assert len(found) == 4
    assert all(ck.rstrip("/").endswith("salmonn-13b") for _, ck in found), found
