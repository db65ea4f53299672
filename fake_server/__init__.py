"""fake_server package."""
