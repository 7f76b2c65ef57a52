"""Bridge ops: framework ops outside the core set, lowered to core ops by patterns.

nGraph's design: "A framework bridge may define its own bridge-specific ops, as long
as they can be converted to transformer ops ... nGraph pattern replacement
facilities can be used to convert it into one of our core ops." Here a bridge
op is an ordinary `Node` subclass (checked at construction by its `_infer`,
printed like any node) that no backend has a kernel for; `register_bridge`
pairs it with a rewrite rule, and `BridgeLowering` applies every registered
rule so that only core ops reach a backend.

`Gelu` (the tanh approximation used by BERT and GPT-2) is the worked example:

    gelu(x) = 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))
"""
from __future__ import annotations

import math
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Type, Union

from ..core.function import Function
from ..core.node import Node
from ..core.ops import CORE_OPS, Add, Constant, Multiply, Tanh
from ..core.ops._checks import arity, require_kind
from ..core.tensor_types import ElementType, Shape
from ..errors import GraphError
from .manager import Pass
from .pattern import Any, Match, Op, RewriteRule, RuleIndex, rewrite


class Gelu(Node):
    """A bridge op: GELU with the tanh approximation, on a floating-point tensor."""

    def __init__(self, x: Node, name: Optional[str] = None):
        super().__init__((x,), {}, name)

    def _infer(self) -> Tuple[ElementType, Shape]:
        (x,) = arity(self, 1)
        require_kind(self, x, "float")
        return x.element_type, x.shape


def lower_gelu(match: Match) -> Node:
    """Gelu(x) as core ops; the constants fill x's shape (symbolic shapes work too)."""
    x = match["x"]

    def fill(value: float) -> Constant:
        return Constant(x.element_type, x.shape, value)

    cube = Multiply(x, Multiply(x, x))
    inner = Multiply(fill(math.sqrt(2.0 / math.pi)), Add(x, Multiply(fill(0.044715), cube)))
    return Multiply(Multiply(fill(0.5), x), Add(fill(1.0), Tanh(inner)))


# -- the registry -----------------------------------------------------------------------------

_BRIDGES: Dict[Type[Node], List[RewriteRule]] = {}

BridgeRule = Union[RewriteRule, Callable[[Node], Optional[Node]]]


def register_bridge(op_class: Type[Node], rule: BridgeRule) -> RewriteRule:
    """Make `BridgeLowering` lower `op_class` with `rule`; returns the rule.

    `rule` is a `RewriteRule` whose pattern's root is `op_class`, or simply a
    function `node -> core node` (wrapped as a rule matching `Op(op_class)`).
    Several rules for one op are tried in registration order; a rule may
    decline (return None) so that a later, more general one applies.
    """
    if not (isinstance(op_class, type) and issubclass(op_class, Node)):
        raise TypeError(f"register_bridge needs a Node subclass, not {op_class!r}")
    if issubclass(op_class, CORE_OPS):
        raise TypeError(f"{op_class.__name__} is a core op; bridge ops lower *to* core ops")
    if not isinstance(rule, RewriteRule):
        if not callable(rule):
            raise TypeError(f"a bridge rule is a RewriteRule or a function, not {rule!r}")
        function = rule
        rule = RewriteRule(Op(op_class), lambda match: function(match.root),
                           f"lower-{op_class.__name__}")
    roots = rule.pattern.root_classes
    if roots is None or not any(issubclass(op_class, r) for r in roots):
        raise TypeError(f"the rule {rule.name!r} does not match {op_class.__name__} at its root")
    _BRIDGES.setdefault(op_class, []).append(rule)
    return rule


def bridge_rules() -> Tuple[RewriteRule, ...]:
    """Every registered bridge rule, in registration order."""
    return tuple(rule for rules in _BRIDGES.values() for rule in rules)


def bridge_ops() -> Tuple[Type[Node], ...]:
    """The op classes that have a bridge rule."""
    return tuple(_BRIDGES)


register_bridge(Gelu, RewriteRule(Op(Gelu, Any("x")), lower_gelu, "lower-Gelu"))


class BridgeLowering(Pass):
    """Lower bridge ops to core ops with the registered rules (or `rules` given).

    With `strict=True`, any node left that is not a core op is an error naming
    it and its line, instead of a missing-kernel error later in a backend.
    """

    name = "bridge-lowering"

    def __init__(self, rules: Optional[Sequence[RewriteRule]] = None, strict: bool = False):
        self._rules = None if rules is None else tuple(rules)
        self.strict = strict

    def run(self, function: Function) -> Function:
        rules = bridge_rules() if self._rules is None else self._rules
        if any(not isinstance(n, CORE_OPS) for n in function.nodes):
            function = rewrite(function, RuleIndex(rules))
        if self.strict:
            require_core(function)
        return function


def require_core(function: Function) -> None:
    """Raise GraphError naming the first node that is not a core op."""
    for node in function.nodes:
        if not isinstance(node, CORE_OPS):
            raise GraphError(f"{node.op} {node.name} is not a core op and no bridge rule "
                             f"lowered it (register one with passes.register_bridge)",
                             node.location)


__all__ = ["Gelu", "lower_gelu", "register_bridge", "bridge_rules", "bridge_ops",
           "BridgeLowering", "require_core"]
