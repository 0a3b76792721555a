"""``planner race``: the active loop, suggest -> execute -> refit -> classify, until every
setting is decided or a cap is hit (its table: :mod:`planner.cli.race_display`; the options
it shares with ``planner suggest``: :mod:`planner.cli.problem`). Heavy imports (torch,
botorch, optuna) happen inside the command."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Annotated, Any

import typer

from planner.cli.app import (
    SEED_MAX,
    command,
    engine_options,
    interrupted_code,
    parse_budget,
    terminate_as_interrupt,
)
from planner.cli.paths import (
    check_not_store_folder,
    check_output_dir,
    nonempty,
    path_value,
)
from planner.cli.problem import (
    BudgetOpt,
    ModelsOpt,
    NoiseOpt,
    PilotOpt,
    RewardsOpt,
    TargetOpt,
    check_target,
    no_trend,
    note_stated_noise,
    ours_options,
    race_problem,
    warn_corrupt,
)

__all__ = ["race"]

DEFAULT_RUNS_PER_SETTING = 30


@command(help="Run the active loop: suggest -> execute -> refit -> classify, until confident or capped.")
def race(
    budget: BudgetOpt,
    data: Annotated[Path, typer.Option(parser=path_value, help="Pilot dataset directory; regimes.json is written here.")],
    engine: Annotated[str, typer.Option(help="Engine: sim or trl.")] = "sim",
    world: Annotated[str | None, typer.Option(parser=nonempty, help="Simulator world (file or name in configs/worlds).")] = None,
    device: Annotated[str | None, typer.Option(parser=nonempty, help="trl engine device: cpu or cuda[:N].")] = None,
    option: Annotated[list[str] | None, typer.Option("--option", "-o", help="Engine option KEY=VALUE (repeatable), e.g. -o eval_samples=128.")] = None,
    models: ModelsOpt = None,
    rewards: RewardsOpt = None,
    target: TargetOpt = "native",
    confidence: Annotated[float, typer.Option(help="Stop when every setting's top regime probability reaches this (more than 1/3, below 1).")] = 0.9,
    indifference: Annotated[float, typer.Option(help="Also count a setting decided when its call is expected to lose at most this much of the target metric (0 = off).")] = 0.0,
    max_runs: Annotated[int | None, typer.Option(min=1, help=f"Cap on runs, shared by the settings (default {DEFAULT_RUNS_PER_SETTING} x the number of settings).")] = None,
    max_flops: Annotated[str | None, typer.Option(help="Cap on FLOPs spent, e.g. 1e19.")] = None,
    strategy: Annotated[str, typer.Option(help="ours, grid, random, optuna-tpe or optuna-gp.")] = "ours",
    seeds: Annotated[int, typer.Option(min=1, help="Seed replicates of every proposal.")] = 1,
    pilot_budget: PilotOpt = None,
    batch: Annotated[int | None, typer.Option(min=1, help="Proposals per round (default: the strategy's).")] = None,
    seed: Annotated[int, typer.Option(min=0, max=SEED_MAX, help="Seed of the strategy's samplers.")] = 0,
    anchors: Annotated[int | None, typer.Option(min=0, max=20, help="ours: stratified target-budget runs per setting after the pilot design (default 2; 0 = trust the pilots; at most 20).")] = None,
    cost_power: Annotated[float | None, typer.Option(help="ours: the acquisition values a run's expected gain / FLOPs**p (default 0.5; 1 = gain per FLOP, favours pilots; 0 ignores cost).")] = None,
    noise_sd: NoiseOpt = None,
    quiet: Annotated[bool, typer.Option(help="No live progress display.")] = False,
    workers: Annotated[int, typer.Option(min=1, help="Runs of a round in flight at once, each in its own worker process (1 = in this process, one after another). ours' acquisition rounds then hold at least N runs, the next best picks of its batch, so no worker idles; the pilot and anchor rounds are the same as with 1. A tiny-world run uses one core, so 2 suits a 2-core laptop.")] = 1,
    backend: Annotated[str | None, typer.Option(parser=nonempty, help="Where the workers run: local, ray or slurm, as in `runners execute` (default local when --workers > 1).")] = None,
    backend_config: Annotated[Path | None, typer.Option(parser=path_value, help="TOML with \\[local]/\\[ray]/\\[slurm] settings, as in `runners execute`; the --backend's table is read.")] = None,
) -> None:
    """Suggest, execute, refit and call until every setting's top regime probability
    reaches --confidence or a cap stops it; writes DIR/regimes.json."""
    from planner.cli.race_display import RaceDisplay
    from planner.engine import (
        check_engine_device,
        check_engine_settings,
        check_same_source,
        load_engine,
        open_batches,
        open_store,
        prepare_engine,
        tied_settings,
    )
    from planner.errors import ConfigError
    from planner.loop import regimes_document, run_race, write_regimes
    from planner.schema import check_seed_count
    from planner.strategies import make_strategy
    from planner.strategies.base import ran_pilot_budgets

    check_target(target)
    problem = race_problem(budget, models, rewards, target, pilot_budget, confidence, indifference)
    if strategy != "ours" and anchors is not None:
        raise ConfigError(f"anchors: only the ours strategy takes anchors, not {strategy!r}; drop --anchors")
    if strategy != "ours" and cost_power is not None:
        raise ConfigError(f"cost-power: only the ours strategy has an acquisition, not {strategy!r}; drop --cost-power")
    if strategy != "ours" and noise_sd is not None:
        raise ConfigError(f"noise-sd: only the ours strategy models the run noise, not {strategy!r}; drop --noise-sd")
    ours_opts = ours_options(seed, anchors, cost_power, noise_sd, problem)
    check_seed_count(seeds)
    flops_cap = parse_budget(max_flops, "max-flops", most=None) if max_flops is not None else None
    runs_cap = max_runs if max_runs is not None else DEFAULT_RUNS_PER_SETTING * len(problem.settings)
    # Before any run: a store refused after one wastes it. The store's own check knows
    # its layout (runs/, failed/); opening it creates nothing.
    check_output_dir(data, "data")
    check_not_store_folder(data)
    check_writable = getattr(open_store(data), "check_writable", None)
    if callable(check_writable):
        check_writable("data")
    _check_summary_path(data / "regimes.json")
    opts = engine_options(engine, option, world, device)
    eng = load_engine(engine, **opts)
    if strategy == "ours" and workers > 1:
        ours_opts["min_batch"] = -(-workers // seeds)  # proposals that keep every worker busy
    strat = make_strategy(strategy, problem, seed, **ours_opts)
    parallel = None  # built before the store is opened: a bad backend leaves no trace
    if backend_config is not None and workers == 1 and backend is None:
        # In-process runs read no backend settings: a config given here would be dropped unread.
        raise ConfigError("backend-config: a race runs in this process unless --workers > 1 or --backend is "
                          "given; pass one of them, or drop --backend-config")
    # Held to the end (regimes.json included): a second race here would overshoot this one's
    # caps. Taken before the backend starts (a Ray cluster, SLURM), so a refused race starts
    # none; a folder it made is removed again if the race leaves it empty.
    from runners.race_lock import race_lock

    held = contextlib.ExitStack()
    try:
        held.enter_context(race_lock(data, warn=lambda text: typer.echo(f"warning: {text}", err=True)))
        if workers > 1 or backend is not None:
            parallel = open_batches(engine=engine, data=data, workers=workers, backend=backend or "local",
                                    engine_options=opts, backend_config=backend_config)
        else:  # the runs execute here (a trl race with --device cuda on a CPU pretrained for minutes first)
            check_engine_device(eng)
    except BaseException:
        held.close()
        raise
    raced = False
    try:
        store = open_store(data)
        # The race reads them again; here to say what it must skip, and to refuse another
        # engine's or world's store before the engine's preparation (minutes of pretraining).
        scan = store.scan(status=None)
        check_engine_settings(eng, [(s.model, s.reward) for s in problem.settings])
        check_same_source(scan.records, eng, store.root)
        said = warn_corrupt(store.root, scan.corrupt)
        if strategy == "ours":
            note_stated_noise(data, problem, noise_sd)
        from planner.versions import changed_since

        if moved := changed_since([r for r in scan.records if r.status == "ok"]):
            typer.echo(f"warning: {moved}", err=True)
        with terminate_as_interrupt():  # SIGTERM mid-pretraining: its temporary folder is removed
            prepare_engine(eng, [(s.model, s.reward) for s in problem.settings])  # before the live table
        if tied := tied_settings(eng, [(s.model, s.reward) for s in problem.settings], problem.budget,
                                 problem.target):
            # A simulator knows its truth: a call where the world has no best regime is a tie-break.
            typer.echo(f"note: at {problem.budget:.3g} FLOPs this world's {problem.target} ties across regimes for "
                       + ", ".join(f"{m}/{r}" for m, r in tied) + " (allocations of more than one regime reach the "
                       "top: the budget saturates it), so their calls are tie-breaks, however sure; `runners truth "
                       "--model M --reward R --budget B` shows at which smaller budget a regime wins", err=True)
        display = RaceDisplay(problem, quiet, posterior=strat.stops_on_confidence, runs_cap=runs_cap,
                              flops_cap=flops_cap)
        with terminate_as_interrupt(), display:
            result = run_race(problem, strat, eng, store, max_runs=runs_cap, max_flops=flops_cap,
                              seeds=seeds, batch_size=batch, progress=display.update, run_batch=parallel)
        raced = True
        # Reading the store again and writing the summary take a while on a large store: a
        # Ctrl-C there was a bare exit 130, silent, with no regimes.json.
        with terminate_as_interrupt():
            if result.total_runs == 0 and result.stop_reason in ("max-flops", "max-runs"):
                # Nothing measured: a call now would be the prior's, so no regimes.json either.
                first = strat.ask(1)
                cost = f" (the first proposal costs {seeds} x {first[0].plan.flops.total:.3g} FLOPs)" if first else ""
                raise ConfigError(f"{result.stop_reason}: the cap allows no run{cost}; raise --{result.stop_reason}")
            if result.total_runs and not any(result.measured.values()):
                # Runs, but not one value of the target in any setting: a "call" now is the prior's
                # (P near the regimes' shares of the rho grid), so no regimes.json, and not exit 0.
                after = store.records(status=None)
                ok = sum(r.status == "ok" for r in after if (r.model, r.reward) in problem.settings)
                why = (f"its {ok} ok run(s) measured no {problem.target}" if ok else
                       f"every attempt failed: `runners status --data {data}` says why")
                typer.echo(f"error: no run of this race measured {problem.target} ({why}); nothing to call, so no "
                           "regimes.json was written; fix the cause and rerun the same command (the records are kept)",
                           err=True)
                raise typer.Exit(1)
            world_name = getattr(getattr(eng, "world", None), "name", None)
            # The strategy's own budgets where it has them (ours: where a setting's pilots ran, else
            # its design's; the baselines: where they run, what their calls rest on), else where the
            # setting's pilots ran, else the requested one.
            after = store.records(status=None)
            ran = ran_pilot_budgets(problem, after)
            own_budgets = getattr(strat, "pilot_budgets", None)
            planned = own_budgets() if callable(own_budgets) else {}
            budgets = {**ran, **planned}
            doc = regimes_document(result, engine=engine, simulated=bool(getattr(eng, "simulated", False)),
                                   world=world_name, seed=seed, pilot_budgets=budgets, seeds=seeds,
                                   noise_sd=getattr(strat, "noise_sd", None))
            from planner.versions import fitting_versions

            doc["fitted_with"] = fitting_versions()  # the same runs can give other calls under another fit
            replaced = _other_race(data / "regimes.json", doc)
            path = write_regimes(data / "regimes.json", doc)
            display.final(result, path)
            _say_lone_calls(problem, result.calls, after)
            if replaced:
                typer.echo(f"note: {path} held {replaced}; it is replaced (its runs stay in the store: rerunning that "
                           "race's command resumes from them and writes its summary again, with more runs only if "
                           "its calls reopen)", err=True)
            unrun = [s for s in problem.settings if result.measured.get(s, 0) == 0]
            if unrun:
                # Ok runs that measured no value of the target are not failures: status shows them ok.
                blank = [s.key for s in unrun if any(r.status == "ok" and (r.model, r.reward) == s for r in after)]
                failing = [s.key for s in unrun if result.runs[s] and s.key not in blank]
                capped = [s.key for s in unrun if not result.runs[s]]
                causes = [(names, text) for names, text in (
                    (blank, f"its ok runs measured no {problem.target}"),
                    (failing, f"every attempt failed, `runners status --data {data}` says why"),
                    (capped, f"{result.stop_reason} came first")) if names]
                # One cause: the settings are named once (13 capped settings were listed twice).
                why = causes[0][1] if len(causes) == 1 else "; ".join(f"{', '.join(n)}: {t}" for n, t in causes)
                # Only ours has a surrogate to predict from; a baseline calls such a setting from the prior.
                source = ("the surrogate's predictions from the other settings' runs"
                          if callable(getattr(strat, "surrogate", None)) else "the prior's (no runs to call from)")
                typer.echo(f"note: no runs for {', '.join(s.key for s in unrun)} ({why}): their entries in "
                           f"regimes.json (runs 0) are {source}; raise the cap, or race them on their own", err=True)
            if result.stop_reason == "exhausted" and callable(getattr(strat, "surrogate", None)):
                # No surrogate, so the calls are the prior's and ours has nothing to acquire with.
                if note := no_trend(problem, after):
                    typer.echo(f"note: {note}", err=True)
            # Only pilots this invocation ran: a raise for a setting that never ran, or whose pilots
            # an earlier invocation ran, is no news.
            had = ran_pilot_budgets(problem, scan.records)
            if result.rounds == 0 and result.stop_reason in ("max-runs", "max-flops"):
                cap = runs_cap if result.stop_reason == "max-runs" else f"{flops_cap:.3g}"
                typer.echo(f"note: the store already held {result.total_runs} run(s) ({result.total_flops:.3g} FLOPs) of these "
                           f"settings, so --{result.stop_reason} {cap} allowed none more; raise it to go on", err=True)
            _say_raised_pilots(problem, {s: b for s, b in ran.items() if s not in had})

            warn_corrupt(store.root, store.scan(status=None).corrupt, said)
    except KeyboardInterrupt as exc:
        # Every finished run is already in the store; say so, and how to go on.
        when = " after the race's last run: its runs are" if raced else ": the finished runs are"
        typer.echo(f"interrupted{when} kept in {data}; rerun the same command to resume "
                   "(regimes.json is written when a race ends)", err=True)
        raise typer.Exit(interrupted_code(exc)) from None
    finally:
        if parallel is not None:
            parallel.close()
        held.close()


def _check_summary_path(path: Path) -> None:
    """The race writes its summary at ``path`` when it ends: a folder there, or a folder
    that takes no file, failed it after every run, naming a temporary file."""
    from planner.errors import ConfigError
    from planner.files import check_creatable

    if path.is_dir():
        raise ConfigError(f"data: {str(path)!r} is a directory where the race writes its summary; move it away")
    check_creatable(path, "data")


def _other_race(path: Path, doc: dict[str, Any]) -> str | None:
    """What an existing race summary at ``path`` answered, where it is another race's than
    ``doc`` (another budget, target or set of settings); None otherwise or if unreadable."""
    try:
        old = json.loads(path.read_text())
        key = (float(old["budget"]), old["target"], frozenset((e["model"], e["reward"]) for e in old["settings"]))
        was = str(old.get("strategy", doc["strategy"]))
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None
    mine = (float(doc["budget"]), doc["target"], frozenset((e["model"], e["reward"]) for e in doc["settings"]))
    if key == mine and was == doc["strategy"]:
        return None
    what = f"the {key[1]} race at {key[0]:.3g} FLOPs of {len(key[2])} setting(s)"
    if was != doc["strategy"]:
        # Its runs are in the store, so this strategy's calls rest on them too: no
        # comparison of strategies, which needs a --data each.
        what = (f"{what} by the {was} strategy, whose runs this {doc['strategy']} race's calls also rest on "
                "(give each strategy its own --data to compare them)")
    return what


def _say_lone_calls(problem: Any, calls: dict[Any, Any], records: list[Any]) -> None:
    """A decided call whose rho* rests on one run and whose noise no replicate measured
    (sd*): one lucky run can make such a peak, and P weighs it against a guess (a user's
    sim race called 3b/prm reward-heavy at rho* 0.06, decided, where the truth is 0.50;
    with --seeds 2, right). The report names such calls too."""
    from planner.frontier import runs_at_rho_star
    from planner.strategies import decision_state

    lone = [s.key for s, c in calls.items() if c.noise_guessed and decision_state(c, problem) == "confident"
            and c.extra.get("rho_star_support", "measured") == "measured"
            and runs_at_rho_star(records, s.model, s.reward, problem.budget, c.rho_star, problem.target) == 1]
    if lone:
        typer.echo(f"note: the decided call of {', '.join(lone)} rests on one unreplicated run near its rho* and a "
                   "guessed noise (sd*): one lucky run can make that peak; a race with --seeds 2 measures the noise "
                   "(on a new --data: a resume of a decided race stops at once)", err=True)


def _say_raised_pilots(problem: Any, budgets: dict[Any, float]) -> None:
    """Where a setting's initial design (``budgets``: its pilot budget) was above
    --pilot-budget (the design raises it when that budget buys too few prompt groups), as
    ``planner suggest`` says when it proposes those pilots."""
    from planner.design import ISO_RAISED

    raised = {s.key: b for s, b in budgets.items() if b > problem.pilot_budget * 1.01}
    if raised:
        # On stderr with the race's other notes: stdout is its table.
        typer.echo(f"note: {ISO_RAISED} for " + ", ".join(f"{k} (to {b:.2g})" for k, b in sorted(raised.items()))
                   + f" from {problem.pilot_budget:.2g}: the requested one buys too few prompt groups "
                   "to land every design point", err=True)
