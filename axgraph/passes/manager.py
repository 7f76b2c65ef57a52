"""PassManager: run passes in order, verify the function between them, report.

A pass is anything callable as `pass_(function) -> Function` with a `name`
(subclass `Pass`, or give a plain function). Because every pass returns a new
Function and never changes its input, a verifier can compare before and
after: a pass that breaks the graph is caught at once and named, instead of
surfacing later as a wrong number in a backend. Each pass run is recorded
with the rewrite rules that fired in it (`rewrite_log`), and can be traced.
"""
from __future__ import annotations

import abc

import time
from dataclasses import dataclass
from typing import Callable, ClassVar, Dict, List, Optional, Sequence, Tuple, Union

from ..core.function import Function
from ..core.node import Node
from ..core.ops import Parameter
from ..errors import GraphError
from .pattern import RewriteRule, RuleIndex, renamed_copy, rewrite, sweep
from .rewrite_log import RewriteLog, TraceSetting, tracer


class VerificationError(GraphError):
    """A function broke a structural rule (after a pass: that pass is named)."""


class Pass(abc.ABC):
    """Base class of passes: `run(function) -> Function`, never changing the input.

    A pass that finds nothing to do should return its input itself, so that
    the manager can tell that a round changed nothing.
    """

    name: ClassVar[str] = "pass"

    @abc.abstractmethod
    def run(self, function: Function) -> Function:
        """The rewritten function (the input itself when nothing changed)."""

    def __call__(self, function: Function) -> Function:
        return self.run(function)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


class RulePass(Pass):
    """A pass made of rewrite rules, applied to a fixed point by `pattern.rewrite`.

    A pass whose rules' replacements are never rewritten again by its rules sets
    `one_sweep`: one `pattern.sweep` is already the fixed point, and the sweep
    that would only confirm it is skipped.
    """

    rules: Sequence[RewriteRule] = ()
    one_sweep: ClassVar[bool] = False

    def __init__(self, rules: Optional[Sequence[RewriteRule]] = None):
        self._index = RuleIndex(self.rules if rules is None else rules)

    def run(self, function: Function) -> Function:
        if self.one_sweep:
            return sweep(function, self._index)
        return rewrite(function, self._index)


PassLike = Union[Pass, Callable[[Function], Function]]


def pass_name(pass_: PassLike) -> str:
    return getattr(pass_, "name", "") or getattr(pass_, "__name__", type(pass_).__name__)


# -- verification --------------------------------------------------------------------------

def _reinferred(node: Node):
    """The node's element type and shape inferred afresh from its inputs and attributes.

    A throwaway twin is built the way `with_inputs` builds, so a node whose
    recorded type no longer follows from its inputs shows up.
    """
    twin = renamed_copy(node, node.inputs)
    return twin.element_type, twin.shape


def verify(function: Function, reference: Optional[Function] = None) -> None:
    """Raise VerificationError unless `function` is well formed.

    Checks: nodes are listed once each, inputs before users (topological
    order); parameters come first and every Parameter node is listed; every
    input and result is a listed node (nothing dangling) and every listed node
    is needed by a result or is a parameter; each node's type, inferred again,
    equals its recorded type. With `reference` (the function before a pass):
    the same parameter nodes in the same order, and results of the same count,
    element types and shapes.
    """
    where = function.name
    nodes = function.nodes
    position: Dict[Node, int] = {}
    for k, node in enumerate(nodes):
        if node in position:
            raise VerificationError(f"{where}: {node.op} {node.name} is listed twice")
        position[node] = k
    parameters = function.parameters
    if tuple(nodes[:len(parameters)]) != tuple(parameters):
        raise VerificationError(f"{where}: parameters are not listed first, in order")
    for k, node in enumerate(nodes):
        if isinstance(node, Parameter) and k >= len(parameters):
            raise VerificationError(f"{where}: parameter {node.name} is used but not a "
                                    f"parameter of the function")
        for i in node.inputs:
            if i not in position:
                raise VerificationError(f"{where}: {node.op} {node.name} reads {i.op} {i.name}, "
                                        f"which is not a node of the function (dangling)")
            if position[i] >= k:
                raise VerificationError(f"{where}: {node.op} {node.name} comes before its input "
                                        f"{i.op} {i.name} (not topological)")
        if node.inputs:  # leaves' types follow from their attributes alone
            element_type, shape = _reinferred(node)
            if element_type != node.element_type or shape != node.shape:
                raise VerificationError(f"{where}: {node.op} {node.name} is recorded as "
                                        f"{node.type_str()} but infers {element_type}{shape}")
    needed: set[Node] = set(parameters)
    stack = [r for r in function.results]
    for r in stack:
        if r not in position:
            raise VerificationError(f"{where}: result {r.op} {r.name} is not a node of the "
                                    f"function")
    while stack:
        node = stack.pop()
        if node not in needed:
            needed.add(node)
            stack.extend(node.inputs)
    unused = [n for n in nodes if n not in needed]
    if unused:
        raise VerificationError(f"{where}: {unused[0].op} {unused[0].name} is listed but no "
                                f"result needs it (dead node kept)")
    if reference is not None:
        _same_signature(function, reference)


