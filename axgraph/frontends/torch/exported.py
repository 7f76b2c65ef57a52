"""`torch.export` programs as axes graphs: named axes, parameters as variables.

An exported program is positional (each tensor a list of dims); an axes graph pairs
dims by axis. The importer gives every dim of every value an axis, in the value's
positional order, and where an op needs two dims to be one (a matrix product's
contracted dims, the aligned dims of a broadcast) it relabels one operand's axes to the
other's (`ng.cast_axes`, which moves no data). Axes come from the inputs and the
parameters and flow through the graph: an input's dim declared with `torch.export.Dim`
gets that Dim's name (and no fixed length, so any size runs), its other dims are named
after the input (``x_1``), a parameter's after the parameter (``fc1.weight`` rows:
``fc1_weight_0``). Parameters and buffers become variables initialised with their values.

The ops imported are the forward ops of MLPs, CNNs and transformer blocks: matrix
products, elementwise arithmetic with broadcasting, comparisons and activations,
softmax and reductions, convolutions (1-3 spatial dims, strided, padded, dilated,
grouped, transposed) and pooling on channels-first images (`..images`), batch norm as
torch decomposes it, slicing and joining (splits into pieces of an input's symbolic
size too), writes at indices, and every reshape: a reshape pairs its dims
with the input's by their traced sizes, keeps a merged group as a `FlattenedAxis` (so
a later split gives the same axes back, a symbolic batch kept symbolic) and splits a
dim onto new axes. An op's arguments are judged by the torch bridge's own check
where the bridge declares one. Anything else is an `UnsupportedOperatorError` naming
each op, its line, and why. The rules live beside this walk: `exported_rules` (the
table), `exported_math`, `exported_shape`, `exported_pieces`, `exported_scatter` and
`exported_nn`.
"""
from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence

import torch

from ..positional import aligned, broadcast_axes, in_order
from . import (exported_math, exported_nn, exported_pieces,  # noqa: F401 - they fill the table
               exported_scatter, exported_shape)
from .errors import TorchBridgeError, UnsupportedOperatorError, node_location, node_source
from .exported_rules import IMPORT_RULES, imported_ops, numpy_dtype, refusal
from .registry import Arguments, op_name


@dataclass
class ImportedProgram:
    """An exported PyTorch program as axes-graph ops.

    Attributes
    ----------
    inputs : dict of str to Op
        One placeholder per user input, by the input's name, with its axes.
    outputs : list of Op
        The model's results, in order (the new values of buffers it changes are in
        `updates`).
    variables : dict of str to Op
        One variable per parameter and buffer, by its name in the module
        (``fc1.weight``), initialised with its value.
    axes : dict of str to Axis
        Every axis the inputs and variables use, by name.
    updates : dict of str to Op
        The new value of each buffer the program changes, by its name (a batch norm in
        training mode steps its running statistics): ``ng.assign(variables[name], op)``
        applies one.
    """

    inputs: Dict[str, Any]
    outputs: List[Any]
    variables: Dict[str, Any]
    axes: Dict[str, Any] = field(default_factory=dict)
    updates: Dict[str, Any] = field(default_factory=dict)


