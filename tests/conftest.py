"""Shared fixtures: every execution test runs on each backend in BACKENDS.

Later backends join by adding their registry name here; the tests then run
against them unchanged (differential testing against the reference).
"""
import os
import sys

import numpy as np
import pytest
from hypothesis import settings

import axgraph as ng

# CI runs a fixed set of hypothesis examples (reproducible, never a new failure on an
# unrelated change); local runs keep exploring new ones.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

BACKENDS = ["numpy", "interpreter", "cpu", "jax"]
#: Every engine an op can run on: name -> make_transformer arguments
#: (fuse_min_elements=1 fuses every group however small; C for floats where a compiler works).
ENGINES = {
    "numpy": ("numpy", {}),
    "interpreter": ("interpreter", {}),
    "cpu": ("cpu", {"fuse": False}),
    "cpu-fused": ("cpu", {"fuse_min_elements": 1}),
    "cpu-fused-numpy": ("cpu", {"fuse_min_elements": 1, "engine": "numpy"}),
    "jax": ("jax", {}),
}


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    """Registry name of the transformer under test."""
    return request.param


@pytest.fixture
def transformer(backend):
    """A fresh transformer of the backend under test, closed afterwards."""
    with ng.make_transformer(backend) as t:
        yield t


@pytest.fixture
def rng():
    """A NumPy generator with a fixed seed, so failures reproduce."""
    return np.random.default_rng(1234)


@pytest.fixture(autouse=True)
def fresh_torch_dynamo():
    """Each test starts with TorchDynamo's caches empty, once something loaded it.

    Dynamo keeps what it learned per code object for the whole process: a test that traced
    `torch.nn.Sequential.forward` at one batch size (`torch.onnx.export`, `torch.export`)
    makes a later `torch.compile` of another Sequential recompile with dynamic sizes, so
    counts of compiled graphs would depend on which tests ran before.
    """
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is not None:
        dynamo.reset()
    yield
