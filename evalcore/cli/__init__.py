"""The ``evalcore`` command line.

Every command exits with one convention (:class:`evalcore.core.errors.ExitCode`, docs/commands.md, "Exit codes"):
0 ok; 1 the work failed part way (resume it); 2 a usage or config mistake, found before any work;
3 ``evalcore nightly``: a checkpoint evaluated tonight regressed, with ``fail_on_regression``; 4 finished, but nothing could be scored or the error budget was exceeded.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import sys
from pathlib import Path
from typing import Optional

import typer

from evalcore.core import cluster, storage

from evalcore.reports import console

from evalcore.runconfig import preflight
from evalcore.runconfig.config import ConfigError, demo_config_path, load_config, read_yaml
from evalcore.core.deadline import DeadlineExceeded, call_within
from evalcore.core.errors import RETRY_BY_DEFAULT, ExitCode, bounded, parse_classes
from evalcore.cli.input_schemas import schema as named_schema
from evalcore.models.tiny import FAMILIES, build_tiny
from evalcore.models.vllm_audio import FAMILIES as VLLM_FAMILIES
from evalcore.nightly import validate as nv
from evalcore.nightly.config import parse_nightly, run_config
from evalcore.core.packages import MODELS_EXTRA, PIP_INSTALL, missing
from evalcore.pipeline.attempts import superseded
from evalcore.pipeline.commit import RunStateError
from evalcore.pipeline.outcome import budget_rule, model_shares
from evalcore.pipeline.resume import resume_config
from evalcore.cli.compare import compare as compare_command
from evalcore.cli.reproduce import reproduce as reproduce_command
from evalcore.cli.subset import subset as subset_command
from evalcore.cli.nightly import nightly as nightly_command
from evalcore.cli.score import score_app
from evalcore.cli.track import track as track_command
from evalcore.tracking.checks import problems as tracking_problems
from evalcore.core.tracking_config import TrackFlagError, with_track_flags

app = typer.Typer(add_completion=False, no_args_is_help=False,
                  help="Evaluate Music Language Models: does the model actually listen?")


@app.callback()
def _main() -> None:
    """evalcore: free-form, factual and multiple-choice evaluation of Music LMs on Ray."""


def load_or_exit(config: Optional[Path], out: Optional[str]):
    """Load CONFIG (or the embedded demo), apply --out; a bad config exits 2 naming the field."""
    try:
        cfg = load_config(config or demo_config_path())
    except ConfigError as e:
        typer.echo(str(e), err=True)
        raise typer.Exit(code=ExitCode.USAGE)
    return cfg.with_root(out)


@app.command()
def run(
    config: Optional[Path] = typer.Argument(None, help="Run config (YAML). Omit to run the embedded offline demo "
                                            "(or, with --resume, to use the run's own config)."),
    out: Optional[str] = typer.Option(None, "--out", help="Run root: a local path or s3://bucket/prefix "
                                      "(default: the config's storage.root, else ./runs/<name>)."),
    resume: Optional[str] = typer.Option(None, "--resume", metavar="RUN_URI",
                                         help="Finish the killed or failed run at RUN_URI with its own config.yaml: "
                                         "committed rows are kept and not computed again."),
    commit_every: float = typer.Option(10.0, "--commit-every", min=0.0, metavar="SECONDS",
                                       help="Commit finished rows to the run root at least this often."),
    retry_errors: str = typer.Option(",".join(RETRY_BY_DEFAULT), "--retry-errors", metavar="CLASS,…",
                                     help="With --resume: run again the committed error rows of these failure "
                                     "classes (transient, input, incomplete, model, judge, output; '' = none)."),
    quiet: bool = typer.Option(False, "--quiet", help=console.QUIET_HELP + " Still printed: where the report is, "
                               "the verdicts, and the counts line when something errored."),
    verbose: bool = typer.Option(False, "--verbose", help="Print the report at the end, and Ray's and the "
                                 "libraries' INFO lines."),
    no_ping: bool = typer.Option(False, "--no-ping", help="Do not call each LLM endpoint once (list its models) "
                                 "before the run starts."),
    track: Optional[list[str]] = typer.Option(None, "--track", metavar="SINK[=VALUE]",
                                              help="Also send the results to mlflow[=URI], wandb[=PROJECT] or "
                                              "lm_eval[=DIR] (repeat for several); a failing sink is a warning."),
) -> None:
    """Run an evaluation end to end: items → requests → audio → models → judges → tables → report.

    Exit status: 0 ok, 1 failed part way (resume it), 2 usage or config mistake, 4 nothing scored or
    error budget exceeded."""
    from evalcore.pipeline.run import RunUnscored, run as run_pipeline  # heavy: pulls matplotlib (reports)

    try:
        retry = parse_classes(retry_errors)
    except ValueError as e:
        typer.echo(f"--retry-errors: {e}", err=True)
        raise typer.Exit(code=ExitCode.USAGE)
    if resume is None:
        cfg = load_or_exit(config, out)
    else:
        cfg = resume_or_exit(resume, config, out)
    if (problem := cluster.temporary_root(cfg.root)) is not None:  # a Ray job's outputs outlive its working dir
        typer.echo(problem, err=True)
        raise typer.Exit(code=ExitCode.USAGE)
    try:
        cfg = with_track_flags(cfg, track)
    except TrackFlagError as e:
        typer.echo(str(e), err=True)
        raise typer.Exit(code=ExitCode.USAGE)
    if quiet:
        cfg = cfg.model_copy(update={"ray": cfg.ray.model_copy(update={"progress_bars": False})})
    console.setup(verbose, quiet)
    if not quiet:
        typer.echo(f"evalcore: {'resume' if resume else 'run'} {cfg.name!r} → {cfg.root}", err=True)
    try:
        result = run_pipeline(cfg, resume=resume is not None, commit_every_s=commit_every, retry_errors=retry,
                              ping=not no_ping)
    except (RunStateError, ConfigError) as e:  # ConfigError: e.g. a free-form metric's model file is missing
        typer.echo(f"evalcore: {e}", err=True)
        raise typer.Exit(code=ExitCode.USAGE)
    except RunUnscored as e:  # tables and report were written before the check
        echo_counts(e.result.counts, quiet)
        console.finished(e.result.root, e.result.report, verbose)
        typer.echo(f"evalcore: {e}", err=True)
        raise typer.Exit(code=ExitCode.UNSCORED)
    except Exception as e:  # noqa: BLE001 - a crash part way: what was committed stays, --resume finishes it
        logging.getLogger("evalcore").debug("run failed", exc_info=True)
        if superseded(e):  # another attempt resumed this root while this one stalled: it finishes the run
            typer.echo(f"evalcore: stopped: a later attempt took over {cfg.root} (an `evalcore run --resume` "
                       "elsewhere, or a nightly that took the checkpoint over) while this one stalled; this attempt "
                       "committed nothing more and wrote no tables: the other attempt finishes the run", err=True)
            raise typer.Exit(code=ExitCode.FAILED)
        typer.echo(f"evalcore: the run failed part way: {type(e).__name__}: {e}\n"
                   f"evalcore: finish it with `evalcore run --resume {cfg.root}`", err=True)
        raise typer.Exit(code=ExitCode.FAILED)
    echo_counts(result.counts, quiet)
    console.finished(result.root, result.report, verbose, result.verdicts)


def echo_counts(c: dict, quiet: bool = False) -> None:
    """The run's reconciliation line and each model's errored share, the worst first (``quiet``: only when something
    errored), and its warnings, on stderr."""
    if not quiet or c["requests_errored"] or c["items_errored"]:
        typer.echo(f"requests: {c['requests_in']} in = {c['requests_scored']} scored + {c['requests_errored']} "
                   f"errored; items: {c['items_in']} in, {c['items_errored']} errored", err=True)
        shares = model_shares(c)
        if shares:
            typer.echo("errored by model: " + ", ".join(f"{m} {e} of {n} ({s:.1%})" for m, n, e, s in shares),
                       err=True)
    for line in c.get("protocols_without_items") or []:
        typer.echo(f"WARNING: {line}", err=True)


def resume_or_exit(run_uri: str, config: Optional[Path], out: Optional[str]):
    """The config of the run at RUN_URI; a CONFIG given too must agree with it. Problems exit 2."""
    if out is not None and out.rstrip("/") != run_uri.rstrip("/"):
        typer.echo(f"--out {out} and --resume {run_uri} name different run roots; give only --resume", err=True)
        raise typer.Exit(code=ExitCode.USAGE)
    given = load_or_exit(config, None) if config is not None else None
    try:  # the run root reached with the given config's S3 options (endpoint), to read its own
        with storage.using(given.storage.settings() if given is not None else None):
            return resume_config(run_uri, given)
    except RunStateError as e:
        typer.echo(f"evalcore: {e}", err=True)
        raise typer.Exit(code=ExitCode.USAGE)


@app.command()
def report(run_root: str = typer.Argument(..., metavar="RUN", help="A finished run's root (path or s3:// URI)."),
           quiet: bool = typer.Option(False, "--quiet",
                                      help=console.QUIET_HELP + " The report is not printed.")) -> None:
    """Render RUN's report.md and report.html again from its tables and print report.md."""
    from evalcore.pipeline.finish import rerender  # heavy: pulls matplotlib (reports)

    console.setup(quiet=quiet)
    try:
        text = rerender(run_root)
        if not quiet:
            typer.echo(text)
    except FileNotFoundError as e:
        typer.echo(f"not a finished run: {run_root} ({e})", err=True)
        raise typer.Exit(code=ExitCode.USAGE)


