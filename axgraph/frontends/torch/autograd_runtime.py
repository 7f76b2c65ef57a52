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
from typing import Any, Callable, Dict, NamedTuple, Optional, Sequence, Tuple

import torch

from ...debug_info import user_location
from ...errors import ExecutionError, NotDifferentiableError
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


def plan_node(runtime: "ThinRuntime", args: Sequence[Any]) -> Tuple[Any, bool]:
    """(the C++ node's plan for `runtime` (thin_node.py) or None, whether that is final:
    not while the node library compiles in the background, after which it is asked
    again); once a plan is made, the views the forward graph's Python path holds are
    dropped (they would go stale)."""
    from . import thin_node
    if thin_node.pending():
        return None, False
    node = thin_node.plan_for(runtime, args)
    forward = runtime.forward
    if node is not None and isinstance(forward, CompiledGraph):
        forward.held_views[:] = [(None, 0, None)] * len(forward.held_views)
    return node, node is not None or not thin_node.pending()


def _ran(graph: Any) -> bool:
    """Whether a compiled graph has run (its program, native or not, is built)."""
    return getattr(getattr(graph, "executable", None), "last_program", None) is not None


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
        #: The forward inputs that raw saved values are views of (their versions are
        #: checked at the backward, as autograd checks a saved tensor's).
        self.versioned: Tuple[int, ...] = ()
        if self.raw:
            forward: CompiledGraph = capture.forward  # type: ignore[assignment]
            forward.raw = frozenset(self.outputs + i for i in self.raw)
            self.versioned = tuple(forward.built.outputs[self.outputs + i].index
                                   for i in sorted(self.raw)
                                   if forward.built.outputs[self.outputs + i].kind == "argument")
        self._savings: Dict[Tuple[int, bool], Saving] = {}
        #: The C++ autograd node's plan (thin_node.py), made once both graphs have run
        #: natively; None before, or where it does not apply.
        self.node: Any = None
        self._node_tried = False

    def saving(self, count: int, raw: bool) -> "Saving":
        """How the forward's results are saved for the backward (see `Saving`).

        Parameters
        ----------
        count : int
            How many results the forward handed back (outputs, saved values, sizes).
        raw : bool
            Whether the raw arrays are kept as they are (False: under saved-tensor
            hooks, which see them as tensors).

        Returns
        -------
        Saving
            The plan, made once per (count, raw).
        """
        found = self._savings.get((count, raw))
        if found is None:
            first, end = self.outputs, count - self.sizes
            unchecked = range(end - self.unchecked, end)
            kept = tuple(k for k in range(first, end)
                         if (raw and k - first in self.raw) or k in unchecked)
            checked = tuple(k for k in range(first, end) if k not in kept)
            stored = checked + kept
            found = self._savings[count, raw] = Saving(
                checked, kept, tuple(k for k in checked + kept if k - first not in self.raw),
                tuple(stored.index(k) for k in range(first, end)))
        return found

    def __call__(self, *args: Any) -> Any:
        outputs = None
        if torch.is_grad_enabled():
            node = self.node
            if node is None and not self._node_tried and _ran(self.backward):
                node, self._node_tried = plan_node(self, args)
                self.node = node
            if node is not None:
                outputs = node(args)
                if outputs is not None:
                    return outputs
            for i in self.tensor_inputs:
                if args[i].requires_grad:
                    # autograd's own apply, without Function.apply's Python layer for
                    # functorch's transforms (about 1.3 µs a call), where none is active
                    outputs = _ThinFunction.apply(self, *args) \
                        if torch._C._are_functorch_transforms_active() \
                        else _APPLY(self, *args)
                    break
        if outputs is None:
            outputs = tuple(self.forward(*args)[:self.outputs])
        for i, dims in self.dynamic_outputs:
            _mark_dynamic(outputs[i], dims)
        return outputs

    def run_backward(self, saved: Sequence[Any], grads: Sequence[Any]) -> Sequence[Any]:
        """The inputs' gradients.

        Parameters
        ----------
        saved : sequence
            The saved sizes and values, in the order of the backward graph's inputs.
        grads : sequence
            The gradients of the forward's outputs (None where an output got none).

        Returns
        -------
        sequence
            The backward graph's outputs, one per forward input (None: no gradient).
        """
        # (a CompiledGraph takes its direct call itself, MISS or not)
        return self.backward(*saved, *[_laid_out(grads[i], layout)
                                       for i, layout in self.tangents])

    def check_versions(self, inputs: Sequence[Any], versions: Sequence[int]) -> None:
        """Refuse a backward whose raw saved views' inputs were written to since the
        forward (autograd's own check of a saved tensor, made here for them).

        Parameters
        ----------
        inputs : sequence
            The forward's arguments.
        versions : sequence of int
            The `versioned` inputs' versions when the forward ran.

        Raises
        ------
        ExecutionError
            An input changed in place: its gradient would be computed from new values.
        """
        for i, version in zip(self.versioned, versions):
            tensor = inputs[i]
            if tensor._version != version:
                raise ExecutionError(
                    f"one of the variables needed for gradient computation has been "
                    f"modified by an inplace operation: a {tensor.dtype} tensor of shape "
                    f"{list(tensor.shape)}, input {i} of the compiled graph, is at version "
                    f"{tensor._version}; expected version {version} instead (written to "
                    f"between the forward and the backward)", user_location())


