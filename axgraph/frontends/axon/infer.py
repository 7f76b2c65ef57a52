"""Hindley-Milner inference with shapes: constraint generation, then solving.

Walking the syntax tree only *generates* constraints, each tagged with the position
that produced it (an annotation, an argument, an operator); the `Unifier` (`unify.py`,
types here, shapes and sizes in the shared shape solver)
decides them. They meet at generalization points, as in HM(X): the constraints of a
`fun` (or of a `val` whose right side is a value) are solved, then the type is
generalized over the variables the environment does not mention (types, element types,
shapes and sizes alike), and any constraint still undecided about those variables goes
into the scheme, to be checked again at each use.

Names in annotations: in a declaration that is generalized (a `fun`, or a `val` of a
function), each name is local to that top-level declaration and becomes polymorphic;
elsewhere (`val y = f (input : f32[B, 784])`) a size name is a size of the whole
program, the same `B` in every such declaration, fed when the program runs.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, FrozenSet, List, Mapping, Optional, Sequence, Set, Tuple

from ...dims import Dim, DimLike, free_symbols, subs
from . import syntax as s
from .builtins import BUILTINS, OPERATORS, Builtin
from .conditions import (AtLeast, Blame, Broadcast, Conflict, Constraint, DimEq, Divides,
                         OneOrEqual, SameSize, ShapeEq, TypeEq, constraint_terms, constraint_vars,
                         rename_constraint, with_blame)
from .errors import AxonShapeError, AxonTypeError, Cause
from .printing import Namer, format_dim, format_shape, format_type
from .source import Source, Span
from .types import (DTYPES, DTypeVar, Elem, Fresh, FunctionType, Shape, ShapeVar, TensorType,
                    TupleType, Type, TypeVar, Var, free_vars, is_internal, map_dims)
from .unify import Unifier


@dataclass(frozen=True)
class Scheme:
    """A type generalized over `variables`, with the constraints still to check at each use."""

    variables: FrozenSet[Var]
    type: Type
    constraints: Tuple[Constraint, ...] = ()
    links: Mapping[Var, Blame] = field(default_factory=dict)


@dataclass(frozen=True)
class Effect:
    """An occurrence of `input` or `param`: its node, kind, type and a name for the graph."""

    node: s.Var
    kind: str
    type: Type
    name: str


@dataclass(frozen=True)
class Binding:
    """A top-level name: how it was declared, its scheme and where."""

    name: str
    kind: str  # "val" or "fun"
    scheme: Scheme
    span: Span


Env = Mapping[str, Scheme]


def _mono(t: Type) -> Scheme:
    return Scheme(frozenset(), t)


class Inferencer:
    """Generates the constraints of a program and drives the solver over them."""

    def __init__(self, source: Source, inputs: Mapping[str, Type], fresh: Fresh):
        self.source = source
        self.fresh = fresh
        self.origins: List[Cause] = []
        self.solver = Unifier(fresh, self.origins, source.name or "<axon>")
        self.inputs = dict(inputs)
        self.program_scope: Dict[Tuple[str, str], object] = {}
        self.scope = self.program_scope
        self.depth = 0
        self.defining: List[str] = []
        self.decl_name = ""
        self.effect_counts: Dict[str, int] = {}
        self.effects: List[Effect] = []
        self.bindings: List[Binding] = []
        self.direct: Dict[int, str] = {}  # an input or param bound by `val name = ...` directly

    # -- positions ------------------------------------------------------------------------------
    def blame(self, span: Span, why: str) -> Blame:
        """A blame set naming one position."""
        self.origins.append((span, why))
        return frozenset({len(self.origins) - 1})

    def causes(self, blame: Blame) -> List[Cause]:
        """The positions a blame set names."""
        return [self.origins[i] for i in sorted(blame)]

    def error(self, conflict: Conflict) -> Exception:
        """The user-facing error for a conflict of the solver."""
        kind = AxonTypeError if conflict.kind == "type" else AxonShapeError
        return kind(conflict.message, self.causes(conflict.blame), self.source)

    def solve(self) -> None:
        """Run the solver; a contradiction becomes an error naming every position."""
        try:
            self.solver.solve()
        except Conflict as conflict:
            raise self.error(conflict) from None

    def add(self, *constraints) -> None:
        """Unify types now and tell the solver the conditions on sizes; a contradiction
        in the structure of types becomes an error at once."""
        try:
            self.solver.add(*constraints)
        except Conflict as conflict:
            raise self.error(conflict) from None

    # -- the program ------------------------------------------------------------------------------
    def program(self, program: s.Program) -> None:
        """Infer every declaration in order, then solve what is left."""
        env: Dict[str, Scheme] = {}
        for decl in program.decls:
            generalized = isinstance(decl, s.FunDecl) or s.is_value(decl.expr)
            self.scope = {} if generalized else self.program_scope
            self.decl_name = decl.name if isinstance(decl, s.FunDecl) else \
                next((name for name, _ in s.pattern_names(decl.pattern)), "_")
            if isinstance(decl, s.ValDecl):
                self.note_direct_effect(decl)
            before = dict(env)
            env = dict(self.decl(decl, env))
            for name, scheme in env.items():
                if before.get(name) is not scheme:
                    kind = "fun" if isinstance(decl, s.FunDecl) else "val"
                    span = decl.name_span if isinstance(decl, s.FunDecl) else decl.pattern.span
                    self.bindings.append(Binding(name, kind, scheme, span))
        self.scope = self.program_scope
        self.solve()
        for effect in self.effects:
            self.default_dtypes(effect.type)
        for binding in self.bindings:
            if not binding.scheme.variables:
                self.default_dtypes(binding.scheme.type)
        self.solve()

    def note_direct_effect(self, decl: s.ValDecl) -> None:
        """`val x = input : t` names its input `x` (other inputs are named by position)."""
        pattern, expr = decl.pattern, decl.expr
        while isinstance(pattern, s.PAnnot):
            pattern = pattern.pattern
        while isinstance(expr, s.Annot):
            expr = expr.expr
        if isinstance(pattern, s.PVar) and isinstance(expr, s.Var) and expr.name in ("input", "param"):
            self.direct[id(expr)] = pattern.name

    def default_dtypes(self, t: Type) -> None:
        """Element types nothing decided become f32 (in a value that is not generalized)."""
        for var in free_vars(self.solver.resolve(t)):
            if isinstance(var, DTypeVar):
                self.add(TypeEq(TensorType(var, ()), TensorType("f32", ())))

    # -- declarations -------------------------------------------------------------------------------
    def decl(self, decl: s.Decl, env: Env) -> Env:
        if isinstance(decl, s.FunDecl):
            self.depth += 1
            self.defining.append(decl.name)
            params, inner = [], dict(env)
            for pattern in decl.params:
                t = self.fresh.type("a")
                inner = self.bind(pattern, t, inner)
                params.append(t)
            body = self.expr(decl.body, inner)
            if decl.result_type is not None:
                self.add(TypeEq(body, self.annotation(decl.result_type),
                                self.blame(decl.result_type.span, "result type annotated")))
            self.depth -= 1
            self.defining.pop()
            function: Type = body
            for param in reversed(params):
                function = FunctionType(param, function)
            self.solve()
            return {**env, decl.name: self.generalize(function, env)}
        value = self.expr(decl.expr, env)
        bound = self.bind(decl.pattern, value, {})
        self.solve()
        if s.is_value(decl.expr):
            return {**env, **{name: self.generalize(scheme.type, env) for name, scheme in bound.items()}}
        return {**env, **bound}

    def bind(self, pattern: s.Pattern, t: Type, env: Env) -> Dict[str, Scheme]:
        """`env` plus the names `pattern` binds, matched against type `t`."""
        if isinstance(pattern, s.PVar):
            return {**env, pattern.name: _mono(t)}
        if isinstance(pattern, s.PWild):
            return dict(env)
        if isinstance(pattern, s.PTuple):
            items = tuple(self.fresh.type("a") for _ in pattern.items)
            self.add(TypeEq(t, TupleType(items), self.blame(pattern.span, "a tuple pattern")))
            result = dict(env)
            for item, item_type in zip(pattern.items, items):
                result = self.bind(item, item_type, result)
            return result
        self.add(TypeEq(t, self.annotation(pattern.type), self.blame(pattern.type.span, "annotated")))
        return self.bind(pattern.pattern, t, env)

    # -- generalization ------------------------------------------------------------------------------
    def generalize(self, t: Type, env: Env) -> Scheme:
        resolved = self.solver.resolve(t)
        fixed: Set[Var] = set()
        for scheme in env.values():
            fixed |= free_vars(self.solver.resolve(scheme.type)) - scheme.variables
        fixed |= {v for v in free_vars(resolved) if isinstance(v, str) and not is_internal(v)}
        candidates = set(free_vars(resolved)) - fixed
        if not candidates:
            return _mono(resolved)
        constraints = self.solver.take_residuals(candidates)
        for constraint in constraints:
            candidates |= {v for v in constraint_vars(constraint) if v not in fixed
                           and not (isinstance(v, str) and not is_internal(v))}
        links = {v: b for v, b in self.solver.links(candidates).items() if b}
        return Scheme(frozenset(candidates), resolved, tuple(constraints), links)

    def instantiate(self, scheme: Scheme, span: Span, name: str) -> Type:
        if not scheme.variables:
            return scheme.type
        rename = _Renamer()
        for var in scheme.variables:
            if isinstance(var, TypeVar):
                rename.types[var] = self.fresh.type(var.hint)
            elif isinstance(var, DTypeVar):
                rename.dtypes[var] = self.fresh.dtype(var.hint)
            elif isinstance(var, ShapeVar):
                rename.shapes[var] = self.fresh.shape(var.hint)
            else:
                rename.dims[var] = self.fresh.dim(self.fresh.hints.get(var, "d"))
                if var in self.fresh.marked:
                    self.fresh.marked.add(rename.dims[var].name)
        use = self.blame(span, f"`{name}` used here")
        for var, blame in scheme.links.items():
            self.solver.var_blame[rename.copy(var)] = blame | use
        if scheme.constraints:
            self.add(*(with_blame(rename_constraint(c, rename), use) for c in scheme.constraints))
        return rename.type(scheme.type)

    # -- expressions ---------------------------------------------------------------------------------
    def expr(self, e: s.Expr, env: Env) -> Type:
        if isinstance(e, s.Var):
            return self.var(e, env)
        if isinstance(e, s.Num):
            return TensorType(self.fresh.dtype(), ())
        if isinstance(e, s.App):
            return self.application(e, env)
        if isinstance(e, s.BinOp):
            builtin = BUILTINS[OPERATORS[e.op]]
            t = self.builtin_type(builtin, (), e.op_span)
            return self.apply(t, [e.left, e.right], env, f"`{e.op}`")
        if isinstance(e, s.Neg):
            t = self.builtin_type(BUILTINS["neg"], (), e.span)
            return self.apply(t, [e.operand], env, "`~`")
        if isinstance(e, s.Lambda):
            self.depth += 1
            params, inner = [], dict(env)
            for pattern in e.params:
                t = self.fresh.type("a")
                inner = self.bind(pattern, t, inner)
                params.append(t)
            result = self.expr(e.body, inner)
            self.depth -= 1
            for param in reversed(params):
                result = FunctionType(param, result)
            return result
        if isinstance(e, s.Let):
            inner = dict(env)
            for decl in e.decls:
                inner = dict(self.decl(decl, inner))
            return self.expr(e.body, inner)
        if isinstance(e, s.TupleExpr):
            return TupleType(tuple(self.expr(item, env) for item in e.items))
        if isinstance(e, s.Annot):
            t = self.expr(e.expr, env)
            self.add(TypeEq(t, self.annotation(e.type), self.blame(e.type.span, "annotated")))
            return t
        if isinstance(e, s.ShapeLiteral):
            raise AxonTypeError("a shape like `[n, 28]` is an argument of reshape, zeros or ones, "
                                "not a value", [(e.span, "here")], self.source)
        raise TypeError(f"not an expression: {e!r}")

    def var(self, e: s.Var, env: Env) -> Type:
        if e.name in env:
            return self.instantiate(env[e.name], e.span, e.name)
        if e.name in BUILTINS:
            builtin = BUILTINS[e.name]
            if builtin.statics:
                raise AxonTypeError(f"`{e.name}` needs its {_statics_text(builtin)} first, written "
                                    f"in place (like `{_example(builtin)}`)", [(e.span, "here")],
                                    self.source)
            t = self.builtin_type(builtin, (), e.span)
            if builtin.lower is None:
                self.effect(e, t)
            return t
        if e.name in self.inputs:
            return self.inputs[e.name]
        note = ("a `fun` cannot call itself: loop with fold or scan" if e.name in self.defining
                else "not bound here")
        raise AxonTypeError(f"unknown name `{e.name}`", [(e.span, note)], self.source)

    def effect(self, e: s.Var, t: Type) -> None:
        if self.depth:
            raise AxonTypeError(f"`{e.name}` inside a function would make a new {e.name} at each "
                                f"call; use it at the top level and pass the value in",
                                [(e.span, "here")], self.source)
        taken = {effect.name for effect in self.effects} | set(self.inputs)
        name = self.direct.get(id(e), "")
        while not name or name in taken:  # `<val>.input0`, `<val>.input1`, ...
            key = f"{self.decl_name}.{e.name}"
            count = self.effect_counts.get(key, 0)
            self.effect_counts[key] = count + 1
            name = f"{key}{count}"
        self.effects.append(Effect(e, e.name, t, name))

    def builtin_type(self, builtin: Builtin, statics: tuple, span: Span) -> Type:
        t, constraints = builtin.scheme(self.fresh, statics)
        if constraints:
            blame = self.blame(span, f"`{builtin.name}`: {builtin.summary}")
            self.add(*(with_blame(c, blame) for c in constraints))
        return t

    def application(self, e: s.App, env: Env) -> Type:
        head, args = _spine(e)
        if isinstance(head, s.Var) and head.name in BUILTINS and head.name not in env \
                and BUILTINS[head.name].statics:
            builtin = BUILTINS[head.name]
            count = len(builtin.statics)
            if len(args) < count:
                raise AxonTypeError(f"`{head.name}` needs its {_statics_text(builtin)} first, "
                                    f"written in place (like `{_example(builtin)}`)",
                                    [(e.span, "here")], self.source)
            statics = tuple(self.static(builtin, spec, arg) for spec, arg in
                            zip(builtin.statics, args[:count]))
            t = self.builtin_type(builtin, statics, e.span)
            return self.apply(t, args[count:], env, f"`{head.name}`")
        return self.apply(self.expr(head, env), args, env, _describe(head))

    def apply(self, t: Type, args: Sequence[s.Expr], env: Env, what: str) -> Type:
        for index, arg in enumerate(args, start=1):
            arg_type = self.expr(arg, env)
            result = self.fresh.type("r")
            self.add(TypeEq(t, FunctionType(arg_type, result),
                            self.blame(arg.span, f"argument {index} of {what}")))
            t = result
        return t

    def static(self, builtin: Builtin, spec, arg: s.Expr):
        label, kind, least = spec
        if kind == "shape":
            if not isinstance(arg, s.ShapeLiteral):
                raise AxonTypeError(f"the {label} of `{builtin.name}` must be written in place, "
                                    f"like `[n, 28, 28]`", [(arg.span, "here")], self.source)
            return self.shape(arg.shape)
        value = _int_literal(arg)
        if value is None or (kind == "int" and value < least):
            bound = "" if kind == "index" else f" >= {least}"
            raise AxonTypeError(f"the {label} of `{builtin.name}` must be an int literal{bound}",
                                [(arg.span, "here")], self.source)
        return value

    # -- annotations -------------------------------------------------------------------------------
    def annotation(self, t: s.TypeExpr) -> Type:
        """The type an annotation stands for, its names looked up in the current scope."""
        if isinstance(t, s.TensorTypeExpr):
            if t.dtype.startswith("'"):
                dtype = self.scoped("dtype", t.dtype, lambda: self.fresh.dtype(t.dtype[1:]))
            elif t.dtype in DTYPES:
                dtype = t.dtype
            else:
                raise AxonTypeError(f"unknown element type `{t.dtype}` (Axon has "
                                    f"{', '.join(DTYPES)})", [(t.span, "here")], self.source)
            return TensorType(dtype, self.shape(t.shape))
        if isinstance(t, s.TypeVarExpr):
            return self.scoped("type", t.name, lambda: self.fresh.type(t.name[1:]))
        if isinstance(t, s.FunctionTypeExpr):
            return FunctionType(self.annotation(t.arg), self.annotation(t.result))
        if isinstance(t, s.ForallTypeExpr):
            for name in t.names:
                size = self.dim(name)
                assert isinstance(size, Dim)
                blame = self.blame(name.span, f"`forall {name.name}`: a rigid size")
                try:
                    self.solver.make_rigid(size.name, blame)
                except Conflict as conflict:
                    raise self.error(conflict) from None
            return self.annotation(t.body)
        return TupleType(tuple(self.annotation(item) for item in t.items))

    def shape(self, items: Sequence[s.ShapeItem]) -> Shape:
        """The shape an annotation's items stand for."""
        shape: List[Elem] = []
        for item in items:
            if isinstance(item, s.ShapeSplat):
                shape.append(self.scoped("shape", item.name, lambda name=item.name: self.fresh.shape(name)))
            else:
                shape.append(self.dim(item))
        return tuple(shape)

    def dim(self, d: s.DimExpr) -> DimLike:
        if isinstance(d, s.DimInt):
            return d.value
        if isinstance(d, s.DimWild):
            return self.fresh.dim("d")
        if isinstance(d, s.DimName):
            if self.scope is self.program_scope:
                size = self.scoped("dim", d.name, lambda: Dim(d.name))
            else:
                size = self.scoped("dim", d.name, lambda: self.fresh.dim(d.name))
            if d.marked:
                self.fresh.marked.add(size.name)
            return size
        left, right = self.dim(d.left), self.dim(d.right)
        return left + right if d.op == "+" else left - right if d.op == "-" else left * right

    def scoped(self, kind: str, name: str, make):
        key = (kind, name)
        if key not in self.scope:
            self.scope[key] = make()
        return self.scope[key]


