"""Graph rewriting over the core IR: patterns, rules, passes and a PassManager.

    from axgraph import core, passes
    optimized = passes.PassManager(passes.default_passes(), max_rounds=3).run(function)

Every pass takes a `core.Function` and returns a new one (the input is never
changed), rebuilding it through `map_nodes`; the PassManager verifies the
structure between passes and records node counts and the rewrite rules that
fired per pass (`manager.report`, `manager.format_report()`), and traces each
rewrite on request (`AXGRAPH_TRACE_PASSES=1`). Bridge ops (framework ops
outside the core set, such as `Gelu`) are lowered to core ops by pattern
rules registered with `register_bridge` (framework bridges).
"""
from __future__ import annotations

from typing import List

from ..core.function import Function
from ..core.function import Rewrite, map_nodes
from .algebraic import AlgebraicSimplification
from .bridge import (BridgeLowering, Gelu, bridge_ops, bridge_rules, lower_gelu,
                     register_bridge, require_core)
from .concat_layout import ConcatAbsorbsLayout
from .constant_folding import ConstantFolding
from .convolution_matmul import ConvolutionAsMatmul
from .cse import CommonSubexpressionElimination
from .dce import DeadCodeElimination
from .manager import Pass, PassLike, PassManager, PassRecord, RulePass, VerificationError, verify
from .pad_sums import PadSumToConcat
from .pattern import (Any, Const, Match, Op, Pattern, RewriteRule, renamed_copy, rewrite, sweep,
                      uniform_fill, uniform_value)
from .rewrite_log import TRACE_VARIABLE, RewriteLog, record_rewrite
from .sinking import LayoutSinking
from .threshold_from_clamp import ThresholdFromClamp


def default_passes() -> List[Pass]:
    """The standard pipeline, in order (fresh instances each call).

    Bridge ops are lowered first so that every later pass sees core ops only;
    CSE runs early so identity rules such as Select(c, x, x) see shared
    nodes; folding precedes simplification so that constant subtrees
    collapse before rules look at them; dead code goes last, after the
    rewrites that orphan values.
    """
    return [BridgeLowering(), CommonSubexpressionElimination(), ConstantFolding(),
            AlgebraicSimplification(), PadSumToConcat(), ConcatAbsorbsLayout(), LayoutSinking(),
            DeadCodeElimination()]


def optimize(function: Function, max_rounds: int = 4) -> Function:
    """`function` after `default_passes()`, repeated until a round changes nothing."""
    return PassManager(default_passes(), max_rounds=max_rounds).run(function)


__all__ = ["Pass", "PassLike", "PassManager", "PassRecord", "RulePass", "VerificationError",
           "verify", "default_passes", "optimize", "map_nodes", "Rewrite",
           "RewriteLog", "record_rewrite", "TRACE_VARIABLE",
           "Pattern", "Any", "Op", "Const", "Match", "RewriteRule", "rewrite", "sweep",
           "uniform_value", "uniform_fill", "renamed_copy",
           "DeadCodeElimination", "CommonSubexpressionElimination", "ConstantFolding",
           "AlgebraicSimplification", "LayoutSinking", "BridgeLowering", "ConvolutionAsMatmul",
           "PadSumToConcat", "ConcatAbsorbsLayout", "ThresholdFromClamp",
           "Gelu", "lower_gelu", "register_bridge", "bridge_rules", "bridge_ops", "require_core"]
