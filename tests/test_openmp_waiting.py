"""How long the cpu kernels' idle OpenMP threads spin (kernel_c._bound_openmp_spinning)."""
import os
import subprocess
import sys

import pytest

from axgraph.transformers.cpu import kernel_c

VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")


@pytest.fixture
def clean_environment(monkeypatch):
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_unset_the_threads_spin_briefly_then_sleep(clean_environment):
    kernel_c._bound_openmp_spinning()
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    assert os.environ["GOMP_SPINCOUNT"] == str(kernel_c.OPENMP_SPINS)


@pytest.mark.parametrize("name, value", [("OMP_WAIT_POLICY", "ACTIVE"),
                                         ("OMP_WAIT_POLICY", "passive"),
                                         ("GOMP_SPINCOUNT", "0")])
def test_a_users_setting_is_left_alone(clean_environment, name, value):
    """GOMP_SPINCOUNT overrides OMP_WAIT_POLICY in GNU OpenMP: setting it beside a user's
    PASSIVE would make their threads spin, so neither is touched."""
    clean_environment.setenv(name, value)
    kernel_c._bound_openmp_spinning()
    assert os.environ[name] == value
    assert [n for n in VARIABLES if n in os.environ] == [name]


def test_a_fresh_process_sets_them_when_its_first_kernel_loads():
    if not kernel_c.toolchain():
        pytest.skip("no C compiler: no kernel loads")
    script = ("import os, numpy as np, axgraph as ng\n"
              "ax = ng.make_axis(length=4, name='A')\n"
              "x = ng.placeholder([ax])\n"
              "before = [os.environ.get(n) for n in ('OMP_WAIT_POLICY', 'GOMP_SPINCOUNT')]\n"
              "f = ng.make_transformer('cpu').computation(ng.tanh(x) * 2 + 1, x)\n"
              "f(np.arange(4, dtype=np.float32))\n"
              "after = [os.environ.get(n) for n in ('OMP_WAIT_POLICY', 'GOMP_SPINCOUNT')]\n"
              "print(before, after)\n")
    environment = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=environment, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[None,", "None]",
                                   "['PASSIVE',", f"'{kernel_c.OPENMP_SPINS}']"]
