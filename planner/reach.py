"""Which plan the compiler picks for each requested rho: a step function, exactly.

:func:`~planner.compiler.compile_plan` ranks its lever candidates (rho_c, G, K, mu) for a
request ``r`` by the 0.01-wide bin of ``|rho_c - r|`` (``rint(err / 0.01)``), then in
its simplest-first order, among candidates within ``rho_tolerance``; at an unlimited
budget the first one wins. So the winner only changes where some candidate's bin or
tolerance status changes: at ``rho_c +- 0.005 (2k + 1)`` and ``rho_c +- tolerance``.
Between two such edges the whole ranking is constant (at any budget, since the budget
only decides how far down the ranking the compiler goes), and :func:`request_map`
tabulates it once per (model, reward).

Why it matters: the bins are relative to the request, so which of several close plans a
request gets depends on where it falls, and a grid of requests (0.005 apart, half a bin)
misses plans that other requests reach: 145 of paper 1.5b prm's 270
(``tests/planner/test_reach.py``). The simulator's truth must range over every
plan a strategy can buy, not over those a grid happens to reach.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from planner.compiler import (
    BUDGET_TOLERANCE,
    CompileOptions,
    _candidates,
    _lever_arrays,
    per_completion,
)
from planner.registry import get_model, get_reward

__all__ = ["RequestMap", "request_map"]

BIN = 0.01  # the compiler's rho bin width (``np.rint(err / 0.01)`` in compile_plan)


@dataclass(frozen=True)
class RequestMap:
    """The compiler's lever choice over requested rho, at an unlimited budget or at the one
    :func:`request_map` was given.

    ``edges`` ``(m + 1,)``: sorted; interval ``j`` is the open range ``(edges[j],
    edges[j + 1])``, in which every request gets the same ranking of candidates.
    ``winner`` ``(m,)``: the index (into the compiler's candidate order) of the first-ranked
    candidate there, -1 where no candidate lies within the tolerance (or, at a budget, none
    of them lands it).
    ``rho`` ``(n,)``: every candidate's rho. A request exactly on an edge (measure zero)
    may rank as either neighbour.
    """

    edges: np.ndarray
    winner: np.ndarray
    rho: np.ndarray

    @property
    def midpoints(self) -> np.ndarray:
        """``(m,)``: one request inside each interval, which gets that interval's ranking."""
        return (self.edges[1:] + self.edges[:-1]) / 2

    def interval(self, rho: np.ndarray) -> np.ndarray:
        """``(...)`` -> ``(...)``: the interval of each request (-1 outside every interval)."""
        j = np.searchsorted(self.edges, np.asarray(rho, float), side="right") - 1
        return np.where((j >= 0) & (j < len(self.winner)), j, -1)

    def representatives(self) -> np.ndarray:
        """One request per distinct plan the compiler can pick (sorted by request): the
        midpoint of the widest interval each winner holds, so float rounding of the request
        (:data:`~planner.compiler.RHO_DIGITS`) stays inside it."""
        ok = self.winner >= 0
        width = np.diff(self.edges)[ok]
        j = np.flatnonzero(ok)
        # Widest first, then the first interval of each winner (np.unique keeps the first).
        order = np.lexsort((j, -width))
        _, first = np.unique(self.winner[j[order]], return_index=True)
        return np.sort(self.midpoints[j[order][first]])


@cache
def request_map(model: str, reward: str, opts: CompileOptions | None = None,
                budget: float | None = None) -> RequestMap:
    """Tabulate :func:`~planner.compiler.compile_plan`'s choice for (model, reward): at an
    unlimited budget (``budget=None``) the first-ranked candidate; at ``budget`` the
    first-ranked one whose prompt count lands the budget within 2% (the compiler walks
    down its ranking to it; -1 where none does: the request is infeasible there).

    Vectorised: within radius ``d`` of a request, the candidates sorted by rho are one
    contiguous run, so the first-ranked candidate of a bin is a range minimum of the
    candidates' order, taken over the nearest non-empty bin (O(n log n), milliseconds).
    """
    arch, rs = get_model(model), get_reward(reward)
    o = (opts or CompileOptions()).resolve(arch)
    unit = per_completion(arch, rs, o)
    rhos, _ = _lever_arrays(unit, o)
    keep = np.ones(rhos.shape, dtype=bool)
    if budget is not None:
        total = np.array([c[4].total for c in _candidates(unit, o)])
        prompts = np.maximum(1.0, np.rint(budget / total))
        keep = np.abs(prompts * total - budget) <= BUDGET_TOLERANCE * budget
    tol = float(o.rho_tolerance)
    radii = [BIN * (k + 0.5) for k in range(int(tol / BIN) + 1) if BIN * (k + 0.5) < tol]
    offsets = np.array([*radii, tol])
    edges = np.unique(np.concatenate([rhos, (rhos[:, None] + offsets).ravel(), (rhos[:, None] - offsets).ravel()]))
    edges = edges[(edges > 0) & (edges < 1)]
    edges = np.unique(np.concatenate([[0.0], edges, [1.0]]))  # requests live in (0, 1)
    mids = (edges[1:] + edges[:-1]) / 2
    by_rho = np.argsort(rhos, kind="stable")
    sorted_rho = rhos[by_rho]
    # Candidates that cannot land the budget rank last of all (a sentinel order).
    never = len(rhos)
    table = _SparseMin(np.where(keep[by_rho], by_rho, never))
    winner = np.full(mids.shape, -1, dtype=np.int64)
    open_ = np.ones(mids.shape, dtype=bool)
    for r in offsets:
        # The disk of bins 0..k (radius r; no midpoint sits on an edge, so open or closed
        # does not matter). Where still open, no smaller disk held a candidate that lands
        # the budget, so the disk's first-ranked one is bin k's: the compiler's pick.
        lo = np.searchsorted(sorted_rho, mids - r, side="left")
        hi = np.searchsorted(sorted_rho, mids + r, side="right")
        ask = np.flatnonzero(open_ & (hi > lo))
        best = table.query(lo[ask], hi[ask])
        hit = ask[best < never]
        winner[hit] = best[best < never]
        open_[hit] = False
    return RequestMap(edges=edges, winner=winner, rho=rhos)


class _SparseMin:
    """Range-minimum queries over a fixed integer array (a sparse table)."""

    def __init__(self, values: np.ndarray) -> None:
        self.levels = [np.asarray(values, dtype=np.int64)]
        span = 1
        while 2 * span <= len(values):
            prev = self.levels[-1]
            self.levels.append(np.minimum(prev[:-span], prev[span:]))
            span *= 2

    def query(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Minimum of ``values[lo:hi]`` for each pair (``hi > lo``)."""
        n = hi - lo
        k = np.floor(np.log2(n)).astype(np.int64)
        out = np.empty(len(lo), dtype=np.int64)
        for level in np.unique(k):
            m = k == level
            v = self.levels[int(level)]
            out[m] = np.minimum(v[lo[m]], v[hi[m] - (1 << int(level))])
        return out
