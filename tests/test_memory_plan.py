"""The cpu backend's memory planner: liveness, in-place, offsets in one arena, reports.

Graphs are built by hand in the core IR; the callbacks below play the
scheduler's part (which nodes get buffers, which are views, which ops may run
in place), turned into a hand-made `Schedule` by `as_schedule`. Every plan is checked against an independent, pairwise
no-overlap check, not only the planner's own `verify`.
"""
from __future__ import annotations

import itertools
import json
import sys
from typing import Dict, Optional, Sequence, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from axgraph import core
from axgraph.core.ops.elementwise import BinaryElementwise, UnaryElementwise
from axgraph.errors import GraphError
from axgraph.transformers.cpu.liveness import analyze_liveness
from axgraph.transformers.cpu.memory_plan import MemoryPlan, MemoryPlanError, plan_memory
from axgraph.transformers.cpu.schedule import Schedule
from axgraph.visualize import draw_memory_plan, graph_to_dot

VIEW_OPS = (core.Transpose, core.Reshape, core.Broadcast, core.Slice)


# -- the generator's side ------------------------------------------------------------------

def needs_buffer(node: core.Node) -> bool:
    return not isinstance(node, (core.Parameter, core.Constant) + VIEW_OPS)


def alias_of(node: core.Node) -> Optional[core.Node]:
    return node.inputs[0] if isinstance(node, VIEW_OPS) else None


def elementwise_in_place(node: core.Node, source: core.Node) -> bool:
    return (isinstance(node, (UnaryElementwise, BinaryElementwise))
            and node.element_type == source.element_type and node.shape == source.shape)


def never(node: core.Node, source: core.Node) -> bool:
    return False


def as_schedule(function: core.Function, shapes=None, buffers=needs_buffer, views=alias_of,
                in_place=elementwise_in_place) -> Schedule:
    """The Schedule the callbacks describe (static shapes unless `shapes` is given)."""
    shapes = shapes if shapes is not None else {n: tuple(n.shape) for n in function.nodes
                                                 if n.shape.is_static}
    alias = {n: views(n) for n in function.nodes if views(n) is not None}
    storage = {n: "view" if n in alias else "buffer" if buffers(n) else "parameter"
               for n in function.nodes}
    overwritable = {n: frozenset(x for x in n.inputs if in_place(n, x)) for n in function.nodes}
    return Schedule(function.nodes, function.results, function.parameters, shapes, storage,
                    alias, overwritable=overwritable, names=function.display_names())


def plan(function: core.Function, in_place=elementwise_in_place, alignment: int = 64,
         shapes: Optional[Dict[core.Node, Tuple[int, ...]]] = None) -> MemoryPlan:
    result = plan_memory(as_schedule(function, shapes, in_place=in_place), alignment)
    check_sound(result)
    return result


def check_sound(p: MemoryPlan) -> None:
    """Independent of MemoryPlan.verify: every pair, plain Python."""
    items = list(p.buffers.values())
    for b in items:
        assert b.offset % p.alignment == 0, (b, p.alignment)
        assert 0 <= b.offset and b.offset + b.nbytes <= p.arena_bytes
        assert b.start <= b.end
    for a, b in itertools.combinations(items, 2):
        together = a.start <= b.end and b.start <= a.end
        shared = (a.nbytes and b.nbytes and a.offset < b.offset + b.nbytes
                  and b.offset < a.offset + a.nbytes)
        if together and shared:
            writer, old = (a, b) if a.in_place_of is b.node else (b, a)
            assert writer.in_place_of is old.node, f"{a} overlaps {b}"
            assert writer.offset == old.offset and old.end == writer.start
    assert p.naive_bytes == sum(b.nbytes for b in items)
    assert p.peak_live_bytes <= p.arena_bytes


F32 = core.f32


# -- reuse ---------------------------------------------------------------------------------

def test_chain_reuses_two_blocks_without_in_place_and_one_with():
    x = core.Parameter(F32, (256, 256))
    t = x
    for _ in range(20):
        t = core.Tanh(t)
    f = core.Function([t], [x])
    size = 256 * 256 * 4
    shared = plan(f)
    assert shared.naive_bytes == 20 * size
    assert shared.arena_bytes == size
    assert shared.peak_live_bytes == size
    copied = plan(f, in_place=never)
    assert copied.arena_bytes == 2 * size       # ping-pong between two blocks
    assert copied.peak_live_bytes == 2 * size
    assert all(b.in_place_of is None for b in copied.buffers.values())


