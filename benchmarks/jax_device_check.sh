#!/usr/bin/env bash
# The jax transformer's checks on whatever accelerator JAX finds (run from the repository root
# on a machine with a GPU and JAX for it installed; nothing here is needed on a CPU-only one):
#   1. the jax-specific tests and the sharding tests (several devices: forced host devices);
#   2. every semantic test of the shared engine map on the "jax" transformer (on that device);
#   3. the MLP training-step benchmark against hand-written jax.jit on the device;
#   4. the data-parallel scaling of the step over forced host devices (that machine's CPU).
# Each part has a time limit so that one slow part leaves time for the rest. Results go to
# stdout and, when OUT is set, to $OUT/*.log.
set -uo pipefail
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1 CI=1
export AXGRAPH_CACHE_DIR="${AXGRAPH_CACHE_DIR:-$(mktemp -d)}"
log="${OUT:-/tmp}"
workers="${WORKERS:-8}"
parallel=()   # pytest-xdist where that machine has it; one process otherwise
python3 -c "import xdist" 2>/dev/null && parallel=(-n "$workers")
python3 -c "import jax; print('jax', jax.__version__, jax.devices())"
nvidia-smi --query-gpu=name,memory.total --format=csv 2>/dev/null
timeout "${LIMIT_TESTS:-150}" python3 -m pytest -q -p no:cacheprovider \
    tests/test_jax_backend.py tests/test_jax_sharding.py \
    2>&1 | tee "$log/jax_tests.log" | tail -15
timeout "${LIMIT_MAP:-200}" python3 -m pytest -q -rfE -p no:cacheprovider "${parallel[@]}" -k "jax" tests \
    2>&1 | tee "$log/jax_engine_map.log" | tail -25
timeout "${LIMIT_BENCH:-90}" python3 -m benchmarks.jax_mlp --quick 2>&1 | tee "$log/jax_mlp.log" | tail -14
timeout "${LIMIT_SCALING:-60}" python3 -m benchmarks.jax_data_parallel --rounds 3 2>&1 \
    | tee "$log/jax_data_parallel.log" | tail -12
