"""Registers every ``planner`` sub-command (one module per concept)."""

from planner.cli import accounting, audit, race, report  # noqa: F401
