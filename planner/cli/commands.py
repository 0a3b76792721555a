"""Registers every ``planner`` sub-command (one module per concept)."""

from planner.cli import accounting, audit, bench, race, report  # noqa: F401
