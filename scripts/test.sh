#!/usr/bin/env bash
# Install the pinned working set (CPU torch first: a bare `torch` pulls a multi-GB CUDA
# build), then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q torch==2.13.0
python3 -m pip install -q -c constraints.txt -e '.[dev]'
python3 -m ruff check .
# The type check ([tool.mypy] in pyproject.toml: the pydantic plugin, check_untyped_defs);
# about a minute on 2 cores from a cold cache.
python3 -m mypy planner surrogate runners
# Headless Chromium for the report's browser test (tests/planner/test_browser.py): Debian's
# package, installed once. Skipped when already installed, without apt-get or root; a failed
# install only warns here: that test then skips and says why, except in CI (CI set, apt-get
# present), where it fails and names this step.
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >/dev/null 2>&1 \
    || echo "warning: could not install chromium; the browser test will skip" >&2
fi
# Two xdist workers, one per CI core (tests/conftest.py keeps each on one thread); the
# tests that need the pretrained tiny world share one worker, so it is pretrained once.
# Pass -n 0 to run in one process.
python3 -m pytest -q -p no:cacheprovider -n 2 --dist loadgroup "$@"
