"""``runners calibrate``: fit a sim world's policy entries to real runs in a store."""

from __future__ import annotations

from pathlib import Path

import typer

from planner.cli.paths import check_not_store_folder, nonempty, path_value
from runners.cli.app import command

__all__ = ["calibrate_cmd"]


@command(name="calibrate")
def calibrate_cmd(
    data: Path = typer.Option(..., "--data", parser=path_value, help="pilot store with real (trl) runs"),
    world: str = typer.Option("paper", "--world", parser=nonempty, help="world file or name in configs/worlds to start from"),
    models: str | None = typer.Option(None, "--models", help="comma-separated policies to fit "
                                      "(default: every policy with real runs)"),
    out: Path | None = typer.Option(None, "--out", parser=path_value, help="write the world with the fitted entries here "
                                    "(a .toml; use it with --world in race, execute and truth)"),
    delta: float = typer.Option(0.02, "--delta", help="Huber threshold in metric units (~2 evaluation-noise sd)"),
    force: bool = typer.Option(False, "--force", help="replace --out if it exists"),
) -> None:
    """Fit each policy's sim entry (base, ceiling, scale per target) to its real runs.

    The base is measured, ceiling and scale fit the runs' gains; --out writes a world with them."""
    from planner.cli.app import parse_list
    from planner.cli.paths import check_output_file
    from planner.errors import ConfigError
    from planner.files import atomic_write_text
    from runners.sim.calibrate import calibrate, measured_runs, world_text_with
    from runners.sim.world import list_worlds, load_world, resolve_world_path
    from runners.store import PilotStore

    if not (0.0 < delta < 1.0):
        raise ConfigError(f"delta: must be in (0, 1) metric units, got {delta}; e.g. --delta 0.02")
    if out is not None:
        if out.suffix.lower() != ".toml":
            raise ConfigError(f"out: {str(out)!r} is not a .toml file; end it in .toml")
        shipped = {p.stem for p in list_worlds()}
        if out.stem in shipped:
            raise ConfigError(f"out: the world is named after its file, and {out.stem!r} is a shipped world's "
                              "name (records would not tell them apart); choose another file name")
        check_output_file(out, "out")
        if out.exists() and not force:
            # A world file may be hand-edited, or the world some store's sim records were
            # made with (they carry its hash, and a race on that store would then refuse).
            raise ConfigError(f"out: {str(out)!r} exists; choose another file name, or add --force to replace it")
    if not Path(data).is_dir():
        raise ConfigError(f"data: {str(data)!r} is not a directory; give the pilot store of your runs")
    # DIR/runs read as a store holds no run: "no real runs ... run `runners execute` first"
    # sent the user to redo runs that are there.
    check_not_store_folder(data)
    base_world = load_world(world)
    scan = PilotStore(data).scan()
    for c in scan.corrupt:  # left where it is, not fitted
        typer.echo(f"corrupt record skipped: {c.path} ({c.reason})", err=True)
    runs = measured_runs(scan.records)
    if not runs:
        raise ConfigError(f"data: no real runs with base and trained metrics under {str(data)!r}; "
                          "run `runners execute ... --engine trl` first (sim records are not evidence)")
    wanted = parse_list(models, "models") or sorted(runs)
    for m in wanted:
        if m not in runs:
            raise ConfigError(f"models: no real runs of {m!r} in {str(data)!r}; "
                              f"runs exist for: {', '.join(sorted(runs))}")
        if len(runs[m]) < 3:
            others = [o for o in wanted if o != m and len(runs.get(o, ())) >= 3]
            fix = f"run more of it, or fit the others alone: --models {','.join(others)}" if others else "run more of it"
            raise ConfigError(f"models: {m!r} has {len(runs[m])} real runs; at least 3 are needed to fit it; {fix}")

    from rich.console import Console
    from rich.markup import escape
    from rich.progress import (
        BarColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.table import Table

    fits = {}
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), TimeRemainingColumn(), transient=True) as bar:
        task = bar.add_task("fitting", total=3 * len(wanted))
        for m in wanted:
            bar.update(task, description=f"fitting {m}")
            try:
                fits[m] = calibrate(base_world, m, runs[m], delta=delta,
                                    on_target=lambda _t: bar.advance(task))
            except ValueError as exc:
                raise ConfigError(f"models: {exc}") from None
    table = Table(title=f"capacities fitted to real runs ({escape(base_world.name)} world's reward constants)")
    for col in ("policy", "target", "runs", "base", "ceiling", "scale", "ceilings within 5%",
                "gain measured / sim", "residual sd"):
        table.add_column(col, justify="left" if col in ("policy", "target") else "right")
    for m, cal in fits.items():
        for t, f in cal.targets.items():
            cap = f.capacity
            table.add_row(m, t, str(cal.runs), f"{cap.base:.3f}", f"{cap.ceiling:.3f}", f"{cap.scale:.3g}",
                          f"{f.ceiling_range[0]:.2f}-{f.ceiling_range[1]:.2f}",
                          f"{f.observed_gain:+.4f} / {f.predicted_gain:+.4f}", f"{f.residual_sd:.3f}")
    Console(width=140).print(table)
    for m in wanted:
        rewards = sorted(set(map(str, runs[m].reward)))
        if all(base_world.reward(r).native_lift > 0 for r in rewards):
            # The world's base is an answer rate; partial-credit rewards measure their own
            # training reward, mapped back through the world's lift, an assumption of the
            # world (the tiny PRM's base reward, 0.45, sits below its answer rate, 0.51).
            typer.echo(f"warning: {m}: every run uses a partial-credit reward ({', '.join(rewards)}), so its native "
                       "base is read through the world's native_lift, not measured; add runs with a "
                       "rule reward (sparse) to measure it", err=True)
    if out is None:
        return
    text = world_text_with(resolve_world_path(world).read_text(), fits,
                           note=f"fitted by runners calibrate to the real runs in {data}", name=out.stem)
    tmp = out.with_name(f".{out.name}.check.toml")
    atomic_write_text(tmp, text)
    try:  # never hand over a world file that does not load, or that kept the old name
        written = load_world(tmp)
    except ConfigError as exc:
        raise ConfigError(f"world: rewriting {str(resolve_world_path(world))!r} with the fit gave a file that "
                          f"does not load ({str(exc).split(': ', 2)[-1]}); write each fitted policy as its own "
                          f"[models.NAME] table (not dotted keys or an inline table under [models]), or report "
                          "it with the world file") from None
    finally:
        tmp.unlink(missing_ok=True)
    if written.name != out.stem:
        raise ConfigError(f"world: the rewrite of {str(resolve_world_path(world))!r} kept the name "
                          f"{written.name!r}; give its [world] table a plain `name = ...` line")
    atomic_write_text(out, text)
    typer.echo(f"wrote {out}: world {out.stem!r}, {base_world.name!r} with {', '.join(fits)} fitted")
