#!/usr/bin/env bash
# The main job on the embedded default (CPU, tiny world), end to end on a fresh machine:
# install, pretrain the tiny-s policy, race real GRPO/LoRA pilot runs (TRL + peft) until the
# allocation regime is known or the run cap is hit, then write the regime report.
# 20 runs: 8 pilots and 4 target-budget anchors, then acquisition and validation rounds
# (with 12 the race ended before its first acquisition batch).
# A smaller version of the committed campaign in reports/tiny-campaign/ (6-25 min on 2 cores: README).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q torch==2.13.0
python3 -m pip install -q -c constraints.txt -e .
OUT=${RACE_OUT:-runs-main}
runners pretrain --model tiny-s --no-prms
planner race --engine trl --models tiny-s --rewards sparse,dense \
  --budget 5e11 --pilot-budget 1e11 --max-runs 20 --target native --workers 2 \
  --data "$OUT/data" -o eval_samples=128
planner report --data "$OUT/data" --out "$OUT/report"
echo
echo "report: $OUT/report/report.html (also report.md, regimes.json and figures in $OUT/report)"
