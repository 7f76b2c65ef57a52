"""`map_nodes`: the one loop that rebuilds a Function node by node.

Every rewrite of a Function (each pass, `Function.replace`) walks its nodes
inputs first, rebuilds each over its inputs' replacements, lets a rewrite
replace it, and builds a new Function only if some node changed. This is
that walk, written once, so that three facts hold for all of them:

* order: a node is offered after all its inputs, over their final
  replacements (rebuilt through `with_inputs`, so re-checked like new nodes);
* location: nodes the rewrite builds record the user's file and line of the
  node they replace, not the line of the pass that built them, so errors and
  traces still point at the user's code;
* change detection: when every node maps to itself the input Function is
  returned, the same object, which is how a pass says "nothing to do".

It lives in `core` (not `passes`) because `Function.replace` uses it too.
"""
from __future__ import annotations

from typing import Callable, Dict, Optional

from .function import Function
from .node import Node, at_location

#: `rewrite(node, original)`: the node to use instead of `node` (None: keep it). `node` is
#: `original` rebuilt over its inputs' replacements (`original` itself when none changed).
Rewrite = Callable[[Node, Node], Optional[Node]]


def map_nodes(function: Function, rewrite: Rewrite) -> Function:
    """`function` with every node replaced by what `rewrite` gives for it.

    Nodes are offered in order, Parameters included (a rewrite that must keep
    the signature declines them). What `rewrite` builds is recorded at the
    location of the node it replaces. Returns `function` itself when nothing
    changed.
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


__all__ = ["map_nodes", "Rewrite"]
