"""Layer 7: export (ahead-of-time tracing with rigid symbols, Dim constraints,
suggested fixes, save/load). Not built yet: this package is empty until that
work lands; nothing imports it."""
