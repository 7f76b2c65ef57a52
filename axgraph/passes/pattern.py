"""Patterns over the core IR and a rewrite driver (nGraph's "pattern replacement").

A pattern is a small graph whose nodes describe nodes of the IR:

* `Op(core.Add, x, one)` matches an `Add` node whose inputs match `x` and `one`
  (any subclass of the op class counts; a tuple of classes matches any of them);
* `Any("x")` is a wildcard that matches any node and *labels* it `x`;
* `Const("one", value=1)` matches a Constant all of whose elements equal 1.

Every pattern node can carry a `label` (the match binds the node there) and a
`predicate` (a further test on the node). A label used twice must bind the
same node both times, so `Op(core.Select, Any(), Any("x"), Any("x"))` matches
only `Select(c, x, x)`. `Op(..., commutative=True)` also tries its two child
patterns the other way round.

A `RewriteRule(pattern, build_replacement)` replaces a matched node with what
`build_replacement(match)` returns (None declines). `rewrite(function, rules)`
applies rules bottom-up, sweep after sweep, until nothing changes: a rewrite
can expose another, and a fixed point is what callers expect.

Why matching is over nodes, not over a mutable graph: nodes are immutable, so
a rewrite builds new nodes and the driver threads them through `with_inputs`
(each sweep is one `map_nodes`). The old function is never changed.
"""
from __future__ import annotations

import abc

from typing import (Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Type,
                    Union)

import numpy as np

from ..core.function import Function
from ..core.function import map_nodes
from ..core.node import Node
from ..core.ops import Constant, Parameter
from ..errors import GraphError
from .rewrite_log import record_rewrite

Predicate = Callable[[Node], bool]
OpClasses = Union[Type[Node], Tuple[Type[Node], ...]]
Bindings = Dict[str, Node]


class Match:
    """A successful match: the matched `root`, labelled bindings and use counts.

    `match["x"]` is the node bound to label `x`. `match.uses(node)` is how many
    readers `node` has in the function being rewritten (a result counts as one
    reader; None when unknown, see `UseCounts`); rules that must not duplicate
    work (sinking) ask it.
    """

    def __init__(self, root: Node, bindings: Mapping[str, Node],
                 uses: Optional[Callable[[Node], Optional[int]]] = None):
        self.root = root
        self.bindings = dict(bindings)
        self._uses = uses

    def __getitem__(self, label: str) -> Node:
        return self.bindings[label]

    def __contains__(self, label: str) -> bool:
        return label in self.bindings

    def get(self, label: str, default: Optional[Node] = None) -> Optional[Node]:
        return self.bindings.get(label, default)

    def uses(self, node: Node) -> Optional[int]:
        """Number of consumers of `node`, or None when unknown."""
        return None if self._uses is None else self._uses(node)

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v.name}" for k, v in self.bindings.items())
        return f"<Match {self.root.name}: {inner}>"


class Pattern(abc.ABC):
    """Base of pattern nodes: an optional label and predicate, and matching."""

    def __init__(self, label: Optional[str] = None, predicate: Optional[Predicate] = None):
        self.label = label
        self.predicate = predicate

    # -- what subclasses define -----------------------------------------------------
    @abc.abstractmethod
    def _candidates(self, node: Node, bindings: Bindings) -> Iterator[Bindings]:
        """Bindings extending `bindings` under which this pattern (minus label and
        predicate) matches `node`; several when there is a choice (commutative)."""

    @property
    def root_classes(self) -> Optional[Tuple[Type[Node], ...]]:
        """Op classes the root can match (None: any); the driver indexes rules by it."""
        return None

    # -- matching ----------------------------------------------------------------------
    def matches(self, node: Node, bindings: Optional[Bindings] = None) -> Iterator[Bindings]:
        """Every way this pattern matches `node` (each a dict label -> node)."""
        bindings = {} if bindings is None else bindings
        if self.predicate is not None and not self.predicate(node):
            return
        if self.label is not None:
            bound = bindings.get(self.label)
            if bound is not None and bound is not node:
                return
        for extended in self._candidates(node, bindings):
            if self.label is not None and self.label not in extended:
                extended = dict(extended)
                extended[self.label] = node
            yield extended

    def match(self, node: Node) -> Optional[Match]:
        """The first match of this pattern at `node`, or None."""
        for bindings in self.matches(node):
            return Match(node, bindings)
        return None


