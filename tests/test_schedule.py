"""The cpu backend's Schedule: storage kinds, layouts, in-place options, and the plan from it."""
from __future__ import annotations

import numpy as np

from axgraph import core
from axgraph.transformers.cpu.fusion import FusionPass
from axgraph.transformers.cpu.liveness import analyze_liveness
from axgraph.transformers.cpu.memory_plan import plan_memory
from axgraph.transformers.cpu.schedule import schedule_function

F32 = core.f32


def small():
    """x (N, 4) -> exp -> transpose (view) -> tanh (buffer, exp's memory order) -> tanh*tanh."""
    n = core.Dim("N")
    x = core.Parameter(F32, (n, 4), name="x")
    e = core.Exp(x)
    t = core.Transpose(e, (1, 0))
    h = core.Tanh(t)
    c = core.Constant(F32, (4, n), 2.0)
    r = core.Multiply(core.Multiply(h, h), c)
    return core.Function([r], [x]), (x, e, t, h, c, r)


def test_storage_kinds_layouts_and_in_place_options():
    function, (x, e, t, h, c, r) = small()
    schedule = schedule_function(function, {"N": 3})
    assert schedule.nodes == function.nodes
    assert schedule.shapes[t] == (4, 3) and schedule.shapes[r] == (4, 3)
    assert {node: schedule.storage[node] for node in (x, e, t, h, c, r)} == {
        x: "parameter", e: "buffer", t: "view", h: "buffer", c: "constant", r: "fresh"}
    assert schedule.alias_of(t) is e and schedule.alias_of(h) is None
    assert schedule.layout[e].element_strides == (4, 1)   # row-major (3, 4)
    assert schedule.layout[t].element_strides == (1, 4)   # its transpose, no copy
    assert schedule.layout[h].element_strides == (1, 4)   # tanh walks exp's memory order
    square = r.inputs[0]
    assert schedule.can_run_in_place(square, h)           # same layout, elementwise
    assert not schedule.can_run_in_place(h, t)            # a view is no buffer of its own
    assert schedule.fresh == {r: 0} and schedule.writes(r) and not schedule.needs_buffer(r)


def test_liveness_and_plan_come_from_the_schedule():
    function, (x, e, t, h, c, r) = small()
    schedule = schedule_function(function, {"N": 3})
    live = analyze_liveness(schedule)
    square = r.inputs[0]
    assert live.owners == (e, h, square)
    assert live.root == {t: e}
    assert live.end[e] == live.step[h]                    # read through its view by tanh
    plan = plan_memory(schedule)
    assert plan.buffers[square].in_place_of is h          # h dies at the square
    assert plan.buffers[e].nbytes == 48 and plan.arena_bytes == 128
    assert plan.names[x] == "x"


def test_a_fused_node_is_one_buffer_reading_its_inputs():
    function, (x, e, t, h, c, r) = small()
    fused = FusionPass().run(function)
    (node,) = [n for n in fused.nodes if isinstance(n, core.Fused)]
    schedule = schedule_function(fused, {"N": 3})
    assert schedule.storage[node] == "fresh" and node.inputs == (t,)
    assert [schedule.storage[n] for n in fused.nodes] == ["parameter", "buffer", "view", "fresh"]
    plan = plan_memory(schedule)
    assert set(plan.buffers) == {e}
    compiled = core.compile(function, backend="cpu", fuse_min_elements=1)
    values = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    (got,) = compiled(values)
    np.testing.assert_allclose(got, np.tanh(np.exp(values).T) ** 2 * 2, rtol=1e-6)
    assert any(isinstance(n, core.Fused) for n in compiled.last_program.function.nodes)


def test_a_batched_product_is_laid_out_for_the_product_reading_it(rng):
    """Attention's weighted values (H, N, T, Dh), read by the output projection as
    (N, T) x (H, Dh): laid out (N, T, H, Dh), so that product takes it as a matrix view;
    a batched product read only by another batched one stays row-major, as do results."""
    H, N, T, K, Dh, D = 2, 3, 4, 5, 6, 7
    weights = core.Parameter(F32, (H, N, T, K), name="weights")
    values = core.Parameter(F32, (H, N, K, Dh), name="values")
    projection = core.Parameter(F32, (D, H, Dh), name="projection")
    mixed = core.Dot(weights, values, contract_a=(3,), contract_b=(2,), batch_a=(0, 1),
                     batch_b=(0, 1))                                      # (H, N, T, Dh)
    scaled = core.Multiply(mixed, core.Constant(F32, (H, N, T, Dh), 0.5))
    out = core.Dot(projection, scaled, contract_a=(1, 2), contract_b=(0, 3))  # (D, N, T)
    first = core.Dot(weights, values, contract_a=(3,), contract_b=(2,), batch_a=(0, 1),
                     batch_b=(0, 1))                                      # (H, N, T, Dh)
    again = core.Dot(first, values, contract_a=(3,), contract_b=(3,), batch_a=(0, 1),
                     batch_b=(0, 1))                                      # (H, N, T, K)
    function = core.Function([out, again, mixed], [weights, values, projection])
    schedule = schedule_function(function, {})
    assert schedule.layout[first].element_strides == (N * T * Dh, T * Dh, Dh, 1)
    assert schedule.layout[again].element_strides == (N * T * K, T * K, K, 1)
    assert schedule.layout[mixed].element_strides == (N * T * Dh, T * Dh, Dh, 1)  # a result
    function = core.Function([out, again], [weights, values, projection])
    schedule = schedule_function(function, {})
    assert schedule.layout[mixed].element_strides == (Dh, T * H * Dh, H * Dh, 1)
    assert schedule.layout[scaled].element_strides == (Dh, T * H * Dh, H * Dh, 1)
    w = rng.standard_normal((H, N, T, K)).astype(np.float32)
    v = rng.standard_normal((H, N, K, Dh)).astype(np.float32)
    p = rng.standard_normal((D, H, Dh)).astype(np.float32)
    got_out, got_again = core.compile(function, backend="cpu")(w, v, p)
    m = np.einsum("hntk,hnkd->hntd", w.astype(np.float64), v)
    np.testing.assert_allclose(got_out, np.einsum("ehd,hntd->ent", p, m * 0.5), rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_allclose(got_again, np.einsum("hntd,hnkd->hntk", m, v), rtol=1e-5,
                               atol=1e-5)
