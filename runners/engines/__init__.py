"""Engines (plan -> record): ``sim`` (:mod:`runners.engines.sim`, the simulated worlds) and
``trl`` (:mod:`runners.engines.trl`, a real TRL GRPO/LoRA run). Registered under the
``race_planner.engines`` entry points; nothing is imported here.
"""
