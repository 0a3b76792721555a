"""How long ``planner suggest`` takes with ``ours``: on empty data and on a running study.

:func:`suggest_latency` times what the command does (tell the records, fit and call,
propose) for the default 15 settings; :func:`latency_records` builds the study it times,
far enough along that a suggestion pays for the fit, the regime calls and the acquisition.
``planner_bench.py`` prints the timings (``--latency-only`` runs just them).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from planner.frontier import Setting
from planner.registry import POLICIES_QWEN
from planner.schema import RunRecord
from planner.strategies import RaceProblem, make_strategy
from planner.strategies.ours import N_ANCHOR
from runners.engines.sim import SimEngine

__all__ = ["cli_suggest_latency", "latency_records", "suggest_latency"]


def latency_records(problem: RaceProblem, world: str, n_records: int = 200, seed: int = 0) -> list[RunRecord]:
    """``n_records`` sim records spread round-robin over ``problem``'s settings. Each setting's
    first :data:`N_ANCHOR` records are target-budget runs at distinct plans (its anchors) and
    its next two pilots (its initial design then has ``n_init`` = 4 plans); the rest are 80%
    pilots, 20% target-budget runs. With fewer, ``ask()`` would return the initial design or
    anchor proposals and skip the fit, the regime calls and the acquisition that a suggestion
    on a running study pays for."""
    from planner.design import compile_feasible
    from planner.proposals import make_proposal

    rng = np.random.default_rng(seed)
    eng = SimEngine(world=world)
    recs: list[RunRecord] = []
    plans: dict[Setting, set[str]] = {s: set() for s in problem.settings}
    per: dict[Setting, int] = dict.fromkeys(problem.settings, 0)
    tries = 0
    while len(recs) < n_records:
        s = problem.settings[len(recs) % len(problem.settings)]
        k = per[s]
        target = k < N_ANCHOR or (k >= N_ANCHOR + 2 and rng.random() >= 0.8)
        b = problem.budget if target else problem.pilot_budget
        plan, _ = compile_feasible(s, float(rng.uniform(0.1, 0.95)), b, problem.opts)
        tries += 1
        if tries > 100 * n_records:
            raise RuntimeError(f"latency records: cannot compile distinct plans for {s.key}")
        if plan is None:
            continue
        prop = make_proposal(plan, target=problem.target)
        if prop.id in plans[s]:  # a repeated plan would not count as another anchor
            continue
        plans[s].add(prop.id)
        recs.append(eng.run(prop, len(recs)))
        per[s] += 1
    return recs


def suggest_latency(base: RaceProblem, world: str, n_records: int = 200) -> dict[str, float]:
    """Seconds for what ``planner suggest`` does with ``ours`` (tell the records, decide,
    ask; a fresh strategy each time, so every timing includes the surrogate fit) for the
    default 15 settings (3 Qwen2.5 sizes x 5 reward systems):

    * ``empty_s``: no records (the initial design);
    * ``records_N_first_s``: ``n_records`` sim records (:func:`latency_records`), every
      setting past its anchors, so the suggestion pays for the fit and the regime calls;
      the first fit in this process, so it also carries the one-off setup a fresh
      ``planner suggest`` process pays (lazy imports, first-call overheads);
    * ``records_N_s``: the same suggestion again, warm. Its batch (one per open setting, at
      most 8) may be all validation runs, which skip the acquisition;
    * ``records_N_acquisition_s``: warm, with ``--n`` = those validation runs + 8, so the
      acquisition also selects a full batch of 8 (the slowest default path).

    Raises if a suggestion on the records returns initial-design or anchor proposals, or
    the last one no acquisition proposal: then it would not time what it says."""
    from planner.registry import REWARD_SYSTEMS

    problem = RaceProblem(tuple(Setting(m, r) for m in POLICIES_QWEN for r in REWARD_SYSTEMS),
                          budget=base.budget, pilot_budget=base.pilot_budget, target=base.target)

    def suggestion(records: list[RunRecord], n: int | None = None) -> tuple[float, list[Any]]:
        st = make_strategy("ours", problem)
        t0 = time.perf_counter()
        st.tell(records)
        st.decide()
        props = st.ask(n)
        return time.perf_counter() - t0, props

    empty, _ = suggestion([])
    recs = latency_records(problem, world, n_records)
    first, props = suggestion(recs)
    early = [p.reason for p in props if p.reason.startswith(("anchor", "initial design"))]
    if early or not props:
        raise RuntimeError(f"suggest latency with {n_records} records did not get past the anchors: "
                           f"{early[:1] or 'no proposals'}")
    warm, props = suggestion(recs)
    checks = sum(p.reason.startswith("validation") for p in props)
    acq, props = suggestion(recs, checks + 8)
    if all(p.reason.startswith("validation") for p in props):
        raise RuntimeError("suggest latency: the batch with --n = validation runs + 8 has no acquisition proposal")
    return {"empty_s": empty, f"records_{n_records}_first_s": first, f"records_{n_records}_s": warm,
            f"records_{n_records}_acquisition_s": acq}


def cli_suggest_latency(world: str, n_records: int = 200, budget: float = 1e18) -> dict[str, float]:
    """Wall seconds of ``planner suggest --budget B --data DIR --out DIR/p.json`` run as its
    own process, end to end (interpreter start, imports, reading the store, the fit, the
    calls, the acquisition, writing the file), for the default 15 settings:

    * ``cli_empty_s``: an empty ``DIR``;
    * ``cli_records_N_s``: ``DIR`` holding ``n_records`` sim records (:func:`latency_records`
      at ``budget``, pilots at ``budget / 100``, the command's default).

    :func:`suggest_latency` times the same work inside one process, without the start-up
    and the store; this is what a user waits for. Raises if a command fails."""
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    from planner.registry import REWARD_SYSTEMS
    from runners.store import PilotStore

    problem = RaceProblem(tuple(Setting(m, r) for m in POLICIES_QWEN for r in REWARD_SYSTEMS),
                          budget=budget, pilot_budget=budget / 100)

    def run(data: Path) -> float:
        # What the `planner` console script runs, with this interpreter.
        cmd = [sys.executable, "-c", "import sys; from planner.cli import main; sys.argv[0] = 'planner'; main()",
               "suggest", "--budget", f"{budget:g}", "--data", str(data), "--out", str(data / "p.json")]
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        return time.perf_counter() - t0

    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        empty, full = Path(tmp) / "empty", Path(tmp) / "full"
        empty.mkdir()
        out["cli_empty_s"] = run(empty)
        store = PilotStore(full)
        for rec in latency_records(problem, world, n_records):
            store.add(rec)
        out[f"cli_records_{n_records}_s"] = run(full)
    return out
