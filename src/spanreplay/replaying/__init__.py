"""Replay: the engine that serves recorded steps, the replaying and forking runs, overrides, breakpoints, checks."""
