"""Fusion as a pass: `core.Fused` nodes in the printed IR, run by the interpreter too.

Every expected value is computed independently with NumPy; the fused function
is also compared with the unfused one on the reference interpreter.
"""
from __future__ import annotations

import inspect

import numpy as np
import pytest

from axgraph import core
from axgraph.errors import ShapeError
from axgraph.passes import VerificationError
from axgraph.transformers.cpu.backend import CpuFunction
from axgraph.transformers.cpu.fusion import FusionPass, find_fusion_groups

F32, F64 = core.f32, core.f64


def chain(shape=(4, 6)):
    """tanh(a*b + c) * sigmoid(d), then a row sum of its square: two groups."""
    a, b, c, d = (core.Parameter(F64, shape, name=n) for n in "abcd")
    value = core.Multiply(core.Tanh(core.Add(core.Multiply(a, b), c)), core.Sigmoid(d))
    total = core.Sum(core.Multiply(core.Dot(value, core.Transpose(value, (1, 0)), (1,), (0,)),
                                   core.Constant(F64, (shape[0], shape[0]), 2.0)), (1,))
    return core.Function([total, value], [a, b, c, d]), (a, b, c, d)


def run(function, *arrays):
    return core.compile(function, backend="interpreter")(*arrays)


def expected(a, b, c, d):
    value = np.tanh(a * b + c) / (1 + np.exp(-d))
    return np.sum(value @ value.T * 2.0, axis=1), value


def test_the_printed_ir_shows_each_group_as_a_fused_node_with_its_body():
    function, _ = chain()
    fused = FusionPass().run(function)
    text = str(fused)
    lines = text.splitlines()
    fused_lines = [line for line in lines if "= Fused(" in line]
    assert len(fused_lines) == 2
    # the body follows its node, indented, with its own parameters and return
    start = lines.index(fused_lines[0])
    assert lines[start + 1].startswith("      fused(")
    assert any(line.startswith("        ") and "Tanh(" in line for line in lines)
    # only the bodies compute Tanh, Sigmoid and the Sum now
    outer = [line for line in lines if line.startswith("  ") and not line.startswith("      ")]
    assert not any(op in line for line in outer for op in ("Tanh(", "Sigmoid(", "Sum("))
    assert any("Dot(" in line for line in outer)
    nodes = [n for n in fused.nodes if isinstance(n, core.Fused)]
    assert isinstance(nodes[-1].output, core.Sum) and nodes[-1].element_type == F64


def test_the_interpreter_runs_fused_functions_like_unfused_ones():
    function, _ = chain()
    fused = FusionPass().run(function)
    rng = np.random.default_rng(1)
    arrays = [rng.normal(size=(4, 6)) for _ in range(4)]
    got = run(fused, *arrays)
    plain = run(function, *arrays)
    for g, p, e in zip(got, plain, expected(*arrays)):
        np.testing.assert_allclose(g, e, rtol=1e-12)
        np.testing.assert_array_equal(g, p)


def test_the_fused_function_keeps_the_unfused_node_order():
    function, _ = chain()
    groups = find_fusion_groups(function)
    fused = FusionPass().run(function)
    internal = {n for g in groups for n in g.nodes if n is not g.output}
    outputs = {g.output for g in groups}
    # (op, type) per node; a Fused node stands where its group's output was
    before = [("Fused" if n in outputs else n.op, n.type_str())
              for n in function.nodes if n not in internal]
    after = [(n.op, n.type_str()) for n in fused.nodes]
    assert after == before and len(outputs) == 2


def test_scalar_constants_become_literals_of_the_body():
    x = core.Parameter(F32, (3,))
    two = core.Constant(F32, (3,), 2.0)
    used_outside = core.Add(x, two)        # the constant is read outside the group too
    inside = core.Exp(core.Multiply(core.Negative(x), two))
    function = core.Function([inside, used_outside], [x])
    fused = FusionPass().run(function)
    (node,) = [n for n in fused.nodes if isinstance(n, core.Fused)]
    assert node.inputs == (x,)
    assert any(isinstance(n, core.Constant) for n in node.body)
    values = np.array([0.5, -1.0, 2.0], np.float32)
    got, other = run(fused, values)
    np.testing.assert_allclose(got, np.exp(-values * 2), rtol=1e-6)
    np.testing.assert_allclose(other, values + 2, rtol=1e-6)


def test_a_body_may_use_sizes_only_the_enclosing_function_binds():
    n = core.Dim("N")
    x = core.Parameter(F64, (n, 2))
    s = core.Parameter(F64, ())
    t = core.Parameter(F64, ())
    total = core.Add(core.Broadcast(s, (n, 2), (0, 1)), core.Broadcast(t, (n, 2), (0, 1)))
    function = core.Function([core.Multiply(core.Exp(total), x)], [x, s, t])
    fused = FusionPass().run(function)
    (node,) = [m for m in fused.nodes if isinstance(m, core.Fused)]
    assert node.function.free_symbols == {"N"}   # x's parameter carries N
    values = np.arange(6.0).reshape(3, 2)
    (got,) = run(fused, values, np.float64(0.5), np.float64(0.25))
    np.testing.assert_allclose(got, np.exp(0.75) * values, rtol=1e-12)


