"""Import a TensorFlow GraphDef as an axes graph: `TFImporter` (Nervana Graph v0.4's API).

The importer loads the GraphDef into a TF graph of its own (so TF checks it and
infers every static shape), computes the values known before any data is fed
(`static_values`), and walks the ops in order, looking each op type up in the
rule table (`rules.RULES`). Every other value becomes an op whose axes are its TF
dimensions in order (the positional helpers shared with the ONNX importer).
"""
from __future__ import annotations

import importlib
import os
from typing import Any, Dict, FrozenSet, List, Mapping, Optional, Sequence, Set, Tuple, Union

import numpy as np

from ...debug_info import user_location
from ...errors import AxgraphError
from ...op_graph.control import assign, doall, sequential
from ...op_graph.op import Op
from ...op_graph.tensors import constant
from . import (ops_control, ops_conv, ops_gather, ops_math, ops_nn,  # noqa: F401 (RULES)
               ops_optimizers, ops_random, ops_shape, ops_variable)
from .deduplication import without_deduplication
from .ops_variable import WRITING_OPS
from .rules import (RULES, Context, GraphBuilder, Node, TFImportError, UnsupportedOpError,
                    Value)
from .static_values import FED_OPS, static_values

Handle = Union[Op, List[Any]]

#: Ops run for their effect: a control dependency on one (or on a value computed after one)
#: runs it first.
EFFECT_OPS = WRITING_OPS + ("Assert", "PrintV2")
#: Ops that read strings: an Assert's message, tf.print's template (string constants).
STRING_OPS = ("Const", "Assert", "StringFormat", "PrintV2")

#: The file names of GraphDefs in protobuf's text form (others are read as binary first).
TEXT_SUFFIXES = (".pbtxt", ".txt", ".pbtext", ".prototxt")


def _tensorflow() -> Any:
    """``tensorflow.compat.v1``, imported when a graph is imported."""
    try:
        return importlib.import_module("tensorflow.compat.v1")
    except ImportError:
        raise TFImportError("TensorFlow import needs the optional package tensorflow: "
                            "pip install 'axgraph[tensorflow]'", user_location()) from None