class _Renamer:
    """Applies a renaming of variables to types, shapes and dims (an instantiation)."""

    def __init__(self) -> None:
        self.types: Dict[TypeVar, TypeVar] = {}
        self.dtypes: Dict[DTypeVar, DTypeVar] = {}
        self.shapes: Dict[ShapeVar, ShapeVar] = {}
        self.dims: Dict[str, Dim] = {}

    def copy(self, var: Var) -> object:
        """The variable `var` is renamed to (a size variable by its name)."""
        if isinstance(var, str):
            return self.dims[var].name
        if isinstance(var, TypeVar):
            return self.types[var]
        return self.dtypes[var] if isinstance(var, DTypeVar) else self.shapes[var]

    def dim(self, d: DimLike) -> DimLike:
        return subs(d, self.dims) if self.dims and free_symbols(d) & set(self.dims) else d

    def shape(self, shape: Shape) -> Shape:
        return tuple(self.shapes.get(e, e) if isinstance(e, ShapeVar) else self.dim(e) for e in shape)

    def type(self, t: Type) -> Type:
        if isinstance(t, TypeVar):
            return self.types.get(t, t)
        if isinstance(t, TensorType):
            dtype = self.dtypes.get(t.dtype, t.dtype) if isinstance(t.dtype, DTypeVar) else t.dtype
            return TensorType(dtype, self.shape(t.shape))
        if isinstance(t, FunctionType):
            return FunctionType(self.type(t.arg), self.type(t.result))
        if isinstance(t, TupleType):
            return TupleType(tuple(self.type(item) for item in t.items))
        raise TypeError(f"not a type: {t!r}")

    def __call__(self, term):
        if isinstance(term, tuple):
            return self.shape(term)
        if isinstance(term, (int, Dim)):
            return self.dim(term)
        return self.type(term)


