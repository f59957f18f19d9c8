"""Examples of using prunex as a library (examples/README.md)."""
