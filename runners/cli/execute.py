"""``runners execute`` and ``runners status``: run proposals into the pilot store, and list it.

Exit codes: 0 all runs ok, 1 some runs still failed after their retries (their records
are in ``DIR/failed/``), 2 bad input (nothing was run and no record was touched).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any

import typer

from planner.cli.app import engine_options, interrupted_code, terminate_as_interrupt, whole_console
from planner.cli.paths import check_not_store_folder, nonempty, path_value
from runners.cli.app import command

DataOpt = Annotated[Path, typer.Option("--data", "-d", parser=path_value, help="Pilot store directory.")]
DEFAULT_DATA = Path("pilot-data")


@command(help="Run the proposals in PROPOSALS (a proposals.json) and record them in --data.")
def execute(
    proposals: Annotated[Path, typer.Argument(parser=path_value, help="proposals.json from `planner suggest` or `planner plan --out`.")],
    data: DataOpt = DEFAULT_DATA,
    engine: Annotated[str, typer.Option(help="trl (real GRPO/LoRA), sim (simulator) or module:Class.")] = "trl",
    world: Annotated[str | None, typer.Option(parser=nonempty, help="Simulator world (file or name in configs/worlds; sim engine).")] = None,
    device: Annotated[str | None, typer.Option(parser=nonempty, help="cpu, cuda or cuda:N (trl engine; default: the engine's).")] = None,
    seeds: Annotated[int, typer.Option(help="Seeds per proposal: 0..N-1.")] = 1,
    backend: Annotated[str, typer.Option(parser=nonempty, help="local, ray or slurm.")] = "local",
    workers: Annotated[int, typer.Option(help="Runs at once (local: processes; ray/slurm: tasks in flight).")] = 1,
    retries: Annotated[int, typer.Option(help="Extra attempts for a failed run.")] = 1,
    timeout_min: Annotated[float | None, typer.Option(help="Time limit per run, minutes.")] = None,
    option: Annotated[list[str] | None, typer.Option("--option", "-o", help="Engine option KEY=VALUE (repeatable).")] = None,
    backend_config: Annotated[Path | None, typer.Option(parser=path_value, help="TOML with \\[local]/\\[ray]/\\[slurm] settings.")] = None,
    ray_address: Annotated[str | None, typer.Option(parser=nonempty, help="Ray cluster to connect to (default: start a local Ray).")] = None,
    partition: Annotated[str | None, typer.Option(parser=nonempty, help="SLURM partition.")] = None,
    time_min: Annotated[int | None, typer.Option(help="SLURM job time limit, minutes.")] = None,
    gpus_per_run: Annotated[int | None, typer.Option(help="GPUs per run (ray/slurm).")] = None,
    cpus_per_run: Annotated[int | None, typer.Option(help="CPUs per run (ray/slurm).")] = None,
    mem_gb: Annotated[float | None, typer.Option(help="SLURM memory per run, GB.")] = None,
    progress: Annotated[bool, typer.Option(help="Live progress table on stderr.")] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    from planner.engine import is_device
    from planner.errors import ConfigError
    from planner.proposals import read_proposals
    from planner.schema import check_seed_count
    from runners.backends import MAX_WORKERS
    from runners.execution import MAX_TIMEOUT_S

    # Everything is validated before anything runs: bad input must leave the store untouched.
    check_seed_count(seeds)
    if not 1 <= workers <= MAX_WORKERS:
        raise ConfigError(f"workers: must be 1-{MAX_WORKERS} (runs in flight at once), got {workers}")
    if retries < 0:
        raise ConfigError(f"retries: must be >= 0, got {retries}")
    if timeout_min is not None and not (math.isfinite(timeout_min) and timeout_min > 0):
        raise ConfigError(f"timeout-min: must be a positive number of minutes, got {timeout_min}")
    if timeout_min is not None and timeout_min * 60 > MAX_TIMEOUT_S:
        raise ConfigError(f"timeout-min: at most {MAX_TIMEOUT_S / 60:.0f} minutes (a year), got {timeout_min:g}; "
                          "omit it for no limit")
    if device is not None and not is_device(device):
        raise ConfigError(f"device: {device!r} is not cpu, cuda or cuda:N")
    for flag, value in (("gpus-per-run", gpus_per_run), ("cpus-per-run", cpus_per_run), ("mem-gb", mem_gb),
                        ("time-min", time_min)):
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise ConfigError(f"{flag}: must be a non-negative number, got {value}")
    if data.exists() and not data.is_dir():
        raise ConfigError(f"data: {str(data)!r} is a file; give a directory for the pilot store")
    check_not_store_folder(data)
    pset = read_proposals(proposals)
    if not pset.proposals:  # valid (suggest writes none when nothing is left to run), but say so
        typer.echo(f"note: {proposals} lists no proposals: nothing to run, {data} left as it was", err=True)
    options = engine_options(engine, option, world, device)
    _check_backend_flags(backend, {"ray-address": ray_address, "partition": partition, "time-min": time_min,
                                   "mem-gb": mem_gb, "gpus-per-run": gpus_per_run, "cpus-per-run": cpus_per_run})
    backend_opts = _backend_options(
        backend, backend_config,
        {"address": ray_address} if backend == "ray" else {},
        {"partition": partition, "time_min": time_min, "mem_gb": mem_gb} if backend == "slurm" else {},
        {"gpus_per_run": gpus_per_run, "cpus_per_run": cpus_per_run} if backend != "local" else {},
    )
    from planner.files import shown_path
    from runners.execution import execute as run_proposals
    from runners.race_lock import race_running

    # Last, nearest the runs: a race that ends meanwhile lets them through.
    if (holder := race_running(data)) is not None:
        raise ConfigError(f"data: a planner race is running on {shown_path(data)} ({holder}); runs added beside it "
                          "overshoot its caps: wait for it to end, or give these runs their own --data")
    try:
        with terminate_as_interrupt():
            res = run_proposals(
                pset, data=data, engine=engine, engine_options=options, seeds=seeds, backend=backend,
                workers=workers, retries=retries, timeout_s=None if timeout_min is None else timeout_min * 60,
                backend_options=backend_opts, show_progress=progress and not as_json,
                warn=lambda line: typer.echo(f"warning: {line}", err=True),
            )
    except KeyboardInterrupt as exc:
        # Finished runs are in the store (each written atomically); rerunning skips them.
        typer.echo(f"interrupted: the finished runs are kept in {data}; rerun the same command to run "
                   "the rest", err=True)
        raise typer.Exit(interrupted_code(exc)) from None
    summary = res.summary()
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
    else:
        typer.echo(
            f"{summary['ok']} ok, {summary['failed']} failed, {summary['skipped']} already done "
            f"({summary['attempts']} attempts, {summary['wall_s']:.1f} s) -> {data}"
        )
        for f in summary["failures"]:
            typer.echo(f"failed: {f['run_id']} (attempt {f['attempt']}): {f['error']}", err=True)
        for c in res.corrupt:
            typer.echo(f"corrupt record skipped: {c}", err=True)
    if res.failed:
        raise typer.Exit(1)


# Which backend reads each flag: one given to another backend would be dropped without a word.
_FLAG_BACKENDS = {"ray-address": ("ray",), "partition": ("slurm",), "time-min": ("slurm",), "mem-gb": ("slurm",),
                  "gpus-per-run": ("ray", "slurm"), "cpus-per-run": ("ray", "slurm")}


def _check_backend_flags(backend: str, given: dict[str, Any]) -> None:
    from planner.errors import ConfigError
    from runners.backends import BACKENDS

    if backend not in BACKENDS:
        return  # _backend_options names the unknown backend itself
    for flag, value in given.items():
        takers = _FLAG_BACKENDS[flag]
        if value is not None and backend not in takers:
            raise ConfigError(f"{flag}: only the {' and '.join(takers)} backend{'s' if len(takers) > 1 else ''} "
                              f"take{'' if len(takers) > 1 else 's'} it, not {backend!r}; drop --{flag} or "
                              f"pass --backend {takers[0]}")


def _backend_options(name: str, config: Path | None, *flag_sets: dict[str, Any]) -> dict[str, Any]:
    from planner.errors import ConfigError
    from runners.backends import BACKENDS
    from runners.backends.config import backend_options

    if name not in BACKENDS:
        raise ConfigError(f"backend: unknown backend {name!r}; use one of: {', '.join(BACKENDS)}")
    return backend_options(name, config, {k: v for flags in flag_sets for k, v in flags.items() if v is not None})


@command(help="List the records in a pilot store: ok runs, failed attempts, corrupt files.")
def status(
    data: DataOpt = DEFAULT_DATA,
    attempts: Annotated[bool, typer.Option("--attempts", help="Show every failed attempt, not only runs still failing.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    from planner.errors import ConfigError
    from runners.store import PilotStore

    if not data.is_dir():
        raise ConfigError(f"data: no pilot store at {str(data)!r}; run `runners execute` first or pass --data")
    check_not_store_folder(data)
    store = PilotStore(data)
    scan = store.scan(status=None)
    ok = [r for r in scan.records if r.status == "ok"]
    done = {r.run_id for r in ok}
    failed = [r for r in scan.records if r.status == "failed"]
    if not attempts:  # latest attempt of each run that has no ok record yet
        latest: dict[str, Any] = {}
        for r in failed:
            if r.run_id not in done and (r.run_id not in latest or r.attempt > latest[r.run_id].attempt):
                latest[r.run_id] = r
        failed = list(latest.values())
    rows = sorted(ok, key=lambda r: r.run_id) + sorted(failed, key=lambda r: (r.run_id, r.attempt))
    corrupt = store.corrupt()
    if as_json:
        typer.echo(json.dumps({
            # rho null where no split was metered (a failed run's partial card), as in the table
            "records": [r.to_row() | {"plan_json": None, "card_json": None, "rho": r.card.metered_rho} for r in rows],
            "corrupt": [{"file": str(c.path), "reason": c.reason} for c in corrupt],
        }, indent=2, default=str))
        return
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from planner.proposals import id_spells

    # A wreck a rerun already moved aside is history, not a live problem: counted apart.
    moved = sum(c.path.parent == store.corrupt_dir for c in corrupt)
    title = (f"{escape(str(data))}: {len(ok)} ok, {len(failed)} failed, {len(corrupt) - moved} corrupt"
             + (f" ({moved} moved aside earlier)" if moved else ""))

    def f(v: float | None, spec: str = ".3f") -> str:
        return "" if v is None else format(v, spec)

    cells = [{
        "run": r.run_id, "status": "[green]ok[/]" if r.status == "ok" else "[red]failed[/]", "try": str(r.attempt),
        "model": r.model, "reward": r.reward, "budget": f(r.budget, ".2e"), "rho plan": f(r.rho_planned),
        "rho": f(r.card.metered_rho), "FLOPs": f(r.card.flops.total, ".2e"), "native": f(r.metrics.native),
        "pass1": f(r.metrics.pass1), "judge": f(r.metrics.judge), "wall": f"{r.wall_s:.0f}s",
        # Recorded text, not markup: an engine's "[/INST]" was a MarkupError traceback.
        "error": escape((r.error or "")[:60]),
    } for r in rows]
    columns = ["run", "status", "try", "model", "reward", "budget", "rho plan", "rho", "FLOPs", "native", "pass1",
               "judge", "wall", "error"]
    # A column with nothing to say (no errors, no judge scores, every run a first try) only
    # widens a table that is already wider than most terminals.
    columns = [c for c in columns if c in ("run", "status") or not rows
               or any(row[c] not in ("", "1") if c == "try" else row[c] for row in cells)]

    def table(cols: list[str], caption: str | None = None) -> Table:
        t = Table(title=title, caption=caption)
        for col in cols:
            t.add_column(col, justify="left" if col in ("run", "status", "model", "reward", "error") else "right")
        for row in cells:
            t.add_row(*(row[c] for c in cols))
        return t

    t = table(columns)
    console = whole_console(t)  # wider than 80 columns: whole, not "qw…", "1…"
    # A content-derived run id spells its model, reward and budget (a hand-written one may
    # not): on a narrow terminal those columns go first, so fewer lines wrap. Only on a
    # terminal: piped (to a file, `grep`, `less -S`) the table stays whole.
    spelled = bool(rows) and all(id_spells(r.run_id, r.model, r.reward, r.budget) for r in rows)
    shown = Console()
    if spelled and shown.is_terminal and console.width > shown.width:
        short = [c for c in columns if c not in ("model", "reward", "budget")]
        t = table(short, "model, reward and budget are in the run id; --json gives every field")
        console = whole_console(t)
    console.print(t)
    for c in corrupt:
        console.print(f"[red]corrupt[/] {escape(str(c.path))}: {escape(c.reason)}", markup=True, highlight=False)
