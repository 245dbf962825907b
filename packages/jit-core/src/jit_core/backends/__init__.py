"""Backends embedded in jit-core (registered through the same hooks as plugins)."""
