"""Prompt templates held against their sources' own strings, not against evalcore's restatement of them.

* MuChoMusic: the expected strings below were produced by running ``get_prompts`` of the released
  ``prepare_prompts.py`` (github.com/mulab-mir/muchomusic) on these questions, with no in-context
  example, with the released example of ``muchomusic_eval/configs/default.yaml`` (read with
  ``yaml.safe_load``), and with two examples written in that released example's form.
* HumMusQA: the templates as the paper's appendix prints them (``prompt = f"..."``), filled by Python's
  own f-string rule with the same ``question`` and ``answer_str`` (which the paper does not print; evalcore
  writes one "A: text" line per option).
"""

from __future__ import annotations

from evalcore.runconfig.config import parse_config
from evalcore.protocols import expand_requests
from evalcore.protocols.templates import RELEASED_EXAMPLE, TEMPLATE_SETS

QUESTIONS = ["What is the mood of the piece?", "Which instrument leads the melody?"]
ANSWERS = [["Melancholic", "Joyful", "It features a piano", "The Eiffel Tower"],
           ["Violin", "Flute", "The tempo is slow", "Bananas"]]

# muchomusic_eval/configs/default.yaml → in_context_examples[0], as yaml.safe_load reads it
RELEASED_EXAMPLE_STRING = (
    "Question: What rhythm pattern do the digital drums primarily follow in this pop music piece? \n Options: (A) "
    "Four on the floor. (B) Off-beat syncopation. (C) Scat singing. (D) E-guitar playing a simple melody. \n The "
    "correct answer is: A")

# get_prompts(QUESTIONS, ANSWERS, []) of the released prepare_prompts.py
RELEASED_ZERO_SHOT = [
    "Question: What is the mood of the piece?\n Options: (A) Melancholic (B) Joyful (C) It features a piano (D) The "
    "Eiffel Tower \n The correct answer is: ",
    "Question: Which instrument leads the melody?\n Options: (A) Violin (B) Flute (C) The tempo is slow (D) Bananas "
    "\n The correct answer is: ",
]
# get_prompts(QUESTIONS, ANSWERS, [RELEASED_EXAMPLE_STRING]) — the released one-shot setting
RELEASED_ONE_SHOT = [RELEASED_EXAMPLE_STRING + "\n " + p for p in RELEASED_ZERO_SHOT]
# two examples in the released example's form: question 2 (answer B) and the released one
EXAMPLE_Q2 = ("Question: Which instrument leads the melody? \n Options: (A) Flute (B) Violin (C) The tempo is slow "
              "(D) Bananas \n The correct answer is: B")
# get_prompts(QUESTIONS[:1], ANSWERS[:1], [EXAMPLE_Q2, RELEASED_EXAMPLE_STRING])
RELEASED_TWO_SHOT = (
    "Question: Which instrument leads the melody? \n Options: (A) Flute (B) Violin (C) The tempo is slow (D) Bananas "
    "\n The correct answer is: B Question: What rhythm pattern do the digital drums primarily follow in this pop "
    "music piece? \n Options: (A) Four on the floor. (B) Off-beat syncopation. (C) Scat singing. (D) E-guitar "
    "playing a simple melody. \n The correct answer is: A\n Question: What is the mood of the piece?\n Options: (A) "
    "Melancholic (B) Joyful (C) It features a piano (D) The Eiffel Tower \n The correct answer is: ")

MUCHO = TEMPLATE_SETS["muchomusic"]


def test_muchomusic_zero_one_and_two_shot_prompts_are_the_released_strings() -> None:
    assert [MUCHO.render(q, a) for q, a in zip(QUESTIONS, ANSWERS)] == RELEASED_ZERO_SHOT
    assert MUCHO.render_example(*RELEASED_EXAMPLE) == RELEASED_EXAMPLE_STRING  # the example ends in the bare letter
    assert [MUCHO.render(q, a, [RELEASED_EXAMPLE]) for q, a in zip(QUESTIONS, ANSWERS)] == RELEASED_ONE_SHOT
    q2 = (QUESTIONS[1], ["Flute", "Violin", "The tempo is slow", "Bananas"], 1)
    assert MUCHO.render_example(*q2) == EXAMPLE_Q2
    assert MUCHO.render(QUESTIONS[0], ANSWERS[0], [q2, RELEASED_EXAMPLE]) == RELEASED_TWO_SHOT


def test_muchomusic_config_with_the_released_example_builds_the_released_prompt() -> None:
    cfg = parse_config({
        "name": "t", "datasets": [{"name": "d", "kind": "items_file", "params": {"path": "unused.jsonl"}}],
        "models": [{"name": "m", "kind": "null"}],
        "protocols": [{"name": "muchomusic", "kind": "mcq", "conditions": ["correct"], "templates": "muchomusic",
                       "icl_examples": 1, "icl_pool": "released"}]})
    items = [{"dataset": "d", "item_id": f"q{i}", "protocol": "mcq", "audio_uri": f"/a/{i}.wav", "question": q,
              "options": a, "correct_option": 0} for i, (q, a) in enumerate(zip(QUESTIONS, ANSWERS))]
    reqs = expand_requests(cfg, items)
    for r, q in zip(reqs, QUESTIONS):
        order = "".join(f"({'ABCD'[i]}) {o} " for i, o in enumerate(r["options"]))
        assert r["prompt"] == f"{RELEASED_EXAMPLE_STRING}\n Question: {q}\n Options: {order}\n The correct answer is: "
        assert r["variant"] == "muchomusic" and r["protocol"] == "muchomusic" and r["protocol_kind"] == "mcq"


# The HumMusQA appendix's listings, line for line as printed (blank lines where it separates blocks).
GEMINI_LISTING = '''f"""**Task:** You are an expert musicologist with perfect pitch and extensive knowledge
of music theory, instrumentation, and performance techniques. Your goal is to analyze the provided
audio excerpt and answer the multiple-choice question with high precision. If audio is missing,
use theoretical knowledge to deduce the answer.
{question}
{answer_str}
**Final Answer:** Return ONLY the single letter: A, B, C, or D"""'''
QWEN_LISTING = '''f"""You are a music audio understanding model.

Listen carefully to the provided audio clip. Answer the following multiple-choice
question based on what you hear.

Question:
{question}

Options:
{answer_str}

Respond with ONLY the letter of the correct option (A, B, C, or D).
Do not include any explanation or additional text."""'''
PLAIN_LISTING = 'f"{question}\\n{answer_str}"'


def _paper(listing: str, question: str, answer_str: str) -> str:
    """The listing evaluated as the Python f-string it is."""
    return eval(listing, {}, {"question": question, "answer_str": answer_str})  # noqa: S307 - our own constants


def test_hummusqa_templates_are_the_appendix_listings() -> None:
    question, options = QUESTIONS[1], ANSWERS[1]
    answer_str = "\n".join(f"{'ABCD'[i]}: {o}" for i, o in enumerate(options))
    assert TEMPLATE_SETS["hummusqa-plain"].render(question, options) == _paper(PLAIN_LISTING, question, answer_str)
    assert TEMPLATE_SETS["hummusqa-gemini"].render(question, options) == _paper(GEMINI_LISTING, question, answer_str)
    assert TEMPLATE_SETS["hummusqa-qwen-omni"].render(question, options) == _paper(QWEN_LISTING, question,
                                                                                     answer_str)
