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

The ops imported are those of inference MLPs and transformer feed-forward parts (matrix
products, elementwise arithmetic with broadcasting, activations, softmax, sums and
means, variances, permutes and the reshapes that merge or split dims or add or drop
dims of 1); any other is an `UnsupportedOperatorError` naming each and its line.
"""
from __future__ import annotations

import math
import operator
import re
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence

import torch

from ..positional import aligned, broadcast_axes, in_order
from .errors import TorchBridgeError, UnsupportedOperatorError, node_location, node_source
from .registry import Arguments, op_name

aten = torch.ops.aten
ImportRule = Callable[["Importer", Any, Arguments], Any]
_RULES: Dict[Any, ImportRule] = {}


def _rule(*overloads: Any) -> Callable[[ImportRule], ImportRule]:
    def register(function: ImportRule) -> ImportRule:
        for overload in overloads:
            _RULES[overload] = function
        return function
    return register


def imported_ops() -> List[str]:
    """The ATen overloads `import_exported` turns into axes-graph ops, sorted.

    Returns
    -------
    list of str
        Their printed names (``aten.addmm.default``).
    """
    return sorted(op_name(op) for op in _RULES)


@dataclass
class ImportedProgram:
    """An exported PyTorch program as axes-graph ops.

    Attributes
    ----------
    inputs : dict of str to Op
        One placeholder per user input, by the input's name, with its axes.
    outputs : list of Op
        The program's results, in order.
    variables : dict of str to Op
        One variable per parameter and buffer, by its name in the module
        (``fc1.weight``), initialised with its value.
    axes : dict of str to Axis
        Every axis the inputs and variables use, by name.
    """

    inputs: Dict[str, Any]
    outputs: List[Any]
    variables: Dict[str, Any]
    axes: Dict[str, Any] = field(default_factory=dict)


class Importer:
    """Walks an exported graph, giving each node an axes-graph op (axes in torch's order)."""

    def __init__(self, program: Any):
        import axgraph as ng

        self.ng = ng
        self.program = program
        self.values: Dict[Any, Any] = {}
        self.axes: Dict[str, Any] = {}
        self._dim_names = _dim_names(program)

    # -- axes ---------------------------------------------------------------------------------

    def axis(self, name: str, length: Optional[int]) -> Any:
        """A new axis: `name`, or `name_2`, `name_3`... when another axis has it."""
        base, count = re.sub(r"\W", "_", name), 1
        unique = base
        while unique in self.axes:
            count += 1
            unique = f"{base}_{count}"
        made = self.axes[unique] = self.ng.make_axis(length=length, name=unique)
        return made

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
        unsupported = [node for node in program.graph.nodes
                       if node.op == "call_function" and node.target not in _RULES]
        if unsupported:
            listed = "; ".join(f"{op_name(n.target)} at {_where(n)}" for n in unsupported)
            raise UnsupportedOperatorError(
                f"import_exported has no rule for: {listed} (it imports "
                f"{len(_RULES)} ops: axgraph.frontends.torch.imported_ops())",
                node_location(unsupported[0]))
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
                        axes, dtype=_dtype(tensor), name=fqn,
                        initial_value=tensor.detach().numpy().copy())
                else:
                    axes = self.axes_for(value, node.name)
                    inputs[node.name] = self.values[node] = self.ng.placeholder(
                        axes, dtype=_dtype(value), name=node.name)
            elif node.op == "call_function":
                self.values[node] = self._call(node)
            elif node.op == "output":
                outputs = [self.values[item] for item in node.args[0]]
        return ImportedProgram(inputs, outputs, variables, dict(self.axes))

    def _call(self, node: Any) -> Any:
        from ...errors import AxgraphError

        args = Arguments(node, lambda v: self.values[v] if isinstance(v, torch.fx.Node) else v)
        try:
            return _RULES[node.target](self, node, args)
        except AxgraphError as error:
            if isinstance(error, TorchBridgeError):
                raise
            raise TorchBridgeError(f"{op_name(node.target)} ({node_source(node) or node.name}) "
                                   f"could not be imported: {error.message}",
                                   node_location(node)) from error

    # -- what rules use -----------------------------------------------------------------------

    def new_axis(self, length: Any, hint: str) -> Any:
        """A fresh axis for a broadcast result's position no operand's axis can take
        (`positional.broadcast_axes` asks)."""
        return self.axis(hint, length)

    def elementwise(self, node: Any, function: Callable[..., Any], *operands: Any) -> Any:
        """`function` of operands broadcast as torch does, the result in torch's order."""
        tensors = [x for x in operands if hasattr(x, "axes")]  # numbers broadcast as they are
        if not tensors:
            return function(*operands)
        out_axes = broadcast_axes(self, tensors, node.name)
        result = function(*(aligned(x, out_axes) if hasattr(x, "axes") else x
                            for x in operands))
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


