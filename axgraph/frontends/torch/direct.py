"""The direct call of a compiled graph of static shapes: its decisions written out once.

A small network's training step is dispatch-bound: its two graphs compute in a
few microseconds each, and the general call path (`CompiledGraph._call`) spent
longer than that between the tensors and the C function: viewing each tensor,
finding the program by the arguments' dtypes and shapes, making the result
arrays, then walking the outputs' descriptions to make tensors. Once a graph
of static shapes has run, those decisions are the same at every call, so they
are written out once as a short Python function (`source`), the way the cpu
backend writes its programs: the tensors viewed as the last call saw them, the
program run, the outputs made.

Where the graph runs as one C function, the call makes the result arrays and
calls it; C checks every array's type, dtype, shape and flags itself
(`NativeStep.entry`), so the direct call checks nothing. Where it runs as a
Python program (a larger graph: the 784-512-512-10 MLP, a transformer block,
whose general path cost 40-80 us a call), the direct call checks each array's
dtype and shape against the program's (the lookup the general path makes) and
runs it as a call that has found it does (`CpuFunction.run_found`: threads
governed, errors attributed), NumPy's BLAS on one thread as the general path
runs it. Where C declines, a check fails, or a tensor cannot be viewed as
before (it now needs gradients, it is an array no longer), it hands back
`MISS` and the general path runs the call, converting or raising as it always
did.
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
    through the general path), or None where the graph's shapes are not static, its
    backend runs neither a C step nor a Python program (the jax transformer), or an
    output is a size worked out per call.

    Parameters
    ----------
    graph : CompiledGraph
        The compiled graph; its last call ran the program the direct call runs.
    args : sequence
        That call's arguments: a tensor that needed gradients there is viewed through
        the graph's cache of views, one that did not with `numpy()`, a NumPy array
        passed on as it is, and, for a C step, one that was not C-contiguous is copied.

    Returns
    -------
    callable or None
        ``call(args)``: the outputs, as the general path gives them, or `MISS`.
    """
    program = getattr(graph.executable, "last_program", None)
    run_found = getattr(graph.executable, "run_found", None)
    native = getattr(program, "native", None)
    if program is None or (native is None and run_found is None) or not graph.static or \
            any(o.kind == "dim" and not isinstance(o.dim, int) for o in graph.built.outputs):
        return None
    namespace: Dict[str, Any] = {
        "MISS": MISS, "from_numpy": torch.from_numpy, "contiguous": np.ascontiguousarray,
        "HELD": graph.held_views, "VIEW": graph.view, "CALLS": graph.direct_calls}
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
        if native is not None and not graph.view(position, value).flags.c_contiguous:
            view = f"contiguous({view})"
        lines.append(f"        v{position} = {view}")
    lines += ["        pass"] * (not graph.built.tensor_inputs) + [
        "    except (RuntimeError, TypeError, AttributeError):", "        return MISS"]
    arguments = [f"v{p}" for p in range(len(graph.built.tensor_inputs))]
    lines += (_native_lines(native, arguments, namespace) if native is not None else
              _python_lines(program, run_found, graph, args, arguments, namespace))
    lines.append("    CALLS[0] += 1")
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


def _native_lines(native: Any, arguments: List[str], namespace: Dict[str, Any]) -> List[str]:
    """The result arrays made and the C step called (C checks every array)."""
    namespace.update(ENTRY=native.entry, FIXED=native.fixed, empty=np.empty,
                     NATIVE=native)  # what FIXED points into (the arena) lives as long
    lines, results = [], []
    for k, (shape, dtype) in enumerate(native.result_types):
        namespace[f"S{k}"], namespace[f"D{k}"] = shape, dtype
        lines.append(f"    r{k} = empty(S{k}, D{k})")
        results.append(f"r{k}")
    return lines + [f"    if ENTRY(FIXED, ({', '.join(arguments + results)},)):",
                    "        return MISS"]


def _python_lines(program: Any, run_found: Any, graph: "CompiledGraph",
                  args: Sequence[Any], arguments: List[str],
                  namespace: Dict[str, Any]) -> List[str]:
    """Each array's dtype and shape checked against the program's (else MISS), and the
    program run as a call that found it runs it, NumPy's BLAS on one thread (as
    `CompiledGraph._call` runs a Python program)."""
    from ...transformers.cpu import blas_threads

    namespace.update(RUN=run_found, PROGRAM=program, ALIVE=program.namespace,
                     ONE_THREAD=blas_threads.single_threaded)
    checks = ["not ALIVE"]  # (a program evicted from the graph's cache is released)
    for position, i in enumerate(graph.built.tensor_inputs):
        array = graph.view(position, args[i])
        namespace[f"DT{position}"], namespace[f"SH{position}"] = array.dtype, array.shape
        checks.append(f"v{position}.dtype is not DT{position} "
                      f"or v{position}.shape != SH{position}")
    results = "".join(f"r{k}, " for k in range(len(program.function.results)))
    return [f"    if {' or '.join(checks)}:", "        return MISS",
            "    with ONE_THREAD():",
            f"        ({results}) = RUN(PROGRAM, ({''.join(a + ', ' for a in arguments)}))"]


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
