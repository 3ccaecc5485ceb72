"""controller package."""
