"""Target disagreement: a pair of targets is flagged exactly when their optimum intervals
(over all regimes) are disjoint, whatever the regimes called."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from planner.regime import RegimeCall
from planner.report.data import SettingAt, disagreements

S = SettingAt("tiny-s", "sparse", 5e11)
T = SettingAt("tiny-s", "prm", 5e11)


def call(regime: str, optimum: tuple[float, float] | None, rho_ci: tuple[float, float] = (0.4, 0.6)) -> RegimeCall:
    return RegimeCall(0.5, rho_ci, regime, {regime: 1.0}, optimum_ci=optimum)


def data(calls: dict[str, dict[SettingAt, RegimeCall]]) -> Any:
    fits = {t: SimpleNamespace(frontiers={s: SimpleNamespace(call=c) for s, c in by.items()})
            for t, by in calls.items()}
    return SimpleNamespace(settings=[S, T], fits=fits)


def test_disjoint_optimum_intervals_are_flagged_and_overlapping_ones_are_not() -> None:
    out = disagreements(data({
        "judge": {S: call("update-heavy", (0.70, 0.90)), T: call("update-heavy", (0.5, 0.8))},
        "native": {S: call("update-heavy", (0.55, 0.71)), T: call("search-heavy", (0.2, 0.5))},
        "pass1": {S: call("search-heavy", (0.10, 0.40))},
    }))
    by = {d.setting: d for d in out}
    # Targets in TARGETS order; native-judge overlap at 0.70-0.71 (touching counts).
    assert list(by[S].calls) == ["native", "pass1", "judge"]
    assert by[S].flagged == (("native", "pass1"), ("pass1", "judge"))
    assert by[S].regimes_differ
    # Different regimes but overlapping intervals (0.5 is in both): not flagged.
    assert by[T].flagged == () and by[T].regimes_differ


def test_without_optimum_intervals_the_regime_interval_is_used_and_one_target_is_skipped() -> None:
    out = disagreements(data({
        "native": {S: call("update-heavy", None, (0.6, 0.7)), T: call("update-heavy", None)},
        "pass1": {S: call("update-heavy", None, (0.2, 0.3))},
    }))
    assert [d.setting for d in out] == [S]  # T has one target: nothing to compare
    assert out[0].flagged == (("native", "pass1"),) and not out[0].regimes_differ
