"""contracts package."""
