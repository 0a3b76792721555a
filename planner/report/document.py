"""What the report says: report data + saved figures -> blocks and ``regimes.json``.

The wording of the status lines matters: an empty or all-failed campaign produces a
report that says so in its first lines, not a stack trace and not an empty page.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np

from planner.frontier import AT_BUDGET_RATIO, RHO_STAR_SUPPORT, runs_at_rho_star
from planner.regime import GUESSED_NOISE, format_probability, format_stake
from planner.report.cards import CARD_COLUMNS, card_rows
from planner.report.data import ReportData, SettingAt, base_score, disagreements, runs_at
from planner.report.race_summary import stated_noise
from planner.report.render import Block, FigureRef
from planner.schema import TARGETS
from planner.versions import fitting_versions
from surrogate.noise import MIN_REPLICATE_DOF

__all__ = ["blocks", "regimes_json", "status_line"]

SCHEMA_VERSION = 1
# The confidence a call is read against where no race of this target states its own
# (`planner race --confidence`'s default).
CONFIDENCE = 0.9


def status_of(data: ReportData) -> str:
    if data.empty:
        return "empty"
    if data.all_failed:
        return "all-failed"
    fit = data.primary
    if fit is None or not fit.ok:
        return "no-fit"
    return "ok"


def status_line(data: ReportData) -> str:
    """One plain sentence on what the data supports (first line of the report)."""
    st = status_of(data)
    if st == "empty":
        extra = f" ({len(data.corrupt)} unreadable file(s) were skipped)" if data.corrupt else ""
        return (f"No runs found in {data.data_text}{extra}: there is nothing to report yet. "
                "Run proposals with `runners execute` or `planner race` into this directory first.")
    if st == "all-failed":
        return (f"All {len(data.failed)} attempt(s) of {_n_runs(data.failed)} run(s) in {data.data_text} "
                "failed: no frontier can be fitted and no regime can be called. The failed attempts and "
                "their errors are listed below.")
    if st == "no-fit":
        why = data.primary.error if data.primary else "not fitted"
        others = [t for t, f in data.fits.items() if t != data.target and f.ok]
        hint = (f"--target {others[0]} fits these runs" if others
                else "run more pilots measuring this target")
        return (f"The {data.target} surrogate could not be fitted ({why}); frontiers and regime calls "
                f"are missing. {hint[0].upper()}{hint[1:]}.")
    n = len(data.primary.frontiers) if data.primary else 0
    pairs = len({(s.model, s.reward) for s in data.primary.frontiers}) if data.primary else 0
    done = {r.run_id for r in data.ok}
    still = {r.run_id for r in data.failed} - done
    retried = sum(r.run_id in done for r in data.failed)  # attempts, as the sentence says, not runs
    failed = (f"{len(still)} failed run(s)" + (f" ({len(data.failed)} failed attempt(s), {retried} of them "
              "on runs that later succeeded)" if retried else "")) if data.failed else "no failed runs"
    # No run within at_budget's band: what the table and figures mark as extrapolated.
    unrun = sum(1 for s in data.primary.frontiers if not any(runs_at(data.ok, s, data.target))) if data.primary else 0
    where = ("each at every budget it was measured at" if not unrun else
             f"each at every budget it was measured at, and {unrun} at a budget with no run of its own "
             "(the race's decision budget): predicted from the others")
    return (f"{len(data.ok)} successful run(s) and {failed} in {data.data_text}; "
            f"{n} regime call(s) under the {data.target} target: {pairs} policy/reward setting(s), {where}.")


def _n_runs(records: Sequence[Any]) -> int:
    return len({r.run_id for r in records})


def _decided(entry: dict[str, Any]) -> str:
    """The race's decision on a setting: confident, indifferent or open. A call at the
    confidence that its validation runs had not yet checked is open, not "confident yes"
    (the race counts it undecided); summaries from before "decided" was kept say yes/no."""
    state = entry.get("decided")
    if state not in ("confident", "indifferent", "open"):
        return "confident" if entry.get("confident") else "open"
    if state == "open" and entry.get("confident"):
        return "open (unchecked)"
    return str(state)


def _fmt_coverage(p: float) -> str:
    """LOO coverage in whole percent, rounded down as probabilities beside a threshold are
    (:func:`format_probability`): 26 of 29 points (89.7%) read "90%" beside the nominal 90%."""
    return f"{format_probability(p, 0, percent=True)}%"


def _fmt_ci(ci: Sequence[float]) -> str:
    return f"[{ci[0]:.2f}, {ci[1]:.2f}]"


def _figs(figs: dict[str, list[FigureRef]], section: str) -> list[Block]:
    return [Block("figure", figure=f) for f in figs.get(section, [])]


def _ok_runs(entries: list[dict[str, Any]]) -> int | None:
    """The runs of a race summary's settings that measured its target (``runs`` beside
    ``failed_runs``, which holds ok runs without a value of the target too, docs/planner.md;
    a summary written before failed_runs existed counted attempts there: None)."""
    if not entries or not all("failed_runs" in e for e in entries):
        return None
    try:
        return sum(int(e["runs"]) for e in entries)
    except (TypeError, ValueError):
        return None


def added_since_race(data: ReportData) -> int:
    """Attempts of the race's settings in the store beyond what its regimes.json counts
    (an interrupted resume, or `runners execute` after the race); 0 when none or no race."""
    race = data.race
    if race is None or not isinstance(race.get("runs"), int):
        return 0
    keys = {(str(e["model"]), str(e["reward"])) for e in race.get("settings", [])
            if isinstance(e, dict) and "model" in e and "reward" in e}
    return max(0, sum(1 for r in data.records if (r.model, r.reward) in keys) - race["runs"])


def _race(data: ReportData) -> list[Block]:
    """The race's own summary (DIR/regimes.json) beside the report's recomputed calls."""
    race = data.race
    if race is None:
        return []
    entries = [e for e in race.get("settings", []) if isinstance(e, dict) and "model" in e and "reward" in e]
    budget = _float(race.get("budget"))
    decided = sum(1 for e in entries if e.get("decided", "confident" if e.get("confident") else "open") != "open")
    keys = {(str(e["model"]), str(e["reward"])) for e in entries}
    other = sorted({float(r.budget) for r in data.ok if (r.model, r.reward) in keys and float(r.budget) != budget})
    # `rounds` are the last invocation's (a resumed or repeated race starts at 0); `runs`
    # are every attempt of its settings in the store, earlier invocations' included.
    text = (f"`planner race` ({race.get('strategy', '?')} strategy) raced the {race.get('target', '?')} regime "
            f"at {budget:.3g} FLOPs; its last invocation ran {race.get('rounds', '?')} round(s) and stopped "
            f"({race.get('stop_reason', '?')}) with {decided} of {len(entries)} setting(s) decided "
            f"(confidence threshold {race.get('confidence', '?')}). Its settings have {race.get('runs', '?')} "
            f"attempt(s) in the store, failed ones included ({_float(race.get('flops_spent')):.3g} FLOPs)"
            + (f", {ok} of them ok runs measuring {race.get('target', '?')}." if (ok := _ok_runs(entries)) is not None
               else "."))
    if other:
        text += " Their runs at other budgets were at " + ", ".join(f"{b:.4g}" for b in other) + " FLOPs."
    out = [Block("h2", "Race"), Block("p", text)]
    added = added_since_race(data)
    stale = added > 0
    if stale:
        # An interrupted resume or `runners execute` added runs after the summary was written.
        out.append(Block("warn", (
            f"The store now holds {race['runs'] + added} attempt(s) of these settings, {added} more than this summary "
            "counts: runs were added after the race wrote it (an interrupted resume, or `runners execute`). "
            "Its calls are older than the refit's; rerun the race's command to bring it up to date.")))
    fit = data.fits.get(str(race.get("target")))
    rows, differ = [], []
    for e in entries:
        s = SettingAt(str(e["model"]), str(e["reward"]), budget)
        mine = fit.frontiers.get(s) if fit else None
        # A hand-edited summary may hold anything here: what is not a pair of numbers or a
        # table of probabilities reads as missing, not as a crash of the whole report.
        raw_ci = e.get("rho_star_ci")
        ci = [_float(x) for x in raw_ci] if isinstance(raw_ci, list | tuple) and len(raw_ci) == 2 else [float("nan")] * 2
        probs = e.get("probabilities")
        p = probs.get(e.get("regime"), float("nan")) if isinstance(probs, dict) else float("nan")
        if mine is not None and mine.call.regime != e.get("regime"):
            differ.append(f"{s.model}/{s.reward}")
        rows.append([s.model, s.reward, f"{_float(e.get('rho_star')):.2f}", _fmt_ci(ci),
                     str(e.get("regime")), format_probability(_float(p)), _decided(e),
                     f"{mine.call.rho_star:.2f} {_fmt_ci(mine.call.rho_star_ci)} {mine.call.regime}"
                     if mine else "n/a"])
    out.append(Block("table", headers=["model", "reward", "race rho*", "90% interval", "regime", "P",
                                       "decided", "report (refitted on the store)" if stale else "report (same data, refitted)"], rows=rows,
                     flags=[r[6].startswith("open") for r in rows]))
    out.append(Block("note", "Rows in bold (red in HTML) are calls the race left open: below its confidence, "
                             "or (\"unchecked\") at it but not yet checked by runs at the target budget."))
    if any(r[-1] == "n/a" for r in rows):
        target = race.get("target", "?")
        why = (fit.error if fit and fit.error else "no ok run measured it")
        out.append(Block("note", f"n/a: the {target} surrogate could not be fitted ({why})." if not (fit and fit.ok)
                         else f"n/a: no run of the setting measured {target}; the report calls only settings "
                              "with one (the race's call there is its surrogate's prediction from the others)."))
    if differ:
        older = "" if all("stake" in e for e in entries) else " (by an older version of the planner, too)"
        out.append(Block("warn", (
            f"The refit calls another regime than the race for {len(differ)} of {len(entries)} setting(s): "
            f"{', '.join(differ)}. The race's calls are the fits it made as it ran{older}; the refit uses "
            "every record now in the store with the current surrogate. "
            + ("Part of the difference is the runs added since (above)." if stale else
               "A call that flips between two fits of the same runs rests on little evidence: read its P and stake."))))
    return out


def _float(v: object) -> float:
    """A number from a (possibly hand-edited) race summary; NaN where it is not one."""
    try:
        return float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return float("nan")


def blocks(data: ReportData, figs: dict[str, list[FigureRef]]) -> list[Block]:
    """The report as a sequence of blocks (headings, text, tables, figures), which
    :mod:`planner.report.render` writes as markdown and html."""
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    out = [Block("h1", "RACE regime report")]
    st = status_of(data)
    out.append(Block("warn" if st != "ok" else "note", status_line(data)))
    software = data.software_text  # a pass over the records' cards: once
    made_with = f" Made with {software}." if software else ""
    out.append(Block("p", f"Data: {data.source_text}. Engine: {data.engine_text}.{made_with} "
                          f"Primary target: {data.target}. Generated {now} by `planner report`."))
    if not data.empty:
        # The tables below use these words first; a reader met "P" and "native" undefined.
        out.append(Block("note", (
            "Words: rho is the update fraction, learning FLOPs / total FLOPs of a run; the regime is the largest "
            "of its search (rollouts), learning (updates) and reward (scoring) shares. Targets: native (the "
            "training reward on held-out prompts), pass1 (downstream pass@1), judge (a process judge's score). "
            "rho* is the best rho within the called regime for a target at a budget (held to measured allocations: "
            "Regime calls says how); P a regime's posterior probability; a call is decided where P reaches the "
            "race's confidence (or, with its --indifference, where committing is expected to lose at most that) "
            "and a run at its budget has checked it, and open (a lean, not a call) otherwise.")))
    if any(r.simulated for r in data.records):
        out.append(Block("warn", "Results from the sim engine are SIMULATED: they measure the planner "
                                 "against a known world, not a real training run."))
    if data.corrupt:
        out.append(Block("warn", f"{len(data.corrupt)} unreadable record file(s) were skipped (listed at the end)."))
    out += [Block("warn", m) for m in data.mixed]
    out += [Block("note", n) for n in data.notes]
    out += _race(data)

    fit = data.primary
    if fit is not None and fit.frontiers:
        out.append(Block("h2", "Regime calls"))
        out.append(Block("p", f"Per setting under the {data.target} target: the regime is the one "
                              "holding the argmax of most posterior sample paths (P: that share), "
                              "rho* the argmax of the posterior-mean frontier within that regime, among "
                              f"the allocations measured at the budget (grid points within {RHO_STAR_SUPPORT:g} of a run's "
                              f"rho, at the budget or within {AT_BUDGET_RATIO:g}x of it) "
                              "where there are any, so "
                              "the regime is the largest component of the allocation at rho*; the "
                              "interval is the 90% credible interval of each sample path's best rho "
                              "within that regime. rho* can sit outside it where it is held to "
                              "allocations measured at the budget and the samples peak elsewhere: a run "
                              "inside the interval would test it; or, held or not, just outside it where "
                              "the posterior mean is nearly flat across the regime (a stake near 0): its "
                              "peak is then at the regime's edge, where few sample paths peak. The stake is the expected gap "
                              "between the best allocations of the called regime and of the next "
                              "one, and in brackets the same in one run's noise sd (the surrogate's "
                              "estimate): near 0, the regime hardly matters, however probable the "
                              "call."))
        rows, weak, lone = [], [], []
        race = data.race or {}
        ours = race.get("target", "native") == data.target  # another target's race judged other calls
        level = _float(race.get("confidence")) if ours else CONFIDENCE
        level = level if 1 / 3 < level < 1 else CONFIDENCE  # as the race takes it (a hand edit may not)
        indifference = _float(race.get("indifference")) if ours else 0.0
        indifference = indifference if 0 < indifference < 1 else 0.0
        bases = {(s.model, s.reward): base_score(data.ok, s.model, s.reward, data.target) for s in fit.frontiers}
        show_base = any(v is not None for v in bases.values())
        for s, f in fit.frontiers.items():
            exact, nearby = runs_at(data.ok, s, data.target)  # nearby budgets count as measured here (rho*'s support)
            n, near = len(exact), len(nearby)
            c = f.call
            # +: rho* is the posterior mean's peak, with no run near it at this budget.
            held = "" if c.extra.get("rho_star_support", "measured") == "measured" else "+"
            if not held and runs_at_rho_star(data.ok, s.model, s.reward, s.budget, c.rho_star, data.target) == 1:
                lone.append(s.label)
            rows.append([s.model, s.reward, f"{s.budget:.4g}", f"{n}" + (f" (+{near} near)" if near else ""),
                         f"{c.rho_star:.2f}{held}",
                         _fmt_ci(c.rho_star_ci), c.regime, format_probability(c.confidence),
                         format_stake(c), f"{f.predicted_at_rho_star:.3f}"]
                        + ([f"{b:.3f}" if (b := bases[s.model, s.reward]) is not None else "-"] if show_base else []))
            # Decided as the race decides (planner.strategies.base.decision_state): P at the
            # confidence, or committing is expected to lose no more than its --indifference.
            # The race also holds a call open until a run at its budget checked it: a row
            # there without one was plain here beside the Race table's "open (unchecked)".
            unchecked = bool(ours and race and s.budget == _float(race.get("budget")) and not exact and not nearby)
            weak.append(unchecked or (c.confidence < level and not (indifference and c.expected_loss <= indifference)))
        marks = []
        if any(weak):
            lose = (f" and committing to it is expected to lose more than the race's indifference {indifference:g}"
                    if indifference else "")
            marks.append(f"Rows in bold (red in HTML): open, a lean, not a call: P below {level:g}{lose}, or, at the "
                         "race's budget, no run there has checked it yet; more runs there, or seed replicates, would "
                         "decide it")
        if show_base:
            marks.append(f"untrained: the policy's {data.target} before training (the median its runs measured); "
                         "a prediction below it is an allocation at which training lost ground (the frontier "
                         "figures draw it dash-dotted)")
        if any(r[3].endswith("near)") for r in rows):
            marks.append(f"runs (+k near): k more runs at budgets within {AT_BUDGET_RATIO:g}x, which count as "
                         "measured at this one (rho* is held to their allocations too; the frontier figure "
                         "draws them as hollow diamonds)")
        if any(r[4].endswith("+") for r in rows):
            marks.append("rho*+: a prediction, no run of the setting near it at that budget "
                         f"(or within {AT_BUDGET_RATIO:g}x of it)")
        if lone:
            # One run's luck can be the peak: P weighs it against the fit's noise, which
            # one run cannot measure (a reviewer's P = 1.00 rested on such a run).
            held_rows = sum(not r[4].endswith("+") for r in rows)
            which = "every setting whose rho* is held to runs" if len(lone) == held_rows > 1 else ", ".join(lone)
            marks.append(f"rho* rests on one run for {which}: a single unreplicated run near the called "
                         "allocation sets its height, so a lucky run can make the peak; a seed replicate there would "
                         "test it")
        if any("sd*" in r[8] for r in rows):
            marks.append(f"sd*: {GUESSED_NOISE}")
        told = stated_noise(data.race) if ours else None
        if told and any(f.call.extra.get("noise_source") in ("stated", "other stated") for f in fit.frontiers.values()):
            marks.append("sd: where no seed replicates measured it, the run noise the race was told (--noise-sd "
                         + ", ".join(f"{r}={v:g}" for r, v in told.items())
                         + "), not measured: P and the stake are as right as that figure")
        out.append(Block("table", headers=["model", "reward", "budget", "runs", "rho*", "90% interval",
                                           "regime", "P(regime)", "stake", f"predicted {data.target} at rho*",
                                           *(["untrained"] if show_base else [])],
                         rows=rows, flags=weak))
        out += [Block("note", m) for m in marks]
        if warning := _too_sure(fit):
            out.append(Block("warn", warning))
        out.append(Block("h2", "Frontiers"))
        out += _figs(figs, "frontiers")
        out.append(Block("h2", "rho* against model size"))
        out += _figs(figs, "size")

    dis = disagreements(data)
    if dis:
        out.append(Block("h2", "Target disagreement"))
        out.append(Block("p", "rho* of each setting under native (training reward), pass1 (downstream "
                              "pass@1) and judge (process judge), with the 90% interval of the optimum "
                              "over posterior samples in any regime. A setting is flagged when two "
                              "targets' intervals do not overlap: they disagree by more than the "
                              "uncertainty. \"regimes differ\": the intervals overlap, but the targets call "
                              "different regimes, so which allocation is best depends on what is measured, "
                              "within the uncertainty."))
        out += _figs(figs, "targets")
        # Every target any setting has, in the canonical order; a setting without one (not
        # measured there) gets a blank cell under that target's header, not a shifted row.
        targets = [t for t in TARGETS if any(t in d.calls for d in dis)]
        rows, flags = [], []
        for d in dis:
            cells = [f"{tc.rho_star:.2f} {_fmt_ci(tc.optimum_ci or tc.rho_star_ci)} {tc.regime}"
                     if (tc := d.calls.get(t)) is not None else "" for t in targets]
            flag = "; ".join(f"{a} vs {b}" for a, b in d.flagged) or ("regimes differ" if d.regimes_differ else "")
            rows.append([d.setting.label, *cells, flag or "agree"])
            flags.append(bool(d.flagged))
        headers = ["setting", *(f"{t}: rho* [90%] regime" for t in targets), "disagreement"]
        out.append(Block("table", headers=headers, rows=rows, flags=flags))

    unfitted = [tf for tf in data.fits.values() if not tf.ok]
    for tf in unfitted:
        out.append(Block("note", f"No {tf.target} surrogate: {tf.error}"))

    if not data.empty:
        out.append(Block("h2", "FLOP split of every run"))
        out += _figs(figs, "split")

    fitted = [tf for tf in data.fits.values() if tf.ok]
    if fitted:
        out.append(Block("h2", "Surrogate diagnostics"))
        out += _figs(figs, "diagnostics")
        rows = []
        for tf in fitted:
            loo = tf.loo
            rows.append([tf.target, str(tf.n_obs), str(loo.n) if loo else "-",
                         _fmt_coverage(loo.coverage90) if loo else "-", f"{loo.rmse:.3g}" if loo else "-",
                         f"{loo.loglik:.2f}" if loo else (tf.loo_error or "-"), f"{tf.fit_seconds:.1f} s"])
        out.append(Block("table", headers=["target", "runs", "LOO points", "90% coverage", "RMSE",
                                           "log lik / point", "fit time"], rows=rows))
        out += _noise_blocks(fitted)

    if data.failed:
        out.append(Block("h2", "Failed runs"))
        done = {r.run_id for r in data.ok}  # every failed attempt is listed; these runs are fitted as ok
        out.append(Block("table", headers=["run", "model", "reward", "rho", "budget", "attempt", "error"],
                         rows=[[r.run_id, r.model, r.reward, f"{r.rho_planned:.2f}", f"{r.budget:.4g}",
                                f"{r.attempt}" + (" (run later ok)" if r.run_id in done else ""),
                                r.error or "(no message)"] for r in data.failed]))
    if data.corrupt:
        out.append(Block("h2", "Unreadable record files"))
        out.append(Block("table", headers=["file", "reason"], rows=[list(c) for c in data.corrupt]))

    if data.records:
        out.append(Block("h2", "Compute cards"))
        out.append(Block("p", "One card per record: total metered FLOPs, the search / learning / reward "
                              "split as shares of it, rho, tokens and wall time by phase, hardware and "
                              "software. `runners card RUN_ID --data DIR` prints one in full."))
        cards = card_rows(data.records)
        out.append(Block("table", headers=list(CARD_COLUMNS),
                         rows=[[c[k] for k in CARD_COLUMNS] for c in cards],
                         flags=[not c["status"].startswith("ok") for c in cards]))
    return out


def _loo(f: Any) -> dict[str, Any] | None:
    if f.loo is None:
        return None
    return {"n": f.loo.n, "coverage90": f.loo.coverage90, "rmse": f.loo.rmse, "loglik": f.loo.loglik}


_NOISE_FROM = {
    "other replicates": "other reward systems' seed replicates",
    "stated": "stated to the race (--noise-sd)",
    "other stated": "other reward systems' stated noise",
    "inferred": "the fit's guess (sd*)",
    "identical replicates": "the fit's guess: its seed replicates all agreed (sd*)",
}


# Held-out runs the fit's guessed noise should have covered: below this share of the 90%
# intervals, with an error this many guessed sds, the guess is called too small. Loose on
# purpose: 17 of 20 (0.85) is a 90% rate's ordinary luck.
TOO_SURE_COVERAGE = 0.85
TOO_SURE_RATIO = 2.0


def _too_sure(fit: Any) -> str | None:
    """A warning where the evidence says the fit's guessed run noise (sd*) is too small:
    its leave-one-out error is several guessed sds and its 90% intervals missed too many
    held-out runs. The sd* note says it *can* be; this says the store shows it is (a
    reviewer found a P = 1.00 call resting on sd* 0.0047 beside a LOO RMSE of 0.019)."""
    loo = fit.loo
    sds = [float(sd) for f in fit.frontiers.values() if f.call.noise_guessed
           and (sd := f.call.extra.get("noise_sd")) is not None and np.isfinite(sd) and sd > 0]
    if loo is None or not sds or not (np.isfinite(loo.rmse) and np.isfinite(loo.coverage90)):
        return None
    sd = float(np.median(sds))
    if loo.rmse < TOO_SURE_RATIO * sd or loo.coverage90 >= TOO_SURE_COVERAGE:
        return None
    return (f"The fit's guessed run noise (sd* {sd:.2g}) is {loo.rmse / sd:.1f}x smaller than its leave-one-out error "
            f"(RMSE {loo.rmse:.2g}), and {_fmt_coverage(loo.coverage90)} of the held-out runs fell inside their 90% "
            "intervals: the runs vary more than the fit allows for, so its P and stakes are likely too sure. Seed "
            "replicates (--seeds 2) would measure the noise; --noise-sd states a known one.")


def _noise_blocks(fitted: Sequence[Any]) -> list[Block]:
    """One run's noise per target and reward system, where it came from, and the
    ``--noise-sd`` a later race can state where seed replicates measured it."""
    rows = [[tf.target, reward, f"{n.sd:.3g}",
             f"seed replicates ({n.dof} dof)" if n.source == "replicates" else _NOISE_FROM.get(n.source, n.source)]
            for tf in fitted for reward, n in tf.noise.items()]
    if not rows:
        return []
    out = [Block("p", "One run's noise, the sd of the target between seeds of one plan, as each fit used it "
                      "(the stakes' unit, and what P weighs the runs' differences against)."),
           Block("table", headers=["target", "reward", "one run's noise sd", "from"], rows=rows)]
    options = []
    for tf in fitted:
        # Below MIN_REPLICATE_DOF a reward system's value is mostly the others' pool: not its own measurement.
        measured = {r: n.sd for r, n in tf.noise.items() if n.source == "replicates" and n.dof >= MIN_REPLICATE_DOF}
        if measured:
            # --rewards too: a race's --noise-sd names each of its reward systems and no other.
            options.append(f"--target {tf.target} --rewards {','.join(measured)} --noise-sd "
                           + ",".join(f"{r}={sd:.3g}" for r, sd in measured.items()))
    if options:
        out.append(Block("note", f"Measured by seed replicates (at least {MIN_REPLICATE_DOF} degrees of freedom "
                                 "each), so a later race of these reward systems can state them instead of "
                                 "replicating again: " + "; ".join(options)))
    return out


def regimes_json(data: ReportData) -> dict[str, Any]:
    """Machine-readable regime calls (``regimes.json`` next to the report)."""
    sims = {r.simulated for r in data.records}
    fit = data.primary
    return {
        "schema_version": SCHEMA_VERSION,
        "generated_by": "planner report",
        "status": status_of(data),
        "message": status_line(data),
        # Absolute: this file outlives the directory `planner report` ran in, and a reader
        # elsewhere (the refusal of this folder given as a store names it) must find the store.
        "data": str(data.data_dir.resolve()),
        "engine": data.engine_text,
        # {library: {version: runs}}: what the runs were made with, from their compute cards.
        "software": data.software,
        # What this report's refits ran on (the race's own are in race.fitted_with).
        "fitted_with": fitting_versions(),
        "simulated": None if not sims else (sims == {True} if len(sims) == 1 else "mixed"),
        "target": data.target,
        # failed: runs with no ok attempt (the status line's "failed runs"); every failed
        # attempt, retried ones included, is failed_attempts.
        "runs": {"ok": len(data.ok), "failed": len({r.run_id for r in data.failed} - {r.run_id for r in data.ok}),
                 "failed_attempts": len(data.failed), "corrupt": len(data.corrupt)},
        "settings": [f.to_dict() for f in fit.frontiers.values()] if fit else [],
        "by_target": {
            t: {
                "fitted": f.ok,
                "error": f.error,
                "n_obs": f.n_obs,
                "loo": _loo(f),
                "noise": {r: n.to_dict() for r, n in f.noise.items()},
                "settings": [fr.to_dict() for fr in f.frontiers.values()],
            }
            for t, f in data.fits.items()
        },
        "disagreements": [
            {
                "model": d.setting.model,
                "reward": d.setting.reward,
                "budget": d.setting.budget,
                "rho_star": {t: c.rho_star for t, c in d.calls.items()},
                "rho_star_ci": {t: list(c.rho_star_ci) for t, c in d.calls.items()},
                "optimum_ci": {t: list(c.optimum_ci or c.rho_star_ci) for t, c in d.calls.items()},
                "regime": {t: c.regime for t, c in d.calls.items()},
                "flagged": [list(p) for p in d.flagged],
            }
            for d in disagreements(data)
        ],
        "race": data.race,
        "notes": data.notes,
        "mixed_weights": data.mixed,
        "failed_runs": [{"run_id": r.run_id, "attempt": r.attempt, "error": r.error} for r in data.failed],
    }