class Saving(NamedTuple):
    """How a plain graph's forward results are saved for its backward (positions among
    the forward's results)."""

    #: saved as tensors (version-checked, packed by the caller's saved-tensor hooks)
    checked: Tuple[int, ...]
    #: kept in the context as they are: the raw arrays, and the last tensors AOTAutograd
    #: saves unchecked
    kept: Tuple[int, ...]
    #: the tensors among them, which are detached where they are views, as AOTAutograd
    #: does, so that autograd does not keep their bases
    tensors: Tuple[int, ...]
    #: per saved value, in the backward's order, its place among checked + kept
    order: Tuple[int, ...]


class _ThinFunction(torch.autograd.Function):
    """One call of a plain graph: the compiled forward, then the compiled backward."""

    @staticmethod
    def forward(ctx: Any, runtime: ThinRuntime, *args: Any) -> Any:
        # (a small net's step spends more here than in its arithmetic: each line counts)
        results = runtime.forward(*args)
        raw = bool(runtime.raw)
        if raw and torch._C._autograd._top_saved_tensors_default_hooks(False):
            # the caller's saved-tensor hooks (offloading, checkpointing) see every value
            first, raw = runtime.outputs, False
            results = [as_tensor(v) if k - first in runtime.raw else v
                       for k, v in enumerate(results)]
        saving = runtime.saving(len(results), raw)
        if saving.tensors or runtime.dynamic_saved:
            results = list(results)
            for k in saving.tensors:
                value = results[k]
                if isinstance(value, torch.Tensor) and value._is_view():
                    results[k] = value.detach()
            for i, dims in runtime.dynamic_saved:
                if isinstance(results[runtime.outputs + i], torch.Tensor):
                    _mark_dynamic(results[runtime.outputs + i], dims)
        if saving.checked:
            ctx.save_for_backward(*[results[k] for k in saving.checked])
        # one attribute: each costs a dictionary entry on the node
        ctx.state = (runtime, saving, [results[k] for k in saving.kept],
                     results[len(results) - runtime.sizes:] if runtime.sizes else (),
                     args, [args[i]._version for i in runtime.versioned])
        outputs = tuple(results[:runtime.outputs])
        if runtime.non_differentiable:
            ctx.mark_non_differentiable(*[outputs[i] for i in runtime.non_differentiable])
            ctx._materialize_non_diff_grads = False
        return outputs

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        runtime, saving, kept, sizes, inputs, versions = ctx.state
        if versions and [inputs[i]._version for i in runtime.versioned] != versions:
            runtime.check_versions(inputs, versions)
        if saving.checked:
            stored = (*ctx.saved_tensors, *kept)
            saved = [*sizes, *[stored[j] for j in saving.order]]
        else:  # kept in the backward's order
            saved = [*sizes, *kept] if sizes else kept
        if torch.is_grad_enabled():  # create_graph=True: gradients whose own backward refuses
            return (None, *_RefusedDoubleBackward.apply(runtime, saved, len(grads), *grads,
                                                         *inputs))
        return (None, *runtime.run_backward(saved, grads))


#: torch's C++ apply of `_ThinFunction` (what `Function.apply` calls once functorch's
#: transforms are ruled out).
_APPLY = super(torch.autograd.Function, _ThinFunction).apply


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
    graphs are whole compiled graphs, the forward computes it (not a value it also
    hands the user: saved twice is fine, both only read), and the backward reads it
    only as a tensor argument of its Function. A forward input saved as it is (or
    transposed: a weight the backward multiplies by) qualifies too: its array is a
    view of the input's memory, and the input's version is checked at the backward
    instead (`ThinRuntime.versioned`), as autograd checks a saved tensor's, so
    writing to it in between is refused, never a silently wrong gradient.
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
                     if ((o.kind == "result" and o.index not in shown)
                         or (o.kind == "argument" and not o.copy))
                     and sizes + i in read and sizes + i not in passed)


def thin_runtime(capture: Capture, gm: torch.fx.GraphModule,
                 example_inputs: Sequence[Any]) -> Tuple[Optional[ThinRuntime], str]:
    """The thin runtime for a compiled graph, or None and why AOTAutograd's stays.

    Returns
    -------
    (ThinRuntime or None, str)
        The runtime and "thin" (the caller wraps it so that Dynamo does not trace into
        it), or None and the reason the graph is not plain.
    """
    why = plain_reason(capture, gm, example_inputs)
    if why is not None:
        return None, why
    return ThinRuntime(capture, example_inputs), "thin"


__all__ = ["Capture", "Saving", "ThinRuntime", "plain_reason", "raw_saved", "thin_runtime"]
