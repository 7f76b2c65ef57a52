"""Pictures of graphs: a memory plan as a chart, an axes graph or a core Function as DOT.

Why: a memory plan is a 2-D packing problem (time steps x arena bytes), and
whether it is good is easiest to judge by eye: holes show wasted space,
tall stacks show the peak. ``draw_memory_plan`` draws each buffer as a
rectangle spanning its live steps and its bytes. Matplotlib is optional
(``pip install axgraph[viz]``) and imported only inside the function, with
the non-interactive Agg backend, so ``import axgraph`` stays NumPy-only.

``graph_to_dot`` needs nothing: it returns DOT text that ``dot -Tpng`` (or
any Graphviz viewer) renders. It draws a core Function, or the axes graph
that some ops reach: one box per op (its name, class, axes with lengths,
attributes and the user's file:line, the facts `ng.format_graph` prints),
solid edges for args, dashed ones for other_deps. With ``shapes=`` the axes
show the lengths the shape solver infers (``N: B, H: H - 2``) and a note lists
the sizes and the checks left for when data is fed, as `print(report)` does.
``graph_to_svg`` runs Graphviz's ``dot`` program on it, when that is installed.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from typing import TYPE_CHECKING, Any, Dict, Iterable, Optional, Union, cast

from .errors import AxgraphError, AxgraphTypeError
from .op_graph.op import Op
from .op_graph.printing import (Shapes, format_location, format_op_axes, format_value,
                                graph_ops, shape_report, shown_attributes)

if TYPE_CHECKING:  # pragma: no cover - for type checkers only
    from .core.function import Function
    from .transformers.cpu.memory_plan import MemoryPlan


def _matplotlib():
    """matplotlib (for an Agg canvas), or an ImportError that says what to install."""
    try:
        import matplotlib
        import matplotlib.backends.backend_agg  # noqa: F401  (the Agg canvas must exist)
    except ImportError as error:
        raise ImportError("drawing a memory plan needs matplotlib: "
                          "pip install axgraph[viz] (or pip install matplotlib)") from error
    return matplotlib


def draw_memory_plan(plan: Union["MemoryPlan", Any], path: Union[str, os.PathLike],
                     title: Optional[str] = None, label_min_fraction: float = 0.04) -> str:
    """Write a PNG of `plan`: buffers as rectangles over (time step x arena offset).

    `plan` is a MemoryPlan or anything with a ``memory_plan()`` method (a
    compiled computation). Buffers that share bytes through in-place
    execution get the same colour; buffers big enough (at least
    `label_min_fraction` of the arena high and two steps wide) are labelled
    with their node's name. Dashed lines mark the arena size and the peak of
    live bytes (the lower bound). Returns the path written.
    """
    if not hasattr(plan, "buffers") and hasattr(plan, "memory_plan"):
        plan = plan.memory_plan()
    matplotlib = _matplotlib()
    # A Figure on an Agg canvas, not pyplot: no global backend switch, no GUI, no leaks.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    path = os.fspath(path)
    steps = max(plan.num_steps, 1)
    arena = max(plan.arena_bytes, 1)
    unit, scale = ("MiB", 1024 ** 2) if arena >= 1024 ** 2 else (
        ("KiB", 1024) if arena >= 1024 else ("B", 1))

    # One colour per in-place chain: the chain's first buffer names it.
    chain: Dict[Any, Any] = {}
    for buffer in sorted(plan.buffers.values(), key=lambda b: b.start):
        source = buffer.in_place_of
        chain[buffer.node] = chain.get(source, source) if source is not None else buffer.node
    heads = list(dict.fromkeys(chain.values()))
    cmap = matplotlib.colormaps["tab20"]
    colour = {head: cmap(k % 20) for k, head in enumerate(heads)}

    figure = Figure(figsize=(min(4 + steps * 0.12, 24), 6), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    for buffer in plan.buffers.values():
        if buffer.nbytes == 0:
            continue
        x, width = buffer.start - 0.5, buffer.end - buffer.start + 1
        y, height = buffer.offset / scale, buffer.nbytes / scale
        axes.add_patch(Rectangle((x, y), width, height, facecolor=colour[chain[buffer.node]],
                                 edgecolor="black", linewidth=0.4, alpha=0.85))
        if buffer.nbytes >= label_min_fraction * arena and width >= 2:
            axes.text(x + width / 2, y + height / 2, plan.name(buffer.node), ha="center",
                      va="center", fontsize=7, clip_on=True)
    axes.axhline(plan.arena_bytes / scale, color="black", linestyle="--", linewidth=0.8,
                 label=f"arena {plan.arena_bytes / scale:.3g} {unit}")
    axes.axhline(plan.peak_live_bytes / scale, color="tab:red", linestyle=":",
                 linewidth=0.8, label=f"peak live {plan.peak_live_bytes / scale:.3g} {unit}")
    axes.set_xlim(-0.5, steps - 0.5)
    axes.set_ylim(0, arena / scale * 1.05)
    axes.set_xlabel("schedule step")
    axes.set_ylabel(f"arena offset ({unit})")
    axes.set_title(title or f"memory plan: arena {_human(plan.arena_bytes)}, naive "
                   f"{_human(plan.naive_bytes)} (ratio {plan.ratio:.2f})")
    axes.legend(loc="upper right", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, format="png")
    return path


def _human(n: int) -> str:
    for unit, scale in (("MiB", 1024 ** 2), ("KiB", 1024)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} B"


def _dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


class GraphvizError(AxgraphError, RuntimeError):
    """Graphviz's ``dot`` program is not installed, or failed to render."""


