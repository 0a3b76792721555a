"""``planner suggest`` and ``planner race``: proposals and the active loop (the race's table:
:mod:`planner.cli.race_display`). Heavy imports (torch, botorch, optuna) happen inside the
commands."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from planner.cli.app import (
    SEED_MAX,
    command,
    emit_json,
    engine_options,
    interrupted_code,
    parse_budget,
    parse_list,
    terminate_as_interrupt,
)
from planner.cli.paths import (
    check_not_store_folder,
    check_output_dir,
    check_output_file,
    nonempty,
    path_value,
)

BudgetOpt = Annotated[str, typer.Option(help="Target FLOP budget of the decision, e.g. 1e18.")]
ModelsOpt = Annotated[
    str | None, typer.Option("--models", help="Policies, comma-separated (default: the three Qwen2.5 sizes).")
]
RewardsOpt = Annotated[
    str | None, typer.Option("--rewards", help="Reward systems, comma-separated (default: all five).")
]
TargetOpt = Annotated[str, typer.Option(help="Evaluation target: native, pass1 or judge.")]
PilotOpt = Annotated[
    str | None, typer.Option("--pilot-budget", help="FLOPs of one pilot run (default: budget / 100).")
]

DEFAULT_RUNS_PER_SETTING = 30


def race_problem(budget: str, models: str | None, rewards: str | None, target: str,
                 pilot_budget: str | None, confidence: float = 0.9, indifference: float = 0.0) -> Any:
    """The shared options, parsed, as a :class:`~planner.strategies.RaceProblem` (which
    validates them: one place for every check, whoever builds a problem)."""
    from planner.frontier import Setting
    from planner.registry import POLICIES_QWEN, REWARD_SYSTEMS, get_model, get_reward
    from planner.strategies import RaceProblem

    b = parse_budget(budget)
    pilot = parse_budget(pilot_budget, "pilot-budget") if pilot_budget is not None else b / 100
    ms = parse_list(models, "models") or list(POLICIES_QWEN)
    rs = parse_list(rewards, "rewards") or list(REWARD_SYSTEMS)
    _check_names(ms, "models", "model", get_model)
    _check_names(rs, "rewards", "reward", get_reward)
    settings = tuple(Setting(m, r) for m in dict.fromkeys(ms) for r in dict.fromkeys(rs))
    return RaceProblem(settings, budget=b, pilot_budget=pilot, target=target, confidence=confidence,
                       indifference=indifference)


def _check_names(names: list[str], option: str, field: str, lookup: Any) -> None:
    """Each name of a list option in the registry; an unknown one's error names the option
    the user typed (``rewards:``), not the registry's singular field (``reward:``)."""
    from planner.errors import ConfigError

    for name in names:
        try:
            lookup(name)
        except ConfigError as exc:
            msg = str(exc)
            raise ConfigError(f"{option}:{msg[len(field) + 1:]}" if msg.startswith(f"{field}:") else msg) from None


def _ours_options(seed: int, anchors: int | None, cost_power: float | None) -> dict[str, Any]:
    """Keyword options of ours' strategy from the CLI (only those given)."""
    opts: dict[str, Any] = {} if anchors is None else {"n_anchor": anchors}
    if cost_power is not None:
        from planner.acquisition import AcquisitionConfig

        opts["config"] = AcquisitionConfig(seed=seed, cost_power=cost_power)  # validates
    return opts


def _check_target(target: str) -> None:
    from planner.errors import ConfigError
    from planner.schema import TARGETS

    if target not in TARGETS:
        raise ConfigError(f"target: unknown target {target!r}; use one of: {', '.join(TARGETS)}")


