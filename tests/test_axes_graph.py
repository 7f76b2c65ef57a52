"""The axes graph as a uniform data structure (axgraph/op_graph/op.py, printing.py).

Every axes op class declares its attributes and computes its axes in one
`infer_axes` hook, so three things work for every class without code of
their own: `with_args` rebuilds an op (and gives what the constructor would),
`ng.format_graph` prints it, `graph_to_dot` draws it. The catalogue below
holds one op of every class the package defines; a class added without an
entry fails `test_the_catalogue_covers_every_op_class`.
"""
import ast
import inspect
import re
from pathlib import Path
from typing import Callable, Dict, NamedTuple, Optional

import numpy as np
import pytest

import axgraph as ng
from axgraph.frontends.neon import ar
from axgraph.frontends.pieces import PieceAdjointOp, PieceOp, PlacedPieceOp  # (importers' ops)
from axgraph.frontends.tensorflow.checks import AssertOp  # (an op of the TF importer's)
from axgraph.op_graph import (control, convolution as conv, debug, dot, elementwise as ew, fills,
                              lookup, nn, pooling, random, reductions as red, shape_ops as so,
                              tensors)
from axgraph.op_graph.printing import format_axes, format_op, graph_ops
from axgraph.visualize import GraphvizError, graph_to_dot, graph_to_svg

OP_GRAPH = Path(ng.__file__).parent / "op_graph"

# -- axes shared by every build, so two builds of one entry have the same axes ----------
C, D, N = ng.make_axis(3, name="C"), ng.make_axis(2, name="D"), ng.make_axis(4, name="N")
C2 = ng.make_axis(2, name="C")  # another axis named C: concat joins along both
V, E = ng.make_axis(5, name="V"), ng.make_axis(2, name="E")
B = ng.make_axis(name="B")  # no length: a size of it is known only when data is fed
IMG_C = ng.make_axis(2, name="C", roles=[ar.Channel])
IMG_H = ng.make_axis(5, name="H", roles=[ar.Height])
IMG_W = ng.make_axis(5, name="W", roles=[ar.Width])
FIL_K = ng.make_axis(4, name="K", roles=[ar.Channelout])
FIL_R = ng.make_axis(3, name="R", roles=[ar.Height])
FIL_S = ng.make_axis(3, name="S", roles=[ar.Width])
IMAGE, FILTER = [IMG_C, IMG_H, IMG_W, N], [IMG_C, FIL_R, FIL_S, FIL_K]


def fresh(axes, dtype=np.float32) -> ng.Op:
    return ng.placeholder(axes, dtype=dtype)


def stored(axes, dtype=np.float32) -> ng.Op:
    return ng.variable(axes, dtype=dtype, initial_value=0)


class Entry(NamedTuple):
    """How to build one op of `op_class`, and how its public constructor builds the op
    with other `args` and this op's attributes (None: no constructor takes args)."""

    op_class: type
    build: Callable[[], ng.Op]
    construct: Optional[Callable[[tuple, ng.Op], ng.Op]]
    #: Other args for `with_args` (default: fresh placeholders of the same axes, float64).
    new_args: Optional[Callable[[ng.Op], tuple]] = None


def _convolution():
    return ng.convolution({}, fresh(IMAGE), fresh(FILTER))


def _conv_construct(op_class):
    return lambda args, op: op_class(*args, op.x_layout, op.w_layout, op.y_layout, op.axes,
                                     op.geometry)


def _pooling():
    return ng.pooling(None, fresh(IMAGE), window=2)


def _lookup():
    return ng.lookuptable(fresh([V, E]), fresh([N], np.int32))


def _sliced():
    return fresh([C, N])[0:2, 1]


def _concat():
    return ng.concat_along_axis([fresh([C, N]), fresh([C2, N])], C)


def _init_of_variable():
    return next(iter(ng.variable([C], initial_value=np.arange(3.0)).initializers))


def _generic_entries():
    """Elementwise ops and reductions: one entry per class, however many there are."""
    entries = []
    for op_class in _concrete(ew.UnaryElementWiseOp):
        entries.append(Entry(op_class, lambda c=op_class: c(fresh([C, N])),
                             lambda args, op, c=op_class: c(*args)))
    for op_class in _concrete(ew.BinaryElementWiseOp):
        entries.append(Entry(op_class, lambda c=op_class: c(fresh([C, N]), fresh([N, D])),
                             lambda args, op, c=op_class: c(*args)))
    for op_class in _concrete(red.ReductionOp):
        entries.append(Entry(
            op_class, lambda c=op_class: c(fresh([C, N]), reduction_axes=[C]),
            lambda args, op, c=op_class: c(*args, reduction_axes=op.reduction_axes,
                                           out_axes=op.out_axes)))
    return entries


