"""A thin autograd runtime for plain training graphs, in place of AOTAutograd's own.

AOTAutograd traces a Dynamo graph into a forward and a backward ATen graph, which the
bridge compiles; its runtime then wraps them for every call, handling input mutations,
outputs that alias inputs, tensor subclasses, functionalized RNG and effect tokens. On a
small network's training step those wrappers cost more than the compiled graphs
themselves (about 70 µs of a 200 µs step). A *plain* graph needs none of them: run the
forward, save what the backward reads, and run the backward on the saved tensors and the
tangents. `Capture` keeps what the compilers were handed (the compiled graphs and
AOTAutograd's metadata); `thin_runtime` checks that the graph is plain and builds the
callable, or says why not, in which case AOTAutograd's runtime is kept.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

from ...errors import NotDifferentiableError
from .runtime import CompiledGraph, as_tensor


@dataclass
class Capture:
    """What the compilers saw during one AOTAutograd compile.

    Attributes
    ----------
    forward, backward : callable or None
        The compiled forward and backward graphs (called with unpacked arguments).
    forward_inputs : int
        How many inputs the forward graph takes.
    metadata : ViewAndMutationMeta or None
        AOTAutograd's description of the forward (mutations, aliases, saved values).
    inference : bool
        Whether an inference graph (no gradients needed) was compiled instead.
    """

    forward: Optional[Callable[..., Any]] = None
    backward: Optional[Callable[..., Any]] = None
    forward_inputs: int = -1
    metadata: Any = None
    inference: bool = False

    def compiled(self, graph: str, compiled: Callable[..., Any], inputs: Sequence[Any]) -> None:
        """Record a graph just compiled ("forward", "backward" or "inference")."""
        if graph == "forward":
            context = torch._guards.TracingContext.try_get()
            self.forward, self.forward_inputs = compiled, len(inputs)
            self.metadata = getattr(context, "fw_metadata", None)
        elif graph == "backward":
            self.backward = compiled
        else:
            self.inference = True


def _is_subclass(value: Any) -> bool:
    from torch.utils._python_dispatch import is_traceable_wrapper_subclass
    return isinstance(value, torch.Tensor) and is_traceable_wrapper_subclass(value)


def _input_reason(example_inputs: Sequence[Any], meta: Any, capture: Capture) -> Optional[str]:
    for i, value in enumerate(example_inputs):
        if not isinstance(value, (torch.Tensor, int, torch.SymInt)):
            return f"input {i} is a {type(value).__name__}, not a tensor or an int"
        if _is_subclass(value):
            return f"input {i} is a tensor subclass"
    if not len(meta.input_info) == capture.forward_inputs == len(example_inputs):
        return ("AOTAutograd rearranged the inputs (duplicated or aliased inputs, or "
                "lifted parameters)")
    for i, info in enumerate(meta.input_info):
        if info.mutates_data or info.mutates_metadata or info.mutation_inductor_storage_resize:
            return f"input {i} is mutated"
    return None


def _output_reason(gm: torch.fx.GraphModule, meta: Any) -> Optional[str]:
    from torch._functorch._aot_autograd.schemas import OutputType
    (results,) = gm.graph.output_node().args
    results = results if isinstance(results, (tuple, list)) else (results,)
    if len(results) != len(meta.output_info):
        return "AOTAutograd's outputs are not the graph's"
    for i, (info, node) in enumerate(zip(meta.output_info, results)):
        example = node.meta.get("example_value") if isinstance(node, torch.fx.Node) else None
        if info.output_type != OutputType.non_alias:
            return f"output {i} is a view or alias ({info.output_type.name})"
        if not issubclass(info.raw_type, torch.Tensor):
            return f"output {i} is a {info.raw_type.__name__}, not a tensor"
        if _is_subclass(example):
            return f"output {i} is a tensor subclass"
    if meta.num_intermediate_bases:
        return "outputs alias intermediate values"
    return None


def _graph_reason(meta: Any) -> Optional[str]:
    from torch._functorch._aot_autograd.schemas import PlainTensorMeta
    from torch._functorch._aot_autograd.utils import (saved_tensors_hooks_are_inlineable,
                                                        top_saved_tensors_hooks)
    checks = (
        (meta.is_rng_op_functionalized or meta.num_graphsafe_rng_states > 0,
         "random numbers are functionalized"),
        (len(meta.tokens) > 0 or meta.num_backward_tokens > 0, "the graph has effect tokens"),
        (bool(meta.num_opaque_objects_saved_for_bw), "objects are saved for the backward"),
        (meta.grad_enabled_mutation is not None, "the graph changes the grad mode"),
        (bool(meta.indices_of_inputs_that_requires_grad_with_mutations_in_bw),
         "the backward mutates an input"),
        (not all(isinstance(m, PlainTensorMeta) for m in meta.subclass_tangent_meta),
         "a tangent is a tensor subclass"),
        (len(meta.subclass_tangent_meta)
         != sum(info.requires_grad_for_backward for info in meta.output_info),
         "the tangents are not one per differentiable output"),
        (torch._C._is_any_autocast_enabled(), "autocast is on"),
        (saved_tensors_hooks_are_inlineable(top_saved_tensors_hooks()),
         "saved-tensor hooks are inlined in the graphs"),
    )
    return next((why for failed, why in checks if failed), None)


def plain_reason(capture: Capture, gm: torch.fx.GraphModule,
                 example_inputs: Sequence[Any]) -> Optional[str]:
    """Why AOTAutograd's runtime must stay for this graph (None: the thin one will do)."""
    if capture.inference:
        return "no gradients needed (an inference graph)"
    if capture.forward is None:
        return "no forward graph was compiled (AOTAutograd's cache)"
    if capture.backward is None:
        return "the backward graph was not compiled ahead of time"
    meta = capture.metadata
    if meta is None:
        return "AOTAutograd's metadata was not available"
    return (_input_reason(example_inputs, meta, capture) or _output_reason(gm, meta)
            or _graph_reason(meta))


