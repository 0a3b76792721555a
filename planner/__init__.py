"""RACE planner: how to split a GRPO/LoRA FLOP budget between search, learning and reward.

The pure core (no files, clock or GPU): :mod:`planner.accountant` (FLOP formulas),
:mod:`planner.compiler` (a (model, reward, rho, budget) request -> a run plan),
:mod:`planner.regime` and :mod:`planner.frontier` (regime calls from posterior samples),
:mod:`planner.design` and :mod:`planner.acquisition` (which runs next),
:mod:`planner.strategies` (ours and the baselines, ask/tell), :mod:`planner.loop` (the
active race). Records and proposals: :mod:`planner.schema`, :mod:`planner.proposals`.
Reports: :mod:`planner.report`. The CLI (:mod:`planner.cli`) is a thin shell over these.

Nothing is imported here, so ``planner --help`` stays instant; import the submodules.
"""
