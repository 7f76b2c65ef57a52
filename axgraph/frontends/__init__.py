"""Frontends that build axes graphs: neon layers (more to come)."""