def _layout(meta: Any) -> Any:
    """A tangent's expected layout: a memory format, or (size, stride)."""
    layout = meta.memory_format
    if layout.memory_format is not None:
        return layout.memory_format
    return tuple(layout.size), tuple(layout.stride)


def _laid_out(tangent: torch.Tensor, layout: Any) -> torch.Tensor:
    """`tangent` in the layout the backward graph was traced with (as AOTAutograd does)."""
    if isinstance(layout, torch.memory_format):
        if tangent.is_contiguous(memory_format=layout):
            return tangent
        return tangent.contiguous(memory_format=layout)
    size, stride = layout
    if tangent.stride() == stride:
        return tangent
    restrided = torch.empty_strided(size, stride, dtype=tangent.dtype, device=tangent.device)
    return restrided.copy_(tangent)


def _mark_dynamic(tensor: torch.Tensor, dims: Any) -> None:
    known = getattr(tensor, "_dynamo_propagated_dynamic_indices", None)
    tensor._dynamo_propagated_dynamic_indices = set(dims) | (known or set())  # type: ignore[attr-defined]


class ThinRuntime:
    """A plain training graph's compiled forward and backward as one autograd node.

    Call it as AOTAutograd's runtime would be called: with Dynamo's arguments, returning
    the user outputs. Where no input needs a gradient (or grad mode is off) only the
    forward runs.
    """

    def __init__(self, capture: Capture, example_inputs: Sequence[Any]):
        meta = capture.metadata
        self.forward: Callable[..., Any] = capture.forward  # type: ignore[assignment]
        self.backward: Callable[..., Any] = capture.backward  # type: ignore[assignment]
        self.outputs = meta.num_outputs
        #: how many sizes the forward saves for the backward (last among its results)
        self.sizes = meta.num_symints_saved_for_bw
        #: how many of the last saved tensors skip the version-counter check
        self.unchecked = meta.num_tensors_saved_with_no_vc_check or 0
        self.non_differentiable = tuple(i for i, info in enumerate(meta.output_info)
                                        if not info.requires_grad)
        tangents = tuple(i for i, info in enumerate(meta.output_info)
                         if info.requires_grad_for_backward)
        layouts = [_layout(m) for m in meta.subclass_tangent_meta]
        self.tangents: Tuple[Tuple[int, Any], ...] = tuple(zip(tangents, layouts))
        self.tensor_inputs = tuple(i for i, value in enumerate(example_inputs)
                                   if isinstance(value, torch.Tensor))
        # Dims of symbolic size (dynamic shapes), marked on the tensors as AOTAutograd
        # does, so that a graph they reach next keeps them symbolic instead of recompiling
        self.dynamic_outputs = tuple((i, info.dynamic_dims)
                                     for i, info in enumerate(meta.output_info)
                                     if info.dynamic_dims)
        self.dynamic_saved = tuple(meta.dynamic_saved_tensors_idxs.items())
        #: Positions among the saved values that go to the backward as NumPy arrays
        #: (`raw_saved`).
        self.raw = raw_saved(capture, self.outputs, self.sizes)
        if self.raw:
            capture.forward.raw = frozenset(self.outputs + i for i in self.raw)  # type: ignore[union-attr]
        self._splits: Dict[Tuple[int, bool], Tuple[Tuple[int, ...], Tuple[int, ...]]] = {}

    def split(self, count: int, raw: bool) -> Tuple[Tuple[int, ...], Tuple[int, ...]]:
        """Of `count` saved values, the positions saved as tensors (version-checked, and
        packed by the caller's saved-tensor hooks) and those kept in the context as they
        are: the raw arrays (where `raw`), and the last tensors AOTAutograd saves
        unchecked."""
        found = self._splits.get((count, raw))
        if found is None:
            unchecked = range(count - self.unchecked, count) if self.unchecked else range(0)
            kept = tuple(i for i in range(count)
                         if (raw and i in self.raw) or i in unchecked)
            found = self._splits[count, raw] = (
                tuple(i for i in range(count) if i not in kept), kept)
        return found

    def __call__(self, *args: Any) -> Any:
        outputs = None
        if torch.is_grad_enabled():
            for i in self.tensor_inputs:
                if args[i].requires_grad:
                    outputs = _ThinFunction.apply(self, *args)
                    break
        if outputs is None:
            outputs = tuple(self.forward(*args)[:self.outputs])
        for i, dims in self.dynamic_outputs:
            _mark_dynamic(outputs[i], dims)
        return outputs

    def run_backward(self, saved: Sequence[Any], grads: Sequence[Any]) -> List[Any]:
        """The inputs' gradients, from the saved sizes and tensors and the outputs'
        gradients (in the order of the backward graph's inputs)."""
        tangents = [_laid_out(grads[i], layout) for i, layout in self.tangents]
        return list(self.backward(*saved, *tangents))


