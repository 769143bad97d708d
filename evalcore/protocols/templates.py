"""Named multiple-choice prompt template sets, per benchmark and model family.

A :class:`TemplateSet` renders one question with its lettered options and, for in-context
learning, an example block for each example followed by that example's answer. Sets:

* ``muchomusic`` — the prompt MuChoMusic's released code builds (``prepare_prompts.py``):
  ``"Question: " + question + "\n Options: "``, then ``"(A) text "`` for each option on that one
  line, then ``"\n The correct answer is: "``. In-context examples come first, joined by a space
  and followed by ``"\n "``; each is written like the released example
  (``muchomusic_eval/configs/default.yaml``): ``"Question: " + question + " \n Options: " + options +
  "\n The correct answer is: " + letter`` — it ends in the bare letter. :data:`RELEASED_EXAMPLE` is that
  released one-shot example (config ``icl_pool: released``).
* ``rul-muchomusic`` — RUListening's leave-one-out prompt as its released scripts write it
  (``ExampleAudioEval/qwen_2_audio.py``): an instruction, ``Question:``, the options on one line as
  ``"(A) text (B) text"``, and the request to answer as ``[[Letter]]`` listing ``[[A]]`` to ``[[D]]`` (four
  options; docs/rul-muchomusic.md says where the dataset card's copy differs).
* ``hummusqa-plain`` — HumMusQA appendix, audio-flamingo-3, audsemthinker, gpt-audio and
  music-flamingo: ``f"{question}\n{answer_str}"``. The paper does not print ``answer_str``; we
  write one option a line as "A: text" (the form of its Table 3).
* ``hummusqa-gemini`` — the gemini-2.5-flash template, line for line as the appendix prints it
  ("**Task:** You are an expert musicologist …", "**Final Answer:** Return ONLY the single letter: A, B,
  C, or D").
* ``hummusqa-qwen-omni`` — the qwen2.5-omni-7b template, line for line as printed ("You are a music audio
  understanding model.", …, "Respond with ONLY the letter of the correct option (A, B, C, or D).", …).

The letter list in an instruction ("A, B, C, or D") follows the number of options, so a
distractor ablation with three options asks for "A, B, or C". :data:`MODEL_FAMILIES` maps the
papers' model names to their set. In a run config a protocol names a set for every model
(``templates: muchomusic``) or one per model (``templates: {ckpt-1: hummusqa-gemini,
default: muchomusic}``); the set's name becomes the request's prompt variant.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Mapping, Sequence

__all__ = ["TemplateSet", "TEMPLATE_SETS", "MODEL_FAMILIES", "DEFAULT_KEY", "RELEASED_EXAMPLE", "template_set",
           "set_for_model", "check_templates", "letters_or"]

LETTERS = string.ascii_uppercase
#: key of the per-model mapping used for models it does not name
DEFAULT_KEY = "default"


def letters_or(n: int) -> str:
    """"A, B, C, or D" for four options, "A or B" for two."""
    ls = list(LETTERS[:n])
    if len(ls) <= 2:
        return " or ".join(ls)
    return ", ".join(ls[:-1]) + ", or " + ls[-1]


@dataclass(frozen=True)
class TemplateSet:
    """How one benchmark / model family is prompted.

    ``block`` renders the asked question (placeholders ``{question}``, ``{options}``, ``{letters_or}``),
    ``example_block`` (default: ``block``) an in-context example, followed by ``answer``; options are
    ``option_line`` each, joined by ``option_sep``. ``header`` and ``footer`` wrap the whole prompt
    (instructions said once); examples are joined by ``example_sep`` and separated from the asked
    block by ``examples_end`` (default: ``example_sep``).
    """

    name: str
    block: str
    option_line: str = "({letter}) {text}"
    option_sep: str = "\n"
    answer: str = " ({letter}) {text}"
    header: str = ""
    footer: str = ""
    example_sep: str = "\n\n"
    example_block: str | None = None
    examples_end: str | None = None

    def options(self, options: Sequence[str]) -> str:
        return self.option_sep.join(self.option_line.format(letter=LETTERS[i], text=o) for i, o in enumerate(options))

    def render_block(self, question: str, options: Sequence[str], block: str | None = None) -> str:
        return (block or self.block).format(question=question or "", options=self.options(options),
                                            letters_or=letters_or(len(options)))

    def render_example(self, question: str, options: Sequence[str], correct_index: int) -> str:
        """An in-context example: the example block followed by its answer."""
        return self.render_block(question, options, self.example_block) + self.answer.format(
            letter=LETTERS[correct_index], text=options[correct_index])

    def render(self, question: str, options: Sequence[str],
               examples: Sequence[tuple[str, Sequence[str], int]] = ()) -> str:
        """The prompt: header, the examples (question, presented options, correct index), the question."""
        shots = self.example_sep.join(self.render_example(q, o, c) for q, o, c in examples)
        if shots:
            shots += self.examples_end if self.examples_end is not None else self.example_sep
        n = len(options)
        return (self.header.format(letters_or=letters_or(n)) + shots + self.render_block(question, options)
                + self.footer.format(letters_or=letters_or(n)))


#: MuChoMusic's released in-context example (muchomusic_eval/configs/default.yaml) as (question, options,
#: correct index); rendered by the ``muchomusic`` set it is the released string itself
RELEASED_EXAMPLE: tuple[str, tuple[str, ...], int] = (
    "What rhythm pattern do the digital drums primarily follow in this pop music piece?",
    ("Four on the floor.", "Off-beat syncopation.", "Scat singing.", "E-guitar playing a simple melody."),
    0,
)

# the HumMusQA appendix's templates, line breaks where the appendix prints them
_GEMINI_HEADER = (
    "**Task:** You are an expert musicologist with perfect pitch and extensive knowledge\n"
    "of music theory, instrumentation, and performance techniques. Your goal is to analyze the provided\n"
    "audio excerpt and answer the multiple-choice question with high precision. If audio is missing,\n"
    "use theoretical knowledge to deduce the answer.\n"
)
_QWEN_HEADER = (
    "You are a music audio understanding model.\n\n"
    "Listen carefully to the provided audio clip. Answer the following multiple-choice\n"
    "question based on what you hear.\n\n"
)

# RUListening's leave-one-out prompt (ExampleAudioEval/qwen_2_audio.py at d3971de; four options A-D)
_RUL_BLOCK = ("Provide your best guess of this question. Think step by step.\n\nQuestion: {question}\n\n"
              "Options: {options}\n\nWrite out your guess in the format of [[Letter]], such as [[A]], [[B]], [[C]], "
              "[[D]].")

TEMPLATE_SETS: dict[str, TemplateSet] = {t.name: t for t in (
    TemplateSet("muchomusic", block="Question: {question}\n Options: {options}\n The correct answer is: ",
                example_block="Question: {question} \n Options: {options}\n The correct answer is: ",
                option_line="({letter}) {text} ", option_sep="", answer="{letter}", example_sep=" ",
                examples_end="\n "),
    TemplateSet("rul-muchomusic", block=_RUL_BLOCK, option_line="({letter}) {text}", option_sep=" "),
    TemplateSet("hummusqa-plain", block="{question}\n{options}", option_line="{letter}: {text}",
                answer="\nAnswer: {letter}"),
    TemplateSet("hummusqa-gemini", block="{question}\n{options}", option_line="{letter}: {text}",
                answer="\n**Final Answer:** {letter}", header=_GEMINI_HEADER,
                footer="\n**Final Answer:** Return ONLY the single letter: {letters_or}"),
    TemplateSet("hummusqa-qwen-omni", block="Question:\n{question}\n\nOptions:\n{options}",
                option_line="{letter}: {text}", answer="\n\nAnswer: {letter}", header=_QWEN_HEADER,
                footer="\n\nRespond with ONLY the letter of the correct option ({letters_or}).\n"
                       "Do not include any explanation or additional text."),
)}

#: the model families of the two papers → their template set
MODEL_FAMILIES: dict[str, str] = {
    "mu-llama": "muchomusic", "musilingo": "muchomusic", "m2ugen": "muchomusic", "salmonn": "muchomusic",
    "qwen-audio": "muchomusic",
    "audio-flamingo-3": "hummusqa-plain", "audsemthinker": "hummusqa-plain", "gpt-audio": "hummusqa-plain",
    "music-flamingo": "hummusqa-plain", "gemini-2.5-flash": "hummusqa-gemini",
    "qwen2.5-omni-7b": "hummusqa-qwen-omni",
}


def template_set(name: str) -> TemplateSet:
    """A set by its name or by a model family of :data:`MODEL_FAMILIES`."""
    key = MODEL_FAMILIES.get(name, name)
    try:
        return TEMPLATE_SETS[key]
    except KeyError:
        raise ValueError(f"unknown template set {name!r}; known: {', '.join(TEMPLATE_SETS)} "
                         f"or a model family ({', '.join(MODEL_FAMILIES)})") from None


def set_for_model(templates: str | Mapping[str, str] | None, model: str) -> TemplateSet | None:
    """The set a protocol's ``templates`` choose for ``model`` (None: no set, use the variants)."""
    if templates is None:
        return None
    if isinstance(templates, str):
        return template_set(templates)
    name = templates.get(model, templates.get(DEFAULT_KEY))
    return template_set(name) if name is not None else None


def check_templates(templates: str | Mapping[str, str] | None) -> None:
    """Raise ValueError naming any unknown set in a protocol's ``templates``."""
    if templates is None:
        return
    for name in [templates] if isinstance(templates, str) else templates.values():
        template_set(name)