def _same_signature(function: Function, reference: Function) -> None:
    where = function.name
    if len(function.parameters) != len(reference.parameters) or any(
            a is not b for a, b in zip(function.parameters, reference.parameters)):
        raise VerificationError(f"{where}: the parameters changed (a pass must keep the same "
                                f"Parameter nodes, in order)")
    if len(function.results) != len(reference.results):
        raise VerificationError(f"{where}: {len(function.results)} results, was "
                                f"{len(reference.results)}")
    for k, (new, old) in enumerate(zip(function.results, reference.results)):
        if new.element_type != old.element_type or new.shape != old.shape:
            raise VerificationError(f"{where}: result {k} is {new.type_str()}, was "
                                    f"{old.type_str()}")


# -- running ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class PassRecord:
    """One pass run: node counts before and after, the time it took, and the rules that
    fired, as (rule name, times) pairs in order of first firing (a pass may still drop
    what they built: sinking keeps its result only when layout copies go away)."""

    round: int
    name: str
    nodes_before: int
    nodes_after: int
    changed: bool
    seconds: float
    rules_fired: Tuple[Tuple[str, int], ...] = ()


class PassManager:
    """Run `passes` in order, verifying after each, for up to `max_rounds` rounds.

    Rounds repeat while the previous one changed something (one pass often
    exposes work for an earlier one). `verify_each=False` skips the checks
    (they cost a re-inference of every node). `report` holds one `PassRecord`
    per pass run of the last `run`. `trace` logs each rewrite with its rule and
    the user's file:line (True: to stderr; or a callable taking each line; None:
    when the environment variable AXGRAPH_TRACE_PASSES is set; see `rewrite_log`).
    """

    def __init__(self, passes: Sequence[PassLike], max_rounds: int = 1,
                 verify_each: bool = True, trace: TraceSetting = None):
        if max_rounds < 1:
            raise ValueError("max_rounds must be at least 1")
        for p in passes:
            if not callable(p):
                raise TypeError(f"a pass must be callable (Function -> Function), not {p!r}")
        self.passes = list(passes)
        self.max_rounds = max_rounds
        self.verify_each = verify_each
        self.trace = trace
        self.report: List[PassRecord] = []

    def run(self, function: Function) -> Function:
        """The function after every pass (the input is left unchanged)."""
        if not isinstance(function, Function):
            raise TypeError(f"PassManager.run takes a core Function, not "
                            f"{type(function).__name__}")
        self.report = []
        trace = tracer(self.trace)
        if self.verify_each:
            verify(function)
        for round_number in range(1, self.max_rounds + 1):
            round_changed = False
            for pass_ in self.passes:
                before = function
                name = pass_name(pass_)
                start = time.perf_counter()
                with RewriteLog(name, trace).active() as log:
                    function = pass_(before)
                seconds = time.perf_counter() - start
                if not isinstance(function, Function):
                    raise VerificationError(f"pass {name!r} returned "
                                            f"{type(function).__name__}, not a Function")
                if self.verify_each:
                    try:
                        verify(function, before)
                    except VerificationError as error:
                        raise VerificationError(f"after pass {name!r}: {error.message}") from None
                changed = _changed(before, function)
                round_changed = round_changed or changed
                self.report.append(PassRecord(round_number, name, len(before.nodes),
                                              len(function.nodes), changed, seconds,
                                              log.fired()))
            if not round_changed:
                break
        return function

    __call__ = run

    def format_report(self) -> str:
        """The report as a small table: round, pass, nodes before -> after, time, rules."""
        width = max([len("pass")] + [len(r.name) for r in self.report])
        lines = [f"round  {'pass':<{width}}  nodes before -> after  ms  rules fired"]
        for r in self.report:
            mark = "" if r.changed else "  (no change)"
            rules = ", ".join(f"{rule} x{count}" for rule, count in r.rules_fired)
            lines.append(f"{r.round:>5}  {r.name:<{width}}  {r.nodes_before:>12} -> "
                         f"{r.nodes_after:<5}  {r.seconds * 1e3:.2f}{mark}"
                         f"{'  ' + rules if rules else ''}")
        return "\n".join(lines)


def _changed(before: Function, after: Function) -> bool:
    if after is before:
        return False
    return (len(after.results) != len(before.results)
            or any(a is not b for a, b in zip(after.results, before.results)))


__all__ = ["Pass", "RulePass", "PassManager", "PassRecord", "VerificationError", "verify",
           "pass_name"]