def test_dead_space_is_reused_best_fit():
    # a (big) dies before c (small) is made; c should land in a's old block, not on top.
    x = core.Parameter(F32, (64, 64))
    a = core.Exp(x)                       # 16 KiB
    b = core.Sum(a, (0,))                 # a dies here
    b2 = core.Exp(b)
    c = core.Sum(core.Exp(x), (1,))       # small tensors made after a is dead
    out = core.Add(b2, c)
    f = core.Function([out], [x])
    p = plan(f, in_place=never)
    assert p.arena_bytes < p.naive_bytes
    assert p.arena_bytes <= 2 * 64 * 64 * 4   # two 16 KiB live at once at most, smalls fit in gaps


def test_peak_is_a_lower_bound_and_is_reached_on_simple_graphs():
    x = core.Parameter(F32, (32, 32))
    a, b, c = core.Exp(x), core.Sin(x), core.Cos(x)
    f = core.Function([core.Add(core.Add(a, b), c)], [x])
    p = plan(f, in_place=never)
    assert p.arena_bytes >= p.peak_live_bytes
    assert p.arena_bytes == p.peak_live_bytes


# -- in place -------------------------------------------------------------------------------

def test_in_place_when_the_input_dies():
    x = core.Parameter(F32, (8, 8))
    t = core.Exp(x)
    u = core.Tanh(t)            # t's last use: u may overwrite it
    f = core.Function([u], [x])
    p = plan(f)
    assert p.buffers[u].in_place_of is t
    assert p.buffers[u].offset == p.buffers[t].offset
    assert p.buffers[t].end == p.buffers[u].start
    assert p.arena_bytes == 256


def test_no_in_place_when_the_input_is_used_later():
    x = core.Parameter(F32, (8, 8))
    t = core.Exp(x)
    u = core.Tanh(t)
    v = core.Add(u, t)          # t still needed after u
    f = core.Function([v], [x])
    p = plan(f)
    assert p.buffers[u].in_place_of is None
    assert p.buffers[u].offset != p.buffers[t].offset
    assert p.buffers[v].in_place_of in (u, t)   # both die at v


def test_no_in_place_over_a_result_or_a_parameter():
    x = core.Parameter(F32, (8, 8))
    t = core.Exp(x)
    u = core.Tanh(t)
    f = core.Function([t, u], [x])
    p = plan(f)
    assert p.buffers[u].in_place_of is None
    assert p.buffers[t].end == len(f.nodes) - 1
    # a parameter owns no arena space, so nothing runs over it
    g = core.Function([core.Tanh(x)], [x])
    q = plan(g)
    assert all(b.in_place_of is None for b in q.buffers.values())
    # even when the generator gives parameters arena space, they are never overwritten
    r = plan_memory(as_schedule(g, {}, lambda n: not isinstance(n, VIEW_OPS),
                                in_place=lambda n, i: True))
    check_sound(r)
    assert x in r.buffers and all(b.in_place_of is None for b in r.buffers.values())


def test_no_in_place_when_the_op_refuses_or_sizes_differ():
    x = core.Parameter(F32, (8, 8))
    t = core.Exp(x)
    s = core.Sum(t, (0,))
    f = core.Function([s], [x])
    assert plan(f, in_place=lambda n, i: True).buffers[s].in_place_of is None   # 32 B vs 256 B
    y = core.Parameter(F32, (8, 8))
    t2 = core.Exp(y)
    u2 = core.Tanh(t2)
    g = core.Function([u2], [y])
    assert plan(g, in_place=never).buffers[u2].in_place_of is None
    c = core.Convert(core.Exp(y), core.f64)
    h = core.Function([c], [y])
    assert plan(h, in_place=lambda n, i: True).buffers[c].in_place_of is None


def test_no_in_place_over_an_input_read_again_through_a_view():
    x = core.Parameter(F32, (8, 8))
    t = core.Exp(x)
    u = core.Add(t, core.Transpose(t, (1, 0)))   # writing over t would clobber t.T
    f = core.Function([u], [x])
    p = plan(f)
    assert p.buffers[u].in_place_of is None
    same = core.Multiply(t, t)                    # the same input twice is fine
    g = core.Function([same], [x])
    assert plan(g).buffers[same].in_place_of is t