@command(help="Propose the next pilot runs (writes proposals.json).")
def suggest(
    budget: BudgetOpt,
    models: ModelsOpt = None,
    rewards: RewardsOpt = None,
    target: TargetOpt = "native",
    n: Annotated[int | None, typer.Option("--n", min=1, help="At most this many proposals (default: the rest of the current phase — initial design, anchors — or one per undecided setting, every setting once all are decided); phases are not mixed.")] = None,
    pilot_budget: PilotOpt = None,
    data: Annotated[Path | None, typer.Option(parser=path_value, help="Pilot dataset directory (records so far).")] = None,
    out: Annotated[Path, typer.Option(parser=path_value, help="Where to write the proposals.")] = Path("proposals.json"),
    pending: Annotated[list[Path] | None, typer.Option(parser=path_value, help="proposals.json of runs still executing (not proposed again, conditioned on); repeat for several files.")] = None,
    seed: Annotated[int, typer.Option(min=0, max=SEED_MAX, help="Seed of the posterior samplers.")] = 0,
    anchors: Annotated[int | None, typer.Option(min=0, max=20, help="ours: stratified target-budget runs per setting after the pilot design (default 2; 0 = trust the pilots; at most 20).")] = None,
    cost_power: Annotated[float | None, typer.Option(help="ours: the acquisition values a run's expected gain / FLOPs**p (default 0.5; 1 = gain per FLOP, favours pilots; 0 ignores cost).")] = None,
    confidence: Annotated[float, typer.Option(help="A setting counts as decided at this regime probability (as in `planner race`): suggest says when every one is.")] = 0.9,
    as_json: Annotated[bool, typer.Option("--json", help="Print the proposals as JSON.")] = False,
) -> None:
    import time

    t0 = time.perf_counter()
    _check_target(target)
    problem = race_problem(budget, models, rewards, target, pilot_budget, confidence)
    from planner.errors import ConfigError

    check_output_file(out, "out")
    if any(f.resolve() == out.resolve() for f in pending or ()):
        raise ConfigError(f"out: {str(out)!r} is also --pending; writing the new batch there would lose the "
                          "pending runs, so give another --out (e.g. next.json)")
    if data is not None and data.exists() and not data.is_dir():
        raise ConfigError(f"data: {str(data)!r} is a file; give the pilot store's directory")
    if data is not None:
        check_not_store_folder(data)
    if data is not None and not data.exists():
        typer.echo(f"note: no pilot store at {str(data)!r} yet: proposing the initial design", err=True)
    from planner.frontier import Setting
    from planner.proposals import read_proposals, write_proposals
    from planner.strategies.ours import RaceStrategy

    strategy = RaceStrategy(problem, seed, **_ours_options(seed, anchors, cost_power))
    n_store = 0
    if data is not None and data.is_dir():  # failed/ alone too: abandoned runs are not proposed again
        from planner.engine import open_store

        store = open_store(data)
        scan = store.scan(status=None)
        strategy.tell(scan.records)  # failed too: abandoned runs are not proposed again
        n_store = sum(r.status == "ok" for r in scan.records)
        _warn_corrupt(store.root, scan.corrupt)
        from planner.engine import mixed_sources

        if mixed := mixed_sources(strategy.records_):  # race and execute refuse to make such a store
            typer.echo(f"warning: {mixed}", err=True)
    # Every --pending file (a second one used to replace the first, whose runs were proposed
    # again); a run listed in two files is one run.
    from planner.strategies.base import plan_key

    # Keyed by plan, not id: one run listed under two ids (two --target values, a
    # hand-written file) is one run, and executing both would be refused as twins.
    waiting = list({plan_key(p.plan): p for f in pending or ()
                    for p in read_proposals(f, field="pending").proposals}.values())
    done = {plan_key(r.plan) for r in strategy.records_}
    waiting = [p for p in waiting if plan_key(p.plan) not in done]
    # Runs of settings not asked about cannot condition this batch (the surrogate knows only
    # the requested models and rewards: a KeyError traceback), nor be proposed again.
    other = [p for p in waiting if Setting(p.model, p.reward) not in problem.settings]
    if other:
        typer.echo(f"note: pending: {len(other)} of its runs are of settings not asked about here "
                   f"(e.g. {other[0].model}/{other[0].reward}); this batch ignores them", err=True)
        waiting = [p for p in waiting if p not in other]
    skip = {plan_key(p.plan) for p in waiting}
    props = [p for p in strategy.ask(n, pending=waiting) if plan_key(p.plan) not in skip]
    write_proposals(out, props, target_budget=problem.budget)
    elapsed = time.perf_counter() - t0
    if props and strategy.records_ and not any(p.reason.startswith(("initial", "anchor")) for p in props):
        # Where a race would stop: a manual loop had no word of it, and went on proposing.
        from planner.strategies import decision_state

        if all(decision_state(c, problem) != "open" for c in strategy.decide().values()):
            typer.echo(f"note: every setting's call is decided (P >= {problem.confidence:g}, checked at the target "
                       "budget): `planner race` would stop here; these proposals only add evidence", err=True)
    if not props and not waiting and (note := _no_trend(problem, strategy.records_)):
        typer.echo(f"note: nothing to propose: {note}", err=True)
    if strategy.records_:
        # A manual loop (suggest, execute, suggest) saw no call until every setting was
        # decided: the calls so far, as the race's live table shows them (on stderr).
        from planner.cli.app import whole_console
        from planner.cli.race_display import calls_table
        from planner.loop import tally

        _, _, measured = tally(problem, strategy.records_)
        table = calls_table(f"calls so far at {problem.budget:.3g} FLOPs ({problem.target})", problem,
                            strategy.decide(), measured=measured)
        whole_console(table, stderr=True).print(table)  # under 80 columns: whole rows, not cropped
    if as_json:
        for line in proposal_notes(props, len(waiting)):
            typer.echo(f"note: {line}", err=True)
        emit_json([p.model_dump(mode="json") for p in props])
        return
    _print_proposals(props, out, len(strategy.records_), elapsed, len(waiting), n_store)