def _concrete(base):
    found = set()
    for sub in base.__subclasses__():
        found |= {sub} | _concrete(sub)
    return found


ABSTRACT = {ew.ElementWiseOp, ew.UnaryElementWiseOp, ew.BinaryElementWiseOp, so.ShapeOp,
            red.ReductionOp, red.Accumulation, red.IndexReduction, conv.ConvFamilyOp,
            random.RandomOp, PlacedPieceOp}

CATALOGUE = _generic_entries() + [
    Entry(ew.Where, lambda: ng.where(fresh([C, N], np.bool_), fresh([C]), fresh([N, D])),
          lambda args, op: ew.Where(*args)),
    Entry(so.BroadcastOp, lambda: ng.broadcast(fresh([C]), [C, N]),
          lambda args, op: so.BroadcastOp(*args, op.axes)),
    Entry(so.AxesCastOp, lambda: ng.cast_axes(fresh([C, N]), [ng.make_axis(3), N]),
          lambda args, op: so.AxesCastOp(*args, op.axes)),
    Entry(so.ReorderAxes, lambda: ng.axes_with_order(fresh([C, N]), [N, C]),
          lambda args, op: so.ReorderAxes(*args, op.axes)),
    Entry(so.Flatten, lambda: ng.flatten(fresh([C, N])),
          lambda args, op: so.Flatten(*args, op.axes)),
    Entry(so.Unflatten, lambda: ng.unflatten(ng.flatten(fresh([C, N]))),
          lambda args, op: so.Unflatten(*args, op.axes)),
    Entry(so.TensorSliceOp, _sliced, lambda args, op: so.TensorSliceOp(*args, op.slices)),
    Entry(so.SliceAdjointOp,
          lambda: so.SliceAdjointOp(fresh(_sliced().axes), [C, N], (slice(0, 2, None), 1)),
          lambda args, op: so.SliceAdjointOp(*args, op.axes, op.slices)),
    Entry(so.ConcatOp, _concat, lambda args, op: so.ConcatOp(args, op.concat_axes, op.axis)),
    Entry(so.StackOp, lambda: ng.stack([fresh([C]), fresh([C])], ng.make_axis(2), pos=1),
          lambda args, op: so.StackOp(args, op.axis, op.pos)),
    Entry(so.PadOp, lambda: ng.pad(fresh([C, N]), [1, (0, 2)]),
          lambda args, op: so.PadOp(*args, op.paddings, None)),
    Entry(red.TensorSize, lambda: ng.tensor_size(fresh([C, B])),
          lambda args, op: red.TensorSize(op.size_axes)),
    Entry(dot.DotOp, lambda: ng.dot(fresh([C, D]), fresh([D, N])),
          lambda args, op: dot.DotOp(*args, pairs=op.pairs)),
    Entry(tensors.AssignableTensorOp,
          lambda: ng.variable([C, N], initial_value=np.ones((3, 4)), name="weights"),
          lambda args, op: tensors.AssignableTensorOp(op.axes, op.dtype, name=op.name,
                                                      **op.attribute_values)),
    Entry(tensors.InitializeOp, _init_of_variable,
          lambda args, op: tensors.InitializeOp(op.tensor)),
    Entry(control.AssignOp, lambda: ng.assign(stored([C, N]), fresh([C, N])),
          lambda args, op: control.AssignOp(*args, item=op.item),
          lambda op: (stored([C, N], np.float64), fresh([C, N], np.float64))),
    Entry(control.SetItem, lambda: ng.set_item(stored([C, N]), (1, slice(None)), fresh([N])),
          lambda args, op: control.SetItem(args[0], op.item, args[1]),
          lambda op: (stored([C, N], np.float64), fresh([N], np.float64))),
    Entry(fills.Fill, lambda: ng.fill(stored([C]), 2.5),
          lambda args, op: fills.Fill(*args),
          lambda op: (stored([C], np.float64), ng.constant(1.5))),
    Entry(fills.InitTensorOp, lambda: ng.init_tensor(stored([C]), lambda t: np.ones(3)), None),
    Entry(control.SequentialOp, lambda: ng.sequential([fresh([C]), fresh([C, N])]),
          lambda args, op: control.SequentialOp(args)),
    Entry(control.DoAllOp, lambda: ng.doall([fresh([C]), fresh([N])]),
          lambda args, op: control.DoAllOp(args)),
    Entry(control.ValueOfOp, lambda: ng.value_of(stored([C])),
          lambda args, op: control.ValueOfOp(*args)),
    Entry(debug.PrintOp, lambda: ng.PrintOp(fresh([C]), "shown"),
          lambda args, op: debug.PrintOp(*args, op.prefix)),
    Entry(AssertOp, lambda: AssertOp(fresh([], np.bool_), [fresh([C])], "check", ["x:", None], 3),
          lambda args, op: AssertOp(args[0], args[1:], op.label, op.parts, op.summarize)),
    Entry(PieceOp, lambda: PieceOp(fresh([C, N]), N, [D], B),
          lambda args, op: PieceOp(args[0], op.axis, op.before, op.piece)),
    Entry(PieceAdjointOp, lambda: PieceAdjointOp(fresh([C, B]), N, [D], B),
          lambda args, op: PieceAdjointOp(args[0], op.axis, op.before, op.piece)),
    Entry(nn.OneHotOp, lambda: ng.one_hot(fresh([N], np.int32), C),
          lambda args, op: nn.OneHotOp(*args, op.axis)),
    Entry(nn.SoftmaxOp, lambda: ng.softmax(fresh([C, N]), C),
          lambda args, op: nn.SoftmaxOp(*args, op.normalization_axes)),
    Entry(nn.LogSoftmaxOp, lambda: ng.log_softmax(fresh([C, N]), C),
          lambda args, op: nn.LogSoftmaxOp(*args, op.normalization_axes)),
    Entry(nn.SoftmaxBackpropOp,
          lambda: nn.SoftmaxBackpropOp(fresh([N, C]), ng.softmax(fresh([C, N]), C), [C], True),
          lambda args, op: nn.SoftmaxBackpropOp(*args, op.normalization_axes, op.log)),
    Entry(lookup.LookupTableOp, _lookup,
          lambda args, op: lookup.LookupTableOp(*args, op.vocab_axis, op.pad_idx)),
    Entry(lookup.LookupTableBackpropOp,
          lambda: (lambda t: lookup.LookupTableBackpropOp(fresh(t.axes), t.args[1], t))(_lookup()),
          lambda args, op: lookup.LookupTableBackpropOp(*args, op.lookup),
          lambda op: (fresh(op.args[0].axes, np.float64), fresh([N], np.int32))),
    Entry(conv.ConvolutionOp, _convolution, _conv_construct(conv.ConvolutionOp)),
    Entry(conv.ConvBackpropDataOp, lambda: ng.deconvolution({}, _convolution(), fresh(FILTER)),
          _conv_construct(conv.ConvBackpropDataOp)),
    Entry(conv.ConvBackpropFilterOp,
          lambda: (lambda y: conv.ConvBackpropFilterOp(
              fresh(y.axes), y.args[0], y.x_layout, y.w_layout, y.y_layout, FILTER,
              y.geometry))(_convolution()),
          _conv_construct(conv.ConvBackpropFilterOp)),
    Entry(pooling.PoolingOp, _pooling,
          lambda args, op: pooling.PoolingOp(*args, op.x_layout, op.y_layout, op.axes, op.window,
                                             op.geometry, op.kind)),
    Entry(pooling.PoolingBackpropOp,
          lambda: (lambda p: pooling.PoolingBackpropOp(fresh(p.axes), p.args[0], p))(_pooling()),
          lambda args, op: pooling.PoolingBackpropOp(*args, op.pool)),
    Entry(random.UniformOp, lambda: ng.uniform([C, N], -1.0, 2.0, seed=3),
          lambda args, op: random.UniformOp(op.axes, op.low, op.high, op.seed, op.dtype)),
    Entry(random.NormalOp, lambda: ng.normal([C, N], 0.5, 2.0, seed=4),
          lambda args, op: random.NormalOp(op.axes, op.loc, op.scale, op.seed, op.dtype)),
]
BY_CLASS: Dict[type, Entry] = {entry.op_class: entry for entry in CATALOGUE}


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(a, b) and np.asarray(a).dtype == np.asarray(b).dtype
    return a == b


