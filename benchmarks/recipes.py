"""What the budget compiler buys at each rho: the recipe figures quoted in docs/planner.md.

1. Pilots (1e15) that keep the update passes (mu) of the target plan (1e16) at the same
   rho, over 25 rho values per Qwen setting: the bare compiler vs
   :func:`planner.compiler.compile_pilot` (through ``compile_feasible``, as the planner
   calls it).
2. Per shipped world and setting at 1e16: the recipe of the true optimum (prompts N,
   completions generated G and kept K, passes mu), whether it is an odd one (mu >= 3 or
   G >= 4K), and the largest jump of the noise-free frontier between neighbouring rho.
3. The example docs/planner.md ("Limits") quotes: contrast 3b prm's optimum and the
   nearest lower rho.

    python benchmarks/recipes.py
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MODELS = ("qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b")
REWARDS = ("sparse", "prm")
PILOT, TARGET = 1e15, 1e16


def pilot_matches() -> list[tuple[str, str, int, int]]:
    """(model, reward, plain matches, pilot matches) of the target plan's mu, of 25."""
    from planner.compiler import achievable_rho_range, compile_plan
    from planner.design import compile_feasible
    from planner.frontier import Setting

    out = []
    for m in MODELS:
        for r in REWARDS:
            lo, hi = achievable_rho_range(m, r)
            plain = matched = 0
            for rho in np.linspace(lo + 0.02, hi - 0.02, 25):
                mu = compile_plan(m, r, float(rho), TARGET).num_iterations
                p0, _ = compile_feasible(Setting(m, r), float(rho), PILOT)
                p1, _ = compile_feasible(Setting(m, r), float(rho), PILOT, target_budget=TARGET)
                plain += p0 is not None and p0.num_iterations == mu
                matched += p1 is not None and p1.num_iterations == mu
            out.append((m, r, plain, matched))
    return out


def optima() -> list[dict]:
    """Per world and setting: the optimum's recipe and the frontier's largest jump."""
    from runners.sim import list_worlds
    from runners.sim.levers import lever_table, levers_at
    from runners.sim.truth import frontier

    rows = []
    for world in sorted(p.stem for p in list_worlds()):
        for m in MODELS:
            for r in REWARDS:
                f = frontier(world, m, r, TARGET, "native")
                g = lever_table(m, r).grid
                lv = levers_at(m, r, g, np.full(g.shape, TARGET))
                i = int(np.argmin(np.abs(lv.rho - f.rho_star)))
                n, gen, kept, mu = (int(x[i]) for x in (lv.prompts, lv.generated, lv.kept, lv.iterations))
                rows.append({"world": world, "model": m, "reward": r, "rho_star": f.rho_star,
                             "N": n, "G": gen, "K": kept, "mu": mu, "odd": mu >= 3 or gen >= 4 * kept,
                             "jump": float(np.max(np.abs(np.diff(f.value))))})
    return rows


def example(world: str = "contrast", model: str = "qwen2.5-3b", reward: str = "prm") -> list[str]:
    """The optimum of one setting and the nearest lower rho, with their recipes."""
    from runners.sim.levers import lever_table, levers_at
    from runners.sim.truth import frontier

    f = frontier(world, model, reward, TARGET, "native")
    g = lever_table(model, reward).grid
    lv = levers_at(model, reward, g, np.full(g.shape, TARGET))
    lines = []
    for j in (f.star, f.star - 1):
        i = int(np.argmin(np.abs(lv.rho - f.rho[j])))
        lines.append(f"rho {f.rho[j]:.3f}: native {f.value[j]:.4f} with G {int(lv.generated[i])}, K "
                     f"{int(lv.kept[i])}, mu {int(lv.iterations[i])}, {int(lv.prompts[i])} prompts")
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    # No options: the parser exists so that --help prints what this does instead of running it.
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    from rich.console import Console
    from rich.table import Table

    c = Console(width=140)
    t = Table(title="pilots (1e15) with the target plan's mu (1e16), of 25 rho values")
    for col in ("model", "reward", "bare compiler", "compile_pilot"):
        t.add_column(col)
    for m, r, a, b in pilot_matches():
        t.add_row(m, r, str(a), str(b))
    c.print(t)
    rows = optima()
    t = Table(title="true optimum at 1e16 (native): its recipe and the frontier's largest neighbour jump")
    for col in ("world", "model", "reward", "rho*", "N", "G", "K", "mu", "odd", "max jump"):
        t.add_column(col)
    for x in rows:
        t.add_row(x["world"], x["model"], x["reward"], f"{x['rho_star']:.3f}", str(x["N"]), str(x["G"]),
                  str(x["K"]), str(x["mu"]), "yes" if x["odd"] else "", f"{x['jump']:.4f}")
    c.print(t)
    jumps = [x["jump"] for x in rows]
    c.print(f"odd optima (mu >= 3 or G >= 4K): {sum(x['odd'] for x in rows)} of {len(rows)}; largest "
            f"neighbour jump per setting {min(jumps):.4f} - {max(jumps):.4f}")
    for line in example():
        c.print("contrast qwen2.5-3b prm " + line)


if __name__ == "__main__":
    main()
