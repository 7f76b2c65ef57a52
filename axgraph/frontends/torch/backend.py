"""The `torch.compile` backend: Dynamo's FX graphs through AOTAutograd onto axgraph.

AOTAutograd traces each graph Dynamo captures into ATen ops, a forward and (when
gradients are needed) a backward graph, decomposing composite ops first; each graph is
then built from core ops by the rule table and compiled on the chosen transformer. A
plain training graph then runs under the bridge's thin autograd runtime
(`autograd_runtime.py`) rather than AOTAutograd's own.
"""
from __future__ import annotations

import functools
from typing import Any, Dict, List, Optional

import torch

from ...core.backend import check_options, get_backend
from ...errors import AxgraphTypeError
from .attention import attention_decompositions, math_attention
from .autograd_runtime import Capture, ThinRuntime, thin_runtime
from .partition import Fallback, compile_graph
from .runtime import CompiledGraph, core_backend

aten = torch.ops.aten

# Ops whose rules use the core's own ops rather than PyTorch's decomposition of them
# (select_scatter: a zero-padded piece, where the decomposition masks a broadcast of it
# against an index grid, so the pieces of a select's gradient join into one Concat).
_KEPT = (aten.embedding_dense_backward, aten._log_softmax_backward_data,
         aten._softmax_backward_data, aten.nll_loss_forward, aten.nll_loss_backward,
         aten.select_scatter)
# Ops PyTorch's core decomposition set keeps that the rules take apart instead.
_DECOMPOSED = (aten._native_batch_norm_legit_functional, aten._native_batch_norm_legit_no_training,
               aten._native_batch_norm_legit, aten.native_layer_norm, aten.gelu_backward,
               aten.leaky_relu, aten.leaky_relu_backward, aten.elu, aten.elu_backward,
               aten.hardtanh, aten.hardtanh_backward, aten.softplus, aten.softplus_backward,
               aten.silu, aten.silu_backward, aten.hardsigmoid, aten.hardswish,
               aten.mish, aten.logsumexp)


@functools.lru_cache(maxsize=1)
def decompositions() -> Dict[Any, Any]:
    """The decomposition table AOTAutograd applies before the rules see a graph.

    PyTorch's core ATen decompositions, less those ops the core has ops for (softmax
    gradients, embedding gradients, the NLL loss), plus batch and layer norm, and
    attention with its gradient (`attention.py`).
    """
    from torch._decomp import core_aten_decompositions, get_decompositions

    table = dict(core_aten_decompositions())
    for op in list(table):
        if op.overloadpacket in _KEPT:
            del table[op]
    table.update(get_decompositions(list(_DECOMPOSED)))
    table.update(attention_decompositions())
    return table


_DEFAULTS: Dict[str, Dict[str, Any]] = {"cpu": {"native": True}}


