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
torch decomposes it, slicing and joining, and every reshape: a reshape pairs its dims
with the input's by their traced sizes, keeps a merged group as a `FlattenedAxis` (so
a later split gives the same axes back, a symbolic batch kept symbolic) and splits a
dim onto new axes. An op's arguments are judged by the torch bridge's own check
where the bridge declares one. Anything else is an `UnsupportedOperatorError` naming
each op, its line, and why.
"""
from __future__ import annotations

import math
import operator
import re
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np
import torch

from ..images import grouped_window_op, pooled
from ..positional import (aligned, broadcast_axes, concatenated, in_order, index_slices,
                          is_one, relabelled, truncating_cast)
from .errors import TorchBridgeError, UnsupportedOperatorError, node_location, node_source
from .ops_nn import conv_window, pool_window
from .registry import RULES, Arguments, Check, op_name

aten = torch.ops.aten
ImportRule = Callable[["Importer", Any, Arguments], Any]
_RULES: Dict[Any, ImportRule] = {}
_CHECKS: Dict[Any, Check] = {}


def _rule(*overloads: Any, check: Optional[Check] = None) -> Callable[[ImportRule], ImportRule]:
    """Register an import rule; `check(node)` says why a node is beyond it (None: it is not)."""
    def register(function: ImportRule) -> ImportRule:
        for overload in overloads:
            _RULES[overload] = function
            if check is not None:
                _CHECKS[overload] = check
        return function
    return register


def _bridge_check(overload: Any) -> Optional[Check]:
    """The torch bridge's check of `overload`'s arguments: one judgement for both."""
    return RULES[overload].check


def _refusal(node: Any) -> Optional[str]:
    """Why `import_exported` cannot take this node (None: it can)."""
    if node.target not in _RULES:
        return "no rule"
    check = _CHECKS.get(node.target)
    return check(node) if check is not None else None


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
        refused = [(node, _refusal(node)) for node in program.graph.nodes
                   if node.op == "call_function"]
        unsupported = [(node, reason) for node, reason in refused if reason is not None]
        if unsupported:
            listed = "; ".join(f"{op_name(n.target)} at {_where(n)} ({reason})"
                               for n, reason in unsupported)
            raise UnsupportedOperatorError(
                f"import_exported cannot import: {listed} (it imports "
                f"{len(_RULES)} ops: axgraph.frontends.torch.imported_ops())",
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
            return _RULES[node.target](self, node, args)
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


def _elementwise_rule(function_name: str, *overloads: Any, scaled: bool = False,
                      check: Optional[Check] = None) -> None:
    def build(importer: Importer, node: Any, args: Arguments) -> Any:
        function = getattr(importer.ng, function_name)
        other = args.other
        if scaled and args.alpha != 1:
            other = importer.ng.multiply(other, args.alpha)
        return importer.elementwise(node, function, args.self, other)
    _rule(*overloads, check=check)(build)


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
    """One result of an op with several (None: a result not imported)."""
    picked = args.arg0[args.arg1]
    if picked is None:
        source = node.args[0]
        raise TorchBridgeError(f"{op_name(source.target)} ({node_source(source) or source.name}): "
                               f"result {args.arg1} is not imported", node_location(node))
    return picked


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


def _picked(dims: Any, rank: int) -> List[int]:
    """Torch's dim argument (an int, a list, None or empty for every dim) as positions."""
    if isinstance(dims, int):
        dims = [dims]
    return sorted({d % rank for d in (dims or range(rank))})


def _reduced(importer: Importer, args: Arguments, function: Callable[..., Any]) -> Any:
    x = args.self
    axes = list(x.axes)
    picked = _picked(getattr(args, "dim", None), len(axes))
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
    picked = _picked(getattr(args, "dim", None), len(axes))
    reduced = [axes[i] for i in picked]
    kept = [a for i, a in enumerate(axes) if i not in picked]
    mean = in_order(ng.mean(x, reduction_axes=reduced), kept)
    centred = ng.subtract(x, mean)  # mean's axes are among x's: broadcast by name
    correction = 1 if args.correction is None else args.correction
    count = ng.tensor_size(x, reduction_axes=reduced)
    variance = in_order(
        ng.divide(ng.sum(ng.square(centred), reduction_axes=reduced), count - correction), kept)
    if args.keepdim:
        for i in picked:
            one = importer.axis(f"{axes[i].name}_kept", 1)
            mean, variance = ng.expand_dims(mean, one, i), ng.expand_dims(variance, one, i)
    return variance, mean


