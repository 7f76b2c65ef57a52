"""`infer` and `compile`: the front end's entry points, and what they give back."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ... import dims as dims_module
from ...dims import Dim, DimLike, free_symbols
from ...errors import ShapeCheckError, ShapeError
from ...op_graph.op import Op
from .errors import AxonShapeError, AxonTypeError
from .infer import Binding, Inferencer, display_type, format_residual, residual_terms
from .lower import Lowering, NeedsSizes
from .parser import parse, parse_type
from .printing import Namer, format_type
from .shared import SharedChecks, substituted
from .source import Source
from .types import Fresh, ShapeVar, TensorType, Type, is_internal
from .values import TensorValue, TupleValue, arranged

SourceLike = Union[str, "os.PathLike[str]"]
ShapeLike = Union[str, Sequence[Union[int, str, Dim]]]


@dataclass(frozen=True)
class Residual:
    """A condition on the sizes that inference could not decide: checked when sizes are known.

    Parameters
    ----------
    text : str
        The condition (`M % 4 == 0`, `H >= 5`).
    positions : tuple of (int, int)
        The (line, column) of every sub-expression it comes from.
    """

    text: str
    positions: Tuple[Tuple[int, int], ...]

    def __str__(self) -> str:
        where = ", ".join(f"{line}:{column}" for line, column in self.positions)
        return f"{self.text}  (from {where})" if where else self.text


@dataclass(frozen=True)
class TypeScheme:
    """The inferred type of one top-level name, with its variables shown by name.

    Parameters
    ----------
    name : str
        The name bound.
    kind : str
        "val" or "fun".
    type : Type
        The type (a TensorType, FunctionType or TupleType of `axgraph.frontends.axon.types`),
        its size variables renamed to the names printed.
    text : str
        The type as Axon writes it (`f32[*b, k] -> f32[k, n] -> f32[*b, n]`).
    conditions : tuple of str
        What each use of a polymorphic function must satisfy beyond its type (for
        instance how its arguments broadcast), as it was left when it was generalized.
    """

    name: str
    kind: str
    type: Type
    text: str
    conditions: Tuple[str, ...] = ()

    @property
    def shape(self) -> Tuple[object, ...]:
        """The shape of a tensor's type: dims (int or Dim) and `*s` texts for shape variables."""
        if not isinstance(self.type, TensorType):
            raise AxonTypeError(f"{self.name} is not a tensor: {self.text}", [])
        return tuple(f"*{e.hint}" if isinstance(e, ShapeVar) else e for e in self.type.shape)

    def __str__(self) -> str:
        if self.conditions:
            return f"{self.text} with {'; '.join(self.conditions)}"
        return self.text