class Any(Pattern):
    """A wildcard: matches any node (that passes the predicate), binding its label."""

    def _candidates(self, node: Node, bindings: Bindings) -> Iterator[Bindings]:
        yield bindings

    def __repr__(self) -> str:
        return f"Any({self.label!r})" if self.label else "Any()"


AttrTest = Union[Callable[[object], bool], object]


class Op(Pattern):
    """A node of the given op class(es) whose inputs match the child patterns.

    With no child patterns the inputs are not looked at (any arity). `attrs`
    maps attribute names to a required value or to a test on the value.
    """

    def __init__(self, op: OpClasses, *inputs: Pattern, label: Optional[str] = None,
                 predicate: Optional[Predicate] = None,
                 attrs: Optional[Mapping[str, AttrTest]] = None, commutative: bool = False):
        super().__init__(label, predicate)
        self.op = op if isinstance(op, tuple) else (op,)
        for cls in self.op:
            if not (isinstance(cls, type) and issubclass(cls, Node)):
                raise TypeError(f"Op pattern needs core node classes, not {cls!r}")
        for child in inputs:
            if not isinstance(child, Pattern):
                raise TypeError(f"Op pattern inputs must be patterns, not {child!r}")
        if commutative and len(inputs) != 2:
            raise TypeError("a commutative Op pattern needs exactly two input patterns")
        self.inputs: Tuple[Pattern, ...] = inputs
        self.attrs = dict(attrs or {})
        self.commutative = commutative

    @property
    def root_classes(self) -> Optional[Tuple[Type[Node], ...]]:
        return self.op

    def _attrs_match(self, node: Node) -> bool:
        for key, wanted in self.attrs.items():
            if key not in node.attributes:
                return False
            value = node.attributes[key]
            if callable(wanted):
                if not wanted(value):
                    return False
            elif value != wanted:
                return False
        return True

    def _candidates(self, node: Node, bindings: Bindings) -> Iterator[Bindings]:
        if not isinstance(node, self.op) or not self._attrs_match(node):
            return
        if not self.inputs:
            yield bindings
            return
        if len(node.inputs) != len(self.inputs):
            return
        orders = [self.inputs]
        if self.commutative:
            orders.append(self.inputs[::-1])
        for children in orders:
            yield from _match_all(children, node.inputs, bindings)

    def __repr__(self) -> str:
        names = "|".join(c.__name__ for c in self.op)
        inner = ", ".join(repr(c) for c in self.inputs)
        return f"Op({names}{', ' if inner else ''}{inner})"


def _match_all(patterns: Sequence[Pattern], nodes: Sequence[Node],
               bindings: Bindings) -> Iterator[Bindings]:
    """Bindings under which patterns[k] matches nodes[k] for every k (backtracking)."""
    if not patterns:
        yield bindings
        return
    for first in patterns[0].matches(nodes[0], bindings):
        yield from _match_all(patterns[1:], nodes[1:], first)


def uniform_value(node: Node) -> Optional[np.ndarray]:
    """The single value (0-d array) of a Constant whose elements are all bitwise equal.

    Bitwise, so that -0.0 and 0.0 (or two NaNs with other payloads) are not
    taken for one another: rewrites keyed on the value must stay exact.
    """
    if not isinstance(node, Constant):
        return None
    return uniform_fill(node.attributes["value"])


def uniform_fill(value: np.ndarray) -> Optional[np.ndarray]:
    """The single value (0-d array) of `value` when all its elements are bitwise equal."""
    if value.ndim == 0:
        return value
    if value.size == 0:
        return None
    flat = np.ascontiguousarray(value).reshape(-1)
    raw = flat.view(np.uint8).reshape(flat.size, flat.dtype.itemsize)
    if not bool(np.all(raw == raw[0])):
        return None
    return flat[0:1].reshape(())


