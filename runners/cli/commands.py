"""Registers every ``runners`` sub-command (one module per concept)."""

from runners.cli import calibrate, card, execute, pretrain, truth  # noqa: F401
