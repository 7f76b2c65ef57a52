"""The direct call of a compiled graph that runs as one C function.

A small network's training step is dispatch-bound: its two graphs compute in a
few microseconds each, and the general call path (`CompiledGraph._call`) spent
longer than that between the tensors and the C function: viewing each tensor,
finding the program by the arguments' dtypes and shapes, making the result
arrays, then walking the outputs' descriptions to make tensors. Once a graph
of static shapes has run natively, those decisions are the same at every call,
so they are written out once as a short Python function (`source`), the way the
cpu backend writes its programs: the tensors viewed as the last call saw them,
the result arrays made, one C call, the outputs made. The C function checks
every array's type, dtype, shape and flags itself (`NativeStep.entry`), so the
direct call checks nothing: where C declines, or a tensor cannot be viewed as
before (it now needs gradients, it is an array no longer), it hands back `MISS`
and the general path runs the call, converting or raising as it always did.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence

import numpy as np
import torch

if TYPE_CHECKING:
    from .runtime import CompiledGraph

#: What a direct call hands back where it did not run (the general path must).
MISS = object()


def direct_call(graph: "CompiledGraph", args: Sequence[Any]) -> Optional[Callable[..., Any]]:
    """The direct call of `graph`, written for arguments like `args` (the call just made
    through the general path), or None where the graph does not run as one C function
    with static shapes, or an output is a size worked out per call.

    Parameters
    ----------
    graph : CompiledGraph
        The compiled graph; its last call ran natively.
    args : sequence
        That call's arguments: a tensor that needed gradients there is viewed through
        the graph's cache of views, one that did not with `numpy()`, a NumPy array
        passed on as it is, and one that was not C-contiguous is copied.

    Returns
    -------
    callable or None
        ``call(args)``: the outputs, as the general path gives them, or `MISS`.
    """
    native = getattr(getattr(graph.executable, "last_program", None), "native", None)
    if native is None or not graph.static or \
            any(o.kind == "dim" and not isinstance(o.dim, int) for o in graph.built.outputs):
        return None
    namespace: Dict[str, Any] = {
        "MISS": MISS, "ENTRY": native.entry, "FIXED": native.fixed, "empty": np.empty,
        "from_numpy": torch.from_numpy, "contiguous": np.ascontiguousarray,
        "HELD": graph.held_views, "VIEW": graph.view, "CALLS": graph.direct_calls,
        "NATIVE": native}  # what FIXED points into (the arena) lives as long as the call
    lines = ["def direct(args):", "    try:"]
    for position, i in enumerate(graph.built.tensor_inputs):
        value = args[i]
        if isinstance(value, np.ndarray):
            view = f"args[{i}]"
        elif value.requires_grad:  # viewed once while it keeps its memory
            lines += [f"        held = HELD[{position}]", f"        a = args[{i}]"]
            view = f"held[2] if held[0] is a and held[1] == a.data_ptr() else VIEW({position}, a)"
        else:
            view = f"args[{i}].numpy()"
        if not graph.view(position, value).flags.c_contiguous:
            view = f"contiguous({view})"
        lines.append(f"        v{position} = {view}")
    lines += ["    except (RuntimeError, TypeError, AttributeError):",
              "        return MISS"]
    results = []
    for k, (shape, dtype) in enumerate(native.result_types):
        namespace[f"S{k}"], namespace[f"D{k}"] = shape, dtype
        lines.append(f"    r{k} = empty(S{k}, D{k})")
        results.append(f"r{k}")
    arrays = [f"v{p}" for p in range(len(graph.built.tensor_inputs))] + results
    lines += [f"    if ENTRY(FIXED, ({', '.join(arrays)},)):", "        return MISS",
              "    CALLS[0] += 1"]
    names = []
    for position, expression in enumerate(_outputs(graph, namespace)):
        earlier = graph.repeats.get(position)
        if earlier is None:
            lines.append(f"    o{position} = {expression}")
        names.append(f"o{position if earlier is None else earlier}")
    lines.append(f"    return {names[0]}" if graph.built.single else
                 f"    return ({', '.join(names)},)")
    source = "\n".join(lines) + "\n"
    exec(compile(source, "<axgraph direct call>", "exec"), namespace)
    function: Callable[..., Any] = namespace["direct"]
    function.source = source  # type: ignore[attr-defined]
    return function


def _outputs(graph: "CompiledGraph", namespace: Dict[str, Any]) -> List[str]:
    """Per output, the expression that makes it (as `CompiledGraph._call` does); an
    output that repeats an earlier one is that one's object (see the caller)."""
    expressions: List[str] = []
    for position, output in enumerate(graph.built.outputs):
        if output.kind == "result":
            array = f"r{output.index}"
            shape = graph.result_shapes[output.index]
            if shape is not None:
                namespace[f"SHAPE{position}"] = shape
                array += f".reshape(SHAPE{position})"
            if output.permutation is not None:
                array += f".transpose({output.permutation})"
            expressions.append(array if position in graph.raw else f"from_numpy({array})")
        elif output.kind == "argument":
            if position in graph.raw:  # the input's array (see raw_saved)
                value = f"v{graph.built.tensor_inputs.index(output.index)}"
                if output.permutation is not None:
                    value += f".transpose({output.permutation})"
            else:
                value = f"args[{output.index}]"
                if output.permutation is not None:
                    value += f".permute({output.permutation})"
            expressions.append(value + ".clone()" if output.copy else value)
        else:  # a constant: a static size, or a value torch's graph hands back as it is
            namespace[f"CONSTANT{position}"] = output.dim if output.kind == "dim" \
                else output.value
            expressions.append(f"CONSTANT{position}")
    return expressions


__all__ = ["MISS", "direct_call"]