class Const(Pattern):
    """A Constant whose elements all equal `value` (any uniform Constant when None)."""

    def __init__(self, label: Optional[str] = None, value: Optional[object] = None,
                 predicate: Optional[Predicate] = None):
        super().__init__(label, predicate)
        self.value = value

    @property
    def root_classes(self) -> Optional[Tuple[Type[Node], ...]]:
        return (Constant,)

    def _candidates(self, node: Node, bindings: Bindings) -> Iterator[Bindings]:
        found = uniform_value(node)
        if found is None:
            return
        if self.value is not None and not bool(found == self.value):
            return
        yield bindings

    def __repr__(self) -> str:
        return f"Const({self.label!r}, value={self.value!r})"


def renamed_copy(node: Node, inputs: Sequence[Node], name: Optional[str] = None) -> Node:
    """`node`'s op and attributes over `inputs`, re-checked, under `name` (None: automatic).

    `with_inputs` keeps the node's name, which is right when the rebuilt node
    stands for the old value; a rewrite that computes a *different* value with
    the same op (sinking moves `exp` above a transpose) must not show the
    user's name on it. Built through the same `_init` that `with_inputs` uses.
    """
    copy = object.__new__(type(node))
    copy._init(tuple(inputs), dict(node.attributes), name, node.location)
    return copy


Replacement = Callable[[Match], Optional[Node]]


class RewriteRule:
    """Replace what `pattern` matches by `build_replacement(match)` (None declines).

    The replacement must have the matched node's element type and shape; the
    rule checks and names itself if not. Each replacement is recorded under
    the rule's name (`rewrite_log`). Run inside `map_nodes`, new nodes take
    the replaced node's location, so errors still point at the user's line.
    """

    def __init__(self, pattern: Pattern, build_replacement: Replacement,
                 name: Optional[str] = None):
        if not isinstance(pattern, Pattern):
            raise TypeError(f"RewriteRule needs a Pattern, not {pattern!r}")
        self.pattern = pattern
        self.build_replacement = build_replacement
        self.name: str = name if name else getattr(build_replacement, "__name__", "rule")

    def apply(self, node: Node,
              uses: Optional[Callable[[Node], Optional[int]]] = None) -> Optional[Node]:
        """The replacement for `node`, or None when the rule does not apply."""
        for bindings in self.pattern.matches(node):
            new = self.build_replacement(Match(node, bindings, uses))
            if new is None or new is node:
                continue
            if not isinstance(new, Node):
                raise GraphError(f"rewrite rule {self.name!r} returned {type(new).__name__}, "
                                 f"not a core node", node.location)
            if new.element_type != node.element_type or new.shape != node.shape:
                raise GraphError(f"rewrite rule {self.name!r} replaced {node.op} {node.name} "
                                 f"{node.type_str()} by {new.op} {new.type_str()}: a replacement "
                                 f"must keep the element type and shape", node.location)
            record_rewrite(self.name, node, new)
            return new
        return None

    def __repr__(self) -> str:
        return f"<RewriteRule {self.name}: {self.pattern!r}>"


class RuleIndex:
    """Rules looked up by a node's class (through its MRO), in the order given."""

    def __init__(self, rules: Sequence[RewriteRule]):
        self.rules = tuple(rules)
        self._cache: Dict[type, Tuple[RewriteRule, ...]] = {}

    def for_class(self, cls: type) -> Tuple[RewriteRule, ...]:
        found = self._cache.get(cls)
        if found is None:
            found = tuple(r for r in self.rules
                          if r.pattern.root_classes is None
                          or issubclass(cls, r.pattern.root_classes))
            self._cache[cls] = found
        return found


MAX_SWEEPS = 100
MAX_LOCAL_STEPS = 50


