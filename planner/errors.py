"""Errors users see. Each message is one line: the field, what is wrong, and the fix."""

from __future__ import annotations

__all__ = ["ConfigError", "InfeasibleError", "RaceError"]


class RaceError(ValueError):
    """Base class: a user-facing error whose ``str`` is a one-line message naming the field."""


class ConfigError(RaceError):
    """A config, proposal, world or record file (or a CLI value) is invalid."""


class InfeasibleError(RaceError):
    """A (rho, budget) request cannot be met; the message names the nearest feasible value.

    ``nearest`` is a value that compiles: a rho the levers reach, or the exact cost of the
    nearest plan (budgets within the compiler's 2% of it compile too, so the edge of what
    compiles lies up to 2% nearer the request).
    """

    def __init__(self, message: str, *, field: str, nearest: float | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.nearest = nearest
