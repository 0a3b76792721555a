"""Registers every ``planner`` sub-command (one module per concept), in the order ``planner
--help`` lists them: the accounting, then the loop's steps as a user takes them."""

# isort: off
from planner.cli import accounting, audit, bench, suggest, race, report  # noqa: F401
# isort: on
