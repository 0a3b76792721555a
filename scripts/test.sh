#!/usr/bin/env bash
# Install the pinned working set (CPU torch first: a bare `torch` pulls a multi-GB CUDA
# build), then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q torch==2.13.0
python3 -m pip install -q -c constraints.txt -e '.[dev]'
python3 -m ruff check .
python3 -m pytest -q -p no:cacheprovider "$@"