class _ThinFunction(torch.autograd.Function):
    """One call of a plain graph: the compiled forward, then the compiled backward."""

    @staticmethod
    def forward(ctx: Any, runtime: ThinRuntime, *args: Any) -> Any:
        results = runtime.forward(*args)
        n, end = runtime.outputs, len(results) - runtime.sizes
        ctx.sizes = results[end:]
        saved = results[n:end]
        raw = bool(runtime.raw)
        if raw and torch._C._autograd._top_saved_tensors_default_hooks(False):
            # the caller's saved-tensor hooks (offloading, checkpointing) see every value
            saved, raw = [as_tensor(v) if i in runtime.raw else v
                          for i, v in enumerate(saved)], False
        # a saved view is detached, as AOTAutograd does, so autograd does not keep its base
        saved = [v.detach() if isinstance(v, torch.Tensor) and v._is_view() else v
                 for v in saved]
        for i, dims in runtime.dynamic_saved:
            if isinstance(saved[i], torch.Tensor):
                _mark_dynamic(saved[i], dims)
        checked, kept = runtime.split(len(saved), raw)
        ctx.save_for_backward(*[saved[i] for i in checked])
        ctx.kept, ctx.raw = [saved[i] for i in kept], raw
        ctx.runtime, ctx.inputs = runtime, args
        outputs = tuple(results[:n])
        if runtime.non_differentiable:
            ctx.mark_non_differentiable(*[outputs[i] for i in runtime.non_differentiable])
        ctx._materialize_non_diff_grads = False
        return outputs

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        runtime: ThinRuntime = ctx.runtime
        tensors, kept = ctx.saved_tensors, ctx.kept
        checked, kept_at = runtime.split(len(tensors) + len(kept), ctx.raw)
        saved: List[Any] = [None] * (len(tensors) + len(kept))
        for i, value in zip(checked, tensors):
            saved[i] = value
        for i, value in zip(kept_at, kept):
            saved[i] = value
        if runtime.sizes:
            saved = [*ctx.sizes, *saved]
        if torch.is_grad_enabled():  # create_graph=True: gradients whose own backward refuses
            return (None, *_RefusedDoubleBackward.apply(runtime, saved, len(grads), *grads,
                                                         *ctx.inputs))
        return (None, *runtime.run_backward(saved, grads))


