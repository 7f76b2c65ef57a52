"""Which rewrite rules fired during a pass: counted for its record, traced on request.

The PassManager opens a `RewriteLog` around each pass it runs, and
`RewriteRule.apply` calls `record_rewrite` each time a rule replaces a node,
so a pass made of rules reports what it did with no bookkeeping of its own
(a pass that rewrites some other way calls `record_rewrite` itself). Outside
a PassManager nothing is recorded.

The trace is one line per rewrite, naming the pass, the rule and the user's
file:line of the replaced node:

    axgraph pass algebraic-simplification: mul-one at model.py:41 (Multiply Multiply_12 -> Parameter x)

Turn it on with the environment variable `AXGRAPH_TRACE_PASSES=1` (lines go
to stderr) or with `PassManager(..., trace=True)`; `trace=` also takes a
callable that receives each line, and `trace=False` silences the variable.
"""
from __future__ import annotations

import contextlib
import contextvars
import os
import sys
from typing import Callable, Dict, Iterator, Optional, Tuple, Union

from ..core.node import Node

TRACE_VARIABLE = "AXGRAPH_TRACE_PASSES"

Tracer = Callable[[str], None]
TraceSetting = Union[bool, Tracer, None]

_active: contextvars.ContextVar[Optional["RewriteLog"]] = contextvars.ContextVar(
    "axgraph_rewrite_log", default=None)


class RewriteLog:
    """The rules fired during one pass run, with counts, in order of first firing."""

    def __init__(self, pass_name: str, trace: Optional[Tracer] = None):
        self.pass_name = pass_name
        self.trace = trace
        self.counts: Dict[str, int] = {}

    def record(self, rule: str, old: Node, new: Node) -> None:
        self.counts[rule] = self.counts.get(rule, 0) + 1
        if self.trace is not None:
            file, line = old.location
            self.trace(f"axgraph pass {self.pass_name}: {rule} at {file}:{line} "
                       f"({old.op} {old.name} -> {new.op} {new.name})")

    def fired(self) -> Tuple[Tuple[str, int], ...]:
        """(rule name, times fired) pairs."""
        return tuple(self.counts.items())

    @contextlib.contextmanager
    def active(self) -> Iterator["RewriteLog"]:
        """Record into this log the rewrites made inside the block."""
        token = _active.set(self)
        try:
            yield self
        finally:
            _active.reset(token)


def record_rewrite(rule: str, old: Node, new: Node) -> None:
    """Note that `rule` replaced `old` by `new` (into the active log, if any)."""
    log = _active.get()
    if log is not None:
        log.record(rule, old, new)


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr)


def tracer(setting: TraceSetting = None) -> Optional[Tracer]:
    """Where trace lines go: `setting` (True: stderr, a callable, False: nowhere) or,
    when None, stderr if the environment variable AXGRAPH_TRACE_PASSES is set (not 0)."""
    if setting is None:
        setting = os.environ.get(TRACE_VARIABLE, "").strip() not in ("", "0")
    if setting is True:
        return _to_stderr
    if setting is False:
        return None
    if not callable(setting):
        raise TypeError(f"trace must be True, False, None or a callable, not {setting!r}")
    return setting


__all__ = ["RewriteLog", "record_rewrite", "tracer", "TRACE_VARIABLE"]