def _assert_same_op(got: ng.Op, expected: ng.Op) -> None:
    assert type(got) is type(expected)
    assert got.axes == expected.axes
    assert got.dtype == expected.dtype
    assert got.is_tensor_op == expected.is_tensor_op
    assert list(got.attribute_values) == list(expected.attribute_values)
    for key, value in got.attribute_values.items():
        assert _same(value, expected.attribute_values[key]), key


def _new_args(entry: Entry, op: ng.Op) -> tuple:
    if entry.new_args is not None:
        return entry.new_args(op)
    return tuple(fresh(arg.axes, np.float64 if arg.dtype.kind == "f" else arg.dtype)
                 for arg in op.args)


# -- the catalogue ----------------------------------------------------------------------

def test_the_catalogue_covers_every_op_class():
    defined = {c for c in _concrete(ng.Op) if c.__module__.startswith("axgraph.")}
    assert defined - ABSTRACT - set(BY_CLASS) == set()
    for entry in CATALOGUE:
        assert type(entry.build()) is entry.op_class


@pytest.mark.parametrize("entry", CATALOGUE, ids=lambda e: e.op_class.__name__)
def test_with_the_same_args_an_op_rebuilds_equal(entry):
    op = entry.build()
    op.metadata["note"] = "kept"
    rebuilt = op.with_args(*op.args)
    assert rebuilt is not op
    _assert_same_op(rebuilt, op)
    assert rebuilt.args == op.args
    assert rebuilt.location == op.location
    assert rebuilt.metadata == {"note": "kept"} and rebuilt.metadata is not op.metadata
    assert set(op.other_deps) <= set(rebuilt.other_deps)
    if op.has_user_name:
        assert rebuilt.name == op.name
    else:
        assert rebuilt.name != op.name and not rebuilt.has_user_name