def _dtype(value: Any) -> Any:
    return torch.empty((), dtype=value.dtype).numpy().dtype


# -- the rules ----------------------------------------------------------------------------------


@_rule(aten.permute.default)
def _permute(importer: Importer, node: Any, args: Arguments) -> Any:
    x = args.self
    axes = list(x.axes)
    return in_order(x, [axes[d % len(axes)] for d in args.dims])


@_rule(aten.t.default)
def _t(importer: Importer, node: Any, args: Arguments) -> Any:
    x = args.self
    return in_order(x, list(x.axes)[::-1])


@_rule(aten.transpose.int)
def _transpose(importer: Importer, node: Any, args: Arguments) -> Any:
    x = args.self
    axes = list(x.axes)
    a, b = args.dim0 % len(axes), args.dim1 % len(axes)
    axes[a], axes[b] = axes[b], axes[a]
    return in_order(x, axes)


def _product(importer: Importer, a: Any, b: Any) -> Any:
    """a (..., M, K) times b (..., K, N): b relabelled so its K is a's, its N distinct,
    its batch dims a's."""
    a_axes, b_axes = list(a.axes), list(b.axes)
    contracted = a_axes[-1]
    free = importer.fresh_unless_taken(b_axes[-1], a_axes)
    relabelled = a_axes[:-2] + [contracted, free]
    if b_axes != relabelled:
        b = importer.ng.cast_axes(b, relabelled)
    result = importer.ng.dot(a, b, reduction_axes=[contracted])
    return in_order(result, a_axes[:-1] + [free])


@_rule(aten.mm.default, aten.bmm.default)
def _mm(importer: Importer, node: Any, args: Arguments) -> Any:
    return _product(importer, args.self, args.mat2)


@_rule(aten.addmm.default)
def _addmm(importer: Importer, node: Any, args: Arguments) -> Any:
    ng = importer.ng
    product = _product(importer, args.mat1, args.mat2)
    if args.alpha != 1:
        product = ng.multiply(product, args.alpha)
    bias = args.self if args.beta == 1 else ng.multiply(args.self, args.beta)
    return importer.elementwise(node, ng.add, product, bias)  # the weight names the result


def _elementwise_rule(function_name: str, *overloads: Any, scaled: bool = False) -> None:
    def build(importer: Importer, node: Any, args: Arguments) -> Any:
        function = getattr(importer.ng, function_name)
        other = args.other
        if scaled and args.alpha != 1:
            other = importer.ng.multiply(other, args.alpha)
        return importer.elementwise(node, function, args.self, other)
    _rule(*overloads)(build)


_elementwise_rule("add", aten.add.Tensor, aten.add.Scalar, scaled=True)
_elementwise_rule("subtract", aten.sub.Tensor, aten.sub.Scalar, scaled=True)
_elementwise_rule("multiply", aten.mul.Tensor, aten.mul.Scalar)
_elementwise_rule("divide", aten.div.Tensor, aten.div.Scalar)
_elementwise_rule("maximum", aten.maximum.default)
_elementwise_rule("minimum", aten.minimum.default)


def _unary_rule(function_name: str, *overloads: Any) -> None:
    _rule(*overloads)(lambda importer, node, args: getattr(importer.ng, function_name)(args.self))


for _name, _overload in [("relu", aten.relu.default), ("tanh", aten.tanh.default),
                         ("sigmoid", aten.sigmoid.default), ("exp", aten.exp.default),
                         ("log", aten.log.default), ("negative", aten.neg.default),
                         ("sqrt", aten.sqrt.default), ("rsqrt", aten.rsqrt.default),
                         ("absolute", aten.abs.default), ("erf", aten.erf.default),
                         ("reciprocal", aten.reciprocal.default)]:
    _unary_rule(_name, _overload)


@_rule(operator.getitem)
def _getitem(importer: Importer, node: Any, args: Arguments) -> Any:
    return args.arg0[args.arg1]


@_rule(aten.sym_size.int)
def _sym_size(importer: Importer, node: Any, args: Arguments) -> Any:
    """A size (reshapes read their target from the traced shape, not from these)."""
    return list(args.self.axes)[args.dim]


@_rule(aten.gelu.default)
def _gelu(importer: Importer, node: Any, args: Arguments) -> Any:
    return importer.ng.gelu(args.self, approximate=args.approximate)


@_rule(aten.pow.Tensor_Scalar)
def _power(importer: Importer, node: Any, args: Arguments) -> Any:
    if args.exponent == 2:
        return importer.ng.square(args.self)
    return importer.ng.power(args.self, args.exponent)


@_rule(aten.clone.default, aten.alias.default, aten.detach.default)
def _same(importer: Importer, node: Any, args: Arguments) -> Any:
    return args.self


