"""The bridge's errors, and where in the user's model an FX node came from."""
from __future__ import annotations

import re
from typing import Any, Optional, Tuple

from ... import errors
from ...errors import GraphError

_FRAME = re.compile(r'File "([^"]+)", line (\d+)')


class TorchBridgeError(GraphError):
    """A PyTorch graph that the bridge could not turn into axgraph ops."""


class UnsupportedOperatorError(TorchBridgeError, errors.UnsupportedOperatorError):
    """An ATen op without a rule, met where falling back to PyTorch was turned off."""


def node_location(node: Any) -> Optional[Tuple[str, int]]:
    """The user's `(file, line)` an FX node was traced from (its innermost frame), or None.

    Dynamo records the Python stack of every traced op in ``node.meta["stack_trace"]``;
    the last frame is the user's model code that called the op.
    """
    frames = _FRAME.findall(node.meta.get("stack_trace") or "")
    if not frames:
        return None
    file, line = frames[-1]
    return file, int(line)


def node_source(node: Any) -> str:
    """The source line an FX node was traced from (stripped), or "" when not recorded."""
    lines = (node.meta.get("stack_trace") or "").rstrip().splitlines()
    for line in reversed(lines):
        text = line.strip()
        if text and not text.startswith("File ") and set(text) - set("^~ "):
            return text
    return ""


__all__ = ["TorchBridgeError", "UnsupportedOperatorError", "node_location", "node_source"]