Graph = Union["Function", Op, Iterable[Op]]


def graph_to_dot(graph: Graph, plan: Optional["MemoryPlan"] = None,
                 shapes: Shapes = None) -> str:
    """Graphviz DOT text of a core Function, or of the axes graph that an op (or a list
    of ops) reaches.

    For a Function: one box per node, one edge per input; labels use the names
    ``print(function)`` shows, plus the op and type; parameters are ellipses,
    results have a bold border. With a `plan`, each node also shows its arena
    offset (or the buffer it views).

    For ops: one box per op, labelled with its name and class, its axes with
    their lengths and its dtype, its attributes and the user's file:line;
    stored tensors are ellipses, ops without a value dashed boxes, the given
    ops have a bold border. Edges run from each arg to its user (solid) and
    from each of `other_deps` (dashed).

    Parameters
    ----------
    graph : Function, Op or iterable of Op
        What to draw.
    plan : MemoryPlan, optional
        A memory plan of the Function, to show each node's place in the arena.
    shapes : ShapeReport or bool, optional
        For ops: label each axis with its length as the shape solver infers it
        (``(N: B, H: H - 2)``) and add a note with the sizes and the checks left for
        when data is fed, as `print(report)` lists them. A report of
        `ng.infer_shapes`, or True to infer one here.

    Returns
    -------
    str
        The DOT text.

    Raises
    ------
    AxgraphTypeError
        A plan or `shapes` for the wrong kind of graph, or an item that is not an op.
    AxgraphValueError
        `shapes` is a report of another graph.
    ShapeConflictError
        With ``shapes=True``: lengths in the graph that contradict each other.
    """
    roots = _as_roots(graph)
    if roots is not None:
        if plan is not None:
            raise AxgraphTypeError("graph_to_dot: a memory plan belongs to a core Function, "
                                   "not to an axes graph")
        return _axes_graph_to_dot(roots, shapes)
    if shapes is not None and shapes is not False:
        raise AxgraphTypeError("graph_to_dot: shapes= belongs to an axes graph; a core "
                               "Function's nodes already show their symbolic shapes")
    return _function_to_dot(cast("Function", graph), plan)