def rewrite(function: Function, rules: Union[Sequence[RewriteRule], RuleIndex],
            max_sweeps: int = MAX_SWEEPS) -> Function:
    """`function` with `rules` applied until no rule fires (the original is unchanged).

    Each sweep visits nodes inputs-first, rebuilds each over its rewritten
    inputs, and applies rules at that node until none fires. Sweeps repeat
    until one changes nothing; a rule set that keeps rewriting (two rules
    undoing each other) is an error rather than a hang. Parameters are never
    rewritten: they are the function's signature.
    """
    index = _indexed(rules)
    for _ in range(max_sweeps):
        rewritten = sweep(function, index)
        if rewritten is function:
            return function
        function = rewritten
    names = ", ".join(r.name for r in index.rules)
    raise GraphError(f"rewrite: no fixed point after {max_sweeps} sweeps with rules {names}")


class UseCounts:
    """How many readers each node has during a sweep (consumers, plus one per result).

    Counts start from the function being swept. A node that stands in for an
    original one (rebuilt over new inputs, or a rule's new replacement) takes
    over the original's count, so a chain of rewrites can proceed within one
    sweep. When a replacement is an *existing* node, the original's readers
    are added to it: an over-estimate (the original may have read it), which
    is the safe side for rules that refuse to duplicate work. Nodes built
    inside a replacement, below its root, are unknown (None) until the next
    sweep recounts. Counting waits until a rule first asks (most rule sets
    never do); the stand-ins noted before then are replayed onto the counts.
    """

    def __init__(self, function: Function):
        self._function = function
        self._counts: Optional[Dict[Node, int]] = None
        self._origin: Dict[Node, Node] = {}
        self._pending: List[Tuple[Node, Node]] = []

    def __call__(self, node: Node) -> Optional[int]:
        return self._counted().get(self._origin.get(node, node))

    def stands_for(self, new: Node, old: Node) -> None:
        """`new` now takes the place of `old` (whose readers read `new` from now on)."""
        if new is old:
            return
        if self._counts is None:
            self._pending.append((new, old))
        else:
            self._take_over(self._counts, new, old)

    def _counted(self) -> Dict[Node, int]:
        if self._counts is None:
            counts = {n: len(c) for n, c in self._function.users().items()}
            for r in self._function.results:
                counts[r] += 1
            self._counts = counts
            for new, old in self._pending:
                self._take_over(counts, new, old)
            self._pending.clear()
        return self._counts

    def _take_over(self, counts: Dict[Node, int], new: Node, old: Node) -> None:
        known = self._origin.get(new, new)
        if known in counts:
            counts[known] += self(old) or 0
        else:
            self._origin[new] = self._origin.get(old, old)


def _indexed(rules: Union[Sequence[RewriteRule], RuleIndex]) -> RuleIndex:
    return rules if isinstance(rules, RuleIndex) else RuleIndex(rules)


def sweep(function: Function, rules: Union[Sequence[RewriteRule], RuleIndex]) -> Function:
    """One sweep of `rewrite`: every node, inputs first, with rules applied at it until
    none fires. Enough on its own when no rule's replacement can be rewritten again by
    the rules (folding, lowering one op to others): `rewrite`'s next sweep would find
    nothing to do."""
    index = _indexed(rules)
    uses = UseCounts(function)

    def apply_rules(node: Node, original: Node) -> Optional[Node]:
        """The rules at `node`, the first that fires each time, until none does."""
        if isinstance(original, Parameter):
            return None
        uses.stands_for(node, original)
        for _ in range(MAX_LOCAL_STEPS):
            new = _apply_first(node, index, uses)
            if new is None:
                break
            uses.stands_for(new, node)
            node = new
        return node

    return map_nodes(function, apply_rules)


def _apply_first(node: Node, index: RuleIndex,
                 uses: Callable[[Node], Optional[int]]) -> Optional[Node]:
    for rule in index.for_class(type(node)):
        new = rule.apply(node, uses)
        if new is not None:
            return new
    return None


__all__ = ["Match", "Pattern", "Any", "Op", "Const", "RewriteRule", "RuleIndex", "rewrite",
           "sweep", "uniform_value", "uniform_fill", "renamed_copy"]
