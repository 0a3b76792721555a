"""Shared fixtures of the report tests: a small sim campaign and its report, built once.

Not a test module by content (it holds no tests); named ``test_report_*`` so it lives with
the tests it serves. The report is cached per process because the surrogate fits behind
it take seconds and several test modules (report, CLI, browser) read the same output.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

MODELS = ("qwen2.5-1.5b", "qwen2.5-7b")
REWARDS = ("sparse", "prm")
BUDGET = 1e16
SEEDS = (0, 1)
N_RHO = 4
# Failed runs carry a web address in their error: the HTML must show it without linking it.
FAILED_ERROR = "CUDA out of memory; see https://pytorch.org/docs/notes for [details]"


def make_campaign(root: Path, *, models=MODELS, rewards=REWARDS, n_rho: int = N_RHO, seeds=SEEDS,
                  budget: float = BUDGET, n_failed: int = 2, only_failed: bool = False) -> Path:
    """Run a small grid of proposals with the sim engine into the pilot store at ``root``."""
    from planner.compiler import achievable_rho_range, compile_plan
    from planner.engine import load_engine, open_store
    from planner.proposals import make_proposal
    from planner.schema import run_id_for

    engine = load_engine("sim")
    store = open_store(root)
    failed = 0
    for m in models:
        for r in rewards:
            lo, hi = achievable_rho_range(m, r)
            lo, hi = lo + 0.03, min(hi, 0.95) - 0.03
            for i in range(n_rho):
                rho = lo + (hi - lo) * i / max(1, n_rho - 1)
                prop = make_proposal(compile_plan(m, r, rho, budget))
                for s in seeds:
                    rec = engine.run(prop, s)
                    if only_failed or (failed < n_failed and i == 1 and s == 0):
                        failed += 1
                        # Beside the ok runs, a failed run of its own: another seed of the
                        # same proposal (a record's run id is always proposal-s<seed>).
                        seed = s if only_failed else 1000 + s
                        rec = rec.model_copy(update={"status": "failed", "error": FAILED_ERROR, "seed": seed,
                                                     "run_id": run_id_for(prop.id, seed)})
                    store.write(rec)
    return root


TARGET_BUDGET = 1e17


def write_race_summary(data: Path, *, budget: float = TARGET_BUDGET, pilot: float = BUDGET) -> dict:
    """A ``regimes.json`` shaped like ``planner race``'s (planner.loop.regimes_document):
    the race decided at ``budget`` from pilots at ``pilot``; one setting left unconfident."""
    import json

    settings = []
    for i, (m, r) in enumerate((m, r) for m in MODELS for r in REWARDS):
        p = 0.95 if i else 0.6
        settings.append({"model": m, "reward": r, "target": "native", "budget": budget, "rho_star": 0.5,
                         "rho_star_ci": [0.4, 0.6], "regime": "update-heavy",
                         "probabilities": {"search-heavy": 1 - p, "update-heavy": p, "reward-heavy": 0.0},
                         "confident": p >= 0.9, "runs": 8, "flops_spent": 8 * pilot,
                         "engine": "sim", "simulated": True})
    doc = {"schema_version": 1, "strategy": "ours", "engine": "sim", "simulated": True, "world": "paper",
           "target": "native", "budget": budget, "pilot_budget": pilot, "confidence": 0.9,
           "stop_reason": "max-runs", "rounds": 3, "runs": 32, "flops_spent": 32 * pilot,
           "settings": settings}
    (data / "regimes.json").write_text(json.dumps(doc))
    return doc


@dataclass(frozen=True)
class Built:
    data: Path
    out: Path
    result: object  # planner.report.ReportResult


@functools.cache
def built_report() -> Built:
    """The sim campaign and its report (built once per test process)."""
    from planner.report import build_report

    root = Path(tempfile.mkdtemp(prefix="race-report-test-"))
    # Removed when the test process ends; RACE_SCREENSHOT_DIR keeps the browser screenshots.
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    data = make_campaign(root / "data")
    write_race_summary(data)
    out = root / "report"
    return Built(data, out, build_report(data, out, target="native"))