class _RefusedDoubleBackward(torch.autograd.Function):
    """The compiled backward's gradients, from a node that refuses to differentiate them
    again (the compiled backward has no backward of its own). The node hangs on the
    outputs' gradients and the forward's inputs, so that every path from the gradients
    back to anything meets it: never a silently missing term of a second derivative."""

    @staticmethod
    def forward(ctx: Any, runtime: ThinRuntime, saved: Sequence[torch.Tensor], count: int,
                *grads_then_inputs: Any) -> Any:
        return tuple(runtime.run_backward(saved, grads_then_inputs[:count]))

    @staticmethod
    def backward(ctx: Any, *_: Any) -> Any:
        raise NotDifferentiableError(
            "the torch bridge's compiled backward cannot be differentiated again (double "
            "backward, create_graph=True); compute higher derivatives in eager PyTorch")


def raw_saved(capture: Capture, outputs: int, sizes: int) -> frozenset:
    """The positions among a plain graph's saved values that may travel from the
    compiled forward to the compiled backward as NumPy arrays.

    A saved activation is read by the backward alone: no one can change it in place
    (so no version check), and wrapping it as a tensor to unwrap it again cost about
    2 µs a value, a few dozen per transformer-block step. It qualifies where both
    graphs are whole compiled graphs, the forward computes it (not an input passed
    through, not a value it also hands the user: saved twice is fine, both only read),
    and the backward reads it only as a tensor argument of its Function.
    """
    forward, backward = capture.forward, capture.backward
    if not isinstance(forward, CompiledGraph) or not isinstance(backward, CompiledGraph):
        return frozenset()
    made = forward.built.outputs
    saved = made[outputs:len(made) - sizes]
    shown = {o.index for o in made[:outputs] if o.kind == "result"}
    read = set(backward.built.tensor_inputs)
    passed = {o.index for o in backward.built.outputs if o.kind == "argument"}
    return frozenset(i for i, o in enumerate(saved)
                     if o.kind == "result" and o.index not in shown
                     and sizes + i in read and sizes + i not in passed)


def thin_runtime(capture: Capture, gm: torch.fx.GraphModule,
                 example_inputs: Sequence[Any]) -> Tuple[Optional[Callable[..., Any]], str]:
    """The thin runtime for a compiled graph, or None and why AOTAutograd's stays.

    Returns
    -------
    (callable or None, str)
        The runtime (wrapped so that Dynamo does not trace into it) and "thin", or None
        and the reason the graph is not plain.
    """
    why = plain_reason(capture, gm, example_inputs)
    if why is not None:
        return None, why
    runtime = ThinRuntime(capture, example_inputs)
    return torch._dynamo.disable(runtime, reason="axgraph's compiled graph"), "thin"


__all__ = ["Capture", "ThinRuntime", "plain_reason", "raw_saved", "thin_runtime"]
