"""planner race commands."""