# -- reshapes -----------------------------------------------------------------------------------


@_rule(aten.view.default, aten._unsafe_view.default, aten.reshape.default,
       aten.squeeze.default, aten.squeeze.dims, aten.squeeze.dim, aten.unsqueeze.default,
       aten.flatten.using_ints)
def _reshape(importer: Importer, node: Any, args: Arguments) -> Any:
    """Any row-major reshape. Dims of 1 are dropped and added; the other dims are paired
    in runs of equal size (`_size_groups`): a run of several input dims becomes their
    `FlattenedAxis`, one input dim becoming several is split onto their axes (the parts
    of a flattened axis when they fit, which keeps a symbolic batch; else new axes)."""
    ng = importer.ng
    x = args.self
    source, target = _traced_shape(node.args[0]), _traced_shape(node)
    ones = [i for i, size in enumerate(source) if is_one(size)]
    if ones:
        x = ng.tensor_slice(x, [0 if i in ones else slice(None) for i in range(len(source))])
    kept = [i for i, size in enumerate(target) if not is_one(size)]
    groups = _size_groups(node, [source[i] for i in range(len(source)) if i not in ones],
                          [target[i] for i in kept])
    axes = list(x.axes)
    plain = [_stand_in(importer, node, a) for a in axes]  # flatten sees no flattened axis
    flat: List[Any] = []      # one axis per group: the group's input axes as one
    flat_plain: List[Any] = []
    wanted: List[Any] = []    # the group's output axes
    start = 0
    for count, sizes in groups:
        group, group_plain = axes[start:start + count], plain[start:start + count]
        start += count
        flat.append(group[0] if count == 1 else ng.FlattenedAxis.of(group_plain))
        flat_plain.append(group_plain[0] if count == 1 else flat[-1])
        wanted.append([flat[-1]] if len(sizes) == 1 else None)
    for index, (_, sizes) in enumerate(groups):
        if wanted[index] is None:
            taken = [a for other in wanted if other is not None for a in _parts(other)]
            wanted[index] = _split_axes(importer, node, flat[index], sizes, taken)
    if len(flat) != len(axes):
        x = relabelled(ng.flatten(relabelled(x, plain), flat_plain), flat)
    splits = [i for i, w in enumerate(wanted) if len(w) > 1]
    if splits:
        # the axes kept stand in as plain axes while the split ones unflatten
        held = [ng.FlattenedAxis.of(w) if i in splits else _stand_in(importer, node, flat[i])
                for i, w in enumerate(wanted)]
        x = ng.unflatten(relabelled(x, held))
        x = relabelled(x, [a for w in wanted for a in w])
    final = [a for w in wanted for a in w]
    for position in range(len(target)):
        if position not in kept:
            one = importer.axis(f"{node.name}_{position}", 1)
            x = ng.expand_dims(x, one, position)
            final.insert(position, one)
    return in_order(x, final)


def _stand_in(importer: Importer, node: Any, axis: Any) -> Any:
    """A plain axis standing in for a flattened one while `ng.flatten` or `ng.unflatten`
    works on the others (both see through every flattened axis); the axis itself if plain."""
    if not isinstance(axis, importer.ng.FlattenedAxis):
        return axis
    return importer.ng.make_axis(axis.length, name=importer.unique_name(node.name))


def _parts(axes: Sequence[Any]) -> List[Any]:
    """Axes and, for flattened ones, their parts too (none may come back twice)."""
    from ...axes import FlattenedAxis
    return list(axes) + [p for a in axes if isinstance(a, FlattenedAxis) for p in a.axes]


def _traced_shape(node: Any) -> List[Any]:
    """A node's traced sizes: ints, and sympy expressions for symbolic ones."""
    return [size.node.expr if isinstance(size, torch.SymInt) else int(size)
            for size in node.meta["val"].shape]