def graph_to_svg(graph: Graph, plan: Optional["MemoryPlan"] = None,
                 shapes: Shapes = None) -> str:
    """SVG text of `graph_to_dot(graph, plan, shapes)`, drawn by Graphviz's ``dot`` program.

    Parameters
    ----------
    graph, plan, shapes
        As for `graph_to_dot`.

    Returns
    -------
    str
        The SVG text.

    Raises
    ------
    GraphvizError
        ``dot`` is not on PATH (graph_to_dot needs nothing), or it failed.
    """
    program = shutil.which("dot")
    if program is None:
        raise GraphvizError("graph_to_svg needs Graphviz's dot program on PATH (apt install "
                            "graphviz, brew install graphviz, conda install graphviz); "
                            "graph_to_dot gives the DOT text without it")
    done = subprocess.run([program, "-Tsvg"], input=graph_to_dot(graph, plan, shapes),
                          text=True, capture_output=True, check=False)
    if done.returncode != 0:
        raise GraphvizError(f"dot failed (exit status {done.returncode}): {done.stderr.strip()}")
    return done.stdout


def _as_roots(graph) -> Optional[list]:
    """The ops of `graph` when it is an op or an iterable of ops, else None (a Function)."""
    if isinstance(graph, Op):
        return [graph]
    if isinstance(graph, (list, tuple, set, frozenset)):
        roots = list(graph)
        for position, item in enumerate(roots):
            if not isinstance(item, Op):
                raise AxgraphTypeError(f"graph_to_dot: item {position} is "
                                       f"{type(item).__name__}, not an op")
        return roots
    return None


def _axes_graph_to_dot(roots: list, shapes: Shapes) -> str:
    ops = graph_ops(roots)
    report = shape_report(ops, shapes)
    index = {op: k for k, op in enumerate(ops)}
    given = set(roots)
    lines = ["digraph axes_graph {", "  rankdir=TB;",
             '  node [shape=box, fontname="Helvetica", fontsize=10];']
    for op in ops:
        label = [f"{op.name} = {type(op).__name__}"]
        if op.is_tensor_op:
            label.append(f"{format_op_axes(op, report)} {op.dtype}")
        label += [f"{key}={format_value(value)}" for key, value in shown_attributes(op)]
        label.append(format_location(op))
        attributes = [f"label={_dot_quote(chr(10).join(label))}"]
        if op.is_assignable:
            attributes.append("shape=ellipse")
        elif not op.is_tensor_op:
            attributes.append("style=dashed")
        if op in given:
            attributes.append("penwidth=2.5")
        lines.append(f"  n{index[op]} [{', '.join(attributes)}];")
    for op in ops:
        for arg in op.args:
            lines.append(f"  n{index[arg]} -> n{index[op]};")
        for dep in op.other_deps:
            lines.append(f"  n{index[dep]} -> n{index[op]} [style=dashed];")
    if report is not None:
        lines.append(f"  shapes [shape=note, label={_dot_quote(chr(10).join(report.summary_lines()))}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _function_to_dot(function: "Function", plan: Optional["MemoryPlan"]) -> str:
    names = function.display_names()
    results = set(function.results)
    parameters = set(function.parameters)
    index = {node: k for k, node in enumerate(function.nodes)}
    lines = [f"digraph {_dot_quote(function.name)} {{", "  rankdir=TB;",
             '  node [shape=box, fontname="Helvetica", fontsize=10];']
    for node in function.nodes:
        label = f"{names[node]} = {node.op}\n{node.type_str()}"
        if plan is not None:
            buffer = plan.buffers.get(node)
            if buffer is not None:
                label += f"\n@{buffer.offset} [{buffer.start}..{buffer.end}]"
                if buffer.in_place_of is not None:
                    label += f" in place of {names.get(buffer.in_place_of, '?')}"
            elif node in plan.views:
                label += f"\nview of {names.get(plan.views[node], '?')}"
        attributes = [f"label={_dot_quote(label)}"]
        if node in parameters:
            attributes.append("shape=ellipse")
        if node in results:
            attributes.append("penwidth=2.5")
        lines.append(f"  n{index[node]} [{', '.join(attributes)}];")
    for node in function.nodes:
        for source in node.inputs:
            lines.append(f"  n{index[source]} -> n{index[node]};")
    lines.append("}")
    return "\n".join(lines) + "\n"


__all__ = ["GraphvizError", "draw_memory_plan", "graph_to_dot", "graph_to_svg"]
