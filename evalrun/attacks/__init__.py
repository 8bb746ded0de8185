"""evalrun package."""
