"""Function: parameters in, results out, and every node between in topological order.

The core's rules: no parameter twice; every parameter the results use must be
listed; results are computed into distinct arrays. A Function is immutable;
`replace` gives a new Function with a node swapped for another of the same
type (consumers are rebuilt through `Node.with_inputs`), which is how passes
rewrite. `print(function)` shows one line per node.

`map_nodes` is the one loop that rebuilds a Function node by node: every
rewrite (each pass, `Function.replace`) walks its nodes inputs first,
rebuilds each over its inputs' replacements, lets a rewrite replace it, and
builds a new Function only if some node changed. Written once, so that three
facts hold for all of them:

* order: a node is offered after all its inputs, over their final
  replacements (rebuilt through `with_inputs`, so re-checked like new nodes);
* location: nodes the rewrite builds record the user's file and line of the
  node they replace, not the line of the pass that built them, so errors and
  traces still point at the user's code;
* change detection: when every node maps to itself the input Function is
  returned, the same object, which is how a pass says "nothing to do".
"""
from __future__ import annotations

from typing import (Callable, Dict, FrozenSet, Iterable, List, Mapping, Optional, Sequence, Tuple,
                    Union, cast)

import numpy as np

from ..traversal import post_order
from ..debug_info import user_location
from ..dims import Dim, bind_shapes
from ..errors import DTypeError, GraphError, ShapeError
from .node import Node, at_location
from .ops.leaves import Parameter
from .tensor_types import ElementType, Shape


#: Argument shapes a compiled function remembers as bound (and checked); past this many,
#: a function fed ever new shapes forgets them all rather than grow.
KNOWN_SHAPES = 64


def _as_nodes(values, what: str) -> Tuple[Node, ...]:
    if isinstance(values, Node):
        values = (values,)
    if not hasattr(values, "__iter__"):
        raise GraphError(f"Function: {what} must be a sequence of nodes, not {values!r:.60}",
                         user_location())
    values = tuple(values)
    for position, value in enumerate(values):
        if not isinstance(value, Node):
            raise GraphError(f"Function: {what}[{position}] is {type(value).__name__}, not a "
                             f"core node", user_location())
    return values


def topological_order(results: Iterable[Node]) -> List[Node]:
    """Every node the results depend on, inputs before users, in first-visit order."""
    return post_order(results, lambda node: node.inputs)


def attribute_symbols(node: Node) -> FrozenSet[str]:
    """Size variables used by a node's attributes (Slice bounds, DimValue, shapes...)."""
    names: set = set()
    pending = list(node.attributes.values())
    while pending:
        value = pending.pop()
        if isinstance(value, Dim):
            names |= value.free_symbols
        elif isinstance(value, tuple):
            pending.extend(value)
    return frozenset(names)