def _print_proposals(props: list[Any], out: Path, n_records: int, elapsed: float, n_pending: int = 0,
                     n_store: int = 0) -> None:
    from rich import box
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    # Runs of other settings (or targets) are not fitted: say so, not "from 9 records" of 20.
    rest = f" of {n_store} in the store" if n_store > n_records else ""
    t = Table(title=f"{len(props)} proposals from {n_records} records{rest} ({elapsed:.1f} s)",
              box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True,
              caption="split: search / learning / reward share of the planned FLOPs"
                      + ("; acq. gain: expected reduction of regime bits + rho* spread"
                         if any(p.reason.startswith("acquisition") for p in props) else ""))
    # One line per proposal, numbers whole, at 80 columns too: 60 proposals wrapped to 7
    # lines each buried the table. Only "why" gives way; the full reason is in the file.
    rows = []
    for p in props:
        f = p.plan.flops
        rows.append((
            f"{p.model}/{p.reward}", f"{p.plan.rho:.3f}", f"{p.budget:.2g}",
            f"{f.search / f.total:.0%}/{f.learning / f.total:.0%}/{f.reward / f.total:.0%}",
            _predicted(p.prediction),
        ))
    for i, col in enumerate(("setting", "rho", "budget", "split", "predicted")):
        width = max([len(col), *(len(r[i]) for r in rows)])
        t.add_column(col, no_wrap=True, justify="left" if i == 0 else "right", min_width=width)
    t.add_column("why", no_wrap=True, overflow="ellipsis", ratio=1)
    for p, r in zip(props, rows, strict=True):
        t.add_row(*r, _why(p.reason))
    c = Console()
    c.print(t)
    c.print(f"wrote {escape(str(out))} (each proposal's full reason is in it)")
    for note in proposal_notes(props, n_pending):
        c.print(escape(note), highlight=False)


def proposal_notes(props: list[Any], n_pending: int = 0) -> list[str]:
    """The caveats of a batch (guessed predictions, moved pilot budgets, a phase in flight),
    as lines: under the table, or on stderr with --json, where they used to be lost."""
    from planner.design import ISO_RAISED, SCATTERED

    notes = []
    guessed: dict[str, list[str]] = {}  # why -> settings
    for p in props:
        if p.prediction and p.prediction.extrapolated:
            keys = guessed.setdefault(p.prediction.extrapolated_why or "nothing in the fit ties its level to runs", [])
            if (key := f"{p.model}/{p.reward}") not in keys:
                keys.append(key)
    if guessed:
        notes.append("(...): a guess, the mean carrying other runs' level over and the std assuming the setting is "
                     "like them (on the sim 0.10-0.42 of such runs fell inside mean ± 1.645 std, not 0.90; "
                     "docs/schema.md): " + "; ".join(f"{', '.join(keys)}: {why}" for why, keys in guessed.items()))
    raised = {f"{p.model}/{p.reward}": p.budget for p in props if ISO_RAISED in p.reason}
    if raised:
        notes.append(f"{ISO_RAISED} for " + ", ".join(f"{k} (to {b:.2g})" for k, b in raised.items())
                     + ": a run at the requested one is so few prompt groups that not every design point "
                       "lands it, and a setting's pilots should share one budget")
    scattered = sorted({f"{p.model}/{p.reward}" for p in props if SCATTERED in p.reason})
    if scattered:
        notes.append(f"{SCATTERED} for {', '.join(scattered)}: no budget up to --budget lands all their design "
                     "points (a run there is a few prompt groups), so each pilot runs at its own nearest budget and "
                     "some may be missing; a larger --budget gives these settings a proper pilot design")
    if not props and n_pending:
        # The initial design and the anchors are phases: the next one needs their results.
        notes.append(f"nothing new to propose: the {n_pending} pending runs complete the current phase; "
                     "suggest again once they are recorded")
    return notes