def _size_groups(node: Any, source: Sequence[Any], target: Sequence[Any]
                 ) -> List[Any]:
    """[(input dims taken, output sizes)]: the shortest runs of equal total size,
    compared on the traced example and then exactly (a symbolic batch included)."""
    hints = _hints(node)
    value = [_example_size(size, hints) for size in source]
    wanted = [_example_size(size, hints) for size in target]
    groups: List[Any] = []
    i = j = 0
    while i < len(source) or j < len(target):
        if i == len(source) or j == len(target):
            raise _reshape_error(node, source, target)
        ins, outs = [i], [j]
        i, j = i + 1, j + 1
        have, need = value[ins[0]], wanted[outs[0]]
        while have != need:
            if have < need and i < len(source):
                ins.append(i)
                have *= value[i]
                i += 1
            elif have > need and j < len(target):
                outs.append(j)
                need *= wanted[j]
                j += 1
            else:
                raise _reshape_error(node, source, target)
        difference = math.prod(source[k] for k in ins) - math.prod(target[k] for k in outs)
        if (difference.expand() if hasattr(difference, "expand") else difference) != 0:
            raise _reshape_error(node, source, target)
        groups.append((len(ins), [target[k] for k in outs]))
    return groups


def _example_size(size: Any, hints: Dict[Any, int]) -> int:
    """A traced size (an int, or a sympy expression of size symbols) in the example."""
    return size if isinstance(size, int) else int(size.subs(hints))


def _hints(node: Any) -> Dict[Any, int]:
    """Each size symbol's value in the traced example."""
    for value in [node.meta["val"]] + [n.meta.get("val") for n in node.all_input_nodes]:
        for size in getattr(value, "shape", ()):
            if isinstance(size, torch.SymInt):
                env = size.node.shape_env
                values = getattr(env, "backed_var_to_val", None)
                if values is None:  # (torch before 2.13 names it var_to_val)
                    values = env.var_to_val
                return {symbol: int(found) for symbol, found in values.items()}
    return {}


def _reshape_error(node: Any, source: Sequence[Any], target: Sequence[Any]) -> TorchBridgeError:
    return TorchBridgeError(f"{op_name(node.target)} ({node_source(node) or node.name}): "
                            f"cannot pair the dims of {list(source)} with those of "
                            f"{list(target)}", node_location(node))


def _split_axes(importer: Importer, node: Any, single: Any, sizes: Sequence[Any],
                taken: Sequence[Any]) -> List[Any]:
    """The axes one dim splits into: the parts of a flattened axis when their sizes are
    these (a symbolic batch comes back as itself), else new axes (a size symbol's own
    axis for a plain symbolic size)."""
    ng = importer.ng
    if isinstance(single, ng.FlattenedAxis) and len(single.axes) == len(sizes) and all(
            _is_size_of(importer, part, size) for part, size in zip(single.axes, sizes)) and \
            not any(part in taken for part in single.axes):
        return list(single.axes)
    made = []
    for position, size in enumerate(sizes):
        if isinstance(size, int):
            made.append(importer.axis(f"{node.name}_{position}", size))
            continue
        found = importer.symbol_axis(size) if size.is_Symbol else None
        if found is None or found in taken or found in made:
            raise TorchBridgeError(f"{op_name(node.target)} ({node_source(node) or node.name}): "
                                   f"splits a dim into one of symbolic size {size} that is "
                                   f"not an input's torch.export.Dim", node_location(node))
        made.append(found)
    return made


def _is_size_of(importer: Importer, axis: Any, size: Any) -> bool:
    if isinstance(size, int):
        return axis.length == size
    return size.is_Symbol and importer.symbol_axis(size) is axis


# -- images ---------------------------------------------------------------------------------


def _no_output_padding(node: Any) -> Optional[str]:
    output_padding = node.args[7] if len(node.args) > 7 else [0]
    return "output_padding" if any(output_padding) else None


@_rule(aten.convolution.default, check=_no_output_padding)
def _convolution(importer: Importer, node: Any, args: Arguments) -> Any:
    """A (transposed, grouped) convolution of NC(D)HW images, on the shared image rules."""
    x = args.input
    geometry = conv_window(args, len(x.axes) - 2)
    try:
        y = grouped_window_op(x, args.weight, args.groups, importer.unique_name, node.name,
                              bool(args.transposed), geometry["padding_below"],
                              geometry["strides"], geometry["dilation"])
    except ValueError as error:
        raise TorchBridgeError(f"{op_name(node.target)} ({node_source(node) or node.name}): "
                               f"{error}", node_location(node)) from None
    if args.bias is None:
        return y
    return in_order(y + relabelled(args.bias, [y.axes[1]]), list(y.axes))


