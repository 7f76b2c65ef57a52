"""Data parallelism on the jax transformer: one MLP training step on 1, 2, 4 and 8 devices.

    python -m benchmarks.jax_data_parallel [--devices 1,2,4,8] [--rounds 7] [--steps 10]

The 784-512-512-10 MLP (ReLU, softmax cross-entropy, SGD), batch 128, its batch axis N
mapped to the "data" axis of a mesh of D host devices (`axis_mapping={N: "data"}`):
each device computes the step for 128 / D examples and XLA all-reduces the gradients.

Why it is built this way: JAX fixes its device count when it starts, so each device
count runs in a worker process of its own, started with
``XLA_FLAGS=--xla_force_host_platform_device_count=D``. The workers build and compile
the step, then wait; every round asks each of them (in a rotated order) to time
`--steps` steps, so a slow spell of the machine lands on all device counts alike,
and the figure reported is the median over rounds. Before timing, the parent checks
that every worker's loss after the warm-up steps is the same (they train the same
model on the same batch). Forced host devices share the machine's cores: the scaling
shown is what splitting the batch gains or costs on this CPU (with 2 cores, at most
2x), not what as many accelerators would give.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from typing import Dict, List

import numpy as np

LAYERS, BATCH, WARMUP = (784, 512, 512, 10), 128, 3


def _worker(devices: int, steps: int) -> int:
    """Build the sharded step, report the loss after the warm-up, then time on request."""
    import jax

    import axgraph as ng
    from axgraph.frontends.neon import Affine, GlorotUniform, GradientDescentMomentum, Rectlin
    from axgraph.frontends.neon import Sequential, Softmax

    *hidden, classes = LAYERS[1:]
    F, Y = ng.make_axis(LAYERS[0], name="F"), ng.make_axis(classes, name="Y")
    N = ng.make_axis(BATCH, name="N")
    images = ng.placeholder([F, N], name="images")
    labels = ng.placeholder([N], dtype=np.int32, name="labels")
    layers = [Affine(nout=n, weight_init=GlorotUniform(seed=i), bias_init=0.0,
                     activation=Rectlin()) for i, n in enumerate(hidden)]
    layers.append(Affine(axes=Y, weight_init=GlorotUniform(seed=len(hidden)), bias_init=0.0,
                         activation=Softmax()))
    loss = ng.cross_entropy_multi(Sequential(layers)(images), ng.one_hot(labels, axis=Y))
    step = ng.sequential([GradientDescentMomentum(0.01)(loss), ng.mean(loss, out_axes=())])
    rng = np.random.default_rng(0)
    x = rng.random((LAYERS[0], BATCH), dtype=np.float32)
    y = rng.integers(0, classes, BATCH).astype(np.int32)
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:devices]).reshape(devices, 1),
                             ("data", "model"))
    with ng.make_transformer("jax", mesh=mesh, axis_mapping={N: "data"}) as transformer:
        train = transformer.computation(step, images, labels)
        for _ in range(WARMUP):
            value = float(train(x, y))
        print(f"ready {value!r}", flush=True)
        for line in sys.stdin:
            if line.strip() != "time":
                break
            started = time.perf_counter()
            for _ in range(steps):
                train(x, y)  # NumPy results: each call waits for its step to finish
            print(f"{(time.perf_counter() - started) / steps!r}", flush=True)
    return 0


def _start(devices: int, steps: int) -> subprocess.Popen:
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}",
               JAX_PLATFORMS="cpu")
    return subprocess.Popen([sys.executable, "-m", "benchmarks.jax_data_parallel",
                             "--worker", str(devices), "--steps", str(steps)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
                            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _ask(worker: subprocess.Popen, command: str) -> str:
    assert worker.stdin is not None and worker.stdout is not None
    worker.stdin.write(command + "\n")
    worker.stdin.flush()
    return worker.stdout.readline().strip()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", default="1,2,4,8", help="device counts, comma-separated")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=10, help="steps timed per sample")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        return _worker(args.worker, args.steps)
    counts = [int(d) for d in args.devices.split(",")]
    bad = [d for d in counts if d < 1 or BATCH % d]
    if bad:
        parser.error(f"device counts must divide the batch of {BATCH}: not {bad}")
    print(f"MLP {'-'.join(map(str, LAYERS))}, batch {BATCH}, data-parallel on forced host "
          f"devices; {os.cpu_count()} CPU cores; medians of {args.rounds} interleaved rounds "
          f"of {args.steps} steps", flush=True)
    workers = {d: _start(d, args.steps) for d in counts}
    try:
        losses = {}
        for d, worker in workers.items():
            assert worker.stdout is not None
            ready = worker.stdout.readline().split()
            if not ready or ready[0] != "ready":
                raise RuntimeError(f"the worker on {d} devices did not start")
            losses[d] = float(ready[1])
        first = losses[counts[0]]
        for d, value in losses.items():
            if abs(value - first) > 1e-4 * max(1.0, abs(first)):
                raise RuntimeError(f"loss after {WARMUP} steps: {value} on {d} devices, "
                                   f"{first} on {counts[0]}: the runs disagree")
        samples: Dict[int, List[float]] = {d: [] for d in counts}
        for round_index in range(args.rounds):
            order = counts[round_index % len(counts):] + counts[:round_index % len(counts)]
            for d in order:
                samples[d].append(float(_ask(workers[d], "time")))
    finally:
        for worker in workers.values():
            if worker.stdin is not None:
                worker.stdin.close()
            worker.wait(timeout=60)
    base = statistics.median(samples[counts[0]])
    print(f"{'devices':>8} {'examples/device':>16} {'step (ms)':>10} {'spread':>8} "
          f"{'speed-up':>9} {'efficiency':>11}   (against {counts[0]} device(s))")
    for d in counts:
        median = statistics.median(samples[d])
        spread = (max(samples[d]) - min(samples[d])) / median
        speedup = base / median  # against the first device count
        print(f"{d:>8} {BATCH // d:>16} {median * 1e3:>10.2f} {spread:>7.0%} "
              f"{speedup:>8.2f}x {speedup / (d / counts[0]):>10.0%}")
    print(f"(every worker's loss after {WARMUP} warm-up steps: {first:.6f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
