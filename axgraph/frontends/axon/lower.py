"""Lowering: running an inferred Axon program to build its axgraph graph.

The lowering is an interpreter whose values are axgraph ops: functions become Python
closures, so user-defined and higher-order functions, `let` and tuples need no graph
construct of their own, and a polymorphic function is simply called at each of its
shapes. Each builtin application instantiates the builtin's scheme against the dims of
its actual arguments (the same scheme inference used) to learn the result's dims, then
builds the ops; annotations met on the way bind their size names (so `reshape [n * k]`
inside a function sees that call's `n` and `k`).

Sizes stay symbolic wherever axgraph can keep them so: convolutions, pools, slices and
reshapes over symbolic lengths are built as they are, and the conditions they need (a
window that fits, a divisibility) are checked by axgraph when data is fed. A few
constructs need known lengths (loops are unrolled, parameters need their shapes):
lowering them with a symbolic length raises `NeedsSizes`, and the program asks for
`sizes` (`Program.graph(sizes=...)`), or `Program.run` binds them from the data it is
given.
"""
from __future__ import annotations

import math
from collections import ChainMap
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Dict, Iterator, List, Mapping, MutableMapping, Optional, Sequence, Tuple

import numpy as np

from ...debug_info import SourcePosition, source_position
from ...dims import DimLike, free_symbols, subs
from ...errors import AxgraphError
from ...op_graph import tensors
from ...op_graph.op import Op
from . import syntax as s
from .builtins import BUILTINS, OPERATORS, Builtin
from .conditions import Conflict, Constraint, TypeEq
from .errors import AxonShapeError, AxonTypeError
from .infer import Effect, Inferencer
from .printing import Namer, format_dim
from .source import Span
from .types import DTYPES, FunctionType, ShapeVar, TensorType, TupleType, Type, TypeVar
from .unify import Unifier
from .values import AxisTable, FunctionValue, TensorValue, TupleValue, Value, relabel


class NeedsSizes(Exception):
    """A construct that needs known lengths met a symbolic one: what, and where."""

    def __init__(self, message: str, span: Optional[Span]):
        super().__init__(message)
        self.message = message
        self.span = span


@dataclass(frozen=True)
class NumberValue:
    """A number literal: a scalar of whatever element type the other operand has."""

    value: float


SizeEnv = MutableMapping[Tuple[str, str], object]


