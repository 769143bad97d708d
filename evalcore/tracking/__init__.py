"""Results where a lab already looks: a finished run sent to MLflow, Weights & Biases and lm-eval's result files.

One module per sink (``mlflow_sink``, ``wandb_sink``, ``lm_eval_files``), each reading a finished run's files
(:mod:`evalcore.tracking.record`), so one code path (:mod:`evalcore.tracking.sinks`) serves a run's end (from a
process of its own beside the run's score and report stages, :mod:`evalcore.tracking.process`), the nightly (each checkpoint with its training step, :mod:`evalcore.tracking.steps`) and
``evalcore track RUN_ROOT`` replaying a run later. The config block is :mod:`evalcore.core.tracking_config`;
docs/tracking.md says what goes where.
"""