@_rule(aten.max_pool2d_with_indices.default,
       check=_bridge_check(aten.max_pool2d_with_indices.default))
def _max_pool(importer: Importer, node: Any, args: Arguments) -> Any:
    """The maxima; their indices (for a gradient) are not imported."""
    kernel, stride, padding = pool_window(args, 2)
    return pooled(args.self, "max", kernel, stride, padding, importer.unique_name,
                  node.name), None


@_rule(aten.avg_pool2d.default, check=_bridge_check(aten.avg_pool2d.default))
def _avg_pool(importer: Importer, node: Any, args: Arguments) -> Any:
    """Torch's default counts the padding in each mean: padded with zeros, then pooled."""
    x = args.self
    kernel, stride, padding = pool_window(args, 2)
    if args.count_include_pad and any(padding):
        padded = importer.ng.pad(x, [0, 0] + padding)
        x = relabelled(padded, list(x.axes)[:2] + [importer.axis(f"{node.name}_{i}", a.length)
                                                   for i, a in enumerate(padded.axes[2:])])
        padding = [0] * len(padding)
    return pooled(x, "avg", kernel, stride, padding, importer.unique_name, node.name)


# -- copies, constants, sizes --------------------------------------------------------------------


@_rule(aten._to_copy.default, aten.lift_fresh_copy.default,
       check=_bridge_check(aten._to_copy.default))
def _to_copy(importer: Importer, node: Any, args: Arguments) -> Any:
    """A copy in the traced element type (torch converts floats to integers toward zero)."""
    return truncating_cast(args.self, _dtype(node.meta["val"]))


@_rule(aten._assert_tensor_metadata.default)
def _asserted(importer: Importer, node: Any, args: Arguments) -> Any:
    """torch.export's record of a conversion's input type: checked when traced, no value."""
    return None


def _size_value(importer: Importer, node: Any, args: Arguments) -> Any:
    """Size arithmetic: its traced value (reshapes read their sizes from the traced
    shapes, so nothing is computed)."""
    return node.meta["val"]


for _op in (operator.add, operator.sub, operator.mul, operator.floordiv, operator.truediv,
            aten.sym_numel.default):
    _rule(_op, check=_bridge_check(_op))(_size_value)


def _filled(importer: Importer, node: Any, value: Any) -> Any:
    traced = node.meta["val"]
    axes = [importer.axis(f"{node.name}_{i}", int(n)) for i, n in enumerate(traced.shape)]
    return importer.ng.constant(np.full(tuple(traced.shape), value, dtype=_dtype(traced)),
                                axes)


def _static_shape(node: Any) -> Optional[str]:
    traced = node.meta["val"]
    return None if all(isinstance(n, int) for n in traced.shape) else "symbolic sizes"


@_rule(aten.full.default, check=_static_shape)
def _full(importer: Importer, node: Any, args: Arguments) -> Any:
    return _filled(importer, node, args.fill_value)


@_rule(aten.scalar_tensor.default)
def _scalar_tensor(importer: Importer, node: Any, args: Arguments) -> Any:
    return _filled(importer, node, args.s)


def _like(value: Any) -> ImportRule:
    """A tensor of one value on the axes of the input (a symbolic batch included)."""
    def build(importer: Importer, node: Any, args: Arguments) -> Any:
        filled = args.fill_value if value is None else value
        one = importer.ng.constant(filled, dtype=_dtype(node.meta["val"]))
        return importer.ng.broadcast(one, args.self.axes)
    return build


_rule(aten.full_like.default)(_like(None))
_rule(aten.zeros_like.default)(_like(0))
_rule(aten.ones_like.default)(_like(1))


@_rule(aten.arange.start_step, aten.arange.start, aten.arange.default,
       check=_bridge_check(aten.arange.default))
def _arange(importer: Importer, node: Any, args: Arguments) -> Any:
    traced = node.meta["val"]
    start, step = getattr(args, "start", 0), getattr(args, "step", 1)
    values = start + step * np.arange(int(traced.shape[0]), dtype=_dtype(traced))
    return importer.ng.constant(values, [importer.axis(f"{node.name}_0", len(values))])