class TFImporter:
    """Reads TensorFlow graphs (GraphDefs) into axgraph ops.

    After `import_graph_def` (or `import_protobuf`), `get_op_handle` gives the
    axgraph op of a TF tensor or op of that graph: a placeholder for a
    ``tf.placeholder``, a variable for a ``tf.Variable``, an op that runs every
    assignment for an init op (``tf.global_variables_initializer()``), and an op
    computing the same values as TF for everything else. Each op's axes are its
    TF dimensions in order, so computations return arrays of TF's shapes.

    Attributes
    ----------
    graph : tf.Graph or None
        The importer's own copy of the last graph imported (each import replaces
        the one before), with TensorFlow's static shapes.

    Examples
    --------
    >>> import axgraph as ng
    >>> import tensorflow.compat.v1 as tf
    >>> from axgraph.frontends.tensorflow import TFImporter
    >>> graph = tf.Graph()
    >>> with graph.as_default():
    ...     total = tf.constant(1.0) + tf.constant(2.0)
    >>> importer = TFImporter()
    >>> importer.import_graph_def(graph.as_graph_def())
    >>> with ng.make_transformer("numpy") as t:
    ...     print(t.computation(importer.get_op_handle(total))())
    3.0
    """

    def __init__(self) -> None:
        self.graph: Any = None
        self._values: Dict[str, Value] = {}
        self._handles: Dict[str, Optional[Op]] = {}
        self._effects: Set[str] = set()  # the ops run for an effect, or computed after one
        #: tensor or op name -> the branch of v1 control flow it lives in
        self._contexts: Dict[str, Context] = {}
        #: tensor or op name of a value known at import -> the effects its users run first
        self._carried: Dict[str, List[Op]] = {}
        #: op name -> (name, type, error) of the op in the way: it, or one it depends on
        self._refused: Dict[str, Tuple[str, str, UnsupportedOpError]] = {}
        self._missing: Set[str] = set()  # the op types met without an import rule
        #: the sparse steps whose indices TF's optimizer de-duplicated (see deduplication)
        self._deduplicated: FrozenSet[str] = frozenset()
        self._saved: Optional[Tuple[Any, Any, Optional[str]]] = None  # meta graph, saver, ckpt
        self._builder = GraphBuilder()

    def import_graph_def(self, graph_def: Any, verbose: bool = False,
                         shapes: Optional[Mapping[str, Sequence[int]]] = None) -> None:
        """Import every op of a TensorFlow GraphDef.

        Parameters
        ----------
        graph_def : tf.GraphDef
            The graph, e.g. ``tf.get_default_graph().as_graph_def()``.
        verbose : bool
            Print each op as it is imported.
        shapes : dict of str to list of int, optional
            Full shapes for placeholders, by name: for those built with unknown
            dimensions (``tf.placeholder(tf.float32, [None, 784])``).

        Raises
        ------
        TFImportError
            If `graph_def` is not a GraphDef TensorFlow accepts, `shapes` names
            something other than a placeholder, or an op refuses what a node asks.

        Notes
        -----
        An op that cannot be imported (an op type without an import rule, an
        attribute value a rule refuses, a placeholder of unknown shape) does not
        stop the import: the values that depend on it raise `UnsupportedOpError`
        when asked for (`get_op_handle`), so a graph holding, say, a
        ``tf.train.Saver``'s ops still imports. `unsupported_ops` lists them.
        """
        tf = _tensorflow()
        if not isinstance(graph_def, tf.GraphDef):
            raise TFImportError(f"import_graph_def takes a tf.GraphDef, not "
                                f"{type(graph_def).__name__}", user_location())
        if shapes:
            graph_def = _with_shapes(tf, graph_def, shapes)
        graph_def, self._deduplicated = without_deduplication(tf, graph_def)
        graph = tf.Graph()
        try:
            with graph.as_default():
                tf.import_graph_def(graph_def, name="")
        except Exception as error:  # TF's own errors for a malformed graph vary
            raise TFImportError(f"TensorFlow rejects the GraphDef: {type(error).__name__}: "
                                f"{error}", user_location()) from None
        self.graph = graph
        self._values = dict(static_values(tf, graph))
        self._handles, self._effects, self._refused, self._missing = {}, set(), {}, set()
        self._contexts, self._carried = {}, {}
        self._saved = None
        initial = _initial_values(graph, self._values)
        for tf_op in graph.get_operations():
            if verbose:
                print(f"importing {tf_op.type} {tf_op.name}")
            if tf_op.outputs and all(t.name in self._values for t in tf_op.outputs):
                continue
            if tf_op.type not in RULES:
                self._missing.add(tf_op.type)
            needed = [t.op.name for t in tf_op.inputs] + [c.name for c in tf_op.control_inputs]
            refused = next((self._refused[n] for n in needed if n in self._refused), None)
            if refused is not None:  # depends on an op that could not be imported
                self._refused[tf_op.name] = refused
                continue
            try:
                self._import_op(tf_op, initial)
            except UnsupportedOpError as error:
                self._refused[tf_op.name] = (tf_op.name, tf_op.type, error)

    parse_graph_def = import_graph_def

    def _pending(self, name: str) -> List[Op]:
        """The effects a control dependency on op `name` (or a use of tensor `name`) must
        run first: the op itself where it is (or follows) an effect, or those a value
        known at import carries."""
        handle = self._handles.get(name)
        if name in self._effects and isinstance(handle, Op):
            return [handle]
        return self._carried.get(name, [])

    def import_graph(self, graph: Any, verbose: bool = False,
                     shapes: Optional[Mapping[str, Sequence[int]]] = None) -> None:
        """Import every op of a TensorFlow graph (``tf.Graph``): `import_graph_def` of its
        GraphDef.

        Parameters
        ----------
        graph : tf.Graph
            The graph.
        verbose : bool
            Print each op as it is imported.
        shapes : dict of str to list of int, optional
            Full shapes for placeholders, by name (see `import_graph_def`).

        Raises
        ------
        TFImportError
            As in `import_graph_def`.
        """
        as_graph_def = getattr(graph, "as_graph_def", None)
        if as_graph_def is None:
            raise TFImportError(f"import_graph takes a tf.Graph, not {type(graph).__name__}",
                                user_location())
        self.import_graph_def(as_graph_def(), verbose=verbose, shapes=shapes)

    def import_meta_graph(self, meta_graph_path: Union[str, "os.PathLike[str]"],
                          checkpoint_path: Optional[str] = None, verbose: bool = False,
                          shapes: Optional[Mapping[str, Sequence[int]]] = None) -> None:
        """Import a graph saved by ``tf.train.Saver`` (its ``.meta`` file), with its
        collections, and remember the checkpoint whose values `get_restore_op` restores.

        The file is parsed as a protocol buffer only: nothing in it runs.

        Parameters
        ----------
        meta_graph_path : str or os.PathLike
            The ``.meta`` file.
        checkpoint_path : str, optional
            The checkpoint's prefix, as given to ``saver.save`` (its return value).
        verbose : bool
            Print each op as it is imported.
        shapes : dict of str to list of int, optional
            Full shapes for placeholders, by name (see `import_graph_def`).

        Raises
        ------
        TFImportError
            If the file cannot be read as a MetaGraphDef, or as in `import_graph_def`.
        """
        tf = _tensorflow()
        graph = tf.Graph()
        try:
            with graph.as_default():
                saver = tf.train.import_meta_graph(os.fspath(meta_graph_path))
        except Exception as error:  # a missing file, or bytes that are no MetaGraphDef
            raise TFImportError(f"cannot read a TensorFlow MetaGraphDef from "
                                f"{os.fspath(meta_graph_path)!r}: {type(error).__name__}: "
                                f"{error}", user_location()) from None
        self.import_graph(graph, verbose=verbose, shapes=shapes)
        self._saved = (graph, saver, checkpoint_path)

    def get_collection_handle(self, names: Sequence[str]) -> List[Op]:
        """The ops of the first entry of each named collection of the imported meta graph
        (``tf.add_to_collection(name, tensor)`` when it was built).

        Parameters
        ----------
        names : sequence of str
            Collection names.

        Returns
        -------
        list of Op
            One op per name.

        Raises
        ------
        TFImportError
            If no meta graph was imported, or a collection is empty.
        """
        graph = self._saved_part(0)
        handles = []
        for name in names:
            entries = graph.get_collection(name)
            if not entries:
                raise TFImportError(f"the meta graph has no collection {name!r}",
                                    user_location())
            handles.append(self.get_op_handle_by_name(entries[0].name))
        return handles

    def get_restore_op(self) -> Op:
        """An op that sets every variable to its value in the checkpoint given to
        `import_meta_graph` (TensorFlow reads the checkpoint, now).

        Returns
        -------
        Op
            An op without a value; a computation of it restores the variables.

        Raises
        ------
        TFImportError
            If no meta graph or no checkpoint was given, or TF cannot read the
            checkpoint.
        """
        graph, saver, checkpoint = self._saved_part(0), self._saved_part(1), self._saved_part(2)
        if checkpoint is None:
            raise TFImportError("no checkpoint: give import_meta_graph(..., checkpoint_path=...)",
                                user_location())
        tf = _tensorflow()
        variables = graph.get_collection(tf.GraphKeys.GLOBAL_VARIABLES)
        try:
            with tf.Session(graph=graph) as session:
                saver.restore(session, checkpoint)
                values = session.run(variables)
        except Exception as error:  # TF's errors for a missing or mismatched checkpoint
            raise TFImportError(f"cannot restore the checkpoint {checkpoint!r}: "
                                f"{type(error).__name__}: {error}", user_location()) from None
        handles = [self.get_op_handle_by_name(v.name) for v in variables]
        with Op.saved_user_deps():
            return doall([assign(h, constant(v, h.axes, dtype=h.dtype))
                          for h, v in zip(handles, values)])

    def _saved_part(self, index: int) -> Any:
        if self._saved is None:
            raise TFImportError("no meta graph imported: call import_meta_graph first",
                                user_location())
        return self._saved[index]

    def unsupported_ops(self) -> List[str]:
        """The op types of the imported graph that have no import rule, sorted.

        Values that depend on them cannot be used (`get_op_handle` says which op
        stands in the way). Ops whose values TensorFlow computed at import (from
        constants and shapes) need no rule and are not listed.

        Returns
        -------
        list of str
            TF op types, e.g. ``["SaveV2"]``.
        """
        return sorted(self._missing)

    def import_protobuf(self, path: Union[str, "os.PathLike[str]"], verbose: bool = False,
                        shapes: Optional[Mapping[str, Sequence[int]]] = None) -> None:
        """Import a GraphDef saved in a file: binary (``.pb``) or text (``.pbtxt``, ``.txt``;
        another name is read as binary, then as text).

        The file is parsed as a protocol buffer only: nothing in it runs.

        Parameters
        ----------
        path : str or os.PathLike
            The file, as ``tf.train.write_graph`` writes it.
        verbose : bool
            Print each op as it is imported.
        shapes : dict of str to list of int, optional
            Full shapes for placeholders, by name (see `import_graph_def`).

        Raises
        ------
        TFImportError
            If the file cannot be read or parsed as a GraphDef.
        UnsupportedOpError
            As in `import_graph_def`.
        """
        tf = _tensorflow()
        text_format = importlib.import_module("google.protobuf.text_format")
        path = os.fspath(path)
        graph_def = tf.GraphDef()
        try:
            with open(path, "rb") as file:
                data = file.read()
            if os.path.splitext(path)[1].lower() in TEXT_SUFFIXES:
                text_format.Parse(data.decode("utf-8"), graph_def)
            else:
                try:
                    graph_def.ParseFromString(data)
                except Exception:  # not binary: the text form, under another name
                    graph_def = tf.GraphDef()
                    text_format.Parse(data.decode("utf-8"), graph_def)
        except Exception as error:
            raise TFImportError(f"cannot read a TensorFlow GraphDef from {path!r}: "
                                f"{type(error).__name__}: {error}", user_location()) from None
        self.import_graph_def(graph_def, verbose=verbose, shapes=shapes)

    parse_protobuf = import_protobuf

    def get_op_handle(self, tf_op: Any) -> Handle:
        """The axgraph op of a TF tensor or op (or a list of them) of the imported graph.

        Parameters
        ----------
        tf_op : tf.Tensor, tf.Operation, tf.Variable, or a list or tuple of them
            What to look up, by name. An op stands for its first output; an op
            without outputs (an init op, an assignment) for the op running it.

        Returns
        -------
        Op or list of Op
            The op(s), in the order given.

        Raises
        ------
        TFImportError
            If nothing of that name was imported.
        UnsupportedOpError
            If a value depends on an op that could not be imported.
        """
        if isinstance(tf_op, (list, tuple)):
            return [self.get_op_handle(x) for x in tf_op]
        name = getattr(tf_op, "name", None)
        if not isinstance(name, str):
            raise TFImportError(f"get_op_handle takes TF tensors or ops, not "
                                f"{type(tf_op).__name__}", user_location())
        return self.get_op_handle_by_name(name)

    def get_op_handle_by_name(self, name: str) -> Op:
        """The axgraph op of the TF op (``"MatMul"``) or tensor (``"MatMul:0"``) named.

        Parameters
        ----------
        name : str
            An op's name (its first output) or a tensor's name.

        Returns
        -------
        Op
            The op.

        Raises
        ------
        TFImportError
            If nothing of that name was imported.
        UnsupportedOpError
            If the value depends on an op that could not be imported (the message
            names that op, its type, and the supported op types).
        """
        if self.graph is None:
            raise TFImportError("no graph imported yet: call import_graph_def first",
                                user_location())
        op_name = name.split(":")[0]
        if op_name in self._refused:
            root, _, cause = self._refused[op_name]
            prefix = "" if root == op_name else \
                f"TF {name!r} depends on {root!r}, which cannot be imported: "
            raise UnsupportedOpError(prefix + cause.message, user_location())
        handle = self._handles.get(op_name) if ":" not in name else None
        if handle is not None:  # an op without outputs (an init op), or its first output
            return handle
        tensor = name if ":" in name else f"{name}:0"
        if tensor not in self._values:
            known = op_name in self._handles or f"{op_name}:0" in self._values
            raise TFImportError(f"the imported graph has no {'value' if known else 'op'} "
                                f"named {name!r}", user_location())
        # a value known at import becomes a constant (the same op on every call)
        return self._builder.as_op(self._values[tensor], tensor)

    def _import_op(self, tf_op: Any, initial: Dict[str, np.ndarray]) -> None:
        rule = RULES.get(tf_op.type)
        label = f"{tf_op.type} node {tf_op.name!r}"
        if rule is None:
            raise UnsupportedOpError(f"TF {label}: op type {tf_op.type} is not supported; the "
                                     f"supported op types are {', '.join(sorted(RULES))}",
                                     user_location())
        if any(t.dtype.base_dtype.name == "variant" or t.dtype.base_dtype.name == "string"
               and not _reads_strings(tf_op) for t in [*tf_op.inputs, *tf_op.outputs]):
            raise UnsupportedOpError(f"TF {label}: tensors of strings or variants are not "
                                     f"supported", user_location())
        inputs: List[Value] = []
        for tensor in tf_op.inputs:
            if tensor.name not in self._values:
                raise TFImportError(f"TF {label}: input {tensor.name!r} has no value",
                                    user_location())
            inputs.append(self._values[tensor.name])
        controls = [h for h in (self._handles.get(c.name) for c in tf_op.control_inputs)
                    if h is not None]
        input_contexts = [self._contexts.get(t.name, ()) for t in tf_op.inputs]
        context = _union(*input_contexts,
                         *(self._contexts.get(c.name, ()) for c in tf_op.control_inputs))
        if context and tf_op.type in EFFECT_OPS and tf_op.type != "Assert":
            raise UnsupportedOpError(f"TF {label}: a {tf_op.type} inside a branch of tf.cond "
                                     f"is not supported (axgraph computes both branches)",
                                     user_location())
        node = Node(tf_op, inputs, controls, self._builder, initial.get(tf_op.name),
                    context, input_contexts, tf_op.name in self._deduplicated)
        try:
            produced = rule(node)
        except TFImportError:
            raise
        except AxgraphError as error:  # an op refused what the node asked: name the node
            raise TFImportError(f"TF {label}: {error.message}", user_location()) from error
        results = list(produced) if isinstance(produced, tuple) else [produced]
        # the effects (writes, checks, prints) this op runs after: those of its control
        # inputs, and those a value known at import carries from its own
        effects: List[Op] = []
        for name in [c.name for c in tf_op.control_inputs] + [t.name for t in tf_op.inputs]:
            effects.extend(e for e in self._pending(name) if not any(e is f for f in effects))
        if effects and tf_op.type != "NoOp":
            for k, result in enumerate(results):
                if isinstance(result, Op):
                    results[k] = sequential([*effects, result]) if result.is_tensor_op else \
                        doall([*effects, result])
                elif k < len(tf_op.outputs):  # a value known now: its users run them
                    self._carried[tf_op.outputs[k].name] = effects
            if not results or not isinstance(results[0], Op):
                self._carried[tf_op.name] = effects
        if tf_op.type in EFFECT_OPS or effects or any(
                t.op.name in self._effects for t in tf_op.inputs):
            self._effects.add(tf_op.name)
        self._contexts[tf_op.name] = context
        for k, tensor in enumerate(tf_op.outputs):
            self._contexts[tensor.name] = context
            if tf_op.type in ("Switch", "RefSwitch"):  # output 0: where the predicate is false
                predicate = self._builder.as_op(inputs[1], node.hint)
                self._contexts[tensor.name] = _union(context, ((predicate, k == 1),))
            elif tf_op.type == "Merge":
                self._contexts[tensor.name] = _common(*input_contexts)
        for tensor, value in zip(tf_op.outputs, results):
            if tensor.name not in self._values:
                self._values[tensor.name] = value
        effect = results[0] if results and isinstance(results[0], Op) else None
        self._handles[tf_op.name] = effect


