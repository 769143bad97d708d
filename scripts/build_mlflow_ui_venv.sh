#!/usr/bin/env bash
# MLflow's UI for the stores evalcore's trackers write: the full `mlflow` package at the version of the `tracking`
# extra's client (pyproject.toml pins mlflow-skinny; read from there), in a venv of its own, .venv-mlflow-ui in the
# checkout (or the directory given). A store is written with its client's database schema, and an MLflow UI of
# another version refuses it ("out-of-date database schema"); the full package is not in the extra itself because
# it pins pyarrow below the version evalcore installs. About 1 minute and 0.9 GB; built once and kept while its
# version is the pinned one. Then: .venv-mlflow-ui/bin/mlflow ui --backend-store-uri sqlite:///mlflow.db
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-.venv-mlflow-ui}"
export PIP_DISABLE_PIP_VERSION_CHECK=1
version=$(python3 - <<'PY'
import re, tomllib
extra = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["tracking"]
print(next(re.fullmatch(r"mlflow-skinny==([\w.]+)", r).group(1) for r in extra if r.startswith("mlflow-skinny")))
PY
)
if [ "$("$venv/bin/python" -c 'import mlflow; print(mlflow.__version__)' 2>/dev/null)" != "$version" ]; then
  start=$(date +%s)
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "mlflow==$version"
  echo "built the MLflow UI venv ($venv, mlflow $version) in $(( $(date +%s) - start )) s"
fi