def _no_trend(problem: Any, records: Any) -> str | None:
    """Why ours has nothing to propose when every run measured the same value (the
    surrogate refuses to fit them: no trend), else None."""
    from planner.strategies.base import relevant_records

    runs = relevant_records(problem, records)
    values = {getattr(r.metrics, problem.target) for r in runs}
    if len(runs) < 2 or len(values) != 1:
        return None
    return (f"every run measured the same {problem.target} ({values.pop():g}), so there is no trend to fit "
            "and the calls are the prior's (open); a larger budget or another --target may measure one")


def _predicted(pred: Any) -> str:
    """``mean±std``; in parentheses where the prediction is marked extrapolated (a guess)."""
    if pred is None:
        return "-"
    text = f"{pred.mean:.3f}±{pred.std:.3f}"
    return f"({text})" if pred.extrapolated else text


def _why(reason: str) -> str:
    """The kind of a proposal's reason ("initial design", "anchor", "acquisition",
    "validation (rho*)"), with the expected gain for an acquisition pick."""
    kind, _, rest = reason.partition(":")
    if kind == "acquisition":
        gain = rest.split("reduction", 1)[-1].split()[:1]
        return f"acq. gain {gain[0]}" if gain else kind
    return kind


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
    max_runs: Annotated[int | None, typer.Option(min=1, help=f"Cap on runs (default {DEFAULT_RUNS_PER_SETTING} per setting).")] = None,
    max_flops: Annotated[str | None, typer.Option(help="Cap on FLOPs spent, e.g. 1e19.")] = None,
    strategy: Annotated[str, typer.Option(help="ours, grid, random, optuna-tpe or optuna-gp.")] = "ours",
    seeds: Annotated[int, typer.Option(min=1, help="Seed replicates of every proposal.")] = 1,
    pilot_budget: PilotOpt = None,
    batch: Annotated[int | None, typer.Option(min=1, help="Proposals per round (default: the strategy's).")] = None,
    seed: Annotated[int, typer.Option(min=0, max=SEED_MAX, help="Seed of the strategy's samplers.")] = 0,
    anchors: Annotated[int | None, typer.Option(min=0, max=20, help="ours: stratified target-budget runs per setting after the pilot design (default 2; 0 = trust the pilots; at most 20).")] = None,
    cost_power: Annotated[float | None, typer.Option(help="ours: the acquisition values a run's expected gain / FLOPs**p (default 0.5; 1 = gain per FLOP, favours pilots; 0 ignores cost).")] = None,
    quiet: Annotated[bool, typer.Option(help="No live progress display.")] = False,
    workers: Annotated[int, typer.Option(min=1, help="Runs of a round in flight at once, each in its own worker process (1 = in this process, one after another). ours' acquisition rounds then hold at least N runs, the next best picks of its batch, so no worker idles; the pilot and anchor rounds are the same as with 1. A tiny-world run uses one core, so 2 suits a 2-core laptop.")] = 1,
    backend: Annotated[str | None, typer.Option(parser=nonempty, help="Where the workers run: local, ray or slurm, as in `runners execute` (default local when --workers > 1).")] = None,
    backend_config: Annotated[Path | None, typer.Option(parser=path_value, help="TOML with \\[local]/\\[ray]/\\[slurm] settings, as in `runners execute`; the --backend's table is read.")] = None,
) -> None:
    from planner.cli.race_display import RaceDisplay
    from planner.engine import (
        check_engine_settings,
        check_same_source,
        load_engine,
        open_batches,
        open_store,
        prepare_engine,
    )
    from planner.errors import ConfigError
    from planner.loop import regimes_document, run_race, write_regimes
    from planner.schema import check_seed_count
    from planner.strategies import make_strategy
    from planner.strategies.base import ran_pilot_budgets

    _check_target(target)
    problem = race_problem(budget, models, rewards, target, pilot_budget, confidence, indifference)
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
    if strategy != "ours" and anchors is not None:
        raise ConfigError(f"anchors: only the ours strategy takes anchors, not {strategy!r}; drop --anchors")
    if strategy != "ours" and cost_power is not None:
        raise ConfigError(f"cost-power: only the ours strategy has an acquisition, not {strategy!r}; drop --cost-power")
    ours_opts = _ours_options(seed, anchors, cost_power)
    if strategy == "ours" and workers > 1:
        ours_opts["min_batch"] = -(-workers // seeds)  # proposals that keep every worker busy
    strat = make_strategy(strategy, problem, seed, **ours_opts)
    parallel = None  # built before the store is opened: a bad backend leaves no trace
    if backend_config is not None and workers == 1 and backend is None:
        # In-process runs read no backend settings: a config given here would be dropped unread.
        raise ConfigError("backend-config: a race runs in this process unless --workers > 1 or --backend is "
                          "given; pass one of them, or drop --backend-config")
    if workers > 1 or backend is not None:
        parallel = open_batches(engine=engine, data=data, workers=workers, backend=backend or "local",
                                engine_options=opts, backend_config=backend_config)
    try:
        store = open_store(data)
        # The race reads them again; here to say what it must skip, and to refuse another
        # engine's or world's store before the engine's preparation (minutes of pretraining).
        scan = store.scan(status=None)
        check_engine_settings(eng, [(s.model, s.reward) for s in problem.settings])
        check_same_source(scan.records, eng, store.root)
        said = _warn_corrupt(store.root, scan.corrupt)
        from planner.versions import changed_since

        if moved := changed_since([r for r in scan.records if r.status == "ok"]):
            typer.echo(f"warning: {moved}", err=True)
        prepare_engine(eng, [(s.model, s.reward) for s in problem.settings])  # before the live table
        display = RaceDisplay(problem, quiet, posterior=strat.stops_on_confidence, runs_cap=runs_cap,
                              flops_cap=flops_cap)
        with terminate_as_interrupt(), display:
            result = run_race(problem, strat, eng, store, max_runs=runs_cap, max_flops=flops_cap,
                              seeds=seeds, batch_size=batch, progress=display.update, run_batch=parallel)
    except KeyboardInterrupt as exc:
        # Every finished run is already in the store; say so, and how to go on.
        typer.echo(f"interrupted: the finished runs are kept in {data}; rerun the same command to resume "
                   "(regimes.json is written when a race ends)", err=True)
        raise typer.Exit(interrupted_code(exc)) from None
    finally:
        if parallel is not None:
            parallel.close()
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
                           world=world_name, seed=seed, pilot_budgets=budgets, seeds=seeds)
    from planner.versions import fitting_versions

    doc["fitted_with"] = fitting_versions()  # the same runs can give other calls under another fit
    replaced = _other_race(data / "regimes.json", doc)
    path = write_regimes(data / "regimes.json", doc)
    display.final(result, path)
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
        if note := _no_trend(problem, after):
            typer.echo(f"note: {note}", err=True)
    # Only pilots this invocation ran: a raise for a setting that never ran, or whose pilots
    # an earlier invocation ran, is no news.
    had = ran_pilot_budgets(problem, scan.records)
    if result.rounds == 0 and result.stop_reason in ("max-runs", "max-flops"):
        cap = runs_cap if result.stop_reason == "max-runs" else f"{flops_cap:.3g}"
        typer.echo(f"note: the store already held {result.total_runs} run(s) ({result.total_flops:.3g} FLOPs) of these "
                   f"settings, so --{result.stop_reason} {cap} allowed none more; raise it to go on", err=True)
    _say_raised_pilots(problem, {s: b for s, b in ran.items() if s not in had})

    _warn_corrupt(store.root, store.scan(status=None).corrupt, said)


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