class Function:
    """A computation over `parameters` that produces `results`: what backends compile.

    Building one checks the rules of the core: no parameter is listed twice, every
    parameter the results use is listed, and every size variable a node uses can be
    bound from the parameters' shapes. A Function is immutable: passes rewrite one
    with `replace`, which gives a new Function. `print(function)` shows one line
    per node.

    Parameters
    ----------
    results : Node or sequence of Node
        What the function computes, at least one node. Every node they depend on
        belongs to the function.
    parameters : sequence of Parameter
        The function's arguments, in call order: each Parameter the results use,
        once (others may be listed too).
    name : str, optional
        The name printing and error messages use (default "function").
    bound_outside : iterable of str, optional
        Size variables an enclosing function binds: the body of a `Fused` node may
        use sizes none of its own parameters carry.

    Raises
    ------
    GraphError
        `results` or `parameters` is not a sequence of core nodes, or `results`
        is empty; a parameter is not a Parameter or is listed twice; or the
        results use a Parameter that is not listed.
    ShapeError
        A node uses a size variable that no parameter's shape (nor
        `bound_outside`) binds.

    Examples
    --------
    >>> from axgraph import core
    >>> x = core.Parameter(core.f32, ("N", 3), name="x")
    >>> y = core.Multiply(x, x, name="y")
    >>> f = core.Function([y], [x], name="square")
    >>> print(f)
    square(x):
      x = Parameter() : f32[N, 3]
      y = Multiply(x, x) : f32[N, 3]
      return y
    """

    def __init__(self, results: Union[Node, Sequence[Node]], parameters: Sequence[Node],
                 name: Optional[str] = None, bound_outside: Iterable[str] = ()):
        results = _as_nodes(results, "results")
        parameters = _as_nodes(parameters, "parameters")
        location = user_location()
        if not results:
            raise GraphError("Function: needs at least one result", location)
        seen = set()
        for position, parameter in enumerate(parameters):
            if not isinstance(parameter, Parameter):
                raise GraphError(f"Function: parameters[{position}] is a {parameter.op} node "
                                 f"({parameter.name}), not a Parameter", location)
            if parameter in seen:
                raise GraphError(f"Function: parameter {parameter.name} appears twice in "
                                 f"parameters (at {parameter.location[0]}:"
                                 f"{parameter.location[1]})", location)
            seen.add(parameter)
        order = topological_order(results)
        for node in order:
            if isinstance(node, Parameter) and node not in seen:
                raise GraphError(f"Function: the results use parameter {node.name} "
                                 f"{node.type_str()} (made at {node.location[0]}:"
                                 f"{node.location[1]}), which is not in parameters", location)
        self._results = results
        self._parameters = cast(Tuple[Parameter, ...], parameters)  # each checked above
        self._nodes = tuple(parameters) + tuple(n for n in order if n not in seen)
        self._name = name or "function"
        self._free_symbols = frozenset().union(*(p.shape.free_symbols for p in parameters))
        #: Shapes already bound, to their bindings: a call with shapes seen before (the
        #: steady state of a training loop) skips the unification.
        self._bound: Dict[Tuple[Tuple[int, ...], ...], Dict[str, int]] = {}
        # A Fused node's body may use sizes its enclosing function binds.
        bindable = self._free_symbols | frozenset(bound_outside)
        for node in self._nodes:
            unbound = (node.shape.free_symbols | attribute_symbols(node)) - bindable
            if unbound:
                raise ShapeError(f"Function: {node.op} {node.name} {node.type_str()} uses size "
                                 f"variable(s) {', '.join(sorted(unbound))} that no parameter's "
                                 f"shape can bind", node.location)

    # -- inspection ---------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def parameters(self) -> Tuple[Parameter, ...]:
        return self._parameters

    @property
    def results(self) -> Tuple[Node, ...]:
        return self._results

    @property
    def nodes(self) -> Tuple[Node, ...]:
        """Parameters first (in order), then every other node, inputs before users."""
        return self._nodes

    @property
    def free_symbols(self) -> FrozenSet[str]:
        """Size variables of the parameters' shapes: bound from the arguments per call."""
        return self._free_symbols

    def describe_parameter(self, index: int) -> str:
        """`parameter 1 (x: f32[3, 4])`: position (from 0), user name if any, type."""
        return f"parameter {index} ({parameter_signature(self._parameters[index])})"

    # -- binding ----------------------------------------------------------------------------
    def bind(self, shapes: Sequence[Sequence[int]]) -> Dict[str, int]:
        """The value of each size variable, given each parameter's actual shape.

        The one way sizes are bound from data (every backend calls it): dims are
        unified with the shapes, solving equations where needed (`2*N + 1` against 7
        gives N = 3).

        Parameters
        ----------
        shapes : sequence of sequence of int
            One concrete shape per parameter, in order.

        Returns
        -------
        dict of str to int
            The value of every size variable of the parameters' shapes.

        Raises
        ------
        ShapeError
            The number of shapes is not the number of parameters; a shape does not
            fit its parameter's (a rank, a dim, two values for one variable); or a
            size variable cannot be determined from the shapes. It names the
            parameter, the dim and both values.
        """
        try:
            key = tuple(map(tuple, shapes))
            return dict(self._bound[key])
        except (KeyError, TypeError):
            pass
        if len(shapes) != len(self._parameters):
            raise ShapeError(f"{self._name}.bind: {len(self._parameters)} parameter(s) "
                             f"({', '.join(parameter_signature(p) for p in self._parameters)}); "
                             f"got {len(shapes)} shape(s)", user_location())
        try:
            bindings = bind_shapes([p.shape for p in self._parameters], shapes,
                                   lambda i: f"{self.describe_parameter(i)} takes "
                                             f"{self._parameters[i].type_str()}; got shape "
                                             f"{tuple(shapes[i])}")
        except ShapeError as error:
            raise ShapeError(error.message, user_location()) from None
        missing = self._free_symbols - set(bindings)
        if missing:
            raise ShapeError(f"size variable(s) {', '.join(sorted(missing))} of {self._name} "
                             f"cannot be bound from the shapes of its parameters "
                             f"({', '.join(parameter_signature(p) for p in self._parameters)})",
                             user_location())
        if len(self._bound) >= KNOWN_SHAPES:  # a stream of new shapes: forget, do not grow
            self._bound.clear()
        self._bound[tuple(map(tuple, shapes))] = dict(bindings)
        return bindings

    def users(self) -> Dict[Node, List[Node]]:
        """Each node's consumers within this function (in node order)."""
        result: Dict[Node, List[Node]] = {n: [] for n in self._nodes}
        for node in self._nodes:
            for i in node.inputs:
                if node not in result[i]:
                    result[i].append(node)
        return result

    # -- rewriting ------------------------------------------------------------------------
    def replace(self, node: Node, new_node: Node) -> "Function":
        """A new Function in which `new_node` stands wherever `node` was used.

        Every consumer downstream is rebuilt with `with_inputs` (and so re-checked);
        nodes not downstream are shared with this Function. `new_node` may use
        `node` itself: uses inside `new_node`'s own graph are left alone. A
        Parameter may only be replaced by a Parameter, which takes its place in the
        list.

        Parameters
        ----------
        node : Node
            A node of this function.
        new_node : Node
            Its replacement, of the same element type and shape.

        Returns
        -------
        Function
            The rewritten function (this one is unchanged).

        Raises
        ------
        GraphError
            `node` is not a node of this function, `new_node` is not a core node, or
            a Parameter would be replaced by another op.
        DTypeError
            `new_node`'s element type is not `node`'s.
        ShapeError
            `new_node`'s shape is not `node`'s.
        """
        return self.replace_all({node: new_node})

    def replace_all(self, mapping: Mapping[Node, Node]) -> "Function":
        """Several replacements at once, each as `replace` makes it.

        Parameters
        ----------
        mapping : mapping of Node to Node
            Each node of this function to replace, and its replacement.

        Returns
        -------
        Function
            The rewritten function, or this one when nothing changed.

        Raises
        ------
        GraphError
            A key is not a node of this function, a value is not a core node, or a
            Parameter would be replaced by another op.
        DTypeError
            A replacement's element type is not its node's.
        ShapeError
            A replacement's shape is not its node's.
        """
        location = user_location()
        members = set(self._nodes)
        for old, new in mapping.items():
            if old not in members:
                raise GraphError(f"replace: {old.name} is not a node of {self._name}", location)
            if not isinstance(new, Node):
                raise GraphError(f"replace: {old.name} must be replaced by a core node, not "
                                 f"{type(new).__name__}", location)
            if new.element_type != old.element_type:
                raise DTypeError(f"replace: {new.name} has element type {new.element_type}, "
                                 f"{old.name} has {old.element_type}", location)
            if new.shape != old.shape:
                raise ShapeError(f"replace: {new.name} has shape {new.shape}, {old.name} has "
                                 f"{old.shape}", location)
            if isinstance(old, Parameter) and not isinstance(new, Parameter):
                raise GraphError(f"replace: parameter {old.name} can only be replaced by a "
                                 f"Parameter, not {new.op}", location)
        return map_nodes(self, lambda node, original: mapping.get(original))

    # -- printing ------------------------------------------------------------------------
    def display_names(self) -> Dict[Node, str]:
        """The names printing uses: user names where unique, else %0, %1, ... in node order."""
        names: Dict[Node, str] = {}
        used = set()
        counter = 0
        for node in self._nodes:
            if node.has_user_name and node.name not in used:
                shown = node.name
            else:
                shown = f"%{counter}"
                counter += 1
            used.add(shown)
            names[node] = shown
        return names

    def __str__(self) -> str:
        names = self.display_names()
        lines = [f"{self._name}({', '.join(names[p] for p in self._parameters)}):"]
        for node in self._nodes:
            arguments = [names[i] for i in node.inputs]
            arguments += [f"{key}={format_attribute(node.attributes[key])}"
                          for key in node._attributes if key not in node._hidden
                          and (key not in node._shown_when_set or node.attributes[key])]
            lines.append(f"  {names[node]} = {node.op}({', '.join(arguments)}) : "
                         f"{node.type_str()}")
            for value in node.attributes.values():  # a Fused node's body, indented under it
                if isinstance(value, Function):
                    lines.extend("      " + line for line in str(value).splitlines())
        lines.append("  return " + ", ".join(names[r] for r in self._results))
        return "\n".join(lines)

    def __repr__(self) -> str:
        params = ", ".join(p.type_str() for p in self._parameters)
        results = ", ".join(r.type_str() for r in self._results)
        return f"<Function {self._name}({params}) -> ({results}), {len(self._nodes)} nodes>"