@pytest.mark.parametrize("entry", [e for e in CATALOGUE if e.construct is not None],
                         ids=lambda e: e.op_class.__name__)
def test_with_new_args_an_op_is_what_its_constructor_builds(entry):
    op = entry.build()
    args = _new_args(entry, op)
    rebuilt = op.with_args(*args)
    assert rebuilt.args == args
    _assert_same_op(rebuilt, entry.construct(args, op))


def test_with_args_infers_the_type_again():
    x, z = fresh([C, N]), fresh([N, D], np.float64)
    total = ng.add(x, x)
    wider = total.with_args(x, z)
    assert wider.axes == ng.make_axes([C, N, D]) and wider.dtype == np.float64
    contraction = ng.dot(fresh([C, D]), fresh([D, N]))
    repaired = contraction.with_args(fresh([C, N]), fresh([N, D]), pairs=None)
    assert repaired.pairs == [(N, N)] and repaired.axes == ng.make_axes([C, D])
    mean_like = ng.sum(x, reduction_axes=[C])
    assert mean_like.with_args(fresh([C, N]), reduction_axes=[N], out_axes=[C]).axes == \
        ng.make_axes([C])


def test_with_args_checks_like_a_constructor():
    widened = ng.broadcast(fresh([C]), [C, N])
    with pytest.raises(ng.UnmatchedAxesError, match="must include"):
        widened.with_args(fresh([D]))
    with pytest.raises(ng.AxgraphTypeError, match="not an op"):
        widened.with_args(2.0)
    with pytest.raises(ng.AxgraphTypeError, match="no attribute scale"):
        ng.sum(fresh([C])).with_args(fresh([C]), scale=2)
    with pytest.raises(ng.GraphError, match="declares the attributes"):
        widened.sibling(red.Sum, fresh([C]))


def test_with_args_changes_name_and_attributes_on_request():
    x = fresh([C, N])
    named = ng.sum(x, reduction_axes=[C], name="total")
    assert named.with_args(x).name == "total"
    assert not named.with_args(x, name=None).has_user_name
    assert named.with_args(x, name="other").name == "other"
    assert named.with_args(x, dtype=np.float64).dtype == np.float64


def test_with_args_keeps_the_ordering_and_a_sibling_takes_none():
    x = fresh([C, B])
    size = ng.tensor_size(x)
    assert list(size.with_args().other_deps) == [x]
    y = ng.exp(x)
    y.add_other_dep(size)
    assert list(y.with_args(x).other_deps) == [size]
    logarithm = y.sibling(ew.Log, x)
    assert type(logarithm) is ew.Log and not logarithm.other_deps