def test_in_place_chains_share_one_block():
    x = core.Parameter(F32, (16, 16))
    t = core.Exp(x)
    u = core.Tanh(t)
    v = core.Negative(u)
    w = core.Sqrt(core.Abs(v))
    f = core.Function([w], [x])
    p = plan(f)
    assert len({b.offset for b in p.buffers.values()}) == 1
    assert p.arena_bytes == 16 * 16 * 4


# -- views and results -----------------------------------------------------------------------

def test_views_keep_their_base_alive():
    x = core.Parameter(F32, (16, 16))
    t = core.Exp(x)
    view = core.Reshape(core.Transpose(t, (1, 0)), (256,))   # a chain of views
    filler = [core.Sin(x)]
    for _ in range(4):
        filler.append(core.Cos(filler[-1]))
    late = core.Add(view, core.Reshape(filler[-1], (256,)))  # reads t through the view, late
    f = core.Function([late], [x])
    p = plan(f, in_place=never)
    assert p.views[view] is t and p.views[view.inputs[0]] is t
    step = {n: k for k, n in enumerate(f.nodes)}
    assert p.buffers[t].start < min(step[n] for n in filler)
    assert p.buffers[t].end == step[late]
    for node in filler:   # none of them may sit on t while the view is pending
        b = p.buffers[node]
        assert not (b.offset < p.buffers[t].offset + 1024 and p.buffers[t].offset < b.offset + 1024)
    assert p.storage_of(view) is p.buffers[t]


def test_view_of_a_parameter_is_outside_the_arena():
    x = core.Parameter(F32, (4, 6))
    v = core.Transpose(x, (1, 0))
    y = core.Exp(v)
    f = core.Function([y], [x])
    p = plan(f)
    assert p.views[v] is x and x not in p.buffers and p.storage_of(v) is None
    assert "not in arena" in p.table()


def test_results_and_views_that_are_results_live_to_the_end():
    x = core.Parameter(F32, (8, 8))
    early = core.Exp(x)
    base = core.Sin(x)
    shown = core.Transpose(base, (1, 0))
    tail = core.Tanh(core.Cos(core.Log(core.Add(early, base))))
    f = core.Function([early, shown, tail], [x])
    p = plan(f)
    last = len(f.nodes) - 1
    assert p.buffers[early].end == last
    assert p.buffers[base].end == last
    assert p.buffers[tail].end == last
    assert all(b.in_place_of not in (early, base) for b in p.buffers.values())


def test_liveness_directly():
    x = core.Parameter(F32, (4,))
    a = core.Exp(x)
    v = core.Reshape(a, (2, 2))
    b = core.Sin(x)
    c = core.Add(v, core.Reshape(b, (2, 2)))
    f = core.Function([c], [x])
    live = analyze_liveness(as_schedule(f))
    assert live.owners == (a, b, c)
    assert live.root == {v: a, c.inputs[1]: b}
    assert live.end[a] == live.step[c] and live.end[b] == live.step[c]
    assert live.end[c] == live.last_step and live.pinned == {c}
    assert set(live.live_at(live.step[c])) == {a, b, c}


# -- alignment, sizes, errors ----------------------------------------------------------------

@pytest.mark.parametrize("alignment", [1, 8, 64, 256])
def test_offsets_are_aligned(alignment):
    x = core.Parameter(F32, (3, 5))       # 60-byte tensors: padding matters
    a = core.Exp(x)
    b = core.Sin(x)
    c = core.Cos(x)
    d = core.Add(core.Add(a, b), c)
    e = core.Sum(d, (1,))                  # 12 bytes
    f = core.Function([e, a], [x])
    p = plan(f, alignment=alignment)
    assert all(b.offset % alignment == 0 for b in p.buffers.values())
    assert p.arena_bytes % alignment == 0
    assert p.alignment == alignment


def test_symbolic_shapes_use_the_bound_sizes():
    n = core.Dim("N")
    x = core.Parameter(F32, (n, 4))
    t = core.Exp(x)
    s = core.Sum(t, (1,))
    f = core.Function([s], [x])
    p = plan(f, shapes={x: (10, 4), t: (10, 4), s: (10,)})
    assert p.buffers[t].nbytes == 160 and p.buffers[s].nbytes == 40
    with pytest.raises(MemoryPlanError, match="no concrete shape"):
        plan_memory(as_schedule(f, {}, in_place=never))