def test_the_size_threshold_uses_the_bindings_or_leaves_symbolic_groups_fused():
    n = core.Dim("N")
    a, b = core.Parameter(F32, (n, 8)), core.Parameter(F32, (n, 8))
    function = core.Function([core.Tanh(core.Add(a, b))], [a, b])
    count = lambda f: sum(isinstance(m, core.Fused) for m in f.nodes)  # noqa: E731
    assert count(FusionPass(min_elements=64).run(function)) == 1          # symbolic: fused
    assert FusionPass(min_elements=64, bindings={"N": 7}).run(function) is function  # 56
    assert count(FusionPass(min_elements=64, bindings={"N": 8}).run(function)) == 1  # 64
    x, y = core.Parameter(F32, (2, 3)), core.Parameter(F32, (2, 3))
    small = core.Function([core.Tanh(core.Add(x, y))], [x, y])
    assert FusionPass(min_elements=7).run(small) is small
    assert count(FusionPass(min_elements=6).run(small)) == 1


def test_a_fused_node_checks_its_inputs_against_its_body():
    p = core.Parameter(F32, (3,))
    body = core.Function([core.Exp(p)], [p], "fused")
    with pytest.raises(ShapeError, match="input 0"):
        core.Fused([core.Parameter(F32, (4,))], body)
    node = core.Fused([core.Parameter(F32, (3,))], body)
    assert node.type_str() == "f32[3]" and node.output is body.results[0]


def test_a_cpu_computation_shows_the_fused_function_it_ran():
    import axgraph as ng
    from axgraph.errors import ExecutionError

    n_axis = ng.make_axis(1 << 16, name="N")
    a, b, c = (ng.placeholder([n_axis]) for _ in range(3))
    with ng.make_transformer("cpu") as transformer:
        step = transformer.computation(ng.tanh(a * b + c) - ng.erf(c), a, b, c)
        with pytest.raises(ExecutionError, match="nothing has run yet"):
            step.fused_function
        values = [np.linspace(-2, 2, 1 << 16, dtype=np.float32) * k for k in (1.0, 0.5, -1.0)]
        got = step(*values)
        fused = [node for node in step.fused_function.nodes if isinstance(node, core.Fused)]
        assert [(r.name, r.rules_fired) for r in step.fusion_report] == [
            ("fusion", (("fuse-elementwise", 1),))]
    assert len(fused) == 1
    assert [type(n).__name__ for n in fused[0].function.nodes
            if not isinstance(n, core.Parameter)] == ["Multiply", "Add", "Tanh", "Erf", "Subtract"]
    x, y, z = (v.astype(np.float64) for v in values)
    erf = np.vectorize(__import__("math").erf)
    np.testing.assert_allclose(got, np.tanh(x * y + z) - erf(z), rtol=1e-5, atol=1e-6)
    with pytest.raises(ng.TransformerClosedError):
        step.fused_function


def test_the_cpu_backend_fuses_in_a_pass_manager_per_binding(monkeypatch, capsys):
    """Verified, traced with AXGRAPH_TRACE_PASSES at the user's line, each group counted as
    a rule that fired; per binding of sizes, so a small batch stays unfused."""
    n = core.Dim("N")
    a, b = core.Parameter(F64, (n, 8), name="a"), core.Parameter(F64, (n, 8), name="b")
    value, line = core.Tanh(core.Add(a, b)), inspect.currentframe().f_lineno
    total = core.Sum(core.Multiply(value, value), (1,))
    compiled = CpuFunction(core.Function([total, value], [a, b]), fuse_min_elements=64)
    monkeypatch.setenv("AXGRAPH_TRACE_PASSES", "1")
    small = np.full((7, 8), 0.5)  # 56 elements: no group is worth a kernel
    np.testing.assert_allclose(compiled(small, small)[1], np.tanh(small + small), rtol=1e-15)
    (record,) = compiled.fusion_report
    assert (record.name, record.changed, record.rules_fired) == ("fusion", False, ())
    big = np.linspace(-2, 2, 64 * 8).reshape(64, 8)
    got_total, got_value = compiled(big, big)
    np.testing.assert_allclose(got_value, np.tanh(2 * big), rtol=1e-15)
    np.testing.assert_allclose(got_total, np.sum(np.tanh(2 * big) ** 2, axis=1), rtol=1e-13)
    (record,) = compiled.fusion_report
    assert record.changed and dict(record.rules_fired) == {"fuse-elementwise": 1,
                                                           "fuse-reduction": 1}
    assert record.nodes_after < record.nodes_before
    trace = capsys.readouterr().err
    assert f"axgraph pass fusion: fuse-elementwise at {__file__}:{line} (Tanh" in trace
    # a broken fusion is caught by the verifier, which names the pass
    monkeypatch.setattr(FusionPass, "run", lambda self, function: core.Function(
        [function.results[0]], list(function.parameters)))
    with pytest.raises(VerificationError, match="after pass 'fusion'"):
        CpuFunction(core.Function([total, value], [a, b]))(big, big)
