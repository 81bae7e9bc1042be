"""The engine's C source and the table of its functions (no Python API)."""
