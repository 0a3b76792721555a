"""``planner bench``: the planner benchmark on the simulator worlds, a shell over
``benchmarks/planner_bench.py`` (which needs a source checkout)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from planner.cli.app import command
from planner.cli.paths import path_value


@command(help="Benchmark the strategies on the simulator worlds (runs benchmarks/planner_bench.py).")
def bench(
    quick: Annotated[bool, typer.Option(help="CI-sized run: one world, few seeds and settings.")] = False,
    out: Annotated[Path, typer.Option(parser=path_value, help="Where to write the JSON results (the figure goes beside it, .png/.svg).")] = Path("planner_bench.json"),
    plot: Annotated[bool, typer.Option(help="Write the figure (same-regime rate and regret against FLOPs).")] = True,
    worlds: Annotated[str | None, typer.Option(help="Worlds, comma-separated (default: all shipped).")] = None,
    strategies: Annotated[str | None, typer.Option(help="Strategies, comma-separated (default: all).")] = None,
    seeds: Annotated[int | None, typer.Option(min=1, help="Repetitions per world (default 10; quick 3).")] = None,
    first_rep: Annotated[int, typer.Option(min=0, help="First repetition (e.g. 10 for held-out seeds).")] = 0,
    flops_per_setting: Annotated[float | None, typer.Option(
        help="Ours' FLOP cap per setting in target-budget runs (default 6); baselines get equal spend.")] = None,
    cost_power: Annotated[float | None, typer.Option(help="Ours' acquisition cost power (default 0.5).")] = None,
    jobs: Annotated[int, typer.Option(min=1, help="Worlds benchmarked in parallel processes.")] = 1,
    portable_math: Annotated[bool, typer.Option(
        help="Pin MKL, OpenBLAS, glibc's libm and ATen to code every x86-64 CPU runs, one thread each, so the races "
             "replay on another box (runs the script in a fresh, pinned process).")] = False,
) -> None:
    import importlib.util
    import sys

    from planner.errors import ConfigError

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "planner_bench.py"
    if not script.is_file():
        raise ConfigError(f"bench: {script} not found; run from a source checkout of race-planner")
    argv = ["--out", str(out)] + (["--quick"] if quick else []) + ([] if plot else ["--no-plot"])
    argv += ["--worlds", worlds] if worlds else []
    argv += ["--strategies", strategies] if strategies else []
    argv += ["--seeds", str(seeds)] if seeds else []
    argv += ["--first-rep", str(first_rep), "--jobs", str(jobs)]
    argv += ["--flops-per-setting", str(flops_per_setting)] if flops_per_setting is not None else []
    argv += ["--cost-power", str(cost_power)] if cost_power is not None else []
    if portable_math:
        import subprocess

        # The math libraries read their pins when they load, and this process may have
        # loaded them: the script restarts itself pinned, and its exit code is this one's.
        raise typer.Exit(subprocess.call([sys.executable, str(script), *argv, "--portable-math"]))
    spec = importlib.util.spec_from_file_location("planner_bench", script)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    # Registered before it runs: its dataclasses look their module up in sys.modules.
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    mod.main(argv)
