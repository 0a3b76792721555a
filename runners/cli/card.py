"""runners card commands."""
