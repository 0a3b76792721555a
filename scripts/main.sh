#!/usr/bin/env bash
# Install and run the main job on the embedded default (CPU, tiny world).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q torch==2.13.0
python3 -m pip install -q -c constraints.txt -e .
# Until the active loop lands this runs the accountant demo.
planner flops --model qwen2.5-1.5b --batch 2 --seq 256
planner plan --model qwen2.5-1.5b --reward sparse --rho 0.72 --budget 1e16
planner plan --model qwen2.5-1.5b --reward prm --rho 0.45 --budget 1e16