@app.command()
def browse(run_root: str = typer.Argument(..., metavar="RUN_ROOT",
                                          help="A finished run's root (path, a copy of one, or s3:// URI)."),
           quiet: bool = typer.Option(False, "--quiet", help=console.QUIET_HELP + " Still printed: the page's "
                                      "address."),
           deadline: float = typer.Option(600.0, "--deadline", min=1.0, help="Seconds the whole page may take: an "
                                          "object store that does not answer ends the command with one line.")
           ) -> None:
    """Write (or refresh) RUN_ROOT's item browser, items.html beside report.html: each item's answers under every
    audio condition side by side, with the clips as each model heard them (rebuilt from the run's items). Prints
    where it is."""
    from evalcore.pipeline.browse import write_browser  # heavy: pulls matplotlib (reports)

    console.setup(quiet=quiet)

    try:  # an overall deadline: each read has its own, but a store that answers slowly could hold many of them
        uri = call_within(deadline, storage.carried(lambda: write_browser(run_root)))
    except (FileNotFoundError, RunStateError) as e:
        typer.echo(f"not a finished run: {run_root} ({e})", err=True)
        raise typer.Exit(code=ExitCode.USAGE)
    except DeadlineExceeded:
        typer.echo(f"evalcore browse: {run_root} did not answer within {deadline:g} s (--deadline); nothing "
                   "written", err=True)
        # the abandoned read holds an S3 request that cannot be interrupted, and pyarrow's S3 finalizer waits for it
        # at exit: end the process here (nothing was written, nothing is left to close)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(int(ExitCode.FAILED))
    except (OSError, ValueError) as e:  # an unreachable store, refused keys, a bucket that is not there
        typer.echo(f"evalcore browse: cannot read {run_root}: {bounded(f'{type(e).__name__}: {e}', 300)}", err=True)
        raise typer.Exit(code=ExitCode.FAILED)
    typer.echo(uri if storage.is_s3(uri) else Path(uri).resolve().as_uri())


