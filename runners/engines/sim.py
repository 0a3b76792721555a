"""The ``sim`` engine: a proposal in, a simulated ``RunRecord`` out, in microseconds.

The proposal's compiled plan (the same compiler and accountant the ``trl`` engine runs)
fixes the levers; ``runners.sim.dynamics`` turns them into target metrics; the world file
(``configs/worlds/*.toml``) holds every constant. In the sim the metered FLOPs equal the
planned split exactly (no completion-length variation is simulated), so ``card.flops`` is
``plan.flops``. Every record says ``simulated: true`` and names the world file and hash.
"""

from __future__ import annotations

import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from planner.engine import ProgressFn
from planner.errors import ConfigError
from planner.schema import TARGETS, ComputeCard, Metrics, Proposal, RunPlan, RunRecord
from planner.versions import tool_version
from runners.sim.dynamics import base_metrics, learn
from runners.sim.simulate import add_noise, seed_entropy
from runners.sim.world import World, load_world

__all__ = ["SimEngine", "tokens_of_plan"]

# Options other engines take that mean nothing in a simulation (``runners execute --device``).
_IGNORED_OPTIONS = frozenset({"device"})


def tokens_of_plan(plan: RunPlan) -> dict[str, int]:
    """Tokens by phase that the plan implies (every completion at its expected length).

    prompt_generated = N G P (each completion prefills its prompt), completion_generated =
    N G C, trained = N K mu (P + C), logprob_forward = N K (P + C) ([old log-probs, mu > 1]
    + [reference, beta > 0]), reward_scored = N G (P + C) when a reward model scores: the
    keys of a metered card (``runners.meter.TOKEN_KEYS``).
    """
    n, g, k = plan.total_prompts, plan.completions_per_prompt, plan.completions_kept
    seq = plan.prompt_len + plan.completion_len
    return {
        "prompt_generated": n * g * plan.prompt_len,
        "completion_generated": n * g * plan.completion_len,
        "trained": n * k * plan.num_iterations * seq,
        "logprob_forward": n * k * seq * (int(plan.old_logprobs) + int(plan.beta > 0)),
        "reward_scored": n * g * seq if plan.flops.reward > 0 else 0,
    }


class SimEngine:
    """Simulated GRPO/LoRA runs in the world ``world`` (a path or a name in
    ``configs/worlds``; default ``paper``). ``truth=True`` returns noise-free metrics."""

    name = "sim"
    simulated = True

    def __init__(self, world: str | Path | World | None = None, truth: bool = False,
                 **opts: Any) -> None:
        unknown = sorted(set(opts) - _IGNORED_OPTIONS)
        if unknown:
            raise ConfigError(
                f"engine sim: unknown option {unknown[0]!r}; the sim takes world=FILE and truth=true"
            )
        if world is not None and not isinstance(world, str | Path | World):
            raise ConfigError(f"engine sim: option 'world' must be a world file or name, got {world!r}")
        if not isinstance(truth, bool):
            raise ConfigError(f"engine sim: option 'truth' must be true or false, got {truth!r}")
        self.world = load_world(world)
        self.truth = truth
        # Keys of the records' provenance that must agree within one store (planner.engine).
        self.source = {"world": self.world.name, "world_sha256": self.world.sha256, "truth": truth}

    def prepare(self, settings: Any) -> None:
        """Before any run: every (model, reward) of ``settings`` must be in this world
        (a typo in a world file would otherwise fail every run, one by one)."""
        for model, reward in settings:
            self.world.reward(reward)
            self.world.capacity(model, "native")

    def tied_settings(self, settings: Any, budget: float, target: str = "native") -> list[tuple[str, str]]:
        """The (model, reward) of ``settings`` whose noise-free frontier at ``budget`` has
        its top in more than one regime (``runners truth``'s tie): the budget saturates the
        world there, so a regime call is a tie-break, not an answer. The race says so
        before it runs (a user raced the docs' 1e18 example, where every setting ties, and
        read firm calls). A setting the budget buys no run of is not tied."""
        from planner.errors import InfeasibleError
        from runners.sim.truth import frontier

        out = []
        for model, reward in settings:
            try:
                if len(frontier(self.world, model, reward, budget, target).tied_regimes) > 1:
                    out.append((model, reward))
            except InfeasibleError:
                continue
        return out

    def _rng(self, plan: RunPlan, seed: int) -> np.random.Generator:
        # Noise is a pure function of (world, what was run, seed): re-running a proposal with
        # the same seed reproduces it, whatever its id; distinct settings draw independently,
        # and so do worlds (noisy.toml is paper.toml with 4x the noise sd: without its name in
        # the key a noisy run drew its paper twin's standard-normal draw, and pooled benchmark
        # standard errors counted the two worlds as independent evidence).
        key = (f"{self.world.name}|{plan.model}|{plan.reward}|{plan.total_prompts}|{plan.completions_per_prompt}"
               f"|{plan.completions_kept}|{plan.num_iterations}")
        return np.random.default_rng(seed_entropy(seed, zlib.crc32(key.encode())))

    def metrics(self, plan: RunPlan, seed: int) -> Metrics:
        """Target metrics of the plan after training (noise-free when ``truth``)."""
        vals = learn(self.world, plan.model, plan.reward, np.array([plan.total_prompts]),
                     np.array([plan.completions_per_prompt]), np.array([plan.completions_kept]),
                     np.array([plan.num_iterations]))
        rng = self._rng(plan, seed)
        out: dict[str, float] = {}
        for t in TARGETS:
            v = vals[t] if self.truth else add_noise(self.world, t, vals[t], rng)
            out[t] = float(v[0])
        base = base_metrics(self.world, plan.model, plan.reward)
        return Metrics(**out, **{f"{t}_base": base[t] for t in TARGETS})

    def run(self, proposal: Proposal, seed: int, progress: ProgressFn | None = None) -> RunRecord:
        t0 = time.perf_counter()
        plan = proposal.plan
        metrics = self.metrics(plan, seed)
        flops = plan.flops
        if progress is not None:
            for phase, done in (("search", flops.search), ("reward", flops.search + flops.reward),
                                ("learning", flops.total)):
                progress(phase, done, plan.budget, {"simulated": True})
        wall = time.perf_counter() - t0
        card = ComputeCard(
            flops=flops,
            rho=flops.rho,
            tokens=tokens_of_plan(plan),
            wall_s={"total": wall},
            hardware="simulated",
            software={"engine": "sim", "race-planner": tool_version(), "world": self.world.name},
        )
        return RunRecord.ok(
            proposal,
            seed,
            engine=self.name,
            simulated=True,
            card=card,
            metrics=metrics,
            wall_s=wall,
            provenance={
                "simulated": True,
                "engine": "sim",
                "truth": self.truth,
                "target": proposal.target,
                **self.world.provenance(),
            },
        )
