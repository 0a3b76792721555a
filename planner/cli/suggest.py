"""``planner suggest``: the next batch of pilot runs, written as proposals.json, with the
calls so far. Heavy imports (torch, botorch) happen inside the command."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from planner.cli.app import SEED_MAX, command, emit_json
from planner.cli.paths import check_not_store_folder, check_output_file, path_value
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

__all__ = ["suggest"]


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
    noise_sd: NoiseOpt = None,
    confidence: Annotated[float, typer.Option(help="A setting counts as decided at this regime probability (as in `planner race`): suggest says when every one is.")] = 0.9,
    as_json: Annotated[bool, typer.Option("--json", help="Print the proposals as JSON.")] = False,
) -> None:
    """Propose the next runs for the settings asked about: the initial design with no
    records, then target-budget anchors, then acquisition batches aimed at the regime
    call; every proposal carries its plan, split, prediction and reason."""
    import time

    t0 = time.perf_counter()
    check_target(target)
    problem = race_problem(budget, models, rewards, target, pilot_budget, confidence)
    ours_opts = ours_options(seed, anchors, cost_power, noise_sd, problem)  # checked before any output
    from planner.errors import ConfigError
    from planner.files import resolved

    check_output_file(out, "out")
    if any(resolved(f, "pending") == resolved(out, "out") for f in pending or ()):
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

    strategy = RaceStrategy(problem, seed, **ours_opts)
    n_store = 0
    if data is not None and data.is_dir():  # failed/ alone too: abandoned runs are not proposed again
        from planner.engine import open_store

        store = open_store(data)
        scan = store.scan(status=None)
        strategy.tell(scan.records)  # failed too: abandoned runs are not proposed again
        n_store = sum(r.status == "ok" for r in scan.records)
        warn_corrupt(store.root, scan.corrupt)
        note_stated_noise(data, problem, noise_sd)
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
    props = [p for p in strategy.ask(n, pending=waiting) if plan_key(p.plan) not in skip | done]
    write_proposals(out, props, target_budget=problem.budget)
    elapsed = time.perf_counter() - t0
    if props and strategy.records_ and not any(p.reason.startswith(("initial", "anchor")) for p in props):
        # Where a race would stop: a manual loop had no word of it, and went on proposing.
        from planner.strategies import decision_state

        if all(decision_state(c, problem) != "open" for c in strategy.decide().values()):
            typer.echo(f"note: every setting's call is decided (P >= {problem.confidence:g}, checked at the target "
                       "budget): `planner race` would stop here; these proposals only add evidence", err=True)
    if not props and not waiting and (note := no_trend(problem, strategy.records_)):
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
              caption="rho: what the compiled plan achieves (the requested rho is in the file and the run id, "
                      "up to the compiler's tolerance away); split: search / learning / reward share of the planned "
                      "FLOPs"
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