@app.command("validate")
def validate(config: Path = typer.Argument(..., help="Run config or nightly config (YAML, one with a top-level "
                                           "`series`) to check."),
             check_paths: bool = typer.Option(True, "--check-paths/--no-check-paths",
                                              help="Check what depends on this machine (default) or skip it: "
                                              "configured files, s3:// objects, checkpoints and series prefixes "
                                              "exist, API key variables are set, packages import."),
             ping: bool = typer.Option(False, "--ping", help="Also call each LLM endpoint once (list its models): "
                                       "unreachable, a refused key or an unknown model exits 2."),
             out: Optional[str] = typer.Option(None, "--out", help="The run root the run will be given (as `evalcore "
                                               "run --out`): where LLM caches and a synthetic dataset's clips go by "
                                               "default."),
             quiet: bool = typer.Option(False, "--quiet", help=console.QUIET_HELP + " Nothing is printed when the "
                                        "config is valid.")) -> None:
    """Check a run config or a nightly config without running anything or loading a model: fields, every
    component's params, vocabularies, templates, and that configured files and checkpoints exist. A nightly
    config's series are checked too: the prefix lists, the ready marker and baseline are bare names, the baseline
    is among the checkpoints, the model template's params fit its kind (with the first checkpoint found). A
    mistake exits 2, one line per field. The audio file each items-file row names must exist too (reading stops at
    the fifth missing one). With a Ray cluster to join (``ray.address`` or ``$RAY_ADDRESS``) of several nodes, what
    the workers read (audio, checkpoints, LLM caches) must be on s3:// or under ``storage.shared_paths``."""
    console.setup(quiet=quiet)
    try:
        data = read_yaml(config)
    except ConfigError as e:
        typer.echo(str(e), err=True)
        raise typer.Exit(code=ExitCode.USAGE)
    if isinstance(data, dict) and "series" in data:
        return validate_nightly(data, check_paths, ping, quiet)
    cfg = load_or_exit(config, out)
    try:
        with storage.using(cfg.storage.settings()):  # files, objects and checkpoints reached as the run reaches them
            preflight.check(cfg, check_paths=check_paths)
            if check_paths and (missing_audio := preflight.audio_problems(cfg)):
                raise ConfigError("invalid run config:\n" + "\n".join(f"  {line}" for line in missing_audio))
            if check_paths and (misplaced := cluster_problems(cfg)):
                raise ConfigError("invalid run config for its Ray cluster:\n" + "\n".join(f"  {x}" for x in misplaced))
            if ping:
                preflight.check_endpoints(cfg)
    except ConfigError as e:
        typer.echo(str(e), err=True)
        raise typer.Exit(code=ExitCode.USAGE)
    exit_on_tracking_problems(cfg.tracking, check_paths)
    if not quiet:
        typer.echo(f"ok: {cfg.name} — {len(cfg.datasets)} dataset(s), {len(cfg.models)} model(s), "
                   f"{len(cfg.protocols)} protocol(s) → {cfg.root}; "
                   f"{budget_text(cfg.max_error_rate, 'max_error_rate' in data)}")


