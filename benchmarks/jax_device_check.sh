#!/usr/bin/env bash
# The jax transformer's checks on whatever accelerator JAX finds (run from the repository root
# on a machine with a GPU and JAX for it installed; nothing here is needed on a CPU-only one):
#   1. the jax-specific tests and the sharding tests;
#   2. every semantic test of the shared engine map on the "jax" transformer (on that device);
#   3. the MLP training-step benchmark against hand-written jax.jit on the device.
# Results go to stdout and, when OUT is set, to $OUT/*.log.
set -uo pipefail
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1 CI=1
export AXGRAPH_CACHE_DIR="${AXGRAPH_CACHE_DIR:-$(mktemp -d)}"
log="${OUT:-/tmp}"
workers="${WORKERS:-8}"
python3 -c "import jax; print('jax', jax.__version__, jax.devices())"
nvidia-smi --query-gpu=name,memory.total --format=csv 2>/dev/null
python3 -m pytest -q -p no:cacheprovider tests/test_jax_backend.py tests/test_jax_sharding.py \
    2>&1 | tee "$log/jax_tests.log" | tail -15
python3 -m pytest -q -p no:cacheprovider -n "$workers" -k "jax" tests \
    2>&1 | tee "$log/jax_engine_map.log" | tail -25
python3 -m benchmarks.jax_mlp --quick 2>&1 | tee "$log/jax_mlp.log" | tail -20