class AxgraphBackend:
    """A `torch.compile` backend compiling on axgraph; it keeps what it compiled.

    Parameters
    ----------
    transformer : str, optional
        "cpu" (default), "jax", or "numpy" (the reference interpreter).
    fallback : bool, optional
        Whether ATen ops without a rule run in PyTorch (default True); with False
        they raise `UnsupportedOperatorError`.
    **options
        Passed to the core backend's compile (``cache_size=`` on cpu, ...). On cpu,
        ``native`` defaults to True: a small graph runs as one C function.

    Attributes
    ----------
    graphs : list of CompiledGraph
        Every graph and partition compiled, in order (each has ``cache_info()``).
    fallbacks : list of Fallback
        Every op left to PyTorch, with the user's line.
    runtimes : list of str
        Per graph Dynamo captured, "thin" where a plain training graph runs under the
        bridge's own autograd runtime (docs/torch.md), else why AOTAutograd's runtime
        was kept ("no gradients needed (an inference graph)", "input 3 is mutated", ...).
    thin_runtimes : list of ThinRuntime
        The thin runtimes, in order; each says whether its graphs run through the C++
        autograd node (``.node``, thin_node.py) or in Python.

    Raises
    ------
    AxgraphValueError
        `transformer` is not one the bridge runs on.
    AxgraphTypeError
        An option that neither the bridge nor the backend's compile takes.

    Examples
    --------
    >>> import torch
    >>> from axgraph.frontends.torch import AxgraphBackend
    >>> backend = AxgraphBackend(transformer="numpy")
    >>> double = torch.compile(lambda x: x * 2 + 1, backend=backend)
    >>> double(torch.ones(3)).tolist()
    [3.0, 3.0, 3.0]
    """

    def __init__(self, transformer: str = "cpu", fallback: bool = True, **options: Any):
        backend = core_backend(transformer)
        check_options(get_backend(backend), options,
                      f"the torch bridge's options (transformer {transformer!r})")
        self.transformer = transformer
        self.fallback = fallback
        # A step of a small network is dispatch-bound: on cpu, small graphs run as one C
        # function each unless the caller says otherwise (docs/core.md).
        self.options = {**_DEFAULTS.get(backend, {}), **options}
        self.graphs: List[CompiledGraph] = []
        self.fallbacks: List[Fallback] = []
        self.runtimes: List[str] = []
        self.thin_runtimes: List[ThinRuntime] = []

    def _record(self, item: Any) -> None:
        (self.fallbacks if isinstance(item, Fallback) else self.graphs).append(item)

    def _compiler(self, graph: str, capture: Capture) -> Any:
        def compile_one(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
            compiled = compile_graph(gm, graph, self.transformer, self.fallback,
                                     self._record, **self.options)
            capture.compiled(graph, compiled, example_inputs)

            def boxed(args: List[Any]) -> Any:  # AOTAutograd's calling convention
                return compiled(*args)
            boxed._boxed_call = True  # type: ignore[attr-defined]
            return boxed
        return compile_one

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: List[Any]) -> Any:
        from torch._dynamo.backends.common import aot_autograd
        from torch._functorch import config

        capture = Capture()
        compiler = aot_autograd(fw_compiler=self._compiler("forward", capture),
                                bw_compiler=self._compiler("backward", capture),
                                inference_compiler=self._compiler("inference", capture),
                                decompositions=decompositions())
        # AOTAutograd traces here: attention as a softmax; the backward is compiled now,
        # not at the first backward, so that the thin runtime can hold it
        with math_attention(), config.patch(force_non_lazy_backward_lowering=True):
            compiled = compiler(gm, example_inputs)
        thin, why = thin_runtime(capture, gm, example_inputs)
        self.runtimes.append(why)
        if thin is None:
            return compiled
        self.thin_runtimes.append(thin)
        return torch._dynamo.disable(thin, reason="axgraph's compiled graph")


def axgraph_backend(gm: torch.fx.GraphModule, example_inputs: List[Any],
                    options: Optional[Dict[str, Any]] = None, **_: Any) -> Any:
    """The backend `torch.compile(model, backend="axgraph", options={...})` calls.

    Parameters
    ----------
    gm : torch.fx.GraphModule
        The graph Dynamo captured.
    example_inputs : list
        Its example inputs.
    options : dict, optional
        `AxgraphBackend`'s keyword arguments (``{"transformer": "jax"}``).

    Returns
    -------
    callable
        The compiled graph.

    Raises
    ------
    AxgraphTypeError
        `options` is not a dict, or names an argument `AxgraphBackend` does not take.
    """
    if options is not None and not isinstance(options, dict):
        raise AxgraphTypeError(f"options must be a dict, not {type(options).__name__}")
    try:
        backend = AxgraphBackend(**(options or {}))
    except TypeError as error:
        raise AxgraphTypeError(f"options: {error}; the torch bridge takes 'transformer', "
                               f"'fallback' and the backend's compile options") from None
    return backend(gm, example_inputs)


__all__ = ["AxgraphBackend", "axgraph_backend", "decompositions"]
