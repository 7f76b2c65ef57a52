"""Compiling an ATen graph: whole when every op has a rule, else split so that the ops
without one run in PyTorch (never approximated) and the rest on axgraph."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Tuple

import torch
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from ...errors import AxgraphError
from .builder import attribute_value, build_graph
from .errors import UnsupportedOperatorError, node_location, node_source
from .registry import op_name, unsupported_reason
from .runtime import AxgraphModule, CompiledGraph


@dataclass(frozen=True)
class Fallback:
    """An ATen op that PyTorch ran because the bridge has no rule for it (or its arguments).

    Attributes
    ----------
    op : str
        The ATen overload (``aten._fft_r2c.default``).
    reason : str
        Why the bridge left it to PyTorch.
    graph : str
        "forward", "backward" or "inference": the AOTAutograd graph it was in.
    location : tuple of (str, int) or None
        The user's file and line it was traced from.
    source : str
        That line's code.
    """

    op: str
    reason: str
    graph: str
    location: Optional[Tuple[str, int]]
    source: str

    def __str__(self) -> str:
        where = f"{self.location[0]}:{self.location[1]}" if self.location else "(no source)"
        code = f": {self.source}" if self.source else ""
        return f"{self.op} ({self.reason}) in the {self.graph} graph, at {where}{code}"


class _Supported(OperatorSupportBase):
    def is_node_supported(self, submodules: Any, node: torch.fx.Node) -> bool:
        return node.op == "call_function" and unsupported_reason(node) is None


def fallbacks_of(gm: torch.fx.GraphModule, graph: str) -> List[Fallback]:
    """The ops of a graph that PyTorch must run, in graph order."""
    found = []
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        reason = unsupported_reason(node)
        if reason is not None:
            found.append(Fallback(op_name(node.target), reason, graph, node_location(node),
                                  node_source(node)))
    return found


def compile_graph(gm: torch.fx.GraphModule, graph: str = "forward",
                  transformer: str = "cpu", fallback: bool = True,
                  record: Optional[Callable[[Any], None]] = None,
                  **options: Any) -> Callable[..., Any]:
    """An ATen GraphModule as a callable running on axgraph (and PyTorch where it must).

    Parameters
    ----------
    gm : torch.fx.GraphModule
        An ATen graph whose nodes carry traced values (as AOTAutograd gives them).
    graph : str, optional
        Which graph this is ("forward", "backward", "inference"), for the records.
    transformer : str, optional
        "cpu" (default), "jax" or "numpy".
    fallback : bool, optional
        Whether ops without a rule run in PyTorch (default); False makes them an error.
    record : callable, optional
        Called with each `Fallback` and each `CompiledGraph` made.
    **options
        Passed to the core backend's compile.

    Returns
    -------
    callable
        Takes the graph's inputs, returns its outputs.

    Raises
    ------
    UnsupportedOperatorError
        With ``fallback=False``, the graph has ops without a rule; it names each and
        the user's line.
    TorchBridgeError
        With ``fallback=False``, a rule could not build its op (with fallback, PyTorch
        runs that graph or partition and a `Fallback` records why).
    """
    note = record if record is not None else (lambda item: None)
    missing = fallbacks_of(gm, graph)
    for item in missing:
        note(item)
    if missing and not fallback:
        first = missing[0]
        listed = "; ".join(str(item) for item in missing)
        raise UnsupportedOperatorError(f"the torch bridge has no rule for: {listed} "
                                       f"(options={{'fallback': True}} runs them in PyTorch)",
                                       first.location)
    def compiled(graph_module: Any, inputs: Any = None) -> Optional[CompiledGraph]:
        """The graph compiled; None where a rule or the core refused it and PyTorch is to
        run it (recorded as a fallback)."""
        try:
            made = CompiledGraph(build_graph(graph_module.graph, inputs), transformer, **options)
        except AxgraphError as error:
            if not fallback:
                raise
            size = sum(n.op == "call_function" for n in graph_module.graph.nodes)
            note(Fallback(f"{size} ops", f"not compiled: {error.message}", graph,
                          error.location, ""))
            return None
        note(made)
        return made

    if not missing:
        whole = compiled(gm)
        return gm if whole is None else whole
    from torch.fx.passes.utils.fuser_utils import fuse_by_partitions

    partitioner = CapabilityBasedPartitioner(gm, _Supported(), allows_single_node_partition=True)
    partitions = [p for p in partitioner.propose_partitions() if _worth_compiling(p.nodes)]
    if not partitions:
        return gm
    split = fuse_by_partitions(gm, [p.nodes for p in partitions])
    for node in list(split.graph.nodes):
        if node.op != "call_module":
            continue
        part = compiled(getattr(split, node.target), [_traced(a) for a in node.args])
        if part is not None:
            delattr(split, node.target)
            split.add_submodule(node.target, AxgraphModule(part))
    split.recompile()
    return split


def _traced(argument: Any) -> Any:
    """A partition input's traced value (a constant tensor is its own)."""
    if not isinstance(argument, torch.fx.Node):
        return argument
    if argument.op == "get_attr":
        return attribute_value(argument)
    return argument.meta.get("val")


_FREE = frozenset({"getitem", "alias", "detach", "view", "_unsafe_view", "permute", "t",
                   "expand", "squeeze", "unsqueeze", "sym_size"})


def _worth_compiling(nodes: Any) -> bool:
    """Whether a partition computes anything (views alone are free in PyTorch)."""
    return any(getattr(n.target, "__name__", "").split(".")[0] not in _FREE for n in nodes)


__all__ = ["Fallback", "fallbacks_of", "compile_graph"]