def _reads_strings(tf_op: Any) -> bool:
    """Whether `tf_op` is an op of `STRING_OPS` (a constant: one only such ops read)."""
    if tf_op.type == "Const":
        return all(c.type in STRING_OPS for t in tf_op.outputs for c in t.consumers())
    return tf_op.type in STRING_OPS


def _union(*contexts: Context) -> Context:
    """The branch inside all of `contexts` (each (predicate, taken) pair once)."""
    pairs: List[Tuple[Op, bool]] = []
    for context in contexts:
        pairs.extend(p for p in context if not any(q[0] is p[0] and q[1] == p[1]
                                                   for q in pairs))
    return tuple(pairs)


def _common(*contexts: Context) -> Context:
    """The pairs all of `contexts` share: where a Merge of their branches lives."""
    if not contexts:
        return ()
    return tuple(p for p in contexts[0] if all(any(q[0] is p[0] and q[1] == p[1] for q in c)
                                               for c in contexts[1:]))


def _with_shapes(tf: Any, graph_def: Any, shapes: Mapping[str, Sequence[int]]) -> Any:
    """A copy of `graph_def` whose placeholders named in `shapes` have those shapes."""
    copy = tf.GraphDef()
    copy.CopyFrom(graph_def)
    remaining = dict(shapes)
    for node in copy.node:
        if node.name in remaining:
            if node.op not in FED_OPS:
                raise TFImportError(f"shapes: {node.name!r} is a {node.op}, not a placeholder",
                                    user_location())
            shape = [int(n) for n in remaining.pop(node.name)]
            node.attr["shape"].shape.CopyFrom(tf.TensorShape(shape).as_proto())
    if remaining:
        raise TFImportError(f"shapes: the graph has no placeholders named {sorted(remaining)}",
                            user_location())
    return copy


def _initial_values(graph: Any, values: Dict[str, Value]) -> Dict[str, np.ndarray]:
    """Each variable's initial value, where its initializer assigns a known value.

    A variable ``v`` is initialized by the op ``v/Assign``; its value becomes the
    axgraph variable's initial value, so the variable holds it even before the
    imported init op runs.
    """
    initial: Dict[str, np.ndarray] = {}
    for op in graph.get_operations():
        if op.type in ("VariableV2", "VarHandleOp", "Variable"):
            try:
                assign = graph.get_operation_by_name(f"{op.name}/Assign")
            except KeyError:
                continue
            if len(assign.inputs) == 2 and assign.inputs[0].op is op:
                value = values.get(assign.inputs[1].name)
                if isinstance(value, np.ndarray):
                    initial[op.name] = value
    return initial