def _say_raised_pilots(problem: Any, budgets: dict[Any, float]) -> None:
    """Where a setting's initial design (``budgets``: its pilot budget) was above
    --pilot-budget (the design raises it when that budget buys too few prompt groups), as
    ``planner suggest`` says when it proposes those pilots."""
    from planner.design import ISO_RAISED

    raised = {s.key: b for s, b in budgets.items() if b > problem.pilot_budget * 1.01}
    if raised:
        typer.echo(f"{ISO_RAISED} for " + ", ".join(f"{k} (to {b:.2g})" for k, b in sorted(raised.items()))
                   + f" from {problem.pilot_budget:.2g}: the requested one buys too few prompt groups "
                   "to land every design point")


def _warn_corrupt(root: Path, wrecks: list[Any], said: frozenset[str] = frozenset()) -> frozenset[str]:
    """Say on stderr when a read of the store at ``root`` skipped unreadable record files
    (``wrecks``: the answer used fewer runs than the directory seems to hold), unless all of
    them were ``said`` before; returns the names of the files skipped."""
    names = frozenset(w.path.name for w in wrecks)
    if wrecks and not names <= said:
        folders = [w.path.name for w in wrecks if w.path.name in ("runs", "failed")]
        redo = (f"and no run can be recorded until the file {root / folders[0]} is moved out of the way"
                if folders else "and the next run of their proposals replaces them")
        typer.echo(f"warning: {len(wrecks)} unreadable record file(s) in {root} were skipped "
                   f"(first: {wrecks[0].path.name}); `runners status --data {root}` lists them, {redo}",
                   err=True)
    return names
