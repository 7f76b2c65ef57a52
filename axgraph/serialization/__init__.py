"""Files of axgraph: variables (checkpoints of values) and whole graphs, never pickled.

Variables: `save_variables` / `restore_variables` write and read one .npz of arrays
with a JSON manifest (`axgraph.serialization.variables`). Graphs: `save_graph` /
`load_graph` write and read an ``.axg`` file holding the axes graph, its axes and
the values of its stored tensors (`axgraph.serialization.graphs`); `save_function` /
`load_function` do the same for a core IR Function (`axgraph.serialization.functions`).
All kinds are
written atomically and read as untrusted input (`axgraph.variables_file`): a file
that is truncated, crafted or not ours is a `SerializationError` naming the path and
the problem, and nothing in a file can run code.
"""
from __future__ import annotations

from ..errors import SerializationError
from .functions import CORE_FORMAT, CORE_VERSION, load_function, save_function
from .graphs import GRAPH_FORMAT, GRAPH_SUFFIX, GRAPH_VERSION, LoadedGraph, load_graph, save_graph
from .variables import (FORMAT, MANIFEST_KEY, VERSION, get_values, read_manifest,
                        restore_variables, restore_with_manifest, save_variables, set_values)

__all__ = ["CORE_FORMAT", "CORE_VERSION", "FORMAT", "GRAPH_FORMAT", "GRAPH_SUFFIX", "GRAPH_VERSION", "LoadedGraph",
           "MANIFEST_KEY", "VERSION", "SerializationError", "get_values", "load_function", "load_graph",
           "read_manifest", "restore_variables", "restore_with_manifest", "save_function", "save_graph",
           "save_variables", "set_values"]