def test_bad_inputs_are_refused():
    x = core.Parameter(F32, (4,))
    a = core.Exp(x)
    b = core.Sin(a)
    f = core.Function([b], [x])
    with pytest.raises(MemoryPlanError, match="alignment"):
        plan_memory(as_schedule(f, {}, in_place=never), alignment=0)
    with pytest.raises(GraphError, match="not scheduled before"):
        plan_memory(as_schedule(f, {}, views=lambda n: b if n is a else None, in_place=never))


def test_verify_catches_a_broken_plan():
    x = core.Parameter(F32, (8, 8))
    a = core.Exp(x)
    b = core.Sin(x)
    f = core.Function([core.Add(a, b)], [x])
    p = plan(f, in_place=never)
    p.buffers[b].offset = p.buffers[a].offset
    with pytest.raises(MemoryPlanError, match="overlaps"):
        p.verify()


def test_zero_sized_tensors():
    x = core.Parameter(F32, (0, 4))
    a = core.Exp(x)
    b = core.Tanh(a)
    f = core.Function([b], [x])
    p = plan(f)
    assert p.arena_bytes == 0 and p.naive_bytes == 0


# -- reports --------------------------------------------------------------------------------

def test_table_and_dict():
    x = core.Parameter(F32, (8, 8), name="x")
    t = core.Exp(x, name="t")
    u = core.Tanh(core.Transpose(t, (1, 0)), name="u")
    f = core.Function([u], [x])
    p = plan(f)
    text = p.table()
    assert "arena" in text and "naive" in text and "t" in text and "u" in text
    d = p.to_dict()
    json.dumps(d)
    assert d["arena_bytes"] == p.arena_bytes and d["naive_bytes"] == p.naive_bytes
    assert {b["name"] for b in d["buffers"]} == {"t", "u"}
    assert list(d["views"].values()) == ["t"]


# -- an MLP training step: the target ----------------------------------------------------------

def mlp_training_step(batch: int = 64, inputs: int = 784, hidden: int = 256,
                      classes: int = 10) -> core.Function:
    """Two-layer tanh MLP, softmax cross-entropy, SGD: forward, backward and updates."""
    x = core.Parameter(F32, (batch, inputs), name="x")
    y = core.Parameter(F32, (batch, classes), name="y")
    w1 = core.Parameter(F32, (inputs, hidden), name="w1")
    b1 = core.Parameter(F32, (hidden,), name="b1")
    w2 = core.Parameter(F32, (hidden, classes), name="w2")
    b2 = core.Parameter(F32, (classes,), name="b2")

    def const(value: float, shape: Sequence[int]) -> core.Node:
        return core.Broadcast(core.Constant(F32, (), value), shape, tuple(range(len(shape))))

    h_lin = core.Add(core.Dot(x, w1), core.Broadcast(b1, (batch, hidden), (0,)))
    h = core.Tanh(h_lin)
    logits = core.Add(core.Dot(h, w2), core.Broadcast(b2, (batch, classes), (0,)))
    p = core.Softmax(logits, (1,))
    loss = core.Divide(core.Negative(core.Sum(core.Multiply(y, core.Log(p)), (0, 1))),
                       core.Constant(F32, (), float(batch)))
    # backward
    d_logits = core.Multiply(core.Subtract(p, y), const(1.0 / batch, (batch, classes)))
    d_w2 = core.Dot(core.Transpose(h, (1, 0)), d_logits)
    d_b2 = core.Sum(d_logits, (0,))
    d_h = core.Dot(d_logits, core.Transpose(w2, (1, 0)))
    d_tanh = core.Subtract(const(1.0, (batch, hidden)), core.Multiply(h, h))
    d_h_lin = core.Multiply(d_h, d_tanh)
    d_w1 = core.Dot(core.Transpose(x, (1, 0)), d_h_lin)
    d_b1 = core.Sum(d_h_lin, (0,))
    # SGD
    rate = 0.1
    new = [core.Subtract(w, core.Multiply(const(rate, tuple(w.shape)), g))
           for w, g in ((w1, d_w1), (b1, d_b1), (w2, d_w2), (b2, d_b2))]
    return core.Function([loss] + new, [x, y, w1, b1, w2, b2], name="mlp_step")


