"""RACE runners: execute run plans and keep what they measured.

:mod:`runners.engines` (``sim`` and ``trl``: a plan -> a record), :mod:`runners.grpo` (the
TRL ``GRPOTrainer`` + peft run), :mod:`runners.meter` (FLOPs spent by phase),
:mod:`runners.rewards` (rule and PRM rewards), :mod:`runners.store` (the parquet pilot
store), :mod:`runners.execution` and :mod:`runners.backends` (workers: local, SLURM, Ray),
:mod:`runners.sim` (the simulated worlds and their truth), :mod:`runners.tinyworld` (the
CPU tiny world). The CLI is :mod:`runners.cli`.

Nothing is imported here: torch and TRL load only when a run needs them.
"""
