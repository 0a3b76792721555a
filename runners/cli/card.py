"""``runners card RUN_ID``: print one run's compute card."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from planner.cli.paths import check_not_store_folder, path_value
from runners.cli.app import command

__all__ = ["card"]


@command(name="card")
def card(
    run_id: Annotated[str, typer.Argument(help="Run id (see the report's card table or DIR/runs/).")],
    data: Annotated[Path, typer.Option("--data", parser=path_value, help="Campaign directory (the pilot store).")],
) -> None:
    """Print the compute card of one run: FLOPs by component, rho, tokens, wall time.

    Wall time is by phase; hardware and software are listed too."""
    import difflib

    from rich.console import Console

    from planner.errors import ConfigError
    from planner.report.cards import rich_card
    from planner.report.data import check_campaign_dir
    from runners.store import PilotStore, run_of

    # DIR/runs read as a store holds no run: "no run ..." would send the user hunting for it.
    check_not_store_folder(data)
    check_campaign_dir(data)
    store = PilotStore(data)
    scan = store.scan(status=None)
    records = scan.records
    matches = [r for r in records if r.run_id == run_id]
    if not matches:
        # This run's own files only: run ids share dotted prefixes, so a prefix ("tiny-s.sparse")
        # matched another run's wreck and was called corrupt itself.
        wrecks = [c for c in scan.corrupt if run_of(c.path) == run_id]
        if wrecks:
            raise ConfigError(f"run_id: the record of {run_id!r} is corrupt ({wrecks[0].path.name}: "
                              f"{wrecks[0].reason}); the next `runners execute` of its proposal reruns it")
        close = difflib.get_close_matches(run_id, sorted({r.run_id for r in records}), n=1)
        # Runs, not records: a run tried three times is three failed records.
        n = len({r.run_id for r in records})
        hint = (f"did you mean {close[0]!r}?" if close
                else f"{n} run(s) are there; `runners status --data {data}` lists them" if n
                else "it holds no runs; run `runners execute` or `planner race` into it first")
        raise ConfigError(f"run_id: no run {run_id!r} in {data}; {hint}")
    # The ok record is the run's result; without one, the latest failed attempt explains it.
    ok = [r for r in matches if r.status == "ok"]
    rec = ok[0] if ok else max(matches, key=lambda r: r.attempt)
    Console().print(rich_card(rec))
    if len(matches) > 1:
        Console(stderr=True).print(f"({len(matches)} records of this run: "
                                   f"{sum(r.status != 'ok' for r in matches)} failed attempt(s))")

