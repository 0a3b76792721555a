"""Planner benchmark: every strategy on the shipped simulator worlds, against the sim's truth.

For each world and repetition (seed), on the settings (3 Qwen2.5 sizes x {sparse, prm} by
default; ``--rewards`` for all five), target ``native`` at a target budget (1e16, where the
paper's IsoFLOP band sits) with 10x cheaper pilots (1e15):

* ``ours`` races until every setting is called with the confidence or a cap: FLOPs worth 6
  target-budget runs per setting (:data:`FLOPS_PER_SETTING`, ``--flops-per-setting``), 40 runs per setting; its
  calls after every round are also scored (*anytime*: what a race capped there would say);
* ``grid`` (the paper's RACE protocol) is swept over its design: rho points per setting x
  seed replicates x pilot budget (the pilot budget or the target budget itself); the
  cheapest design reaching the same-regime rate of ``ours`` (and 0.95) is reported;
* ``random``, ``optuna-tpe`` and ``optuna-gp`` get up to the FLOPs ``ours`` spent in that
  repetition (equal spend), spent at the target budget: they buy whole target-budget runs
  and stop at the last one that fits, so each ends below ours' spend by less than one run
  (on average 1.7% less in the stored results); ``--baseline-budget pilot`` spends them on
  10x more, cheaper pilot runs instead (Optuna's GP sampler then needs minutes per race).

Metrics: same-regime rate against ``runners.sim.truth``, |rho*_est - rho*_true|, FLOPs
spent until the decision (in target-run units), simple regret of the recommended rho at
the target budget (noise-free value lost), and the column ``ask s (no fit)``: wall time of
``ask()`` alone; the race loop calls ``decide()``, which fits the surrogate and makes the
regime calls, before it starts that timer, so the column times the proposals (the
acquisition), not the fit. The whole of a suggestion (fit, calls and proposals) is the
latency of ``planner suggest``, timed on empty data and with 200 records, in process
(:func:`bench_latency.suggest_latency`) and as the command itself in a process of its own,
start-up and store included (:func:`bench_latency.cli_suggest_latency`, ``cli_*``; not with
``--quick``); ``--latency-only`` runs just those.

    python benchmarks/planner_bench.py [--quick] [--worlds paper,flat] [--seeds 10] [--out FILE]
    python benchmarks/planner_bench.py --from-json benchmarks/planner_bench_results.json   # stored: no races
    python benchmarks/planner_bench.py --latency-only                                     # suggest latency only
    python benchmarks/planner_bench.py --portable-math [...]   # pinned math: races replay across x86-64 boxes (bench_machine.py)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

BENCH = Path(__file__).resolve().parent
if str(BENCH) not in sys.path:  # sibling modules (``planner bench`` loads this file by path)
    sys.path.insert(0, str(BENCH))

from bench_latency import cli_suggest_latency, suggest_latency  # noqa: E402
from bench_machine import PORTABLE_MATH, fingerprint, pin_env, pinned, portable_in_effect  # noqa: E402
from bench_plot import plot_bench  # noqa: E402
from bench_progress import Log, bench_progress  # noqa: E402
from bench_scoring import (  # noqa: E402
    ORACLE_RUNS,
    Outcome,
    Truth,
    anytime,
    as_run_rule,
    constant_row,
    cost_to_reach,
    grid_needed,
    oracle_duel,
    pooled,
    table,
)
from bench_stake import print_stake, stake_by_gap, stake_table  # noqa: E402
from bench_tables import paired as _paired  # noqa: E402
from bench_tables import print_anytime, print_pooled, print_table  # noqa: E402

from planner.errors import ConfigError  # noqa: E402
from planner.files import dumps_json  # noqa: E402
from planner.frontier import Setting  # noqa: E402
from planner.loop import run_race  # noqa: E402
from planner.registry import POLICIES_QWEN  # noqa: E402
from planner.schema import RunRecord  # noqa: E402
from planner.strategies import RaceProblem, make_strategy  # noqa: E402
from planner.strategies.ours import N_ANCHOR  # noqa: E402
from runners.engines.sim import SimEngine  # noqa: E402
from runners.sim.world import list_worlds  # noqa: E402
from runners.store import Scan  # noqa: E402

STRATEGIES = ("ours", "grid", "random", "optuna-tpe", "optuna-gp")
GRID_POINTS = (3, 5, 9)
GRID_REPS = (1, 2, 4)
# Caps on every race of ours (it stops earlier when confident): FLOPs worth 6 target-budget
# runs per setting, and a run count that only binds when nearly every run is a pilot.
FLOPS_PER_SETTING = 6.0  # in target-run units
RUNS_PER_SETTING = 40
REWARDS = ("sparse", "prm")  # a rule reward and a PRM: the paper's contrast


class MemoryStore:
    """A RecordStore in memory: the benchmark runs thousands of races."""

    def __init__(self) -> None:
        self.root = Path(tempfile.gettempdir())
        self._records: dict[str, RunRecord] = {}

    def write(self, record: RunRecord) -> Path:
        self._records[record.run_id] = record
        return self.root

    def records(self, *, status: str | None = "ok") -> list[RunRecord]:
        return [r for r in self._records.values() if status is None or r.status == status]

    def scan(self, *, status: str | None = "ok") -> Scan:
        return Scan(records=self.records(status=status), corrupt=[])


class SeededEngine:
    """The sim engine with repetition-specific noise: replicate ``i`` of repetition ``rep``
    draws with seed ``1000 * rep + i`` (the sim's noise is a function of world, plan and seed)."""

    name = "sim"

    def __init__(self, world: str, rep: int) -> None:
        self.inner = SimEngine(world=world)
        self.rep = rep

    def run(self, proposal: Any, seed: int, progress: Any = None) -> RunRecord:
        return self.inner.run(proposal, 1000 * self.rep + seed, progress)


def _race(name: str, world: str, rep: int, problem: RaceProblem, truth: Truth, *,
          max_runs: int | None = None, max_flops: float | None = None, seeds: int = 1,
          config: str = "", **opts: Any) -> Outcome:
    if "cost_power" in opts:  # ours' acquisition knob; the config is seeded per repetition
        from planner.acquisition import AcquisitionConfig

        opts["config"] = AcquisitionConfig(seed=rep, cost_power=opts.pop("cost_power"))
    if opts.get("noise_sd") == "world":  # ours told the world's own run noise (--ours-noise-sd world)
        from runners.sim.world import load_world

        opts["noise_sd"] = float(load_world(world).noise[problem.target])
    strategy = make_strategy(name, problem, rep, **opts)
    rule = as_run_rule(name)  # regret of the plan the recommendation is run as
    curve: list[tuple[float, list[bool], list[float]]] = []

    def checkpoint(state: Any) -> None:
        # The calls after every round: a race capped at these FLOPs would have made them.
        sc = [truth.score(s, state.calls[s].rho_star, state.calls[s].regime, rule) for s in problem.settings]
        curve.append((state.flops / problem.budget, [a for a, _, _ in sc], [c for _, _, c in sc]))

    res = run_race(problem, strategy, SeededEngine(world, rep), MemoryStore(),
                   max_runs=max_runs, max_flops=max_flops, seeds=seeds,
                   progress=checkpoint if name == "ours" else None)
    scores = [truth.score(s, res.calls[s].rho_star, res.calls[s].regime, rule) for s in problem.settings]
    return Outcome(
        name, world, rep, [a for a, _, _ in scores], [b for _, b, _ in scores], [c for _, _, c in scores],
        res.total_flops / problem.budget, res.ask_seconds, res.stop_reason, config,
        [res.calls[s].confidence >= problem.confidence for s in problem.settings],
        [truth.decidable(s) for s in problem.settings],
        curve,
        [res.calls[s].stake for s in problem.settings],
        [truth.gap[s] for s in problem.settings],
        [float(res.calls[s].rho_star) for s in problem.settings],
    )


def bench_world(world: str, problem: RaceProblem, reps: Sequence[int], strategies: Sequence[str], quick: bool,
                log: Log, baseline_budget: float, ours: dict[str, Any] | None = None,
                flops_per_setting: float = FLOPS_PER_SETTING) -> list[Outcome]:
    truth = Truth(world, problem)
    out: list[Outcome] = []
    cap = RUNS_PER_SETTING * len(problem.settings)
    flop_cap = flops_per_setting * len(problem.settings) * problem.budget
    for rep in reps:
        spend = None
        if "ours" in strategies:
            o = _race("ours", world, rep, problem, truth, max_runs=cap, max_flops=flop_cap, **(ours or {}))
            spend = o.flops * problem.budget
            out.append(o)
            log(o)
        for name in ("random", "optuna-tpe", "optuna-gp"):
            if name in strategies:
                # Equal spend: the FLOPs ours spent (or a 5-point grid's, without ours).
                f = spend or 5 * len(problem.settings) * problem.pilot_budget
                o = _race(name, world, rep, problem, truth, max_flops=f * 1.0001, budget=baseline_budget)
                out.append(o)
                log(o)
        if "grid" in strategies:
            points = (3, 5) if quick else GRID_POINTS
            reps_ = (1, 2) if quick else GRID_REPS
            for b_name, b in (("pilot", problem.pilot_budget), ("target", problem.budget)):
                for k in points:
                    for r in reps_:
                        o = _race("grid", world, rep, problem, truth, seeds=r, n_points=k, budget=b,
                                  config=f"{k}pts x{r} @{b_name}")
                        out.append(o)
        log.rep_done(world)
    return out


def _nan(x: Any) -> Any:
    """Stored JSON has null where a run had NaN (nothing to score); the tables print NaN as '-'."""
    if x is None:
        return float("nan")
    if isinstance(x, dict):
        return {k: _nan(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_nan(v) for v in x]
    return x


def print_stored(path: str | Path) -> dict[str, Any]:
    """The tables of a stored results file, as the run that wrote it printed them (no races)."""
    try:
        doc = json.loads(Path(path).read_text())
        rows, pool = _nan(doc["rows"]), _nan(doc["pooled"])
        # cost_to_reach keeps None: its table prints None as "not reached".
        summary = {w: {**_nan(sm), "cost_to_reach": sm["cost_to_reach"]} for w, sm in doc["summary"].items()}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"from-json: {path}: not a planner_bench.py results file ({e})") from None
    c = doc.get("config", {})
    print(f"{Path(path).name}: reps {c.get('first_rep', 0)}-{c.get('first_rep', 0) + c.get('reps', 0) - 1}, "
          f"ours {c.get('ours')}, FLOPs per setting {c.get('flops_per_setting', FLOPS_PER_SETTING)}")
    m = doc.get("machine")
    # Files before 12-04 do not say: their races replay only on the box that ran them.
    print(f"machine: {m['cpu']}, {m['cpus']} cores, torch {m['versions']['torch']}, portable math "
          f"{'on' if m['portable_math'] else 'off'}" if m else "machine: not recorded (a file from before 12-04)")
    print_table(rows, {})
    if doc.get("suggest_latency"):
        # Files written before latency_records timed a suggestion that returned anchor
        # proposals (no regime calls, no acquisition): not comparable with --latency-only.
        print("suggest latency stored in the file (older files: a suggestion that stopped at the anchors): "
              + ", ".join(f"{k} {v:.2f}" for k, v in doc["suggest_latency"].items()))
    print_pooled(pool)
    print_anytime(summary)
    # Recomputed from the outcomes, not the stored table: a file written before the test
    # counted races (not settings) as the signed-rank test's units holds the old p-values.
    _paired(doc.get("outcomes", []))
    return doc


def _noise_sd(text: str) -> float:
    """--ours-noise-sd as a number (ConfigError naming it otherwise)."""
    from planner.noise import parse_noise_sd

    value = parse_noise_sd(text)
    if not isinstance(value, float):
        raise ConfigError("ours-noise-sd: one sd for every reward system, or 'world'; got a per-reward table")
    return value


# Entries a wrapper script adds to the results' "config", naming what it changed around
# this benchmark (noise_prior.py: the noise prior), so the file says how it was made.
EXTRA_CONFIG: dict[str, Any] = {}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="CI-sized: one world (paper), 3 reps, 2 settings (qwen2.5-1.5b x sparse, prm), grid designs of 3/5 points x 1/2 seeds")
    ap.add_argument("--worlds", default=None, help="comma-separated world names (default: all shipped)")
    ap.add_argument("--strategies", default=",".join(STRATEGIES))
    ap.add_argument("--seeds", type=int, default=None, help="repetitions per world (default 10; quick 3)")
    ap.add_argument("--first-rep", type=int, default=0,
                    help="first repetition (seeds engine draws and ours' sampler); e.g. 10 for held-out reps")
    ap.add_argument("--budget", type=float, default=1e16, help="target budget (FLOPs)")
    ap.add_argument("--pilot-budget", type=float, default=1e15)
    ap.add_argument("--target", default="native")
    ap.add_argument("--models", default=None)
    ap.add_argument("--rewards", default=None)
    ap.add_argument("--confidence", type=float, default=0.9)
    ap.add_argument("--indifference", type=float, default=0.0,
                    help="ours: also count a setting decided when its call is expected to lose <= this "
                         "(off by default: at 0.001-0.0025 it stopped on overconfident flatness in shifted.toml)")
    ap.add_argument("--baseline-budget", choices=("target", "pilot"), default="target",
                    help="budget random/optuna runs at (equal spend either way)")
    ap.add_argument("--anchors", type=int, default=None, help="ours: target-budget anchor runs per setting (default: ours' own, 2)")
    ap.add_argument("--anchor", choices=("stratified", "duel"), default="stratified",
                    help="ours: where the anchors go (see planner.strategies.ours)")
    ap.add_argument("--cost-power", type=float, default=None,
                    help="ours: acquisition value = gain / cost**p (default: ours' own, 0.5; 1 = gain per FLOP)")
    ap.add_argument("--ours-seeds", type=int, default=1,
                    help="ours: seed replicates of every proposal (planner race --seeds; default 1)")
    ap.add_argument("--ours-noise-sd", default=None,
                    help="ours: state this run noise sd (planner race --noise-sd), or 'world' for each world's own")
    ap.add_argument("--flops-per-setting", type=float, default=FLOPS_PER_SETTING,
                    help="ours' FLOP cap per setting, in target-budget runs (default 6); the equal-spend "
                         "baselines follow it")
    ap.add_argument("--jobs", type=int, default=1, help="worlds benchmarked in parallel processes")
    ap.add_argument("--out", default=None,
                    help="results JSON (default planner_bench.json; with --latency-only: none unless given)")
    ap.add_argument("--no-plot", action="store_true", help="skip the figure written beside --out (.png, .svg)")
    ap.add_argument("--latency-only", action="store_true",
                    help="only time `planner suggest` (ours, 15 settings; empty and 200 records of the first "
                         "world) and print it, writing it only where --out is given: no races")
    ap.add_argument("--portable-math", action="store_true",
                    help="pin MKL, OpenBLAS, glibc's libm and ATen to code every x86-64 CPU runs, one thread each "
                         "(bench_machine.PORTABLE_MATH), so the races replay on another box; run as a script "
                         "it restarts itself pinned")
    ap.add_argument("--from-json", metavar="FILE", default=None,
                    help="print the tables of a stored results file (this script's --out) and exit: no races")
    a = ap.parse_args(list(argv) if argv is not None else None)
    if a.from_json:
        return print_stored(a.from_json)
    if a.portable_math:
        check_portable()
    warnings.simplefilter("ignore")
    import torch

    torch.set_num_threads(1)  # the box is shared; one thread is also the fastest for n < 300
    from planner.cli.app import parse_list
    from planner.cli.paths import check_output_file

    shipped = [p.stem for p in list_worlds()]
    worlds = parse_list(a.worlds, "worlds") or (["paper"] if a.quick else shipped)
    models = parse_list(a.models, "models") or (["qwen2.5-1.5b"] if a.quick else list(POLICIES_QWEN))
    rewards = parse_list(a.rewards, "rewards") or list(REWARDS)
    reps = a.seeds if a.seeds is not None else (3 if a.quick else 10)  # --seeds 0 is refused, not 10
    rep_ids = range(a.first_rep, a.first_rep + reps)
    strategies = parse_list(a.strategies, "strategies") or list(STRATEGIES)
    # Everything checked before the first race: a typo must not cost a benchmark's worth of time.
    for name, given, known in (("worlds", worlds, shipped), ("strategies", strategies, STRATEGIES)):
        bad = [g for g in given if g not in known]
        if bad:
            raise ConfigError(f"{name}: unknown {bad[0]!r}; use some of: {', '.join(known)}")
    if reps < 1:
        raise ConfigError(f"seeds: need at least one repetition, got {reps}")
    if a.first_rep < 0:
        raise ConfigError(f"first-rep: repetitions are numbered from 0, got {a.first_rep}")
    if a.jobs < 1:
        raise ConfigError(f"jobs: need at least one process, got {a.jobs}")
    if a.anchors is not None and a.anchors < 0:
        raise ConfigError(f"anchors: must be >= 0, got {a.anchors}")
    if a.ours_seeds < 1:
        raise ConfigError(f"ours-seeds: need at least one seed per proposal, got {a.ours_seeds}")
    if a.out is None and not a.latency_only:
        a.out = "planner_bench.json"
    if a.out is not None:  # --latency-only writes only where --out is given
        check_output_file(a.out, "out")
    problem = RaceProblem(tuple(Setting(m, r) for m in models for r in rewards), budget=a.budget,
                          pilot_budget=a.pilot_budget, target=a.target, confidence=a.confidence,
                          indifference=a.indifference)
    from planner.compiler import compile_plan
    from planner.errors import InfeasibleError

    for st in problem.settings:  # as `planner race` checks: the decision budget must buy a run
        try:
            compile_plan(st.model, st.reward, 0.5, a.budget)
        except InfeasibleError as exc:
            raise ConfigError(f"budget: {a.budget:.3g} FLOPs buys no {st.key} run"
                              + (f"; raise it to at least {exc.nearest:.3g}" if exc.nearest else "")) from None
    if a.latency_only:
        latency = {**suggest_latency(problem, worlds[0]), **cli_suggest_latency(worlds[0])}
        print("suggest latency (s): " + ", ".join(f"{k} {v:.2f}" for k, v in latency.items()))
        doc_l = {"suggest_latency": latency, "world": worlds[0], "cpus": os.cpu_count(),
                 "date": time.strftime("%Y-%m-%d"), "machine": fingerprint()}
        if a.out is not None:
            Path(a.out).write_text(dumps_json(doc_l, indent=2))
            print(f"wrote {a.out}")
        return doc_l
    t0 = time.perf_counter()

    bb = a.budget if a.baseline_budget == "target" else a.pilot_budget
    from planner.acquisition import AcquisitionConfig

    cost_power = AcquisitionConfig().cost_power if a.cost_power is None else a.cost_power
    AcquisitionConfig(cost_power=cost_power)  # a bad value fails here, before any race starts
    if not 0 < a.flops_per_setting < float("inf"):
        raise ConfigError(f"flops-per-setting: {a.flops_per_setting} is not a positive number of "
                          "target-budget runs; the default is 6")
    # Before any race: records_N_first_s is the first fit in this process only if no race
    # has fitted here yet (with --jobs 1 the races run in this process).
    latency = suggest_latency(problem, worlds[0]) if "ours" in strategies else {}
    if latency and not a.quick:  # what a user waits for: `planner suggest` as its own process
        latency.update(cli_suggest_latency(worlds[0]))
    t_races = time.perf_counter()  # the races' own time: wall_s also holds the latency timings
    ours_opts: dict[str, Any] = {"n_anchor": N_ANCHOR if a.anchors is None else a.anchors, "anchor": a.anchor,
                                 "cost_power": cost_power}
    if a.ours_seeds > 1:  # _race's own keyword: every ours proposal runs this many seeds
        ours_opts["seeds"] = a.ours_seeds
    if a.ours_noise_sd is not None:
        ours_opts["noise_sd"] = "world" if a.ours_noise_sd == "world" else _noise_sd(a.ours_noise_sd)
    outcomes: list[Outcome] = []
    if a.jobs > 1 and len(worlds) > 1:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        # fork: the children inherit this module (``planner bench`` loads it by path).
        ctx = mp.get_context("fork")
        with ctx.Manager() as manager, bench_progress(worlds, reps, t0, manager.Queue()) as log, \
                ProcessPoolExecutor(min(a.jobs, len(worlds)), mp_context=ctx) as ex:
            futures = [ex.submit(bench_world, w, problem, rep_ids, strategies, a.quick, log, bb, ours_opts,
                                 a.flops_per_setting) for w in worlds]
            for f in futures:
                outcomes += f.result()
    else:
        import queue

        with bench_progress(worlds, reps, t0, queue.SimpleQueue()) as log:
            for w in worlds:
                outcomes += bench_world(w, problem, rep_ids, strategies, a.quick, log, bb, ours_opts,
                                        a.flops_per_setting)
    rows = table(outcomes, problem)
    truths = {w: Truth(w, problem) for w in worlds}  # noise-free frontiers: computed once per world
    rows += [constant_row(w, truths[w]) for w in worlds]
    summary: dict[str, Any] = {}
    for w in worlds:
        ours = next((r for r in rows if r["world"] == w and r["strategy"] == "ours"), None)
        rate = min(0.95, ours["same_regime"]) if ours else 0.95
        need = grid_needed(rows, w, rate)
        need95 = grid_needed(rows, w, 0.95)
        rate_d = min(0.95, ours["same_regime_decidable"]) if ours else 0.95
        need_d = grid_needed(rows, w, rate_d, "same_regime_decidable")
        best = max((r for r in rows if r["world"] == w and r["strategy"] == "grid"),
                   key=lambda r: (r["same_regime"], -r["flops_target_units"]), default=None)
        for r in (need, need95, need_d, best):
            if r is not None:
                r["show"] = True
        summary[w] = {
            "ours": ours, "grid_for_ours_rate": need, "grid_for_0.95": need95, "grid_best": best,
            "flops_ratio_ours_over_grid": (ours["flops_target_units"] / need["flops_target_units"])
            if ours and need else None,
            "grid_for_ours_decidable_rate": need_d,
            "flops_ratio_decidable": (ours["flops_target_units"] / need_d["flops_target_units"])
            if ours and need_d else None,
            "constant": next(r for r in rows if r["world"] == w and r["strategy"] == "constant"),
            "anytime": anytime(outcomes, w),
            "cost_to_reach": cost_to_reach(rows, outcomes, w),
            "oracle_duel": {str(k): oracle_duel(truths[w], k) for k in ORACLE_RUNS},
            "oracle_duel_decidable": {str(k): oracle_duel(truths[w], k, decidable_only=True)
                                      for k in ORACLE_RUNS},
        }
    pool = pooled(outcomes, rows)
    print_table(rows, latency)
    print_pooled(pool)
    print_anytime(summary)
    summaries = [o.summary() for o in outcomes]
    paired = _paired(summaries)
    noise = {w: t.noise for w, t in truths.items()}
    stake = stake_table(summaries, noise)
    if stake:
        print_stake(stake, stake_by_gap(summaries, noise))
    doc = {
        "config": {"worlds": worlds, "models": models, "rewards": rewards, "reps": reps, "first_rep": a.first_rep,
                   "budget": a.budget, "pilot_budget": a.pilot_budget, "target": a.target,
                   "confidence": a.confidence, "strategies": strategies, "quick": a.quick,
                   "baseline_budget": a.baseline_budget, "indifference": a.indifference,
                   "flops_per_setting": a.flops_per_setting,
                   "ours": ours_opts, **EXTRA_CONFIG},
        "rows": rows, "pooled": pool, "summary": summary, "suggest_latency": latency, "paired_regret": paired, "stake": stake,
        "outcomes": summaries, "wall_s": time.perf_counter() - t0, "races_wall_s": time.perf_counter() - t_races,
        "simulated": True, "machine": fingerprint(),
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    # Standard JSON (jq, JavaScript): no bare NaN; null where there is nothing to score.
    Path(a.out).write_text(dumps_json(doc, indent=2))
    print(f"wrote {a.out} ({time.perf_counter() - t0:.0f} s)")
    if not a.no_plot:
        # Through JSON, so the figure is exactly what `bench_plot.py` draws from the file.
        fig = plot_bench([json.loads(Path(a.out).read_text())], Path(a.out).with_suffix(".png"),
                         sources=[Path(a.out).name])
        print(f"wrote {fig} (same-regime rate and regret against FLOPs; bench_plot.py overlays files)")
    return doc


def check_portable() -> None:
    """Refuse ``--portable-math`` where the pins cannot be in effect: off x86-64, or in a
    process whose math libraries loaded before the pins were set (``planner bench`` and the
    script itself restart pinned instead)."""
    import platform

    if platform.machine().lower() not in ("x86_64", "amd64"):
        raise ConfigError(f"portable-math: pins x86-64 math paths; this machine is {platform.machine()}, "
                          "drop the option")
    if not portable_in_effect():
        pins = " ".join(f"{k}={v}" for k, v in PORTABLE_MATH.items())
        raise ConfigError("portable-math: the math libraries read their pins when they load; run "
                          f"benchmarks/planner_bench.py as a script (it restarts pinned) or start Python with {pins}")


def restart_pinned(argv: Sequence[str]) -> None:
    """Replace this process with a pinned one running the same script and options, where
    ``--portable-math`` is asked for and the pins are not yet set (they must be in place
    before numpy and torch load)."""
    if "--portable-math" in argv and not pinned(os.environ):
        os.execve(sys.executable, [sys.executable, str(Path(__file__).resolve()), *argv], pin_env(os.environ))


if __name__ == "__main__":
    restart_pinned(sys.argv[1:])
    try:
        main()
    except ConfigError as exc:  # the same one line and exit code as `planner bench`
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
