"""The options several ``evalcore score`` commands take are declared once (:mod:`evalcore.cli.score.option_groups`):
a group's fields become the command's options in the group parameter's place, and the command gets the group
object back with the values given."""

from __future__ import annotations

from dataclasses import fields
from typing import Optional

import typer
from typer.testing import CliRunner

from evalcore.cli import app
from evalcore.cli.score.llm_options import LLM, LlmOptions
from evalcore.cli.score.option_groups import COMMON, Common, takes_groups


def test_a_group_is_laid_out_in_place_and_handed_back_as_one_object() -> None:
    got: list = []
    toy = typer.Typer(add_completion=False)

    @toy.command()
    @takes_groups
    def cmd(first: Optional[str] = typer.Option(None, "--first"), llm: LlmOptions = LLM, common: Common = COMMON,
            last: int = typer.Option(0, "--last")) -> None:
        got.append((first, llm, common, last))

    res = CliRunner().invoke(toy, ["--llm-model", "m", "--llm-rpm", "7", "--seed", "3", "--last", "1"])
    assert res.exit_code == 0, res.output
    assert got == [(None, LlmOptions(model="m", rpm=7), Common(seed=3), 1)]
    names = [p.name for p in typer.main.get_command(toy).params]
    assert names == ["first", *(f"llm_{f.name}" for f in fields(LlmOptions)),
                     *(f"common_{f.name}" for f in fields(Common)), "last"]


def test_every_command_taking_the_llm_group_has_each_of_its_options() -> None:
    score = typer.main.get_command(app).commands["score"]  # type: ignore[attr-defined]
    flags = [f.metadata["option"].param_decls[0] for f in fields(LlmOptions)]
    assert len(flags) == 8
    for name in ("mcq", "factual"):
        have = [o for p in score.commands[name].params for o in p.opts]
        assert [o for o in have if o.startswith("--llm-")] == flags, name


def test_an_option_that_sets_a_metric_config_field_says_what_the_config_field_says() -> None:
    from evalcore.cli.score.freeform import MODELS, ModelOptions
    from evalcore.textmetrics.registered.bertscore import BertScoreConfig
    from evalcore.textmetrics.registered.clap_text import ClapTextConfig

    spec = {f.name: f.metadata["option"] for f in fields(ModelOptions)}
    for option, (model, name) in {"bertscore_layers": (BertScoreConfig, "num_layers"),
                                  "bertscore_batch_size": (BertScoreConfig, "batch_size"),
                                  "clap_tokenizer": (ClapTextConfig, "tokenizer")}.items():
        described = model.model_fields[name].description
        assert described and spec[option].help == described
    assert MODELS.bertscore_batch_size == BertScoreConfig.model_fields["batch_size"].default == 64
    assert MODELS.clap_checkpoint is None  # required in the config: given on the command line
