"""What `torch.compile` with the axgraph backend does with a model: which ops fell back
to PyTorch, and where in the user's code they come from."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Tuple

import torch

from .backend import AxgraphBackend
from .partition import Fallback


@dataclass(frozen=True)
class Explanation:
    """The outcome of compiling a model once.

    Attributes
    ----------
    fallbacks : tuple of Fallback
        Each ATen op PyTorch ran instead of axgraph, with its reason and source line.
    graphs : int
        How many graphs and partitions axgraph compiled.
    """

    fallbacks: Tuple[Fallback, ...]
    graphs: int

    @property
    def ops(self) -> Tuple[str, ...]:
        """The distinct ops that fell back, in order of first appearance."""
        return tuple(dict.fromkeys(f.op for f in self.fallbacks))

    def __str__(self) -> str:
        if not self.fallbacks:
            return f"every op ran on axgraph ({self.graphs} graphs compiled)"
        lines = [f"{len(self.fallbacks)} ops ran in PyTorch ({self.graphs} graphs compiled "
                 f"on axgraph):"]
        lines += [f"  {f}" for f in self.fallbacks]
        return "\n".join(lines)


def explain(model: Any, *inputs: Any, **options: Any) -> Explanation:
    """Compile `model` with the axgraph backend, run it on `inputs`, report the fallbacks.

    When the outputs need gradients, the backward graph is compiled and run too (by
    ``torch.autograd.grad``, so no ``.grad`` is touched).

    Parameters
    ----------
    model : callable
        A module or function, as given to ``torch.compile``.
    *inputs
        Its arguments.
    **options
        `AxgraphBackend`'s options (``transformer=...``).

    Returns
    -------
    Explanation
        The ops that fell back, each with the user's file and line.

    Examples
    --------
    >>> import torch
    >>> from axgraph.frontends.torch import explain
    >>> print(explain(lambda x: torch.cumsum(x, 0) * 2, torch.ones(3)).ops)
    ('aten.cumsum.default',)
    """
    backend = AxgraphBackend(**options)
    outputs = torch.compile(model, backend=backend)(*inputs)
    flat = outputs if isinstance(outputs, (tuple, list)) else [outputs]
    needing = [t for t in flat if isinstance(t, torch.Tensor) and t.requires_grad]
    if needing:
        sources = [p for p in _leaves(model, inputs) if p.requires_grad]
        if sources:
            total = torch.stack([t.float().sum() for t in needing]).sum()
            torch.autograd.grad(total, sources, allow_unused=True)
    return Explanation(tuple(backend.fallbacks), len(backend.graphs))


def _leaves(model: Any, inputs: Any) -> list:
    found = list(model.parameters()) if isinstance(model, torch.nn.Module) else []
    return found + [t for t in inputs if isinstance(t, torch.Tensor)]


__all__ = ["Explanation", "explain"]
