"""The trio client under test: transport, session, turns, cancellation, usage, client trace."""