class Inference(Mapping[str, TypeScheme]):
    """What `infer` found: each top-level name's type, and the conditions left for run time.

    It is a mapping from name to `TypeScheme` (a later binding of a name replaces an
    earlier one); `str()` prints one line per binding, then the residual checks.
    `infer` makes it; `residuals` holds the `Residual` checks.

    Parameters
    ----------
    inferencer : Inferencer
        The inference run over the program.
    program : syntax.Program
        The program's syntax tree.
    source : Source
        The program's text.
    declared : mapping of str to Type
        The types of the inputs given by name.
    """

    def __init__(self, inferencer: Inferencer, program, source: Source, declared: Mapping[str, Type]):
        self._inferencer = inferencer
        self._program = program
        self._source = source
        self._declared = dict(declared)
        self._schemes: Dict[str, TypeScheme] = {}
        for binding in inferencer.bindings:
            self._schemes[binding.name] = self._scheme(binding)
        self.residuals: Tuple[Residual, ...] = tuple(self._residuals())

    def _scheme(self, binding: Binding) -> TypeScheme:
        solver = self._inferencer.solver
        t = solver.resolve(binding.scheme.type)
        constraints = [solver.resolve_constraint(c) for c in binding.scheme.constraints]
        terms = [t] + [term for c in constraints for term in residual_terms(c)]
        namer = Namer(self._inferencer.fresh.hints, terms)
        text = format_type(t, namer)
        conditions = tuple(format_residual(c, namer) for c in constraints)
        return TypeScheme(binding.name, binding.kind, display_type(t, namer), text, conditions)

    def _residuals(self) -> Iterator[Residual]:
        for constraint in self._inferencer.solver.residuals():
            namer = Namer(self._inferencer.fresh.hints, residual_terms(constraint))
            positions = sorted({(span.line, span.column) for span, _ in
                                self._inferencer.causes(constraint.blame)})
            yield Residual(format_residual(constraint, namer), tuple(positions))

    @property
    def sizes(self) -> Tuple[str, ...]:
        """The program's free size variables, by printed name: those fed when it runs."""
        return tuple(sorted(self._size_vars()))

    def _size_vars(self) -> Dict[str, str]:
        """Each free size variable of the inputs: printed name -> the solver's name."""
        found = set()
        for effect in self._inferencer.effects:
            if effect.kind == "input":
                found |= _size_names(self._inferencer.solver.resolve(effect.type))
        for t in self._declared.values():
            found |= _size_names(self._inferencer.solver.resolve(t))
        namer = Namer(self._inferencer.fresh.hints)
        return {namer.size(name): name for name in sorted(found)}

    def __getitem__(self, name: str) -> TypeScheme:
        return self._schemes[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._schemes)

    def __len__(self) -> int:
        return len(self._schemes)

    def __str__(self) -> str:
        lines = [f"{scheme.kind} {name} : {scheme}" for name, scheme in self._schemes.items()]
        lines += [f"check {residual}" for residual in self.residuals]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<Inference of {len(self)} bindings>"


def _size_names(t: Type) -> set:
    names: set = set()
    if isinstance(t, TensorType):
        for elem in t.shape:
            if not isinstance(elem, ShapeVar):
                names |= free_symbols(elem)
    return names


def _read(source: SourceLike) -> Source:
    if isinstance(source, str):
        return Source(source)
    if isinstance(source, os.PathLike):
        path = os.fspath(source)
        with open(path, encoding="utf-8") as handle:
            return Source(handle.read(), path)
    raise AxonTypeError(f"an Axon program is a str or a path, not {type(source).__name__}", [])


def _declared_types(inferencer: Inferencer, input_shapes: Mapping[str, ShapeLike]) -> Dict[str, Type]:
    """The type of each input given by name: Axon type text, or a sequence of dims."""
    declared: Dict[str, Type] = {}
    for name, shape in input_shapes.items():
        if isinstance(shape, str):
            declared[name] = inferencer.annotation(parse_type(Source(shape, f"<type of {name}>")))
            continue
        if not isinstance(shape, (tuple, list)):
            raise AxonTypeError(f"the shape given for {name} must be a type like 'f32[B, 784]' or "
                                f"a sequence of dims, not {shape!r}", [])
        items: List[object] = []
        for item in shape:
            if isinstance(item, str) and item.startswith("*"):
                items.append(inferencer.scoped("shape", item[1:], lambda name=item[1:]: inferencer.fresh.shape(name)))
            elif isinstance(item, str):
                items.append(inferencer.scoped("dim", item, lambda name=item: Dim(name)))
            elif isinstance(item, Dim) or (isinstance(item, (int, np.integer)) and not isinstance(item, bool)):
                items.append(item if isinstance(item, Dim) else int(item))
            else:
                raise AxonTypeError(f"a dim of {name}'s shape must be an int, a name or a Dim, "
                                    f"not {item!r}", [])
        declared[name] = TensorType("f32", tuple(items))  # type: ignore[arg-type]
    return declared


def _infer(source: SourceLike, input_shapes: Mapping[str, ShapeLike]):
    text = _read(source)
    tree = parse(text)
    inferencer = Inferencer(text, {}, Fresh())
    declared = _declared_types(inferencer, input_shapes)
    inferencer.inputs = dict(declared)
    inferencer.program(tree)
    return Inference(inferencer, tree, text, declared)


