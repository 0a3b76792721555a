"""The race's live table and its final one: one line per setting, whole at 80 columns;
narrower, the live table sheds columns rather than be cropped."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from planner.frontier import Setting
    from planner.regime import RegimeCall

__all__ = ["RaceDisplay", "RacePace", "calls_table", "clock", "compact_calls_table", "round_line", "time_left"]


def clock(seconds: float) -> str:
    """``4:12``, or ``1:04:12`` past an hour."""
    m, s = divmod(round(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def time_left(now: tuple[float, int, float], since: tuple[float, int, float], runs_cap: int | None,
              flops_cap: float | None) -> tuple[float, str] | None:
    """Seconds until the nearer cap at the pace from ``since`` to ``now`` (each ``(seconds,
    runs, FLOPs)``), and which cap (``"run cap"`` or ``"FLOP cap"``); None without a cap,
    without progress since, or with the cap reached."""
    t, runs, flops = now
    t0, runs0, flops0 = since
    left: list[tuple[float, str]] = []
    if runs_cap and runs > runs0:
        left.append(((runs_cap - runs) * (t - t0) / (runs - runs0), "run cap"))
    if flops_cap and flops > flops0:
        left.append(((flops_cap - flops) * (t - t0) / (flops - flops0), "FLOP cap"))
    return min(left) if left and min(left)[0] > 0 else None


class RacePace:
    """How far the race is toward its caps and, at the pace of the rounds since the first,
    about when the nearest is reached: a bound on the time left, since the race may stop
    sooner on confidence. The first round sets no pace (a resume's runs were not timed
    here, the engine's first run pays for its start, and pilots are the cheapest runs), so
    it says the elapsed time only. Rounds differ (four target-budget anchors, then two
    validation runs), so the pace is every later round's together, not the last one's: on
    three 20-run trl races its estimate was off by a median 24% (mean |log ratio| 0.30),
    the last round's by 33% (0.44); on two races held out from that choice, 17% (0.44)
    against 22% (0.39) (benchmarks/race_eta.py)."""

    def __init__(self, runs_cap: int | None = None, flops_cap: float | None = None,
                 now: Any = time.monotonic) -> None:
        self.runs_cap, self.flops_cap, self._now = runs_cap, flops_cap, now
        self.start = now()
        self._first: tuple[float, int, float] | None = None  # (time, runs, flops) after the first round
        self.spend = ""  # "14/20 runs, 3.53e+12 FLOPs, 4:12 in"
        self.left: tuple[float, str] | None = None  # (seconds, "run cap" | "FLOP cap")

    def restart(self) -> None:
        """Count the time from now (the race's first round begins)."""
        self.start = self._now()

    def round(self, runs: int, flops: float) -> RacePace:
        """Take a round's totals (call once per round); returns self."""
        t = self._now()
        self.spend = ", ".join([
            f"{runs}/{self.runs_cap} runs" if self.runs_cap else f"{runs} runs",
            f"{flops:.3g}/{self.flops_cap:.3g} FLOPs" if self.flops_cap else f"{flops:.3g} FLOPs",
            f"{clock(t - self.start)} in"])
        if self._first is None:
            self._first, self.left = (t, runs, flops), None
        else:
            self.left = time_left((t, runs, flops), self._first, self.runs_cap, self.flops_cap)
        return self

    def line(self) -> str:
        """For a log: ``14/20 runs, 3.53e+12 FLOPs, 4:12 in (the run cap in about 2:30 at
        the pace since round 1)``."""
        if self.left is None:
            return self.spend
        when = "under a minute" if self.left[0] < 60 else f"about {clock(self.left[0])}"
        return f"{self.spend} (the {self.left[1]} in {when} at the pace since round 1)"

    def short(self) -> str:
        """For the live table's title, which must fit 80 columns: ``..., 4:12 in, cap ~2:30``."""
        if self.left is None:
            return self.spend
        return f"{self.spend}, cap {'<1:00' if self.left[0] < 60 else '~' + clock(self.left[0])}"


class RaceDisplay:
    """Live rich table of the race: runs, FLOPs and each setting's regime probabilities."""

    def __init__(self, problem: Any, quiet: bool, posterior: bool = True, runs_cap: int | None = None,
                 flops_cap: float | None = None) -> None:
        self.problem = problem
        self.quiet = quiet
        self.pace = RacePace(runs_cap, flops_cap)
        self.posterior = posterior  # baselines make point calls: their "P" is 100 or 0
        self.live: Any = None
        # Not a terminal (a log file, nohup, SLURM, CI): rich's live table would show only
        # at the end, so each round gets a line here instead.
        self.log: Any = None
        self._said: tuple[int, int] | None = None

    def __enter__(self) -> RaceDisplay:
        self.pace.restart()  # the engine's preparation (pretraining) is not the race's time
        if not self.quiet:
            from rich.console import Console
            from rich.live import Live

            console = Console()
            if not console.is_terminal:
                self.log = console
                return self
            self.live = Live(self._table(None), console=console, refresh_per_second=4, transient=False)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.__exit__(*exc)

    def update(self, progress: Any) -> None:
        new_round = (progress.round, progress.runs) != self._said  # the loop reports once per round
        self._said = (progress.round, progress.runs)
        if new_round:
            self.pace.round(progress.runs, progress.flops)
        if self.live is not None:
            self.live.update(self._table(progress))
        elif self.log is not None and new_round:
            self.log.print(round_line(progress, self.problem, self.pace.line()), highlight=False, soft_wrap=True,
                           markup=False)

    def _table(self, progress: Any) -> Any:
        title = "race: starting" if progress is None else (
            f"race round {progress.round}: {self.pace.short() or f'{progress.runs} runs, {progress.flops:.3g} FLOPs'}")
        calls = progress.calls if progress else {}
        measured = progress.setting_runs if progress else None
        # Live redraws in place, so it cannot hand the terminal over-wide lines to wrap as
        # final() does: under the full table's width (80 columns and below, by its setting
        # names) it sheds columns, chosen at each redraw as the terminal is now.
        return _Fitted([
            calls_table(title, self.problem, calls, posterior=self.posterior, measured=measured),
            *(compact_calls_table(title, self.problem, calls, posterior=self.posterior, measured=measured,
                                  rho=rho) for rho in (True, False)),
        ])

    def final(self, result: Any, path: Path) -> None:
        from rich.markup import escape

        from planner.cli.app import whole_console

        table = calls_table(f"regimes at {self.problem.budget:.3g} FLOPs ({self.problem.target})",
                            self.problem, result.calls, result, posterior=self.posterior)
        c = whole_console(table)  # under 80 columns: whole rows, not P% and the stake cropped off
        c.print(table)
        cap = self.pace.flops_cap
        left = (f" ({cap - result.total_flops:.3g} of --max-flops {cap:.3g} left, less than the next proposal "
                "would cost)" if result.stop_reason == "max-flops" and cap and result.total_flops < cap else "")
        # soft_wrap: one line in a log, however long the path (grep finds "wrote ...").
        c.print(f"stopped: {result.stop_reason} after {result.total_runs} runs, "
                f"{result.total_flops:.3g} FLOPs{left}; wrote {escape(str(path))}", soft_wrap=True)


def round_line(progress: Any, problem: Any, spend: str = "") -> str:
    """One line for a log: the round, the spend (``spend``: :meth:`RacePace.line`, where the
    caller keeps a pace), and each setting's call so far."""
    from planner.regime import format_probability
    from planner.strategies import decision_state

    calls = []
    for s in problem.settings:
        c = progress.calls.get(s)
        if progress.setting_runs.get(s, 1) == 0:
            calls.append(f"{s.key} no runs")
        elif c is not None:
            mark = {"confident": "", "indifferent": "~", "open": "?"}[decision_state(c, problem)]
            calls.append(f"{s.key} {c.regime}{mark} P {format_probability(c.probabilities[c.regime])}")
    spend = spend or f"{progress.runs} runs, {progress.flops:.3g} FLOPs"
    return f"race round {progress.round}: {spend}" + (f"; {', '.join(calls)}" if calls else "")


def calls_table(title: str, problem: Any, calls: dict[Setting, RegimeCall], result: Any = None,
                 posterior: bool = True, measured: dict[Setting, int] | None = None) -> Any:
    """One line per setting, whole at 80 columns (the live view and the final table).
    ``measured``: the live view's runs that measured the target, by setting (the final
    table reads ``result``'s); a setting with none shows no call."""
    from rich import box
    from rich.table import Table

    from planner.regime import GUESSED_NOISE, LABELS, format_probability
    from planner.strategies import decision_state

    # One P column (search/update/reward, percent) leaves room for the stake at 80 columns.
    heads = ["setting", "rho*", "90% CI", "regime", "P% " + "/".join(lab[0] for lab in LABELS), "stake"]
    # The stake in noise sd where the strategy knows the noise (ours), else in metric units.
    in_sd = any(math.isfinite(c.stake_sd) for c in calls.values())
    unit = "in one run's noise sd" if in_sd else "target metric"
    if in_sd and any(c.extra.get("noise_source") in ("stated", "other stated") for c in calls.values()):
        unit += ", as --noise-sd stated it"
    inferred = in_sd and any(c.noise_guessed for c in calls.values())
    guess = f"; *: {GUESSED_NOISE}" if inferred else ""
    if result is not None:
        heads.append("runs")
    rows = []
    for s in problem.settings:
        c = calls.get(s)
        if c is None:
            rows.append([s.key, *["-"] * (len(heads) - 1)])
            continue
        if result is not None and result.measured.get(s, 0) == 0:
            # Only other settings' runs speak for it: a call and a stake here would read as
            # measured (regimes.json keeps the prediction, with runs 0).
            failed = result.runs[s]
            rows.append([s.key, "-", "-", "no runs", "-", "-", "0" + (f" +{failed} failed" if failed else "")])
            continue
        if result is None and measured is not None and measured.get(s, 1) == 0:
            rows.append([s.key, "-", "-", "no runs", "-", "-"])  # as the log's line (round_line)
            continue
        mark = {"confident": "", "indifferent": "~", "open": "?"}[decision_state(c, problem)]
        row = [s.key, f"{c.rho_star:.2f}", f"{c.rho_star_ci[0]:.2f}-{c.rho_star_ci[1]:.2f}",
               c.regime + mark, "/".join(format_probability(c.probabilities[lab], 0, percent=True) for lab in LABELS),
               _stake_cell(c, in_sd) + ("*" if in_sd and c.noise_guessed else "")]
        if result is not None:
            failed = result.runs[s] - result.measured.get(s, 0)
            row.append(f"{result.measured.get(s, 0)}" + (f" +{failed} failed" if failed else ""))
        rows.append(row)
    # show_edge=False: the box's edge spaces made the table 81 wide, whole at 80 only by luck
    # of the crop (a trailing space); printed uncut under 80 columns, they would wrap.
    t = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True, show_edge=False,
              caption=("P%: posterior probability of the search-, update-, reward-heavy regime; "
                       if posterior else "P%: this strategy has no posterior: a point call (optuna: 100 is "
                       "the call) or the share of bootstrap refits of its local fit (grid, random: 100 where "
                       "that fit is exact, three rho values and no replicates); ")
                      + "90% CI: of the best rho within the called regime (rho* is held to measured "
                        "allocations, so it can lie outside); "
                      + f"?: not decided (below {problem.confidence:.0%}, or not yet checked by a run at "
                      "the target budget), ~: indifferent; stake: "
                      "expected gap between the best allocations of the called and the next "
                      f"regime ({unit}; near 0: the regime hardly matters)" + guess)
    for k, head in enumerate(heads):
        t.add_column(head, no_wrap=True, justify="left" if k in (0, 3) else "right",
                     min_width=max(len(head), *(len(r[k]) for r in rows)))
    for r in rows:
        t.add_row(*r)
    return t


def compact_calls_table(title: str, problem: Any, calls: dict[Setting, RegimeCall], posterior: bool = True,
                        measured: dict[Setting, int] | None = None, rho: bool = True) -> Any:
    """The live table for a narrow terminal: setting, its runs, (rho*,) the call and its own
    probability only. The interval, the other regimes' P and the stake go; a long setting
    name folds onto a second line rather than push the call off the edge."""
    from rich import box
    from rich.table import Table

    from planner.regime import format_probability
    from planner.strategies import decision_state

    heads = ["setting", "runs", *(["rho*"] if rho else []), "regime", "P%"]
    rows = []
    for s in problem.settings:
        c, n = calls.get(s), (measured or {}).get(s)
        runs = "-" if n is None else str(n)
        if c is None or n == 0:  # no call yet; or only other settings' runs behind it, as calls_table
            rows.append([s.key, runs, *(["-"] if rho else []), "no runs" if n == 0 else "-", "-"])
            continue
        mark = {"confident": "", "indifferent": "~", "open": "?"}[decision_state(c, problem)]
        rows.append([s.key, runs, *([f"{c.rho_star:.2f}"] if rho else []), c.regime + mark,
                     format_probability(c.probabilities[c.regime], 0, percent=True)])
    what = ("the called regime's posterior probability" if posterior
            else "the call's (no posterior: 100 for a point call, else its share of bootstrap refits)")
    t = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True, show_edge=False,
              caption=f"P%: {what}; ?: not decided, ~: indifferent; wider: the interval, all P and the stake")
    for k, head in enumerate(heads):
        if k == 0:
            t.add_column(head, overflow="fold")  # the one cell that may take two lines
        else:
            t.add_column(head, no_wrap=True, justify="left" if head == "regime" else "right",
                         min_width=max(len(head), *(len(r[k]) for r in rows)))
    for r in rows:
        t.add_row(*r)
    return t


class _Fitted:
    """The first of ``tables`` whose every line fits the width it is drawn at, else the last
    (folding what it must): decided at each render, so a resized terminal gets its own."""

    def __init__(self, tables: list[Any]) -> None:
        self.tables = tables

    def __rich_console__(self, console: Any, options: Any) -> Any:
        for table in self.tables[:-1]:
            if console.measure(table, options=options.update_width(100_000)).maximum <= options.max_width:
                yield table
                return
        yield self.tables[-1]


def _stake_cell(call: RegimeCall, in_sd: bool) -> str:
    value = call.stake_sd if in_sd else call.stake
    if not math.isfinite(value):
        return "-"
    return f"{value:.1f} sd" if in_sd else f"{value:.4f}"
