"""The vectorised simulator: many (rho, budget) runs of one setting in one numpy call.

``simulate`` is what benchmarks and the truth mode use; the ``sim`` engine runs the same
mechanism on one compiled plan. A rho in (0, 1) gets the plan ``compile_plan`` would
compile for it (``runners.sim.levers``), so both give the same noise-free value.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np

from planner.errors import ConfigError
from planner.schema import TARGETS
from runners.sim.dynamics import learn
from runners.sim.levers import levers_at
from runners.sim.world import World, load_world

__all__ = ["add_noise", "check_target", "seed_entropy", "simulate", "simulate_all"]


def check_target(target: str) -> None:
    """A one-line :class:`~planner.errors.ConfigError` unless ``target`` is one of
    :data:`~planner.schema.TARGETS`."""
    if target not in TARGETS:
        raise ConfigError(f"target: unknown target {target!r}; use one of: {', '.join(TARGETS)}")


def simulate_all(
    world: World | str | Path | None,
    model: str,
    reward: str,
    rho: np.ndarray | float,
    budget: np.ndarray | float,
) -> dict[str, np.ndarray]:
    """Noise-free metrics of every target, shaped like ``broadcast(rho, budget)``.

    NaN where the budget buys less than one prompt group at that rho.
    """
    w = load_world(world)
    b = np.asarray(budget, dtype=float)
    if not np.all(np.isfinite(b) & (b > 0)):
        raise ConfigError(f"budget: FLOP budgets must be positive and finite, got {b[~(np.isfinite(b) & (b > 0))].ravel()[:3].tolist()}")
    try:
        shape = np.broadcast_shapes(np.shape(rho), np.shape(budget))
    except ValueError:
        raise ConfigError(f"budget: one budget, or an array that broadcasts with rho's shape {np.shape(rho)}; "
                          f"got shape {np.shape(budget)}") from None
    lv = levers_at(model, reward, rho, budget)
    ok = np.isfinite(lv.prompts)
    out = {t: np.full(lv.prompts.shape, np.nan) for t in TARGETS}
    if ok.any():
        vals = learn(w, model, reward, lv.prompts[ok], lv.generated[ok], lv.kept[ok],
                     lv.iterations[ok])
        for t in TARGETS:
            out[t][ok] = vals[t]
    return {t: v.reshape(shape) for t, v in out.items()}


def add_noise(world: World, target: str, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Seeded observation noise: ``clip(value + N(0, noise[target]**2), 0, 1)``.

    One draw per run (seed replicates of a real run differ by about this much); clipped
    because every target is a rate in [0, 1].
    """
    noisy = values + rng.normal(0.0, world.noise[target], size=np.shape(values))
    # asarray: arithmetic on a 0-d array gives a numpy scalar, not the array promised.
    return np.asarray(np.clip(noisy, 0.0, 1.0))


def simulate(
    world: World | str | Path | None,
    model: str,
    reward: str,
    rho: np.ndarray | float,
    budget: np.ndarray | float,
    target: str = "native",
    seed: int | None = None,
) -> np.ndarray:
    """Simulated ``target`` metric of runs at each (rho, budget) (broadcast together).

    ``seed=None`` is the noise-free truth; an integer seed adds the world's noise,
    reproducibly, independently across worlds, settings, targets and budgets (the whole
    budget array is part of the key: the same call draws the same noise). Each rho runs
    the plan ``compile_plan`` picks for it; rho outside (0, 1) or out of the compiler's
    reach raises :class:`~planner.errors.InfeasibleError`.
    """
    check_target(target)
    w = load_world(world)
    values = simulate_all(w, model, reward, rho, budget)[target]
    if seed is None:
        return values
    # The world, setting, target and budgets join the seed, as in the engine: one seed must
    # not give every world, target, setting or budget the same standardised draw (a pilot
    # and a target-budget call with one seed would share their noise, exactly correlated).
    budgets = np.ascontiguousarray(np.broadcast_to(np.asarray(budget, dtype=float), np.shape(values)))
    key = zlib.crc32(budgets.tobytes(), zlib.crc32(f"{w.name}|{model}|{reward}|{target}".encode()))
    return add_noise(w, target, values, np.random.default_rng(seed_entropy(seed, key)))


def seed_entropy(seed: int, key: int) -> list[int]:
    """The entropy words of a run's generator: ``[seed, key]`` for a seed in [0, 2**32) (the
    draws of every stored run), more words beyond it. Masking a seed to 32 bits made seeds
    0, 2**32 and 2**64 (and -1 and 2**32 - 1) draw the same noise."""
    s = int(seed)
    if 0 <= s < 2**32:
        return [s, key]
    words = [abs(s) & 0xFFFFFFFF, key]
    rest = abs(s) >> 32
    while rest:
        words.append(rest & 0xFFFFFFFF)
        rest >>= 32
    return [*words, 1 if s < 0 else 2]  # a last word no in-range seed's list has
