"""The package as a whole: light import, documented public names."""
import inspect
import subprocess
import sys

import axgraph as ng

OPTIONAL = ("sklearn", "scipy", "hypothesis", "tqdm", "matplotlib", "jax", "torch", "numba",
            "onnx", "tensorflow", "pytest")


def test_import_needs_numpy_only():
    code = ("import sys, axgraph; "
            f"print([m for m in {OPTIONAL!r} if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_public_name_is_documented():
    undocumented = []
    for name in ng.__all__:
        value = getattr(ng, name)
        if inspect.isfunction(value) or inspect.isclass(value):
            if not (value.__doc__ or "").strip():
                undocumented.append(name)
    assert undocumented == []


def test_seed_paths_exist():
    from axgraph.frontends.neon import ax as ax_a
    from axgraph.frontends.neon.axis import ax as ax_b
    from axgraph.transformers.nptransform import NumPyTransformer

    assert ax_a is ax_b
    assert NumPyTransformer is ng.NumPyTransformer
    assert issubclass(ng.op_graph.elementwise.Add, ng.op_graph.op.Op)