#: `rewrite(node, original)`: the node to use instead of `node` (None: keep it). `node` is
#: `original` rebuilt over its inputs' replacements (`original` itself when none changed).
Rewrite = Callable[[Node, Node], Optional[Node]]


def map_nodes(function: Function, rewrite: Rewrite) -> Function:
    """`function` with every node replaced by what `rewrite` gives for it.

    Nodes are offered in order, Parameters included (a rewrite that must keep
    the signature declines them). What `rewrite` builds is recorded at the
    location of the node it replaces.

    Parameters
    ----------
    function : Function
        The function to rebuild (left unchanged).
    rewrite : callable
        `rewrite(node, original)` -> the node to use instead, or None to keep
        `node` (`original` rebuilt over its inputs' replacements).

    Returns
    -------
    Function
        The rebuilt function; `function` itself when nothing changed.
    """
    rebuilt: Dict[Node, Node] = {}
    changed = False
    for original in function.nodes:
        node = original.with_inputs([rebuilt[i] for i in original.inputs])
        with at_location(original.location):
            replacement = rewrite(node, original)
        if replacement is not None:
            node = replacement
        rebuilt[original] = node
        changed = changed or node is not original
    if not changed:
        return function
    return Function([rebuilt[r] for r in function.results],
                    [rebuilt[p] for p in function.parameters], function.name)


def parameter_signature(parameter: Node) -> str:
    """`x: f32[3, 4]` (a parameter with a user name) or `f32[3, 4]`."""
    who = f"{parameter.name}: " if parameter.has_user_name else ""
    return who + parameter.type_str()


def format_attribute(value) -> str:
    """Compact, stable text for an attribute value."""
    if isinstance(value, (ElementType, Shape, Dim)):
        return str(value)
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            return repr(value.item())
        if value.size <= 8:
            return repr(value.tolist())
        return f"<array {list(value.shape)}>"
    if isinstance(value, tuple):
        inner = ", ".join(format_attribute(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    return repr(value)