def infer(source: SourceLike, **input_shapes: ShapeLike) -> Inference:
    """Infer the type of every top-level name of an Axon program, shapes included.

    Parameters
    ----------
    source : str or path-like
        The program's text, or the path of a file holding it (positions in messages
        then start with the path).
    **input_shapes : str or sequence
        A type for each name the program uses without defining it: Axon type text
        (`x="f32[B, 784]"`) or a sequence of dims (`x=("B", 784)`, element type f32).
        Size names here are the program's sizes, shared with its top-level values.

    Returns
    -------
    Inference
        A mapping from each top-level name to its `TypeScheme`; `residuals` lists the
        conditions on sizes left for run time, `sizes` the free size variables.

    Raises
    ------
    AxonSyntaxError
        The program does not parse.
    AxonTypeError
        A value is used as something it is not, or a name is unknown.
    AxonShapeError
        Shapes cannot fit; the message names every contributing position.

    Examples
    --------
    >>> from axgraph.frontends import axon
    >>> print(axon.infer("val y = relu (x @ w)", x="f32[B, 784]", w="f32[784, 10]")["y"])
    f32[B, 10]
    """
    return _infer(source, input_shapes)


@dataclass(frozen=True)
class Graph:
    """The axgraph graph of a compiled program, under one binding of its sizes.

    Parameters
    ----------
    values : dict of str to Op
        Each top-level tensor value (a tuple value `t` gives `t.0`, `t.1`, ...), its axes
        in the order of its Axon shape.
    inputs : dict of str to Op
        The placeholders to feed, by name: inputs given to `compile` by name, then each
        `input` (named by its `val`, else `<val>.input<i>`).
    params : dict of str to Op
        The trainable variables, named as inputs are (`<val>.param<i>`).
    shapes : dict of str to tuple
        The dims of each value, input and parameter (ints and Dim expressions).
    sizes : dict of str to int
        The sizes this graph was built for (empty: every size symbolic).
    """

    values: Dict[str, Op]
    inputs: Dict[str, Op]
    params: Dict[str, Op]
    shapes: Dict[str, Tuple[DimLike, ...]]
    sizes: Dict[str, int]