# -- more elementwise ops ----------------------------------------------------------------------


for _name, _overload in [("log1p", aten.log1p.default), ("sin", aten.sin.default),
                         ("cos", aten.cos.default), ("tan", aten.tan.default),
                         ("sign", aten.sign.default), ("floor", aten.floor.default)]:
    _unary_rule(_name, _overload)


@_rule(aten.logical_not.default, aten.bitwise_not.default,
       check=_bridge_check(aten.bitwise_not.default))
def _not(importer: Importer, node: Any, args: Arguments) -> Any:
    return importer.ng.equal(args.self, False)


@_rule(aten.expm1.default)
def _expm1(importer: Importer, node: Any, args: Arguments) -> Any:
    return importer.ng.exp(args.self) - 1


for _name, _packet in [("equal", aten.eq), ("not_equal", aten.ne), ("less", aten.lt),
                       ("less_equal", aten.le), ("greater", aten.gt),
                       ("greater_equal", aten.ge)]:
    _elementwise_rule(_name, _packet.Tensor, _packet.Scalar)
_elementwise_rule("power", aten.pow.Tensor_Tensor)
_elementwise_rule("divide", aten.div.Tensor_mode, check=_bridge_check(aten.div.Tensor_mode))


def _both(function_name: str) -> Callable[..., Any]:
    """A logical op on booleans as arithmetic: and is a product, or a maximum."""
    def build(importer: Importer, node: Any, args: Arguments) -> Any:
        return importer.elementwise(node, getattr(importer.ng, function_name),
                                    args.self, args.other)
    return build


_rule(aten.logical_and.default)(_both("multiply"))
_rule(aten.logical_or.default)(_both("maximum"))
_rule(aten.bitwise_and.Tensor, check=_bridge_check(aten.bitwise_and.Tensor))(_both("multiply"))
_rule(aten.bitwise_or.Tensor, check=_bridge_check(aten.bitwise_or.Tensor))(_both("maximum"))


@_rule(aten.where.self)
def _chosen(importer: Importer, node: Any, args: Arguments) -> Any:
    dtype = _dtype(node.meta["val"])
    return importer.elementwise(
        node, lambda c, x, y: importer.ng.where(c, x, y, dtype=dtype),
        args.condition, args.self, args.other)


@_rule(aten.clamp.default, aten.clamp_min.default, aten.clamp_max.default)
def _clamp(importer: Importer, node: Any, args: Arguments) -> Any:
    x = args.self
    low, high = getattr(args, "min", None), getattr(args, "max", None)
    if low is not None:
        x = importer.elementwise(node, importer.ng.maximum, x, low)
    if high is not None:
        x = importer.elementwise(node, importer.ng.minimum, x, high)
    return x


# -- more reductions ---------------------------------------------------------------------------


_rule(aten.sum.default)(_sum)
_rule(aten.mean.default)(_mean)


@_rule(aten.amin.default)
def _amin(importer: Importer, node: Any, args: Arguments) -> Any:
    return _reduced(importer, args, importer.ng.min)


@_rule(aten.prod.default, aten.prod.dim_int)
def _prod(importer: Importer, node: Any, args: Arguments) -> Any:
    return _reduced(importer, args, importer.ng.prod)


@_rule(aten.var.correction)
def _var(importer: Importer, node: Any, args: Arguments) -> Any:
    return _var_mean(importer, node, args)[0]


@_rule(aten.std.correction)
def _std(importer: Importer, node: Any, args: Arguments) -> Any:
    return importer.ng.sqrt(_var_mean(importer, node, args)[0])


@_rule(aten.linalg_vector_norm.default, check=_bridge_check(aten.linalg_vector_norm.default))
def _vector_norm(importer: Importer, node: Any, args: Arguments) -> Any:
    ng = importer.ng
    return ng.sqrt(_reduced(importer, args, lambda x, reduction_axes: ng.sum(
        ng.square(x), reduction_axes=reduction_axes)))


def _index_rule(function_name: str, overload: Any) -> None:
    """argmax / argmin over one dim (torch's int64 indices)."""
    def build(importer: Importer, node: Any, args: Arguments) -> Any:
        if args.dim is None:
            raise TorchBridgeError(f"{op_name(node.target)} over every dim is not imported",
                                   node_location(node))
        function = getattr(importer.ng, function_name)
        return _reduced(importer, args, lambda t, reduction_axes: function(
            t, reduction_axes=reduction_axes, dtype=np.int64))
    _rule(overload)(build)


