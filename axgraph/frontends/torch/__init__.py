"""PyTorch programs on axgraph: a `torch.compile` backend, and `torch.export` import.

    import torch
    compiled = torch.compile(model, backend="axgraph", options={"transformer": "cpu"})
    imported = import_exported(torch.export.export(model, (x,)))   # an axes graph

Dynamo captures the model's graphs; AOTAutograd turns them into ATen ops (forward and
backward); one declared rule per ATen overload builds core ops (or bridge ops lowered
by the pass pipeline); the Function runs on an axgraph backend. Ops without a rule run
in PyTorch; `explain` says which and where. Needs the optional ``torch`` extra.
"""
from __future__ import annotations

from .backend import AxgraphBackend, axgraph_backend, decompositions
from .errors import TorchBridgeError, UnsupportedOperatorError
from .explain import Explanation, explain
from .exported import ImportedProgram, import_exported, imported_ops
from .partition import Fallback
from .registry import supported_ops
from .runtime import TRANSFORMERS, CompiledGraph

__all__ = ["AxgraphBackend", "axgraph_backend", "decompositions", "TorchBridgeError",
           "UnsupportedOperatorError", "Explanation", "explain", "ImportedProgram", "import_exported",
           "imported_ops", "Fallback", "supported_ops",
           "TRANSFORMERS", "CompiledGraph"]
