"""``runners truth``: the noise-free frontier of one setting in a simulator world."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from planner.cli.paths import nonempty
from runners.cli.app import command

if TYPE_CHECKING:
    from runners.sim.truth import Frontier

__all__ = ["truth"]


@command(name="truth")
def truth(
    model: str = typer.Option(..., "--model", help="policy, e.g. qwen2.5-1.5b"),
    reward: str = typer.Option(..., "--reward", help="reward system, e.g. sparse or prm"),
    budget: str = typer.Option(..., "--budget", help="FLOP budget of one run, e.g. 1e16"),
    world: str = typer.Option("paper", "--world", parser=nonempty, help="world file or name in configs/worlds"),
    target: str = typer.Option("native", "--target", help="native | pass1 | judge"),
    as_json: bool = typer.Option(False, "--json", help="print JSON instead of a table"),
    plot: str | None = typer.Option(None, "--plot", parser=nonempty, help="also write a figure (PNG/SVG/PDF by suffix): "
                                    "regimes along rho and the one-noise-sd band below the optimum"),
) -> None:
    """Print the noise-free frontier over every plan a request can compile to, and rho*, shares and regime at its argmax."""
    from planner.cli.app import emit_json, parse_budget
    from planner.cli.paths import check_output_file
    from planner.errors import ConfigError
    from planner.registry import get_model
    from runners.sim.truth import TIE, frontier

    if get_model(model).role != "policy":
        raise ConfigError(f"model: {model!r} is a reward model, not a policy; pick a policy model")
    if plot and Path(plot).suffix.lower() not in (".png", ".svg", ".pdf"):
        suffix = Path(plot).suffix
        what = f"ends in {suffix}, not a figure format this writes" if suffix else "has no figure suffix"
        raise ConfigError(f"plot: {plot!r} {what}; end it in .png, .svg or .pdf")
    if plot:
        check_output_file(plot, "plot")
    f = frontier(world, model, reward, parse_budget(budget), target)
    if plot:
        _plot(f, world, Path(plot))
    if as_json:
        emit_json(f.to_json())
        return
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"{escape(f.world)}: {model} / {reward} / {target} at {f.budget:.3g} FLOPs (simulated)")
    table.add_column("rho", justify="right")
    table.add_column(target, justify="right")
    table.add_column("", justify="left")
    lo, span = float(f.value.min()), float(f.value.max() - f.value.min()) or 1.0
    for i, (r, v) in enumerate(zip(f.rho, f.value, strict=True)):
        bar = "#" * round(30 * (v - lo) / span)
        table.add_row(f"{r:.3f}", f"{v:.4f}", bar + ("  <- rho*" if i == f.star else ""))
    console = Console(width=100)
    console.print(table)
    s = f.shares_star
    typer.echo(
        f"rho* = {f.rho_star:.3f}  {target} = {f.value_star:.4f}  regime = {f.regime}  "
        f"shares: search {s['search']:.3f}, learning {s['learning']:.3f}, reward {s['reward']:.3f}"
    )
    if len(f.tied_regimes) > 1:
        n = int((f.value >= f.value_star - TIE).sum())
        typer.echo(f"tie: {n} of {len(f.rho)} allocations reach the top ({', '.join(f.tied_regimes)}); this budget "
                   "saturates the world, so rho* and the regime above are a tie-break, not an answer")


def _plot(f: Frontier, world: str, out: Path) -> None:
    from matplotlib.figure import Figure

    from runners.sim.figure import draw_frontier
    from runners.sim.world import load_world

    w = load_world(world)
    fig = Figure(figsize=(6.0, 3.8), dpi=110, layout="constrained")
    ax = fig.subplots()
    draw_frontier(ax, f, w.noise[f.target],
                  title=f"{w.name}: {f.model} / {f.reward} / {f.target} at {f.budget:.3g} FLOPs (SIMULATED)")
    ax.set_xlabel("rho = C_learning / C_total")
    ax.set_ylabel(f"{f.target} (noise-free)")
    ax.legend(fontsize=7, loc="lower right")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    typer.echo(f"wrote {out}", err=True)  # stdout may be the --json document
