"""What the torch bridge's test files share: each test starts from fresh Dynamo caches and
a seeded generator, and tensors are compared at float32 tolerances."""
from __future__ import annotations

import numpy as np
import pytest
import torch


@pytest.fixture(autouse=True)
def fresh_dynamo():
    """Dynamo's caches emptied before and after, and torch's generator seeded."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    yield
    torch._dynamo.reset()


def assert_close(actual, expected, what):
    """Two tensors agree at float32 tolerances; `what` names them in the failure."""
    np.testing.assert_allclose(actual.detach().numpy(), expected.detach().numpy(),
                               rtol=1e-4, atol=2e-5, err_msg=what)
