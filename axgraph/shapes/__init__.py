"""Symbolic shapes solved by constraints.

Sizes may be unknown until data is fed: declared (`ng.dim("B")`), written as
expressions (`2*T`), or left open (an axis made without a length). This
package reasons about them without data:

* `constraints`: what the solver is told (`Equal`, `AtLeast`, `Divides`,
  `OneOrEqual`, `SameShape`, `SameSize` and `Broadcast` over dims and shape
  variables), each with its `Origin`;
* `prover`: proved / refuted / unknown answers to `e >= 0`, equality and
  divisibility, from bounds;
* `monotone`: the least size satisfying a check that only grows with it;
* `solver`: `solve(constraints) -> Solution`, a worklist to a fixed point
  with bindings, residual checks and conflicts that name every line, and
  `Solver`, the same told one constraint at a time;
* `op_rules`: the constraints each kind of axes op makes;
* `inference`: `infer_shapes(results)` over an axes graph, and the checks
  of fed data (`ng.infer_shapes`, `ng.ShapeReport`).

A front end that generates its own constraints (a language with shape
variables and appended shapes) uses `solve` directly: make `Equal`,
`SameShape` (shapes are sequences of dims and `ShapeVar`s), `SameSize`,
`Broadcast`, `OneOrEqual`, `AtLeast` and `Divides` objects with an `Origin` each, describe the variables
(`Variable`: rigid, flexible or derived), and read the `Solution` (or add them
to a `Solver` one by one).
"""
from .prover import (Verdict, interval, prove_at_least, prove_divides, prove_equal,
                     prove_nonnegative, simplify)

# infer_shapes and ShapeReport (also importable from here) are documented as ng.infer_shapes
# and ng.ShapeReport
__all__ = ["AtLeast", "Broadcast", "Divides", "Equal", "OneOrEqual", "Origin", "SameShape",
           "SameSize", "ShapeVar", "Variable",
           "format_shape", "Verdict", "interval",
           "prove_at_least", "prove_divides", "prove_equal", "prove_nonnegative", "simplify", "Conflict",
           "CONFLICT_KINDS", "Quotient", "Residual", "Solution", "Solver", "quotient", "solve"]


#: Imported on first use: `import axgraph` needs the prover (the op modules use it), not the
#: constraints or the solver, which only solving a graph, checking feeds and the Axon front
#: end need.
_LAZY = {"constraints": ("AtLeast", "Broadcast", "Divides", "Equal", "OneOrEqual", "Origin",
                         "SameShape", "SameSize", "ShapeVar", "Variable", "format_shape"),
         "solver": ("CONFLICT_KINDS", "Conflict", "Quotient", "Residual", "Solution", "Solver", "quotient",
                    "solve"),
         "inference": ("ShapeReport", "infer_shapes")}


def __getattr__(name: str):
    # infer_shapes reads the axes graph, whose op modules use the prover: imported on first
    # use, so that `axgraph.shapes.prover` is importable from the op modules themselves
    for module, names in _LAZY.items():
        if name in names:
            import importlib

            return getattr(importlib.import_module(f".{module}", __name__), name)
    raise AttributeError(f"module 'axgraph.shapes' has no attribute {name!r}")
