"""planner audit commands."""