class Program:
    """A compiled Axon program: its inference, and its axgraph graph built on demand.

    `graph()` keeps every size symbolic where it can (convolutions, pools, slices and
    reshapes included: their conditions are checked when data is fed);
    `graph(sizes={...})` builds the graph for known sizes, which loops over a symbolic
    length and parameters of a symbolic shape need.
    `values`, `inputs` and `params` are those of `graph()`.

    Parameters
    ----------
    inference : Inference
        The inferred program.
    """

    def __init__(self, inference: Inference):
        self.inference = inference
        self._graphs: Dict[Tuple, Graph] = {}

    @property
    def values(self) -> Dict[str, Op]:
        """The top-level tensor values of `graph()`."""
        return self.graph().values

    @property
    def inputs(self) -> Dict[str, Op]:
        """The placeholders of `graph()`."""
        return self.graph().inputs

    @property
    def params(self) -> Dict[str, Op]:
        """The trainable variables of `graph()`."""
        return self.graph().params

    def graph(self, sizes: Optional[Mapping[str, int]] = None, *, seed: int = 0,
              params: Optional[Mapping[str, np.ndarray]] = None) -> Graph:
        """The program's graph, with the sizes given bound and the others symbolic.

        Parameters
        ----------
        sizes : mapping of str to int, optional
            Values for some of the program's sizes (`Inference.sizes`).
        seed : int
            Seed of the parameters' initial values (Glorot uniform; zeros for vectors).
        params : mapping of str to array, optional
            Initial values for parameters, by name, instead of drawn ones.

        Returns
        -------
        Graph
            The graph; the same object for the same arguments (without `params`).

        Raises
        ------
        AxonShapeError
            A size given contradicts the program, a residual check fails for the
            sizes given, or a construct needs a size that is neither given nor known.
        """
        bindings = self._bindings(dict(sizes or {}))
        try:
            return self._graph(bindings, dict(sizes or {}), seed, params)
        except NeedsSizes as need:
            free = ", ".join(self.inference.sizes) or "none"
            raise AxonShapeError(f"{need.message}: build the graph for known sizes with "
                                 f"graph(sizes={{...}}) (the program's sizes: {free})",
                                 [(need.span, "here")] if need.span else [],
                                 self.inference._inferencer.source) from None

    def _graph(self, bindings: Dict[str, DimLike], sizes: Dict[str, int], seed: int,
               params: Optional[Mapping[str, np.ndarray]]) -> Graph:
        """The graph for `bindings` of the solver's variables; NeedsSizes if it needs more."""
        key = (tuple(sorted(bindings.items())), seed)
        if params is None and key in self._graphs:
            return self._graphs[key]
        self._check_residuals(bindings, sizes)
        inferencer = self.inference._inferencer
        lowering = Lowering(inferencer, self.inference._program, bindings, dict(params or {}),
                            np.random.default_rng(seed))
        lowering.prepare_inputs(self.inference._declared)
        graph = _collect(lowering, lowering.run(), sizes)
        if params is None:
            self._graphs[key] = graph
        return graph

    def _bindings(self, sizes: Dict[str, int]) -> Dict[str, DimLike]:
        """Values of the solver's variables that make each given size what it is given."""
        known = self.inference._size_vars()
        bindings: Dict[str, DimLike] = {}
        for name, value in sizes.items():
            if name not in known:
                raise AxonShapeError(f"{name} is not a size of this program (its sizes: "
                                     f"{', '.join(sorted(known)) or 'none'})", [])
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise AxonShapeError(f"size {name} must be an int >= 1, not {value!r}", [])
            bindings[known[name]] = int(value)
        return bindings

    def _check_residuals(self, bindings: Mapping[str, DimLike], sizes: Mapping[str, int]) -> None:
        inferencer = self.inference._inferencer
        if not bindings:
            return
        checks = SharedChecks(inferencer.origins, inferencer.source.name or "<axon>",
                              inferencer.fresh)
        for residual in inferencer.solver.residuals():
            checks.add(substituted(residual, bindings))
        conflicts = checks.conflicts()
        if conflicts:
            raise AxonShapeError(f"{checks.message(conflicts[0])} (with {_sizes_text(sizes)})",
                                 inferencer.causes(checks.blame(conflicts[0])), inferencer.source)

    def run(self, inputs: Mapping[str, np.ndarray], backend: str = "numpy", seed: int = 0,
            params: Optional[Mapping[str, np.ndarray]] = None) -> Dict[str, np.ndarray]:
        """Run the program once on arrays and return every top-level value.

        The sizes are read from the arrays' shapes; the graph is built once for
        symbolic sizes, or, where a construct needs known sizes (a loop, a parameter of
        symbolic shape), once per binding.

        Parameters
        ----------
        inputs : mapping of str to array
            A value for each of `inputs` by name.
        backend : str
            The transformer to run on (`ng.transformer_choices()`).
        seed : int
            Seed of the parameters' initial values.
        params : mapping of str to array, optional
            Values for parameters, by name, instead of drawn ones.

        Returns
        -------
        dict of str to numpy.ndarray
            Each value of `Graph.values`, by name.

        Raises
        ------
        AxonShapeError
            An input is missing or unknown, or the arrays' shapes do not fit the program
            (a check made when they are fed included: its message quotes the construct).
        """
        from ...transformers import make_transformer

        inferencer = self.inference._inferencer
        graph = self._symbolic_or_none(seed, params)
        names = list(graph.inputs if graph is not None else self._any_graph_inputs())
        missing = [n for n in names if n not in inputs]
        unknown = [n for n in inputs if n not in names]
        if missing or unknown:
            raise AxonShapeError(f"run needs exactly the inputs {names}; missing {missing}, "
                                 f"unknown {unknown}", [])
        arrays = [np.asarray(inputs[n]) for n in names]
        if graph is None:
            expected = [self._input_dims(n) for n in names]
            try:
                values = dims_module.bind_shapes(expected, [a.shape for a in arrays],
                                                 lambda i: f"input {names[i]}")
            except ShapeError as error:
                raise AxonShapeError(error.message, []) from None
            namer = Namer(inferencer.fresh.hints)
            sizes = {namer.size(k): v for k, v in values.items() if not is_internal(k)}
            graph = self._graph(dict(values), sizes, seed, params)
        with make_transformer(backend) as transformer:
            computation = transformer.computation(list(graph.values.values()),
                                                  *[graph.inputs[n] for n in names])
            try:
                results = computation(*arrays)
            except ShapeCheckError as error:
                raise _fed_error(error) from None
        return dict(zip(graph.values, results))

    def _symbolic_or_none(self, seed: int, params: Optional[Mapping[str, np.ndarray]] = None
                          ) -> Optional[Graph]:
        try:
            return self._graph({}, {}, seed, params)
        except NeedsSizes:
            return None

    def _any_graph_inputs(self) -> Dict[str, object]:
        inferencer = self.inference._inferencer
        names: Dict[str, object] = {name: None for name in self.inference._declared}
        for effect in inferencer.effects:
            if effect.kind == "input":
                names[effect.name] = None
        return names

    def _input_dims(self, name: str) -> Tuple[DimLike, ...]:
        inferencer = self.inference._inferencer
        t = self.inference._declared.get(name)
        if t is None:
            t = next(e.type for e in inferencer.effects if e.name == name)
        resolved = inferencer.solver.resolve(t)
        assert isinstance(resolved, TensorType)
        return tuple(resolved.shape)  # type: ignore[arg-type]  # an input's rank is known

    def __repr__(self) -> str:
        return f"<axon.Program of {len(self.inference)} bindings>"