class Lowering:
    """Builds the graph of one inferred program under one binding of its sizes.

    Parameters
    ----------
    inference : Inferencer
        The inferred program.
    program : syntax.Program
        Its syntax tree.
    bindings : mapping of str to int or Dim
        Values for size variables (from `sizes`); the rest stay symbolic.
    param_values : mapping of str to array
        Initial values of parameters, by name; the rest are drawn from `rng`.
    rng : numpy.random.Generator
        Draws the other parameters' initial values.
    """

    def __init__(self, inference: Inferencer, program: s.Program, bindings: Mapping[str, DimLike],
                 param_values: Mapping[str, np.ndarray], rng: np.random.Generator):
        self.inference = inference
        self.program = program
        self.fresh = inference.fresh
        self.bindings = dict(bindings)
        self.param_values = param_values
        self.rng = rng
        namer = Namer(self.fresh.hints)
        self.table = AxisTable(lambda dim: format_dim(dim, namer))
        self.effects: Dict[int, Effect] = {id(e.node): e for e in inference.effects}
        self.inputs: Dict[str, TensorValue] = {}
        self.params: Dict[str, TensorValue] = {}
        self.span: Optional[Span] = None
        self.bindable: set = set()
        self.sizes = self.program_sizes()

    # -- the program ------------------------------------------------------------------------------
    def program_sizes(self) -> SizeEnv:
        """What each name of the program scope stands for, under the bindings."""
        solver = self.inference.solver
        found: Dict[Tuple[str, str], object] = {}
        for key, value in self.inference.program_scope.items():
            if key[0] == "dim":
                found[key] = self.concrete(solver.resolve_dim(value))  # type: ignore[arg-type]
            elif key[0] == "shape":
                shape = solver.resolve_shape((value,))  # type: ignore[arg-type]
                found[key] = tuple(e if isinstance(e, ShapeVar) else self.concrete(e) for e in shape)
            elif key[0] == "dtype":
                found[key] = solver.resolve_dtype(value)  # type: ignore[arg-type]
        return found

    def concrete(self, dim: DimLike) -> DimLike:
        """A dim of the program's solution under the bindings given."""
        return subs(dim, self.bindings) if self.bindings else dim

    def run(self) -> Dict[str, Value]:
        """Every top-level binding's value, by name (a later binding of a name wins)."""
        env: Dict[str, Value] = {}
        for decl in self.program.decls:
            generalized = isinstance(decl, s.FunDecl) or s.is_value(decl.expr)
            scope: SizeEnv = ChainMap({}) if generalized else ChainMap({}, self.sizes)
            env = self.decl(decl, env, scope)
        return env

    def prepare_inputs(self, declared: Mapping[str, Type]) -> None:
        """Placeholders for the inputs given by name (and for every `input` and `param`), made
        before the rest so their sizes are known to be fed."""
        for name, t in declared.items():
            self.inputs[name] = self.placeholder(name, self.inference.solver.resolve(t))
        for effect in self.inference.effects:
            t = self.inference.solver.resolve(effect.type)
            if effect.kind == "input":
                self.inputs[effect.name] = self.placeholder(effect.name, t)
        for effect in self.inference.effects:
            if effect.kind == "param":
                self.params[effect.name] = self.variable(effect.name,
                                                         self.inference.solver.resolve(effect.type),
                                                         effect.node.span)

    def tensor_type(self, name: str, t: Type, span: Optional[Span]) -> Tuple[Tuple[DimLike, ...], str]:
        """The dims and element type of an input or parameter, which must be known."""
        kind = "parameter" if name in self.params or any(
            e.name == name and e.kind == "param" for e in self.inference.effects) else "input"
        causes = [(span, "here")] if span else []
        if not isinstance(t, TensorType):
            raise AxonTypeError(f"the type of {kind} {name}, {self.show(t)}, is not known: annotate "
                                f"it (`{kind if kind == 'input' else 'param'} : f32[...]`)"
                                if isinstance(t, TypeVar) else
                                f"{kind} {name} must be a tensor, not {self.show(t)}",
                                causes, self.inference.source)
        if t.rank is None or not isinstance(t.dtype, str):
            raise AxonShapeError(f"the rank of {kind} {name}, {self.show(t)}, is not known: "
                                 f"annotate it", causes, self.inference.source)
        return tuple(self.concrete(d) for d in t.shape), t.dtype  # type: ignore[arg-type]

    def show(self, t: Type) -> str:
        from .printing import format_type
        return format_type(t, Namer(self.fresh.hints, [t]))

    def placeholder(self, name: str, t: Type) -> TensorValue:
        span = next((e.node.span for e in self.inference.effects if e.name == name), None)
        dims, dtype = self.tensor_type(name, t, span)
        for dim in dims:
            self.bindable |= free_symbols(dim)
        axes = self.table.axes_for(dims)
        op = tensors.placeholder(list(axes), dtype=DTYPES[dtype], name=name)
        return TensorValue(op, dims, axes, dtype)

    def variable(self, name: str, t: Type, span: Span) -> TensorValue:
        dims, dtype = self.tensor_type(name, t, span)
        if not all(isinstance(d, int) for d in dims):
            raise NeedsSizes(f"parameter {name} has shape [{', '.join(map(str, dims))}]: parameters "
                             f"need known sizes", span)
        shape = tuple(int(d) for d in dims)  # type: ignore[arg-type]  # all ints, checked above
        value: np.ndarray
        if name in self.param_values:
            value = np.asarray(self.param_values[name], dtype=DTYPES[dtype])
            if value.shape != shape:
                raise AxonShapeError(f"the value given for parameter {name} has shape "
                                     f"{value.shape}, not {shape}", [(span, "declared here")],
                                     self.inference.source)
        else:
            value = initial_value(shape, self.rng).astype(DTYPES[dtype])
        axes = self.table.axes_for(dims)
        op = tensors.variable(list(axes), initial_value=value, dtype=DTYPES[dtype], name=name)
        return TensorValue(op, dims, axes, dtype)

    # -- the lowering context the builtins use ----------------------------------------------------
    def determined(self, dims: Sequence[DimLike]) -> None:
        """Raise AxonShapeError unless every size in `dims` is fed with some input."""
        unknown = set().union(*(free_symbols(d) for d in dims)) - self.bindable if dims else set()
        if unknown:
            namer = Namer(self.fresh.hints)
            names = ", ".join(sorted(namer.size(n) for n in unknown))
            raise AxonShapeError(f"the size(s) {names} of a result are not determined by the "
                                 f"program's inputs", [(self.span, "here")] if self.span else [],
                                 self.inference.source)

    def tensor(self, op: Op, dims: Sequence[DimLike], axes: Sequence, dtype: str) -> TensorValue:
        """A tensor value on the axes of its dims (relabelling `op`'s positional `axes`)."""
        dims = tuple(dims)
        self.determined(dims)
        target = self.table.axes_for(dims)
        try:
            op = relabel(op, dict(zip(axes, target)))
        except AxgraphError:
            self.needs_sizes(f"dims {', '.join(map(str, dims))} that are equal only for some sizes")
        return TensorValue(op, dims, target, dtype)

    def needs_sizes(self, what: str):
        """Raise NeedsSizes: `what` needs lengths that are still symbolic."""
        raise NeedsSizes(f"{what} needs known sizes", self.span)

    def unsupported(self, what: str):
        """Raise an AxonTypeError at the current position: `what` cannot be lowered."""
        raise AxonTypeError(f"cannot lower {what}", [(self.span, "here")] if self.span else [],
                            self.inference.source)

    def apply(self, function: Value, arg: Value) -> Value:
        """`function arg`, for a function value."""
        if not isinstance(function, FunctionValue):
            raise TypeError(f"not a function: {function!r}")
        return function.call(arg)

    @contextmanager
    def at(self, span: Span) -> Iterator[None]:
        """Lower a construct at `span`: the ops built meanwhile record its position, so
        checks made when data is fed quote the program, not the Python line compiling it."""
        source = self.inference.source
        position = SourcePosition(source.name or "<axon>", span.line, span.column,
                                  source.excerpt(span))
        previous, self.span = self.span, span
        try:
            with source_position(position):
                yield
        finally:
            self.span = previous

    # -- declarations and patterns ------------------------------------------------------------------
    def decl(self, decl: s.Decl, env: Dict[str, Value], scope: SizeEnv) -> Dict[str, Value]:
        if isinstance(decl, s.FunDecl):
            return {**env, decl.name: self.closure(decl.params, decl.body, decl.result_type, env,
                                                   scope, decl.name)}
        value = self.expr(decl.expr, env, scope)
        return self.match(decl.pattern, value, env, scope)

    def match(self, pattern: s.Pattern, value: Value, env: Dict[str, Value],
              scope: SizeEnv) -> Dict[str, Value]:
        if isinstance(pattern, s.PVar):
            return {**env, pattern.name: value}
        if isinstance(pattern, s.PWild):
            return env
        if isinstance(pattern, s.PTuple):
            if not isinstance(value, TupleValue):
                raise TypeError("a tuple pattern met a value that is not a tuple")
            for item, item_value in zip(pattern.items, value.items):
                env = self.match(item, item_value, env, scope)
            return env
        self.annotate(value, pattern.type, scope)
        return self.match(pattern.pattern, value, env, scope)

    def closure(self, params: Sequence[s.Pattern], body: s.Expr, result_type, env: Dict[str, Value],
                scope: SizeEnv, name: str) -> FunctionValue:
        def call_with(bound: List[Value]) -> Value:
            if len(bound) < len(params):
                return FunctionValue(lambda arg: call_with(bound + [arg]), name)
            inner_scope = scope.new_child() if isinstance(scope, ChainMap) else ChainMap({}, scope)
            inner = dict(env)
            for pattern, value in zip(params, bound):
                inner = self.match(pattern, value, inner, inner_scope)
            result = self.expr(body, inner, inner_scope)
            if result_type is not None:
                self.annotate(result, result_type, inner_scope)
            return result
        return FunctionValue(lambda arg: call_with([arg]), name)

    # -- annotations ------------------------------------------------------------------------------------
    def annotate(self, value: Value, annotation: s.TypeExpr, scope: SizeEnv) -> None:
        """Bind the size names of `annotation` in `scope` to the value's actual dims."""
        unbound: Dict[Tuple[str, str], object] = {}
        wanted = self.annotation_type(annotation, scope, unbound)
        actual = self.runtime_type(value)
        unifier = Unifier(self.fresh)
        self.solve(unifier, annotation.span, TypeEq(actual, wanted))
        for key, var in unbound.items():
            if key[0] == "dim":
                scope[key] = unifier.resolve_dim(var)  # type: ignore[arg-type]
            elif key[0] == "shape":
                scope[key] = unifier.resolve_shape((var,))  # type: ignore[arg-type]
            elif key[0] == "dtype":
                scope[key] = unifier.resolve_dtype(var)  # type: ignore[arg-type]

    def annotation_type(self, t: s.TypeExpr, scope: SizeEnv, unbound: Dict) -> Type:
        if isinstance(t, s.TensorTypeExpr):
            if t.dtype.startswith("'"):
                dtype = self.lookup(("dtype", t.dtype), scope, unbound, lambda: self.fresh.dtype())
            else:
                dtype = t.dtype
            return TensorType(dtype, self.shape(t.shape, scope, unbound))
        if isinstance(t, s.TypeVarExpr):
            return self.fresh.type()
        if isinstance(t, s.FunctionTypeExpr):
            return self.fresh.type()  # a function's type is not checked again here
        if isinstance(t, s.ForallTypeExpr):
            return self.annotation_type(t.body, scope, unbound)
        return TupleType(tuple(self.annotation_type(item, scope, unbound) for item in t.items))

    def shape(self, items: Sequence[s.ShapeItem], scope: SizeEnv, unbound: Dict) -> tuple:
        shape: List[object] = []
        for item in items:
            if isinstance(item, s.ShapeSplat):
                shape.extend(self.lookup(("shape", item.name), scope, unbound,
                                         lambda name=item.name: self.fresh.shape(name)))
            else:
                shape.append(self.dim(item, scope, unbound))
        return tuple(shape)

    def dim(self, d: s.DimExpr, scope: SizeEnv, unbound: Dict) -> DimLike:
        if isinstance(d, s.DimInt):
            return d.value
        if isinstance(d, s.DimWild):
            return self.fresh.dim("d")
        if isinstance(d, s.DimName):
            return self.lookup(("dim", d.name), scope, unbound, lambda: self.fresh.dim(d.name))
        left, right = self.dim(d.left, scope, unbound), self.dim(d.right, scope, unbound)
        return left + right if d.op == "+" else left - right if d.op == "-" else left * right

    def lookup(self, key, scope: SizeEnv, unbound: Dict, make):
        if key in scope:
            return scope[key]
        if key not in unbound:
            unbound[key] = make()
        return (unbound[key],) if key[0] == "shape" else unbound[key]

    def runtime_type(self, value: Value) -> Type:
        """The type of a value, as far as the lowering knows it."""
        if isinstance(value, TensorValue):
            return TensorType(value.dtype, value.dims)
        if isinstance(value, NumberValue):
            return TensorType(self.fresh.dtype(), ())
        if isinstance(value, TupleValue):
            return TupleType(tuple(self.runtime_type(item) for item in value.items))
        return self.fresh.type()

    def solve(self, unifier: Unifier, span: Optional[Span], *constraints: Constraint) -> None:
        """Unify and solve `constraints`: a conflict is an error at `span`."""
        try:
            unifier.add(*constraints)
            unifier.solve()
        except Conflict as conflict:
            causes = [(span, "here")] if span else []
            kind = AxonTypeError if conflict.kind == "type" else AxonShapeError
            raise kind(f"{conflict.message} (with the sizes given)", causes,
                       self.inference.source) from None

    # -- expressions ------------------------------------------------------------------------------------
    def expr(self, e: s.Expr, env: Dict[str, Value], scope: SizeEnv) -> Value:
        if isinstance(e, s.Var):
            return self.var(e, env)
        if isinstance(e, s.Num):
            return NumberValue(float(e.value))
        if isinstance(e, s.App):
            return self.application(e, env, scope)
        if isinstance(e, s.BinOp):
            args = [self.expr(e.left, env, scope), self.expr(e.right, env, scope)]
            return self.call(BUILTINS[OPERATORS[e.op]], (), args, e.span)
        if isinstance(e, s.Neg):
            return self.call(BUILTINS["neg"], (), [self.expr(e.operand, env, scope)], e.span)
        if isinstance(e, s.Lambda):
            return self.closure(e.params, e.body, None, env, scope, "fn")
        if isinstance(e, s.Let):
            inner = dict(env)
            for decl in e.decls:
                inner = self.decl(decl, inner, scope)
            return self.expr(e.body, inner, scope)
        if isinstance(e, s.TupleExpr):
            return TupleValue(tuple(self.expr(item, env, scope) for item in e.items))
        if isinstance(e, s.Annot):
            value = self.expr(e.expr, env, scope)
            self.annotate(value, e.type, scope)
            return value
        raise TypeError(f"cannot lower {e!r}")

    def var(self, e: s.Var, env: Dict[str, Value]) -> Value:
        if e.name in env:
            return env[e.name]
        if id(e) in self.effects:
            effect = self.effects[id(e)]
            return (self.inputs if effect.kind == "input" else self.params)[effect.name]
        if e.name in self.inputs:
            return self.inputs[e.name]
        return self.call(BUILTINS[e.name], (), [], e.span)

    def application(self, e: s.App, env: Dict[str, Value], scope: SizeEnv) -> Value:
        head, args = _spine(e)
        if isinstance(head, s.Var) and head.name not in env and head.name in BUILTINS \
                and BUILTINS[head.name].statics:
            builtin = BUILTINS[head.name]
            count = len(builtin.statics)
            statics = tuple(self.static(spec, arg, scope) for spec, arg in zip(builtin.statics, args))
            values = [self.expr(arg, env, scope) for arg in args[count:]]
            return self.call(builtin, statics, values, e.span)
        function = self.expr(head, env, scope)
        for arg in args:
            function = self.apply(function, self.expr(arg, env, scope))
        return function

    def static(self, spec, arg: s.Expr, scope: SizeEnv):
        if spec[1] == "shape":
            assert isinstance(arg, s.ShapeLiteral)
            return self.shape(arg.shape, scope, {})
        return arg.value if isinstance(arg, s.Num) else -arg.operand.value  # type: ignore[union-attr]

    def call(self, builtin: Builtin, statics: tuple, args: List[Value], span: Span) -> Value:
        """A builtin applied to its arguments (a function value while some are missing)."""
        arity = builtin.arity(self.fresh, statics)
        if len(args) < arity:
            return FunctionValue(lambda arg: self.call(builtin, statics, args + [arg], span),
                                 builtin.name)
        dtype = next((a.dtype for a in args if isinstance(a, TensorValue)), "f32")
        args = [self.number(a.value, dtype) if isinstance(a, NumberValue) else a for a in args]
        t, constraints = builtin.scheme(self.fresh, statics)
        unifier = Unifier(self.fresh)
        for arg in args:
            assert isinstance(t, FunctionType)
            constraints.append(TypeEq(t.arg, self.runtime_type(arg)))
            t = t.result
        self.solve(unifier, span, *constraints)
        out = unifier.resolve(t)
        with self.at(span):
            if isinstance(out, TensorType) and out.rank is not None:
                self.determined(out.shape)  # type: ignore[arg-type]  # no shape variable left
            return builtin.lower(self, statics, args, out)  # type: ignore[misc]  # builtins with a lowering

    def number(self, value: float, dtype: str) -> TensorValue:
        op = tensors.constant(value, [], dtype=DTYPES[dtype])
        return TensorValue(op, (), (), dtype)


def initial_value(shape: Tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """A parameter's initial value: zeros for a vector or scalar (a bias), else Glorot
    uniform with fan-in the product of all dims but the last and fan-out the last."""
    if len(shape) < 2:
        return np.zeros(shape)
    fan_in, fan_out = math.prod(shape[:-1]), shape[-1]
    limit = math.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-limit, limit, size=shape)


def _spine(e: s.Expr) -> Tuple[s.Expr, List[s.Expr]]:
    args: List[s.Expr] = []
    while isinstance(e, s.App):
        args.insert(0, e.arg)
        e = e.function
    return e, args