def test_a_rebuilt_assign_records_itself_on_its_tensor():
    w, w2, value = stored([C]), stored([C]), fresh([C])
    first = ng.assign(w, value)
    again = first.with_args(w2, value)
    assert list(w2.user_deps) == [again] and list(w.user_deps) == [first]
    assert again in ng.exp(w2).other_deps


class Shift(ng.Op):
    """x moved `offset` places along `axis`: an op defined only here, in a test."""

    attributes = ("axis", "offset")
    dtype_of_arg = 0

    def __init__(self, x, axis, offset, name=None):
        super().__init__(ng.as_op(x), axis=axis, offset=offset, name=name)

    def infer_axes(self):
        x = self.args[0]
        if self.axis not in x.axes:
            raise ng.IncompatibleAxesError(f"shift: {self.axis.name} is not an axis of {x.name}")
        return x.axes


def test_an_op_class_defined_outside_the_library_prints_draws_and_rebuilds():
    x = ng.placeholder([C, N], name="x")
    line = inspect.currentframe().f_lineno + 1
    moved = Shift(x, N, 2, name="moved")
    assert format_op(moved) == (f"moved = Shift(x, axis=N:4, offset=2) : (C:3, N:4) float32  "
                                f"# test_axes_graph.py:{line}")
    assert "axis=N:4" in graph_to_dot(moved)
    again = moved.with_args(fresh([D, N], np.float64), offset=-1)
    assert (again.axes, again.dtype, again.offset, again.name) == \
        (ng.make_axes([D, N]), np.float64, -1, "moved")
    with pytest.raises(ng.IncompatibleAxesError, match="not an axis"):
        moved.with_args(fresh([C]))


def test_an_op_gets_exactly_its_declared_attributes():
    unbuilt = Shift.__new__(Shift)
    with pytest.raises(ng.AxgraphTypeError, match="has the attributes"):
        ng.Op.__init__(unbuilt, fresh([C]), axis=C)  # offset missing


# -- the text printer -------------------------------------------------------------------

def test_format_graph_prints_one_line_per_op():
    first = inspect.currentframe().f_lineno + 1
    x = ng.placeholder([C, N], name="x")
    w = ng.variable([C], initial_value=0.5, name="w")
    y = ng.multiply(x, w, name="y")
    total = ng.sum(y, reduction_axes=[C], name="total")
    update = ng.assign(w, ng.constant(2.0, name="two"), name="update")  # noqa: F841
    later = ng.exp(w, name="later")
    here = "test_axes_graph.py"
    assert ng.format_graph([total, later]).splitlines() == [
        f"x = AssignableTensorOp(persistent=True, input=True) : (C:3, N:4) float32  "
        f"# {here}:{first}",
        f"w = AssignableTensorOp(initial_value=0.5, persistent=True, trainable=True) : (C:3) "
        f"float32  # {here}:{first + 1}",
        f"y = Multiply(x, w) : (C:3, N:4) float32  # {here}:{first + 2}",
        f"total = Sum(y, reduction_axes=(C:3), out_axes=(N:4)) : (N:4) float32  "
        f"# {here}:{first + 3}",
        f"two = AssignableTensorOp(initial_value=2.0, constant=True, persistent=True) : () "
        f"float32  # {here}:{first + 4}",
        f"update = AssignOp(w, two)  # {here}:{first + 4}",
        f"later = Exp(w) : (C:3) float32  after [update]  # {here}:{first + 5}",
    ]


def test_format_graph_shows_attribute_values_of_every_kind():
    text = ng.format_graph([entry.build() for entry in CATALOGUE])
    assert len(text.splitlines()) > len(CATALOGUE)
    assert "slices=(0:2, 1)" in text
    assert "pairs=[(D:2, D:2)]" in text
    assert "paddings=((1, 1), (0, 2))" in text
    assert "initial_value=<array [3, 4] float32>" in text
    assert "x_layout=FeatureLayout(batch=N:4, channel=C:2, spatial=(H:5, W:5))" in text
    assert "kind='max'" in text and "prefix='shown'" in text
    assert "valfun=<function <lambda>>" in text


# -- the picture ------------------------------------------------------------------------