def _sizes_text(sizes: Mapping[str, int]) -> str:
    return ", ".join(f"{k} = {v}" for k, v in sizes.items()) or "the sizes given"


def _collect(lowering: Lowering, env: Mapping[str, object], sizes: Dict[str, int]) -> Graph:
    values: Dict[str, Op] = {}
    shapes: Dict[str, Tuple[DimLike, ...]] = {}

    def add(name: str, value: object) -> None:
        if isinstance(value, TensorValue):
            values[name] = arranged(value.op, value.axes)
            shapes[name] = value.dims
        elif isinstance(value, TupleValue):
            for index, item in enumerate(value.items):
                add(f"{name}.{index}", item)

    for name, value in env.items():
        add(name, value)
    inputs = {name: v.op for name, v in lowering.inputs.items()}
    params = {name: v.op for name, v in lowering.params.items()}
    for name, v in list(lowering.inputs.items()) + list(lowering.params.items()):
        shapes[name] = v.dims
    return Graph(values, inputs, params, shapes, dict(sizes))


def compile(source: SourceLike, **input_shapes: ShapeLike) -> Program:
    """Infer an Axon program and lower it to an axgraph graph.

    The graph runs on every transformer and keeps symbolic sizes symbolic where it can
    (see `Program`); its values are ordinary ops, so `ng.deriv` differentiates them.

    Parameters
    ----------
    source : str or path-like
        The program's text, or the path of a file holding it.
    **input_shapes : str or sequence
        Types of the names the program uses without defining them, as for `infer`.

    Returns
    -------
    Program
        The inferred program; `program.graph()` (and `values`, `inputs`, `params`)
        gives its graph.

    Raises
    ------
    AxonSyntaxError, AxonTypeError, AxonShapeError
        As `infer` does; and AxonShapeError when a value's sizes are not determined by
        the program's inputs.

    Examples
    --------
    >>> import numpy as np
    >>> from axgraph.frontends import axon
    >>> program = axon.compile("val y = x * 2.0", x="f32[n]")
    >>> program.run({"x": np.arange(3.0)})["y"]
    array([0., 2., 4.], dtype=float32)
    """
    program = Program(_infer(source, input_shapes))
    program._symbolic_or_none(0)  # surfaces errors of lowering now, not at first use
    return program


def _fed_error(error: ShapeCheckError) -> AxonShapeError:
    """The feed-time check `run` met, as an AxonShapeError with the same text, positioned at
    the program's constructs it quotes (a graph fed by hand raises the ShapeCheckError)."""
    fed = AxonShapeError(error.message, [])
    fed.positions = tuple(sorted({(o.line, o.column) for c in error.conflicts
                                  for o in c.origins if o.column}))
    return fed