class Importer:
    """Walks an exported graph, giving each node an axes-graph op (axes in torch's order)."""

    def __init__(self, program: Any):
        import axgraph as ng

        self.ng = ng
        self.program = program
        self.values: Dict[Any, Any] = {}
        self.axes: Dict[str, Any] = {}
        self._names: set = set()
        self._dim_names = _dim_names(program)

    # -- axes ---------------------------------------------------------------------------------

    def unique_name(self, hint: str) -> str:
        """`hint` made an identifier: itself, or `hint_2`, `hint_3`... when taken."""
        base, count = re.sub(r"\W", "_", hint), 1
        unique = base
        while unique in self._names:
            count += 1
            unique = f"{base}_{count}"
        self._names.add(unique)
        return unique

    def axis(self, name: str, length: Optional[int]) -> Any:
        """A new axis named `name` (numbered when another axis has it)."""
        unique = self.unique_name(name)
        made = self.axes[unique] = self.ng.make_axis(length=length, name=unique)
        return made

    def symbol_axis(self, symbol: Any) -> Optional[Any]:
        """The axis of an input dim given by this size symbol (a `torch.export.Dim`)."""
        return self.axes.get(self._dim_names.get(str(symbol), str(symbol)))

    def axes_for(self, value: torch.Tensor, base: str) -> List[Any]:
        made = []
        for i, size in enumerate(value.shape):
            if isinstance(size, torch.SymInt):
                expression = size.node.expr
                if not expression.is_Symbol:
                    raise TorchBridgeError(f"input {base} has dim {i} of size {expression}: "
                                           f"only plain torch.export.Dims are imported")
                name = self._dim_names.get(str(expression), str(expression))
                found = self.axes.get(name)
                made.append(found if found is not None else self.axis(name, None))
            else:
                made.append(self.axis(f"{base}_{i}", int(size)))
        return made

    # -- the walk -----------------------------------------------------------------------------

    def run(self) -> ImportedProgram:
        program = self.program
        signature = program.graph_signature
        parameters = dict(signature.inputs_to_parameters)
        parameters.update(signature.inputs_to_buffers)
        constants = dict(getattr(signature, "inputs_to_lifted_tensor_constants", {}))
        refused = [(node, refusal(node)) for node in program.graph.nodes
                   if node.op == "call_function"]
        unsupported = [(node, reason) for node, reason in refused if reason is not None]
        if unsupported:
            listed = "; ".join(f"{op_name(n.target)} at {_where(n)} ({reason})"
                               for n, reason in unsupported)
            raise UnsupportedOperatorError(
                f"import_exported cannot import: {listed} (it imports "
                f"{len(IMPORT_RULES)} ops: axgraph.frontends.torch.imported_ops())",
                node_location(unsupported[0][0]))
        inputs: Dict[str, Any] = {}
        variables: Dict[str, Any] = {}
        outputs: List[Any] = []
        for node in program.graph.nodes:
            if node.op == "placeholder":
                value = node.meta["val"]
                if node.name in parameters or node.name in constants:
                    fqn = parameters.get(node.name) or constants[node.name]
                    tensor = (program.state_dict[fqn] if fqn in program.state_dict
                              else program.constants[fqn])
                    axes = self.axes_for(value, fqn)
                    variables[fqn] = self.values[node] = self.ng.variable(
                        axes, dtype=numpy_dtype(tensor), name=fqn,
                        initial_value=tensor.detach().numpy().copy())
                else:
                    axes = self.axes_for(value, node.name)
                    inputs[node.name] = self.values[node] = self.ng.placeholder(
                        axes, dtype=numpy_dtype(value), name=node.name)
            elif node.op == "call_function":
                self.values[node] = self._call(node)
            elif node.op == "output":
                outputs = [self.values[item] for item in node.args[0]]
        mutated = dict(signature.buffers_to_mutate)
        names = [spec.arg.name for spec in signature.output_specs]
        updates = {mutated[name]: value for name, value in zip(names, outputs)
                   if name in mutated}
        results = [value for name, value in zip(names, outputs) if name not in mutated]
        return ImportedProgram(inputs, results, variables, dict(self.axes), updates)

    def _resolve(self, value: Any) -> Any:
        """The op (or number, list of them) standing for an FX argument."""
        if isinstance(value, torch.fx.Node):
            return self.values[value]
        if isinstance(value, (list, tuple)):
            return type(value)(self._resolve(v) for v in value)
        return value

    def _call(self, node: Any) -> Any:
        from ...errors import AxgraphError

        args = Arguments(node, self._resolve)
        try:
            return IMPORT_RULES[node.target](self, node, args)
        except TorchBridgeError:
            raise
        except Exception as error:  # noqa: BLE001 - any failure of a rule names the op and line
            reason = error.message if isinstance(error, AxgraphError) else \
                f"{type(error).__name__}: {error}"
            raise TorchBridgeError(f"{op_name(node.target)} ({node_source(node) or node.name}) "
                                   f"could not be imported: {reason}",
                                   node_location(node)) from error

    # -- what rules use -----------------------------------------------------------------------

    def new_axis(self, length: Any, hint: str) -> Any:
        """A fresh axis for a broadcast result's position no operand's axis can take
        (`positional.broadcast_axes` asks)."""
        return self.axis(hint, length)

    def elementwise(self, node: Any, function: Callable[..., Any], *operands: Any) -> Any:
        """`function` of operands broadcast as torch does, the result in torch's order and
        element type (torch keeps a tensor's type where NumPy would widen it for a number
        or a size)."""
        tensors = [x for x in operands if hasattr(x, "axes")]  # numbers broadcast as they are
        if not tensors:
            return function(*operands)
        out_axes = broadcast_axes(self, tensors, node.name)
        result = function(*(aligned(x, out_axes) if hasattr(x, "axes") else x
                            for x in operands))
        traced = node.meta.get("val")
        if isinstance(traced, torch.Tensor) and result.dtype != numpy_dtype(traced):
            result = self.ng.multiply(result, 1, dtype=numpy_dtype(traced))
        return in_order(result, out_axes)

    def fresh_unless_taken(self, axis: Any, taken: Sequence[Any]) -> Any:
        return self.axis(axis.name, axis.length) if axis in taken else axis


