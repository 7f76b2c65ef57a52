"""The neon frontend: standard axes and roles (layers arrive with autodiff)."""
from .axis import ar, ax

__all__ = ["ar", "ax"]
