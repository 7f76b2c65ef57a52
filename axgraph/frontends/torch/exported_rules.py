"""The table of `import_exported`'s rules: one per ATen overload, with the check of its
arguments (the torch bridge's own, where the bridge declares one)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional

import torch

from .registry import RULES, Arguments, Check, op_name

if TYPE_CHECKING:
    from .exported import Importer

ImportRule = Callable[["Importer", Any, Arguments], Any]
IMPORT_RULES: Dict[Any, ImportRule] = {}
IMPORT_CHECKS: Dict[Any, Check] = {}


def import_rule(*overloads: Any, check: Optional[Check] = None
                ) -> Callable[[ImportRule], ImportRule]:
    """Register an import rule; `check(node)` says why a node is beyond it (None: it is not)."""
    def register(function: ImportRule) -> ImportRule:
        for overload in overloads:
            IMPORT_RULES[overload] = function
            if check is not None:
                IMPORT_CHECKS[overload] = check
        return function
    return register


def bridge_check(overload: Any) -> Optional[Check]:
    """The torch bridge's check of `overload`'s arguments: one judgement for both."""
    return RULES[overload].check


def refusal(node: Any) -> Optional[str]:
    """Why `import_exported` cannot take this node (None: it can)."""
    if node.target not in IMPORT_RULES:
        return "no rule"
    check = IMPORT_CHECKS.get(node.target)
    return check(node) if check is not None else None


def imported_ops() -> List[str]:
    """The ATen overloads `import_exported` turns into axes-graph ops, sorted.

    Returns
    -------
    list of str
        Their printed names (``aten.addmm.default``).
    """
    return sorted(op_name(op) for op in IMPORT_RULES)


def numpy_dtype(value: Any) -> Any:
    """The NumPy element type of a (fake) tensor's dtype."""
    return torch.empty((), dtype=value.dtype).numpy().dtype


__all__ = ["ImportRule", "IMPORT_RULES", "import_rule", "bridge_check", "refusal",
           "imported_ops", "numpy_dtype"]
