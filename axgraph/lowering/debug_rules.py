"""Lowering of PrintOp to the host call core.host.Print, chained in program order.

Each print takes the previous print of the computation as an extra input, so
every backend prints in the schedule's order; `lower` keeps the last one
among the Function's results (see LoweringContext.effects).
"""
from __future__ import annotations

from ..core.host import Print
from ..op_graph import debug
from .context import LoweringContext
from .rules import rule


@rule(debug.PrintOp)
def _print(ctx: LoweringContext, op: debug.PrintOp, x):
    node = Print(x, op.prefix, after=ctx.effects[-1] if ctx.effects else None,
                  show_value=op.show_value)
    ctx.effects.append(node)
    return node