def _dim_names(program: Any) -> Dict[str, str]:
    """Symbol -> the torch.export.Dim name the user gave it, where torch kept it."""
    names: Dict[str, str] = {}
    for node in program.graph.nodes:
        value = node.meta.get("val")
        if not isinstance(value, torch.Tensor):
            continue
        for size in value.shape:
            if not isinstance(size, torch.SymInt):
                continue
            env = size.node.shape_env
            debug = getattr(env, "source_name_to_debug_name", {}) or {}
            sources = getattr(env, "var_to_sources", {}) or {}
            for symbol, found in sources.items():
                for source in found:
                    name = debug.get(source.name() if callable(source.name) else source.name)
                    if name:
                        names.setdefault(str(symbol), name)
            return names
    return names


def _where(node: Any) -> str:
    location = node_location(node)
    return f"{location[0]}:{location[1]}" if location else "(no source)"


def import_exported(program: Any) -> ImportedProgram:
    """An exported PyTorch program (`torch.export.export`) as axes-graph ops.

    Parameters
    ----------
    program : torch.export.ExportedProgram
        The program; its composite ops are decomposed first (the torch bridge's
        `decompositions()`).

    Returns
    -------
    ImportedProgram
        Placeholders for the inputs, the outputs, the parameters and buffers as
        variables, and the axes.

    Raises
    ------
    UnsupportedOperatorError
        The program has ops without an import rule, or with arguments beyond it (as
        the torch bridge's checks judge them); each is named with its line and why.
    TorchBridgeError
        An op could not be imported: a reshape whose dims cannot be paired, an input
        size given by an expression, a result the import leaves out (max pooling's
        indices) used.

    Examples
    --------
    >>> import torch
    >>> import axgraph as ng
    >>> from axgraph.frontends.torch import import_exported
    >>> model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU())
    >>> imported = import_exported(torch.export.export(model, (torch.ones(4, 3),)))
    >>> imported.outputs[0].axes
    Axes(input_0: 4, 0_weight_0: 2)
    """
    from .backend import decompositions

    with warnings.catch_warnings():  # torch 2.13's own use of a pytree API it deprecated
        warnings.filterwarnings("ignore", ".*LeafSpec.*", FutureWarning)
        decomposed = program.run_decompositions(decompositions())
    return Importer(decomposed).run()


__all__ = ["ImportedProgram", "import_exported", "imported_ops"]