def test_mlp_training_step_arena_is_at_most_half_the_naive_sum():
    f = mlp_training_step()
    p = plan(f)
    assert p.arena_bytes <= 0.5 * p.naive_bytes, p.table()
    assert p.arena_bytes <= 1.1 * p.peak_live_bytes + 1024, p.table()
    assert any(b.in_place_of is not None for b in p.buffers.values())


# -- property: random graphs never overlap ---------------------------------------------------

@st.composite
def random_graphs(draw):
    shapes = [(4, 4), (4, 8), (8, 4), (16,), (3, 5)]
    params = [core.Parameter(F32, s) for s in draw(st.lists(st.sampled_from(shapes),
                                                            min_size=1, max_size=3))]
    nodes = list(params)
    for _ in range(draw(st.integers(1, 25))):
        kind = draw(st.sampled_from(["unary", "binary", "view", "reduce", "dot"]))
        a = draw(st.sampled_from(nodes))
        if kind == "unary":
            op = draw(st.sampled_from([core.Exp, core.Tanh, core.Negative, core.Sin]))
            nodes.append(op(a))
        elif kind == "binary":
            same = [n for n in nodes if n.shape == a.shape]
            b = draw(st.sampled_from(same))
            op = draw(st.sampled_from([core.Add, core.Multiply, core.Subtract]))
            nodes.append(op(a, b))
        elif kind == "view":
            if a.rank == 2:
                nodes.append(core.Transpose(a, (1, 0)))
            else:
                nodes.append(core.Reshape(a, (a.shape.size,)))
        elif kind == "reduce" and a.rank == 2:
            nodes.append(core.Sum(a, (draw(st.integers(0, 1)),)))
        elif kind == "dot" and a.rank == 2:
            partners = [n for n in nodes if n.rank == 2 and n.shape[0] == a.shape[1]]
            if partners:
                nodes.append(core.Dot(a, draw(st.sampled_from(partners))))
    inner = nodes[len(params):] or [core.Exp(params[0])]
    results = draw(st.lists(st.sampled_from(inner), min_size=1, max_size=3, unique=True))
    if inner[-1] not in results:
        results.append(inner[-1])
    return core.Function(results, params)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_graphs(), st.sampled_from([1, 16, 64]), st.booleans())
def test_random_graphs_never_overlap(f, alignment, allow_in_place):
    p = plan(f, in_place=elementwise_in_place if allow_in_place else never, alignment=alignment)
    step = {n: k for k, n in enumerate(f.nodes)}
    for node, buffer in p.buffers.items():
        assert buffer.start == step[node]
        readers = [m for m in f.nodes if any(p.views.get(i, i) is node for i in m.inputs)]
        expected = max([step[node]] + [step[m] for m in readers])
        if any(p.views.get(r, r) is node for r in f.results):
            expected = len(f.nodes) - 1
        assert buffer.end == expected
        if buffer.in_place_of is not None:
            old = p.buffers[buffer.in_place_of]
            assert old.end == step[node] and buffer.in_place_of not in f.results


# -- pictures --------------------------------------------------------------------------------

def test_draw_memory_plan_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    p = plan(mlp_training_step(batch=8, inputs=32, hidden=16))
    path = draw_memory_plan(p, tmp_path / "plan.png")
    data = (tmp_path / "plan.png").read_bytes()
    assert path.endswith("plan.png") and data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000


def test_draw_memory_plan_without_matplotlib_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    x = core.Parameter(F32, (2,))
    p = plan(core.Function([core.Exp(x)], [x]))
    with pytest.raises(ImportError, match=r"pip install axgraph\[viz\]"):
        draw_memory_plan(p, tmp_path / "never.png")


def test_graph_to_dot_names_every_node():
    f = mlp_training_step(batch=4, inputs=6, hidden=5, classes=3)
    p = plan(f)
    dot = graph_to_dot(f, p)
    plain = graph_to_dot(f)
    names = f.display_names()
    assert dot.startswith('digraph "mlp_step" {') and dot.rstrip().endswith("}")
    for node in f.nodes:
        assert f"{names[node]} = {node.op}" in plain
    assert plain.count("->") == sum(len(n.inputs) for n in f.nodes)
    assert "view of" in dot and "@" in dot