NODE = re.compile(r'^  n(\d+) \[label="((?:[^"\\]|\\.)*)"(.*)\];$')
EDGE = re.compile(r"^  n(\d+) -> n(\d+)( \[style=dashed\])?;$")


def _parse_dot(text: str):
    nodes, edges = {}, []
    for line in text.splitlines():
        node, edge = NODE.match(line), EDGE.match(line)
        if node:
            nodes[int(node.group(1))] = (node.group(2).replace("\\n", "\n"), node.group(3))
        elif edge:
            edges.append((int(edge.group(1)), int(edge.group(2)), bool(edge.group(3))))
    return nodes, edges


def test_graph_to_dot_draws_an_axes_graph_with_every_op_family():
    roots = [entry.build() for entry in CATALOGUE]
    roots.append(ng.exp(roots[-1]))  # reads nothing assigned; the dashed edges come next
    w = stored([C])
    ng.assign(w, fresh([C]))
    roots.append(ng.exp(w))
    text = graph_to_dot(roots)
    assert text.startswith("digraph axes_graph {") and text.rstrip().endswith("}")
    ops = graph_ops(roots)
    nodes, edges = _parse_dot(text)
    assert len(nodes) == len(ops)
    assert len([e for e in edges if not e[2]]) == sum(len(op.args) for op in ops)
    assert len([e for e in edges if e[2]]) == sum(len(op.other_deps) for op in ops) >= 1
    for k, op in enumerate(ops):
        label, attributes = nodes[k]
        assert label.startswith(f"{op.name} = {type(op).__name__}\n")
        if op.is_tensor_op:
            assert f"{format_axes(op.axes)} {op.dtype}" in label
        assert label.endswith(f"test_axes_graph.py:{op.lineno}")
        assert ("shape=ellipse" in attributes) == op.is_assignable
        assert ("penwidth" in attributes) == (op in roots)
    index = {op: k for k, op in enumerate(ops)}
    for op in ops:
        for arg in op.args:
            assert (index[arg], index[op], False) in edges


def test_graph_to_dot_still_draws_a_core_function_and_refuses_a_plan_for_ops():
    a = ng.core.Parameter(ng.core.f32, (2,), name="a")
    function = ng.core.Function([ng.core.Exp(a)], [a], name="f")
    assert "Exp" in graph_to_dot(function)
    with pytest.raises(ng.AxgraphTypeError, match="memory plan"):
        graph_to_dot(fresh([C]), plan=object())
    with pytest.raises(ng.AxgraphTypeError, match="not an op"):
        graph_to_dot([fresh([C]), 3])


def test_graph_to_svg_needs_graphviz(monkeypatch):
    import shutil

    graph = ng.exp(fresh([C]))
    if shutil.which("dot") is not None:
        assert "<svg" in graph_to_svg(graph)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(GraphvizError, match="Graphviz's dot program"):
        graph_to_svg(graph)


# -- structure of the op_graph package --------------------------------------------------

def _imports_of(path: Path) -> set:
    """The op_graph modules `path` imports, at module level or inside functions."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            found |= {node.module} if node.module else {a.name for a in node.names}
    return found


def test_op_graph_imports_go_one_way():
    modules = {p.stem: _imports_of(p) for p in OP_GRAPH.glob("*.py") if p.stem != "__init__"}
    assert modules["op"] == set()

    def visit(name, path):
        assert name not in path, f"import circle: {' -> '.join(path + [name])}"
        for imported in modules.get(name, ()):
            visit(imported, path + [name])

    for name in modules:
        visit(name, [])


def test_no_constructor_computes_axes():
    """Constructors pass on only the axes their caller gave; infer_axes computes the rest."""
    computed = []
    for path in OP_GRAPH.glob("*.py"):
        for cls in [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ClassDef)]:
            for init in [n for n in cls.body
                         if isinstance(n, ast.FunctionDef) and n.name == "__init__"]:
                params = {a.arg for a in init.args.args + init.args.kwonlyargs}
                for call in [n for n in ast.walk(init) if isinstance(n, ast.Call)
                             and isinstance(n.func, ast.Attribute) and n.func.attr == "__init__"]:
                    for keyword in call.keywords:
                        if keyword.arg == "axes" and not (
                                isinstance(keyword.value, ast.Name)
                                and keyword.value.id == "axes" and "axes" in params):
                            computed.append(f"{path.name}:{cls.name}")
    assert computed == []
