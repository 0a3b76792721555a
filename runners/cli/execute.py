"""runners execute commands."""