def cluster_problems(cfg) -> list[str]:
    """Where the cluster the run will join (``ray.address`` or ``$RAY_ADDRESS``; none: a new local one, nothing to
    check) would not let every node read what its workers read (:func:`evalcore.pipeline.placement.validate_problems`);
    the cluster is joined for the check and left."""
    if cluster.address_of(cfg.ray.address) == "local":
        return []
    import ray

    from evalcore.pipeline import placement  # heavy: pyarrow, the registries
    from evalcore.pipeline.llm_resources import with_run_llm_roots  # heavy: the LLM layer (openai)

    started = not ray.is_initialized()
    try:
        cluster.start(cfg.ray.address, log_to_driver=False, configure_logging=False)
    except Exception as e:  # noqa: BLE001 - any failure to join is this one line
        return [f"ray.address: cannot join the Ray cluster at {cluster.address_of(cfg.ray.address)} to check where "
                f"its nodes read files ({bounded(f'{type(e).__name__}: {e}', 200)})"]
    try:
        return placement.validate_problems(with_run_llm_roots(cfg), placement.nodes())
    finally:
        if started:
            ray.shutdown()


def budget_text(limit: float | None, configured: bool) -> str:
    """How ``max_error_rate`` will judge the run, as ``evalcore validate`` says it."""
    if limit is None:
        return "no error budget (max_error_rate: null)"
    return f"error budget: max_error_rate {limit:g} ({'set' if configured else 'the default'}; {budget_rule(limit)})"


def exit_on_tracking_problems(sinks: list, check_paths: bool) -> None:
    """The tracking block's problems that its model cannot see (a sink's package missing): exit 2, one line each."""
    found = tracking_problems(sinks) if check_paths else []
    if found:
        typer.echo("invalid tracking block:\n" + "\n".join(f"  {x}" for x in found), err=True)
        raise typer.Exit(code=ExitCode.USAGE)


def validate_nightly(data: dict, check_paths: bool, ping: bool, quiet: bool = False) -> None:
    """``evalcore validate`` of a nightly config (:mod:`evalcore.nightly.validate`); a mistake exits 2."""
    try:
        cfg = parse_nightly(data)
        with storage.using(cfg.storage.settings()):  # the series and inputs reached as the nightly reaches them
            found = nv.check(cfg, check_paths)
            if ping:
                preflight.check_endpoints(run_config(cfg, cfg.series[0], "checkpoint", cfg.series[0].prefix,
                                                     cfg.root))
    except ConfigError as e:
        typer.echo(str(e), err=True)
        raise typer.Exit(code=ExitCode.USAGE)
    for line in found.notes if not quiet else []:
        typer.echo(line, err=True)
    if found.problems:
        typer.echo("invalid nightly config:\n" + "\n".join(f"  {x}" for x in found.problems), err=True)
        raise typer.Exit(code=ExitCode.USAGE)
    exit_on_tracking_problems(cfg.tracking, check_paths)
    if not quiet:
        typer.echo(f"ok: nightly {cfg.name} — {len(cfg.series)} series, {len(cfg.datasets)} dataset(s), "
                   f"{len(cfg.protocols)} protocol(s) → {cfg.root}")


