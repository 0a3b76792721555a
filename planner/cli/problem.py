"""What ``planner suggest`` and ``planner race`` share: the decision problem their options
describe, parsed and checked once, the options of ours' strategy, and what they say of the
pilot store they read."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from planner.cli.app import parse_budget, parse_list

# The option types (BudgetOpt, ...) are shared too, but as annotations, not API.
__all__ = ["check_target", "no_trend", "note_stated_noise", "ours_options", "race_problem", "warn_corrupt"]

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
NoiseOpt = Annotated[
    str | None,
    typer.Option("--noise-sd", help="ours: one run's noise sd in the target metric, if known (earlier replicates, "
                 "the eval set's binomial error): 0.01 for every reward system, or sparse=0.01,prm=0.02. "
                 "Replaces the fit's guess (sd*) where a reward system has no seed replicates; "
                 "its replicates, where it has some, shrink toward it."),
]


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


def ours_options(seed: int, anchors: int | None, cost_power: float | None, noise_sd: str | None,
                 problem: Any) -> dict[str, Any]:
    """Keyword options of ours' strategy from the CLI (only those given); ``--noise-sd`` is
    read and checked against ``problem``'s reward systems here, before any I/O."""
    opts: dict[str, Any] = {} if anchors is None else {"n_anchor": anchors}
    if noise_sd is not None:
        from planner.noise import check_noise_sd, parse_noise_sd, unlikely_noise_sd

        opts["noise_sd"] = check_noise_sd(parse_noise_sd(noise_sd), problem)
        if odd := unlikely_noise_sd(opts["noise_sd"]):
            typer.echo(f"warning: {odd}", err=True)
    if cost_power is not None:
        from planner.acquisition import AcquisitionConfig

        opts["config"] = AcquisitionConfig(seed=seed, cost_power=cost_power)  # validates
    return opts


def check_target(target: str) -> None:
    """An unknown ``--target`` as one line naming the known ones (ConfigError)."""
    from planner.errors import ConfigError
    from planner.schema import TARGETS

    if target not in TARGETS:
        raise ConfigError(f"target: unknown target {target!r}; use one of: {', '.join(TARGETS)}")


def no_trend(problem: Any, records: Any) -> str | None:
    """Why ours has nothing to propose when every run measured the same value (the
    surrogate refuses to fit them: no trend), else None."""
    from planner.strategies.base import relevant_records

    runs = relevant_records(problem, records)
    values = {getattr(r.metrics, problem.target) for r in runs}
    if len(runs) < 2 or len(values) != 1:
        return None
    return (f"every run measured the same {problem.target} ({values.pop():g}), so there is no trend to fit "
            "and the calls are the prior's (open); a larger budget or another --target may measure one")


def warn_corrupt(root: Path, wrecks: list[Any], said: frozenset[str] = frozenset()) -> frozenset[str]:
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


def note_stated_noise(data: Path, problem: Any, given: str | None) -> None:
    """Say on stderr when ``data``'s race summary was told a run noise (``--noise-sd``) for
    this target and this invocation is told none: its calls then rest on the fit's guess,
    not on what the race's did (the report refits with the race's value)."""
    if given is not None:
        return
    from planner.report.race_summary import read_race, stated_noise

    doc, _ = read_race(data)
    told = stated_noise(doc)
    mine = sorted({s.reward for s in problem.settings})
    # Only where the race's value covers this problem: otherwise there is no "same" to pass.
    if not told or (doc or {}).get("target", "native") != problem.target or not set(mine) <= set(told):
        return
    said = ",".join(f"{r}={told[r]:g}" for r in mine)
    typer.echo(f"note: the race in {data} was told --noise-sd {said}; without it these calls rest on the fit's "
               "own guess of the noise (pass the same to keep the race's)", err=True)