def _softmax_rule(function_name: str, overload: Any) -> None:
    def build(importer: Importer, node: Any, args: Arguments) -> Any:
        x = args.self
        axes = list(x.axes)
        result = getattr(importer.ng, function_name)(
            x, normalization_axes=[axes[args.dim % len(axes)]])
        return in_order(result, axes)
    _rule(overload)(build)


_softmax_rule("softmax", aten._softmax.default)
_softmax_rule("log_softmax", aten._log_softmax.default)


def _reduced(importer: Importer, args: Arguments, function: Callable[..., Any]) -> Any:
    x = args.self
    axes = list(x.axes)
    picked = sorted({d % len(axes) for d in (args.dim or range(len(axes)))})
    result = function(x, reduction_axes=[axes[i] for i in picked])
    kept = [a for i, a in enumerate(axes) if i not in picked]
    result = in_order(result, kept)
    if getattr(args, "keepdim", False):
        for i in picked:
            result = importer.ng.expand_dims(result, importer.axis(f"{axes[i].name}_kept", 1), i)
    return result


@_rule(aten.sum.dim_IntList)
def _sum(importer: Importer, node: Any, args: Arguments) -> Any:
    return _reduced(importer, args, importer.ng.sum)


@_rule(aten.mean.dim)
def _mean(importer: Importer, node: Any, args: Arguments) -> Any:
    return _reduced(importer, args, importer.ng.mean)


@_rule(aten.amax.default)
def _amax(importer: Importer, node: Any, args: Arguments) -> Any:
    return _reduced(importer, args, importer.ng.max)


@_rule(aten.var_mean.correction)
def _var_mean(importer: Importer, node: Any, args: Arguments) -> Any:
    """(variance, mean) with torch's `correction` (1: Bessel's)."""
    ng = importer.ng
    x = args.self
    axes = list(x.axes)
    picked = sorted({d % len(axes) for d in (args.dim or range(len(axes)))})
    reduced = [axes[i] for i in picked]
    kept = [a for i, a in enumerate(axes) if i not in picked]
    mean = in_order(ng.mean(x, reduction_axes=reduced), kept)
    centred = ng.subtract(x, mean)  # mean's axes are among x's: broadcast by name
    correction = 1 if args.correction is None else args.correction
    count = math.prod(a.length for a in reduced)
    variance = in_order(
        ng.divide(ng.sum(ng.square(centred), reduction_axes=reduced), count - correction), kept)
    if args.keepdim:
        for i in picked:
            one = importer.axis(f"{axes[i].name}_kept", 1)
            mean, variance = ng.expand_dims(mean, one, i), ng.expand_dims(variance, one, i)
    return variance, mean


@_rule(aten.view.default, aten._unsafe_view.default, aten.reshape.default,
       aten.squeeze.dims, aten.squeeze.dim, aten.unsqueeze.default)
def _reshape(importer: Importer, node: Any, args: Arguments) -> Any:
    """Reshapes that add or drop dims of 1 and merge runs of neighbouring dims (a
    flatten); a reshape that splits a dim is an error."""
    ng = importer.ng
    x = args.self
    target = [d if isinstance(d, int) else None for d in node.meta["val"].shape]
    if any(a.length == 1 for a in x.axes):
        x = ng.tensor_slice(x, [0 if a.length == 1 else slice(None) for a in x.axes])
    axes = list(x.axes)
    groups: List[List[Any]] = []
    i = 0
    for size in target:
        group: List[Any] = []
        while i < len(axes) and (not group or (size is not None and _length(group) < size)):
            if size == 1:
                break
            group.append(axes[i])
            i += 1
        if size is not None and _length(group) != size:
            raise TorchBridgeError(f"{op_name(node.target)}: reshaping {[a.length for a in axes]} "
                                   f"to {target} splits a dim; import_exported only merges "
                                   f"neighbouring dims and adds or drops dims of 1",
                                   node_location(node))
        groups.append(group)
    merged = [importer.axis("_".join(a.name for a in g), _length(g)) if len(g) > 1 else
              (g[0] if g else None) for g in groups]
    if any(len(g) > 1 for g in groups):
        x = ng.flatten(x, [ng.FlattenedAxis.of(g) if len(g) > 1 else g[0] for g in groups if g])
        x = ng.cast_axes(x, [a for a in merged if a is not None])
    final = []
    for position, axis in enumerate(merged):
        if axis is None:
            axis = importer.axis(f"{node.name}_{position}", 1)
            x = ng.expand_dims(x, axis, position)
        final.append(axis)
    return in_order(x, final)


def _length(axes: Sequence[Any]) -> int:
    return math.prod(a.length for a in axes)


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
        The program has ops without an import rule; each is named with its line.
    TorchBridgeError
        An op's arguments are beyond its rule (a reshape that splits a dim, a size
        given by an expression).

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