@app.command("schema")
def schema(name: str = typer.Argument("items", help="items, or a score input: mcq, factual, factual-true_false, "
                                      "factual-binary_choice, freeform.")) -> None:
    """Print the JSON Schema of item rows (docs/items.md) or of an `evalcore score` input row."""
    try:
        typer.echo(json.dumps(named_schema(name), indent=2, ensure_ascii=False))
    except KeyError as e:
        typer.echo(str(e.args[0]), err=True)
        raise typer.Exit(code=ExitCode.USAGE)


@app.command("make-checkpoint")
def make_checkpoint(
    family: str = typer.Argument(..., help="The checkpoint's family: qwen2_audio, audioflamingo3, musicflamingo, "
                                 "glmasr or voxtral."),
    out_dir: Path = typer.Argument(..., metavar="DIR", help="Where to write it: a new or empty directory."),
    seed: int = typer.Option(0, "--seed", help="Seed of the random weights."),
    head_dim: int = typer.Option(8, "--head-dim", min=1, help="Attention head size of the language model; "
                                 "vllm_audio_lm on a CPU needs 32 or more."),
    ends_answers: bool = typer.Option(False, "--ends-answers", help="Make every greedy answer end after its first "
                                      "token, so a dry run's rows are answers that are judged and scored, not answers "
                                      "cut at the token limit (a random model's answers otherwise run to "
                                      "max_new_tokens)."),
    quiet: bool = typer.Option(False, "--quiet", help=console.QUIET_HELP),
) -> None:
    """Write a tiny random-weight checkpoint of FAMILY to DIR, to dry-run a config or a nightly without real
    weights: give DIR as params.checkpoint of hf_audio_lm (or vllm_audio_lm). Nothing is downloaded."""
    problem = None
    if family not in FAMILIES:
        problem = f"FAMILY: {family!r} is not one of {', '.join(FAMILIES)}"
    elif out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        problem = f"DIR: {out_dir} exists and is not an empty directory"
    elif gone := missing(["torch", "transformers"] + (["mistral_common"] if family == "voxtral" else [])):
        problem = (f"make-checkpoint needs {', '.join(gone)}, which do not import here; install: "
                   + (MODELS_EXTRA if gone != ["mistral_common"] else f"{PIP_INSTALL} mistral-common"))
    if problem is not None:
        typer.echo(problem, err=True)
        raise typer.Exit(code=ExitCode.USAGE)
    console.setup(quiet=quiet)
    build_tiny(family, str(out_dir), seed=seed, head_dim=head_dim, ends_answers=ends_answers)
    if not quiet:
        typer.echo(f"wrote a tiny random-weight {family} checkpoint to {out_dir}; use it as params.checkpoint of "
               "hf_audio_lm" + (" or vllm_audio_lm (with --head-dim 32 on a CPU)" if family in VLLM_FAMILIES else ""))


app.command("nightly")(nightly_command)
app.command("compare")(compare_command)
app.command("reproduce")(reproduce_command)
app.command("subset")(subset_command)
app.command("track")(track_command)

app.add_typer(score_app, name="score")


def unwrapped(doc: str | None) -> str | None:
    """A docstring with each paragraph on one line: typer keeps a docstring's line breaks, which cut sentences in
    ``--help`` at the source's width; the terminal wraps them instead. Lines opening a list item stay apart."""
    if not doc:
        return doc
    out = []
    for para in inspect.cleandoc(doc).split("\n\n"):
        lines: list[str] = []
        for line in para.splitlines():
            if lines and not line.lstrip().startswith(("* ", "- ", "• ")):
                lines[-1] += " " + line.strip()
            else:
                lines.append(line.strip())
        out.append("\n".join(lines))
    return "\n\n".join(out)


def _tidy_help(typer_app: typer.Typer) -> None:
    """Every command's help (of ``typer_app`` and its groups) :func:`unwrapped`."""
    for cmd in typer_app.registered_commands:
        cmd.help = unwrapped(cmd.help or (cmd.callback.__doc__ if cmd.callback else None))
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            _tidy_help(group.typer_instance)


_tidy_help(app)
