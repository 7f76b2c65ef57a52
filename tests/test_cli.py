"""The ``axgraph`` command line, run as a subprocess: help, exit statuses, check, show, export."""
import re
import shutil
import textwrap

import numpy as np
import pytest

import axgraph as ng
from axgraph.cli.failures import CommandError
from axgraph.cli.graph_files import KINDS, optional_function
from cli_runner import run_axgraph

SUBCOMMANDS = ["train", "check", "show", "export", "bench"]

#: A graph with a declared batch size B: a dot, then B rows joined to 2*B.
MLP = """\
import axgraph as ng
B = ng.dim("B")
N = ng.make_axis(length=B, name="N")
F = ng.make_axis(length=4, name="F")
H = ng.make_axis(length=5, name="H")
x = ng.placeholder([F, N], name="x")
w = ng.variable([F, H], initial_value=0.1, name="w")
h = ng.tanh(ng.dot(w, x), name="h")
joined = ng.concat_along_axis([h, h], N, name="joined")
"""

#: A conv + pool stack over symbolic height and width: the windows must fit, checked when
#: data is fed.
CONV = """\
import axgraph as ng
from axgraph.frontends.neon import ar

Hd, Wd = ng.dim("Hd"), ng.dim("Wd")
C = ng.make_axis(length=3, name="C", roles=[ar.Channel])
images = ng.placeholder([C, ng.make_axis(length=Hd, name="H", roles=[ar.Height]),
                         ng.make_axis(length=Wd, name="W", roles=[ar.Width]),
                         ng.make_axis(length=ng.dim("B"), name="N")])
filters = ng.variable([C, ng.make_axis(length=3, name="R", roles=[ar.Height]),
                       ng.make_axis(length=3, name="S", roles=[ar.Width]),
                       ng.make_axis(length=8, name="K", roles=[ar.Channelout])],
                      initial_value=0.1)


def graph():
    features = ng.relu(ng.convolution(None, images, filters, strides=2))
    return {"pooled": ng.pooling(None, features, window=2, strides=2, name="pooled")}


if __name__ == "__main__":
    raise SystemExit("check must not run the program's main block")
"""


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_help_lists_every_subcommand_and_exits_0():
    done = run_axgraph("--help")
    assert done.returncode == 0, done.stderr
    for name in SUBCOMMANDS:
        assert re.search(rf"^\s+{name}\s+\w", done.stdout, re.M), name


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_each_subcommand_has_help(name):
    done = run_axgraph(name, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: axgraph {name}")


def test_usage_errors_exit_2():
    assert run_axgraph().returncode == 2               # no subcommand
    done = run_axgraph("check", "--no-such-option", "x.py")
    assert done.returncode == 2 and "unrecognized arguments" in done.stderr
    assert run_axgraph("show", "x.py", "--format", "jpeg").returncode == 2
    assert run_axgraph("export", "x.py").returncode == 2     # --onnx is required


def test_check_prints_each_node_with_its_symbolic_sizes(tmp_path):
    done = run_axgraph("check", write(tmp_path, "mlp.py", MLP))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    node = {line.split(" = ")[0]: line for line in lines if " = " in line}
    # the dot contracts F (4) away and keeps H (5) and the batch N (B); the concatenation
    # along N holds B rows twice
    assert "(F: 4, N: B) float32  # mlp.py:6" in node["x"]
    assert "(H: 5, N: B) float32  # mlp.py:8" in node["h"]
    assert "(H: 5, N: 2*B) float32  # mlp.py:9" in node["joined"]
    assert "  B   free (declared size)" in lines
    assert lines[lines.index("checks when data is fed:") + 1] == "  (none)"
    assert lines[-1].endswith("ok, no shape or axes errors")


def test_check_prints_the_residual_checks_and_sizes_that_evaluate_right(tmp_path):
    done = run_axgraph("check", write(tmp_path, "conv.py", CONV))
    assert done.returncode == 0, done.stdout + done.stderr
    pooled = next(line for line in done.stdout.splitlines() if line.startswith("pooled = "))
    shown = pooled.split(" : ")[-1]                     # (K: 8, P: ..., N: B) float32  # ...
    axes = dict(item.split(": ") for item in shown[1:shown.index(") float32")].split(", "))
    assert axes["K"] == "8" and axes["N"] == "B"
    for size in range(5, 40):
        # a 3-wide window at stride 2, then a 2-wide one at stride 2, written by hand
        expected = ((size - 3) // 2 + 1 - 2) // 2 + 1
        assert eval(axes["P"], {"Hd": size}) == expected
        assert eval(axes["Q"], {"Wd": size}) == expected
    checks = done.stdout.split("checks when data is fed:")[1]
    # the smallest image both windows fit: the pooled length is 1 at 5, and 0 at 4
    assert re.search(r"Hd >= 5 .*conv\.py:17", checks) and re.search(r"Wd >= 5", checks)


def test_check_names_the_line_of_an_axes_error_and_exits_1(tmp_path):
    path = write(tmp_path, "bad.py", """\
        import axgraph as ng
        N = ng.make_axis(name="N")
        F, G = ng.make_axis(length=4, name="F"), ng.make_axis(length=3, name="G")
        x, y = ng.placeholder([F, N]), ng.placeholder([G, N])
        z = x + ng.cast_axes(y, [F, N])
        """)
    done = run_axgraph("check", path)
    assert done.returncode == 1
    assert "IncompatibleAxesError: cast_axes of" in done.stdout
    assert "G (3) cannot become F (4)" in done.stdout
    assert f"at {path}:5\n    z = x + ng.cast_axes(y, [F, N])" in done.stdout


def test_check_reports_lengths_that_cannot_fit_with_every_line(tmp_path):
    path = write(tmp_path, "conflict.py", """\
        import axgraph as ng
        P, Q = ng.make_axis(name="P"), ng.make_axis(name="Q")
        p, q = ng.placeholder([P]), ng.placeholder([Q])
        long = ng.cast_axes(p, [ng.make_axis(length=128, name="L")])
        short = ng.cast_axes(q, [ng.make_axis(length=64, name="M")])
        paired = ng.dot(p, ng.cast_axes(q, [P]))
        """)
    done = run_axgraph("check", path)
    assert done.returncode == 1
    assert "ShapeConflictError: sizes do not fit: P = 128" in done.stdout
    for line in (4, 5, 6):
        assert f"conflict.py:{line}" in done.stdout


def test_check_shows_the_users_own_bug_at_its_line(tmp_path):
    path = write(tmp_path, "typo.py", "import axgraph as ng\n\nx = ng.placeholdr([])\n")
    done = run_axgraph("check", path)
    assert done.returncode == 1
    assert "AttributeError" in done.stdout
    assert f"at {path}:3\n    x = ng.placeholdr([])" in done.stdout


def test_a_python_file_that_exits_while_read_is_an_error(tmp_path):
    done = run_axgraph("check", write(tmp_path, "script.py", "import sys\nsys.exit(0)\n"))
    assert done.returncode == 1
    assert "called sys.exit(0) while building its graph" in done.stderr


def test_a_python_file_without_a_graph_is_an_error(tmp_path):
    done = run_axgraph("check", write(tmp_path, "empty.py", "VALUE = 3\n"))
    assert done.returncode == 1
    assert "no graph found" in done.stderr


def test_check_an_axon_program_prints_types_and_run_time_checks(tmp_path):
    path = write(tmp_path, "mlp.axon", """\
        fun dense (x : f32[*b, k]) (w : f32[k, n]) = relu (x @ w)
        val y = dense (input : f32[B, 784]) (param : f32[784, 10])
        val z = reshape [B, 2, 5] y
        val images = input : f32[N, 3, H, W]
        val features = pool 2 2 (relu (conv2d 1 1 images (param : f32[8, 3, 3, 3])))
        val pooled = pool 2 2 (conv2d 2 0 features (param : f32[16, 8, 3, 3]))
        """)
    done = run_axgraph("check", path)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "fun dense : f32[*b, k] -> f32[k, n] -> f32[*b, n]" in lines
    assert "val y : f32[B, 10]" in lines
    assert "val z : f32[B, 2, 5]" in lines
    # the smallest height that leaves one row: 3x3 same conv, pool 2, 3x3 stride-2 conv,
    # pool 2, written by hand
    def rows(height):
        return ((height // 2 - 3) // 2 + 1) // 2
    smallest = min(h for h in range(1, 64) if rows(h) >= 1)
    checks = [line for line in lines if line.startswith("check ")]
    assert any(line.startswith(f"check H >= {smallest}  (from ") for line in checks), checks
    assert any(line.startswith(f"check W >= {smallest}  (from ") for line in checks), checks


def test_check_an_axon_program_with_a_shape_error_quotes_its_lines(tmp_path):
    path = write(tmp_path, "bad.axon", """\
        fun dense (x : f32[*b, k]) (w : f32[k, n]) = relu (x @ w)
        val y = dense (input : f32[B, 784]) (param : f32[780, 10])
        """)
    done = run_axgraph("check", path)
    assert done.returncode == 1
    assert "dims differ: 784 vs 780" in done.stdout
    assert f"{path}:2:46: annotated" in done.stdout
    assert "                                                 ^^^^^^^^^^^^" in done.stdout


def test_unknown_and_missing_files_are_errors(tmp_path):
    done = run_axgraph("check", write(tmp_path, "notes.txt", "hello"))
    assert done.returncode == 1
    for suffix in KINDS:
        assert suffix in done.stderr
    done = run_axgraph("check", tmp_path / "absent.py")
    assert done.returncode == 1 and "no such file" in done.stderr


def test_an_optional_reader_that_is_missing_says_what_is_not_available():
    with pytest.raises(CommandError, match="ONNX support not available: No module named"):
        optional_function("axgraph.frontends.no_such_reader", "import_model", "ONNX")
    with pytest.raises(CommandError, match="Graph file .* not available: .*no attribute"):
        optional_function("axgraph.errors", "no_such_function", "Graph file (.axg)")


def test_show_text_and_dot(tmp_path):
    path = write(tmp_path, "mlp.py", MLP)
    text = run_axgraph("show", path, "--format", "text")
    assert text.returncode == 0
    checked = run_axgraph("check", path).stdout
    assert text.stdout.strip() == checked.rsplit("\n", 2)[0].strip()  # check adds its verdict
    done = run_axgraph("show", path, "--format", "dot", "-o", tmp_path / "mlp.dot")
    assert done.returncode == 0
    dot = (tmp_path / "mlp.dot").read_text()
    assert dot.startswith("digraph axes_graph {")
    # five ops, four edges into the dot / tanh / concat (w, x, dot, h twice)
    assert len(re.findall(r"^  n\d+ \[label=", dot, re.M)) == 5
    assert len(re.findall(r"^  n\d+ -> n\d+;", dot, re.M)) == 5
    assert "(H: 5, N: 2*B) float32" in dot


def test_show_svg_uses_graphviz_or_writes_dot_with_a_note(tmp_path):
    done = run_axgraph("show", write(tmp_path, "mlp.py", MLP), "--format", "svg",
                       "-o", tmp_path / "mlp.svg")
    assert done.returncode == 0, done.stderr
    if shutil.which("dot"):
        assert "<svg" in (tmp_path / "mlp.svg").read_text()
    else:
        assert "dot program is not installed" in done.stderr
        assert (tmp_path / "mlp.dot").read_text().startswith("digraph")
        assert not (tmp_path / "mlp.svg").exists()


def test_show_memory_charts_the_plan_for_given_sizes(tmp_path):
    pytest.importorskip("matplotlib")
    path = write(tmp_path, "mlp.py", MLP)
    done = run_axgraph("show", path, "--memory")
    assert done.returncode == 1 and "give --size B=N" in done.stderr
    done = run_axgraph("show", path, "--memory", "--size", "B=16", "-o", tmp_path / "plan.png")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "plan.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert run_axgraph("show", path, "--memory", "--size", "B=zero").returncode == 1


def _run_mlp_in_axgraph(x_value):
    """The MLP of `MLP` built here and run on numpy: what the exported file must compute."""
    namespace: dict = {}
    exec(MLP, namespace)
    with ng.make_transformer("numpy") as transformer:
        return transformer.computation(namespace["joined"], namespace["x"])(x_value)


def test_export_to_onnx_runs_in_onnxruntime_as_in_axgraph(tmp_path):
    onnx = pytest.importorskip("onnx")
    onnxruntime = pytest.importorskip("onnxruntime")
    path = write(tmp_path, "mlp.py", MLP)
    done = run_axgraph("export", path, "--onnx", tmp_path / "mlp.onnx")
    assert done.returncode == 0, done.stderr
    model = onnx.load(str(tmp_path / "mlp.onnx"))
    onnx.checker.check_model(model, full_check=True)
    session = onnxruntime.InferenceSession(str(tmp_path / "mlp.onnx"),
                                           providers=["CPUExecutionProvider"])
    x_value = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    (got,) = session.run(None, {"x": x_value})
    # by hand: tanh(w . x) with w all 0.1, the batch joined to itself
    by_hand = np.tanh(0.1 * x_value.sum(axis=0, keepdims=True)).repeat(5, axis=0)
    np.testing.assert_allclose(got, np.concatenate([by_hand, by_hand], axis=1), rtol=1e-6)
    np.testing.assert_allclose(got, _run_mlp_in_axgraph(x_value), rtol=1e-6)


def _saved_graph_file(tmp_path):
    """`MLP` saved as a graph file with its placeholder as input."""
    namespace: dict = {}
    exec(MLP, namespace)
    path = tmp_path / "mlp.axg"
    ng.serialization.save_graph(namespace["joined"], path, inputs=[namespace["x"]])
    return path


def test_check_and_show_a_graph_file(tmp_path):
    path = _saved_graph_file(tmp_path)
    done = run_axgraph("check", path)
    assert done.returncode == 0, done.stderr
    assert re.search(r"joined = .*: \(H: 5, N: 2\*B\)", done.stdout), done.stdout
    assert "mlp.axg: ok" in done.stdout
    done = run_axgraph("show", path, "--format", "dot", "-o", tmp_path / "mlp.dot")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "mlp.dot").read_text().startswith("digraph")


def test_check_a_core_function_file_prints_its_listing(tmp_path):
    from axgraph import core

    x = core.Parameter(core.f32, (3,), name="x")
    function = core.Function([core.Exp(core.Negative(x))], [x])
    path = tmp_path / "core.axg"
    ng.serialization.save_function(function, path)
    done = run_axgraph("check", path)
    assert done.returncode == 0, done.stderr
    assert "Exp" in done.stdout and "Negative" in done.stdout, done.stdout


def test_a_corrupt_graph_file_is_an_error_naming_it(tmp_path):
    path = _saved_graph_file(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    done = run_axgraph("check", path)
    assert done.returncode == 1
    # check reports what it finds, a file it cannot read included, on standard output
    assert "mlp.axg: it is not a readable zip archive" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr


def test_export_a_graph_file_to_onnx(tmp_path):
    pytest.importorskip("onnx")
    onnxruntime = pytest.importorskip("onnxruntime")
    path = _saved_graph_file(tmp_path)
    done = run_axgraph("export", path, "--onnx", tmp_path / "from_axg.onnx")
    assert done.returncode == 0, done.stderr
    session = onnxruntime.InferenceSession(str(tmp_path / "from_axg.onnx"),
                                           providers=["CPUExecutionProvider"])
    x_value = np.arange(8, dtype=np.float32).reshape(4, 2) / 8
    (got,) = session.run(None, {"x": x_value})
    np.testing.assert_allclose(got, _run_mlp_in_axgraph(x_value), rtol=1e-6)


def test_check_and_export_an_onnx_model(tmp_path):
    onnx = pytest.importorskip("onnx")
    onnxruntime = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    weights = np.arange(12, dtype=np.float32).reshape(4, 3) / 10 - 0.5
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        [numpy_helper.from_array(weights, "w")])
    path = tmp_path / "mlp.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    done = run_axgraph("check", path)
    assert done.returncode == 0, done.stderr
    assert re.search(r"Relu_\d+ = Relu\(.*\) : \(batch: batch, \w+: 3\)", done.stdout), done.stdout
    # back out through axgraph: the same function of a batch of any size
    done = run_axgraph("export", path, "--onnx", tmp_path / "again.onnx")
    assert done.returncode == 0, done.stderr
    session = onnxruntime.InferenceSession(str(tmp_path / "again.onnx"),
                                           providers=["CPUExecutionProvider"])
    x_value = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    (got,) = session.run(None, {session.get_inputs()[0].name: x_value})
    np.testing.assert_allclose(got, np.maximum(x_value @ weights, 0), rtol=1e-5, atol=1e-6)
