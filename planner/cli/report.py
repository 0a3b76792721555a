"""planner report commands."""