_index_rule("argmax", aten.argmax.default)
_index_rule("argmin", aten.argmin.default)


def _extremum_rule(values_name: str, index_name: str, overload: Any) -> None:
    """max.dim / min.dim: (values, indices) over one dim."""
    def build(importer: Importer, node: Any, args: Arguments) -> Any:
        values, index = getattr(importer.ng, values_name), getattr(importer.ng, index_name)
        return (_reduced(importer, args, values),
                _reduced(importer, args, lambda t, reduction_axes: index(
                    t, reduction_axes=reduction_axes, dtype=np.int64)))
    _rule(overload)(build)


_extremum_rule("max", "argmax", aten.max.dim)
_extremum_rule("min", "argmin", aten.min.dim)


# -- slicing, joining, broadcasting ----------------------------------------------------------


@_rule(aten.expand.default)
def _expand(importer: Importer, node: Any, args: Arguments) -> Any:
    """A dim of 1 (or a new leading one) broadcast to the traced size."""
    x = args.self
    target = _traced_shape(node)
    own = [None] * (len(target) - len(x.axes)) + list(x.axes)
    out_axes: List[Any] = []
    for position, (axis, size) in enumerate(zip(own, target)):
        if axis is not None and (not is_one(axis.length) or is_one(size)):
            out_axes.append(axis)
        elif not isinstance(size, int) and size.is_Symbol and importer.symbol_axis(size) \
                is not None and importer.symbol_axis(size) not in own:
            out_axes.append(importer.symbol_axis(size))
        elif isinstance(size, int):
            out_axes.append(importer.axis(f"{node.name}_{position}", size))
        else:
            raise TorchBridgeError(f"{op_name(node.target)} ({node_source(node) or node.name}) "
                                   f"to the symbolic size {size}", node_location(node))
    return in_order(importer.ng.broadcast(aligned(x, out_axes), out_axes), out_axes)


def _sliced(importer: Importer, node: Any, x: Any, dim: int, start: Any, end: Any,
            step: int = 1) -> Any:
    """x[..., start:end:step, ...] along `dim`, on a new axis of the traced length."""
    picked = importer.ng.tensor_slice(x, index_slices(len(x.axes), dim, slice(start, end, step)))
    axes = list(picked.axes)
    traced = _traced_shape(node) if isinstance(node.meta["val"], torch.Tensor) else None
    length = picked.axes[dim].length if traced is None else traced[dim]
    axes[dim] = importer.axis(f"{node.name}_{dim}", length if isinstance(length, int) else None)
    return relabelled(picked, axes)


@_rule(aten.slice.Tensor, check=_bridge_check(aten.slice.Tensor))
def _slice(importer: Importer, node: Any, args: Arguments) -> Any:
    x = args.self
    dim = args.dim % len(x.axes)
    source = _traced_shape(node.args[0])[dim]
    if _traced_shape(node)[dim] == source:
        return x
    end = args.end if isinstance(args.end, int) and args.end < 2 ** 62 else None
    return _sliced(importer, node, x, dim, args.start, end, args.step)


@_rule(aten.select.int)
def _select(importer: Importer, node: Any, args: Arguments) -> Any:
    x = args.self
    return importer.ng.tensor_slice(x, index_slices(len(x.axes), args.dim % len(x.axes),
                                                    args.index))


@_rule(aten.split_with_sizes.default, aten.split.Tensor)
def _split(importer: Importer, node: Any, args: Arguments) -> Any:
    x = args.self
    dim = args.dim % len(x.axes)
    pieces: List[Any] = []
    start = 0
    for value in node.meta["val"]:
        length = value.shape[dim]
        if not isinstance(length, int):
            raise TorchBridgeError(f"{op_name(node.target)} ({node_source(node) or node.name}) "
                                   f"into pieces of symbolic size {length}", node_location(node))
        picked = importer.ng.tensor_slice(
            x, index_slices(len(x.axes), dim, slice(start, start + length)))
        axes = list(picked.axes)
        axes[dim] = importer.axis(f"{node.name}_{len(pieces)}", length)
        pieces.append(relabelled(picked, axes))
        start += length
    return tuple(pieces)