def _spine(e: s.Expr) -> Tuple[s.Expr, List[s.Expr]]:
    args: List[s.Expr] = []
    while isinstance(e, s.App):
        args.insert(0, e.arg)
        e = e.function
    return e, args


def _describe(head: s.Expr) -> str:
    return f"`{head.name}`" if isinstance(head, s.Var) else "the function"


def _int_literal(e: s.Expr) -> Optional[int]:
    if isinstance(e, s.Num) and isinstance(e.value, int):
        return e.value
    if isinstance(e, s.Neg) and isinstance(e.operand, s.Num) and isinstance(e.operand.value, int):
        return -e.operand.value
    return None


def _statics_text(builtin: Builtin) -> str:
    return " and ".join(label for label, _, _ in builtin.statics)


def _example(builtin: Builtin) -> str:
    examples = {"index": "0", "int": "1", "shape": "[n, 2]"}
    return " ".join([builtin.name] + [examples[kind] for _, kind, _ in builtin.statics] + ["x"])


# -- reading the results ------------------------------------------------------------------------------

def format_residual(c: Constraint, namer: Namer) -> str:
    """A residual constraint as the check it stands for (`M % 4 == 0`, `H >= 5`)."""
    if isinstance(c, DimEq):
        return f"{format_dim(c.left, namer)} == {format_dim(c.right, namer)}"
    if isinstance(c, AtLeast):
        return f"{format_dim(c.value, namer)} >= {format_dim(c.least, namer)}"
    if isinstance(c, Divides):
        return f"{format_dim(c.value, namer)} % {c.divisor} == 0"
    if isinstance(c, (ShapeEq, SameSize)):
        relation = "==" if isinstance(c, ShapeEq) else "holds as many elements as"
        return f"{format_shape(c.left, namer)} {relation} {format_shape(c.right, namer)}"
    if isinstance(c, Broadcast):
        return (f"{format_shape(c.out, namer)} == broadcast({format_shape(c.left, namer)}, "
                f"{format_shape(c.right, namer)})")
    if isinstance(c, OneOrEqual):
        dim = format_dim(c.dim, namer)
        return f"{dim} == 1 or {dim} == {format_dim(c.other, namer)}"
    if isinstance(c, TypeEq):
        return f"{format_type(c.left, namer)} == {format_type(c.right, namer)}"
    raise TypeError(f"not a constraint: {c!r}")


def residual_terms(c: Constraint) -> List[Type]:
    """The terms of a residual, as types (for a namer to reserve their names)."""
    found: List[Type] = []
    for term in constraint_terms(c):
        if isinstance(term, tuple):
            found.append(TensorType("f32", term))
        elif isinstance(term, (int, Dim)):
            found.append(TensorType("f32", (term,)))
        else:
            found.append(term)
    return found


def display_type(t: Type, namer: Namer) -> Type:
    """`t` with internal size and shape variables renamed to what the namer shows."""
    def dim(d: DimLike) -> DimLike:
        return namer.dim(d)

    def rename(term: Type) -> Type:
        if isinstance(term, TensorType):
            shape = tuple(ShapeVar(e.id, namer.shape_var(e)[1:]) if isinstance(e, ShapeVar) else e
                          for e in term.shape)
            return map_dims(TensorType(term.dtype, shape), dim)
        if isinstance(term, FunctionType):
            return FunctionType(rename(term.arg), rename(term.result))
        if isinstance(term, TupleType):
            return TupleType(tuple(rename(item) for item in term.items))
        return term

    return rename(t)

