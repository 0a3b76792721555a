"""runners truth commands."""