@_rule(aten.cat.default)
def _cat(importer: Importer, node: Any, args: Arguments) -> Any:
    tensors = [t for t in args.tensors if len(t.axes) != 1 or t.axes[0].length != 0]
    dim = args.dim % len(tensors[0].axes)
    try:
        return concatenated(tensors, dim, importer.unique_name(node.name))
    except ValueError as error:
        raise TorchBridgeError(f"{op_name(node.target)} ({node_source(node) or node.name}): "
                               f"{error}", node_location(node)) from None


@_rule(aten.constant_pad_nd.default, check=_bridge_check(aten.constant_pad_nd.default))
def _pad(importer: Importer, node: Any, args: Arguments) -> Any:
    """Zero padding (torch lists it from the last dim backwards, before and after)."""
    x = args.self
    rank = len(x.axes)
    pairs = [(0, 0)] * rank
    for i in range(len(args.pad) // 2):
        pairs[rank - 1 - i] = (args.pad[2 * i], args.pad[2 * i + 1])
    if args.value != 0 or any(p < 0 for pair in pairs for p in pair):
        raise TorchBridgeError(f"{op_name(node.target)} ({node_source(node) or node.name}): "
                               f"only padding with zeros is imported", node_location(node))
    padded = importer.ng.pad(x, pairs)
    return relabelled(padded, [a if pair == (0, 0) else importer.axis(f"{node.name}_{i}", b.length)
                               for i, (a, b, pair) in enumerate(zip(x.axes, padded.axes, pairs))])


@_rule(aten.flip.default)
def _flip(importer: Importer, node: Any, args: Arguments) -> Any:
    x = args.self
    flipped = set(_picked(args.dims, len(x.axes)))
    reversed_ = importer.ng.tensor_slice(x, [slice(None, None, -1) if i in flipped else slice(None)
                                             for i in range(len(x.axes))])
    return relabelled(reversed_, [importer.axis(f"{node.name}_{i}", a.length) if i in flipped
                                  else a for i, a in enumerate(reversed_.axes)])


@_rule(aten.repeat.default)
def _repeat(importer: Importer, node: Any, args: Arguments) -> Any:
    """Tiles: each dim d repeated r times is (r, d) flattened, a new axis of r before it."""
    ng = importer.ng
    x = args.self
    repeats = list(args.repeats)
    lead = len(repeats) - len(x.axes)
    own = [None] * lead + list(x.axes)
    copies = [importer.axis(f"{node.name}_copies_{i}", r) if r != 1 or a is None else None
              for i, (r, a) in enumerate(zip(repeats, own))]
    spread = ng.broadcast(x, [a for pair in zip(copies, own) for a in pair if a is not None])
    groups = [[a for a in (c, o) if a is not None] for c, o in zip(copies, own)]
    flat = ng.flatten(spread, [g[0] if len(g) == 1 else ng.FlattenedAxis.of(g) for g in groups])
    return relabelled(flat, [g[0] if len(g) == 1 else importer.axis(
        f"{node.name}_{i}", math.prod(a.length for a in g)) for i, g in enumerate(groups)])


@_rule(aten.copy.default)
def _copy(importer: Importer, node: Any, args: Arguments) -> Any:
    """`src` written over all of `self`: broadcast to its axes, in its element type."""
    ng = importer.ng
    x, src = args.self, args.src
    if not hasattr(src, "axes"):
        src = ng.constant(src)
    axes = list(x.axes)
    return in_order(ng.broadcast(ng.multiply(aligned(src, axes), 1, dtype=x.dtype), axes), axes)


def _written(importer: Importer, node: Any, x: Any, dim: int, start: int, end: int,
             src: Any) -> Any:
    """x with `src` in place of x[start:end] along `dim`: the pieces joined."""
    ng = importer.ng
    length = x.axes[dim].length
    pieces = [importer.ng.tensor_slice(x, index_slices(len(x.axes), dim, slice(0, start)))
              if start > 0 else None,
              relabelled(ng.multiply(src, 1, dtype=x.dtype), list(x.axes)[:dim]
                         + [src.axes[dim]] + list(x.axes)[dim + 1:]),
              importer.ng.tensor_slice(x, index_slices(len(x.axes), dim, slice(end, length)))
              if end < length else None]
    joined = concatenated([p for p in pieces if p is not None], dim,
                          importer.unique_name(node.name), reference=x)
    return relabelled(joined, list(x.axes))


def _unit_step(node: Any) -> Optional[str]:
    step = node.args[5] if len(node.args) > 5 else node.kwargs.get("step", 1)
    return None if step == 1 else "slices with steps other than 1"


@_rule(aten.slice_scatter.default, check=_unit_step)
def _slice_scatter(importer: Importer, node: Any, args: Arguments) -> Any:
    x = args.self
    dim = args.dim % len(x.axes)
    length = x.axes[dim].length
    start = 0 if args.start is None else args.start
    end = length if args.end is None or args.end >= length else args.end
    start, end = (start + length if start < 0 else start), (end + length if end < 0 else end)
    return _written(importer, node, x, dim, start, end, args.src)


def _gathered(importer: Importer, node: Any, x: Any, dim: int, index: Any) -> Any:
    """x's entries at `index` along dim `dim`: index's dims take that dim's place (negative
    indices count from the end, as torch's indexing allows)."""
    ng = importer.ng
    picked = x.axes[dim]
    fresh = [importer.axis(f"{node.name}_{i}", a.length) for i, a in enumerate(index.axes)]
    index = relabelled(index, fresh)  # its axes may be among x's own
    if isinstance(picked.length, int):
        index = ng.where(ng.less(index, 0), index + picked.length, index)
    rows = ng.lookuptable(x, index, vocab_axis=picked)
    return in_order(rows, list(x.axes)[:dim] + fresh + list(x.axes)[dim + 1:])


@_rule(aten.embedding.default)
def _embedding(importer: Importer, node: Any, args: Arguments) -> Any:
    return _gathered(importer, node, args.weight, 0, args.indices)


@_rule(aten.index_select.default)
def _index_select(importer: Importer, node: Any, args: Arguments) -> Any:
    x = args.self
    return _gathered(importer, node, x, args.dim % len(x.axes), args.index)


@_rule(aten.index.Tensor, check=_bridge_check(aten.index.Tensor))
def _index(importer: Importer, node: Any, args: Arguments) -> Any:
    (dim,) = [i for i, v in enumerate(args.indices) if v is not None]
    return _gathered(importer, node, args.self, dim, args.indices[dim])


@_rule(aten.any.dim, aten.any.dims, aten.any.default)
def _any(importer: Importer, node: Any, args: Arguments) -> Any:
    ng = importer.ng
    counted = _reduced(importer, args, lambda x, reduction_axes: ng.sum(
        ng.multiply(ng.not_equal(x, 0), 1, dtype=np.int64), reduction_axes=reduction_axes))
    return ng.greater(counted, 0)


# -- losses ---------------------------------------------------------------------------------


@_rule(aten.nll_loss_forward.default)
def _nll_loss(importer: Importer, node: Any, args: Arguments) -> Any:
    """(loss, total weight): minus each target's score, weighted (0 at ignore_index),
    then summed or averaged over the total weight as `reduction` (0, 1, 2) asks."""
    ng = importer.ng
    scores, target = args.self, args.target
    batch = list(scores.axes)[:-1] if len(scores.axes) == 1 else [scores.axes[0]]
    classes = scores.axes[-1] if len(scores.axes) == 1 else scores.axes[1]
    target = relabelled(target, batch[:len(target.axes)])
    kept = ng.not_equal(target, args.ignore_index)
    safe = ng.where(kept, target, 0)
    weights = ng.multiply(kept, 1, dtype=scores.dtype)
    if args.weight is not None:
        weights = weights * ng.lookuptable(relabelled(args.weight, [classes]), safe)
    picked = ng.sum(scores * ng.one_hot(safe, classes, dtype=scores.dtype),
                    reduction_axes=[classes])
    losses = in_order(-(picked * weights), list(target.axes))
    total = ng.sum(weights, reduction_axes=list(weights.axes)) if weights.axes else weights
    if args.reduction == 0:
        return losses, total
    summed = ng.sum(losses, reduction_axes=list(losses.axes)) if losses.axes else losses
    return (summed if args.reduction == 2 else summed / total), total


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
