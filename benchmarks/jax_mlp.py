"""MLP training steps on the jax transformer against hand-written `jax.jit` code doing the same step.

    python -m benchmarks.jax_mlp [--quick] [--rounds N]

Target (issue 26): axgraph on "jax" <= 1.05x the hand-written `jax.jit` step, for the
784-512-512-10 step at batch 128 and the overhead-bound 64-32-10 step at batch 32: the graph
adds no per-call overhead beyond argument checks.

Both sides do the math of `benchmarks.mlp` (ReLU MLP, softmax cross-entropy, plain SGD) on
the same initial parameters and batch, checked against its float64 NumPy reference before
timing. The hand-written step is `value_and_grad` inside one `jax.jit` with the parameters
donated, its batch already on the device, and waits for the step to finish. axgraph's is the
graph of `benchmarks.mlp` on `make_transformer("jax")`, fed the same device arrays; two
columns: with `keep_on_device=True` (the loss stays a device array, waited for as the
hand-written one is: the like-for-like figure the target reads) and with the default NumPy
results (one scalar copied to the host per step, with the flag of the program's checks).
With `keep_on_device=True` the checks' flag is read by the next call, which the
previous step has finished by then. A fourth column calls the XLA program axgraph's calls run
directly, as the hand-written step is called: its ratio to the hand-written step is what
the two programs differ by, and the "keep_on_device" column's time over it is what a call
of the computation adds. The hand-written step runs its matmuls at JAX's "highest"
precision, as axgraph's do (full float32); a last column shows it at JAX's default
precision, which on GPUs means TF32 matmuls (the same as "highest" on a CPU). JAX runs on
whatever device it finds first (a GPU where there is one); the device is printed.
"""
from __future__ import annotations

import sys
from typing import Dict, List

import numpy as np

from . import common
from .mlp import BIG, SMALL, JaxJit, Trainer, build_axgraph_graph, check_trainer, make_problem
from .mlp import reference_run

HAND, KEPT, HOST = "jax.jit by hand", "axgraph jax, keep_on_device", "axgraph jax, NumPy loss"
HAND_DEFAULT = "jax.jit by hand, default precision"
PROGRAM = "axgraph's XLA program alone"
COLUMNS = [HAND, KEPT, HOST, PROGRAM, HAND_DEFAULT]
TARGET = 1.05


class HandJit(JaxJit):
    """The hand-written step traced and run under `jax.default_matmul_precision(precision)`.

    axgraph's jax transformer computes float32 matmuls at full precision on every device
    (the other transformers' meaning); on a GPU, JAX's default lets XLA use TF32 instead.
    "highest" makes the hand-written step do the same math; "default" shows what the
    faster, less exact matmuls are worth where the device has them (nothing on a CPU).
    """

    def __init__(self, problem, precision: str):
        super().__init__(problem)
        self.precision = precision

    def __call__(self):
        with self.jax.default_matmul_precision(self.precision):
            return super().__call__()


class AxgraphJax(Trainer):
    """The `benchmarks.mlp` graph on the jax transformer, fed device arrays."""

    def __init__(self, problem, keep_on_device: bool):
        import jax

        import axgraph as ng

        self.jax = jax
        step, x, labels, variables = build_axgraph_graph(problem)
        self.transformer = ng.make_transformer("jax")
        self.computation = self.transformer.computation(step, x, labels)
        self.read = self.transformer.computation(variables)
        self.feeds = (jax.device_put(problem.x), jax.device_put(problem.labels.astype(np.int32)))
        self.keep_on_device = keep_on_device

    def __call__(self):
        loss = self.computation(*self.feeds, keep_on_device=self.keep_on_device)
        if self.keep_on_device:
            self.jax.block_until_ready(loss)
        return loss

    def params(self) -> List[np.ndarray]:
        return [np.asarray(v) for v in self.read()]


class AxgraphProgram(Trainer):
    """The XLA program axgraph's calls run, called directly (the breakdown of the ratio).

    The first calls go through the computation (the general route, then its plan); from
    then on the plan's jitted program is called as the hand-written step is, the donated
    parameters threaded from one call to the next. Its time against the hand-written
    step's is what the programs differ by; against "keep_on_device", what a call of the
    computation adds to its program.
    """

    def __init__(self, problem):
        self.inner = AxgraphJax(problem, keep_on_device=True)
        self.jax = self.inner.jax
        self.plan = None

    def __call__(self):
        if self.plan is None:
            loss = self.inner()
            plans = [p for p in self.inner.computation._plans.values() if p is not None]
            if plans:
                self.plan = plans[0]
                state = self.inner.transformer.state
                self.arguments = list(self.plan._arrange(
                    self.inner.feeds + self.plan._read_stored(state)))
                self.results = None
            return loss
        with self.jax.enable_x64(True):
            results, flag = self.plan.call.jitted(*self.arguments)
        for k, j in self.plan.call.guarded:
            self.arguments[j] = results[k]
        self.results = results
        self.jax.block_until_ready((results, flag))
        return results[0]

    def params(self) -> List[np.ndarray]:
        if self.plan is not None and self.results is not None:  # the stored values now
            self.inner.transformer.state.update(zip(
                self.plan._written_tensors, self.plan._written_outputs(self.results)))
        return self.inner.params()


def contestants(case: str) -> Dict[str, common.Setup]:
    """Each contestant's setup over a fresh problem (its own copy of the parameters)."""
    return {HAND: lambda: HandJit(make_problem(case), "highest"),
            KEPT: lambda: AxgraphJax(make_problem(case), keep_on_device=True),
            HOST: lambda: AxgraphJax(make_problem(case), keep_on_device=False),
            PROGRAM: lambda: AxgraphProgram(make_problem(case)),
            HAND_DEFAULT: lambda: HandJit(make_problem(case), "default")}


def main(argv=None) -> int:
    p = common.parser(__doc__.splitlines()[0])
    args = p.parse_args(argv)
    common.require("jax", "jax")
    import jax

    settings, _, _, load = common.start_run(args, HAND)
    print(f"JAX {jax.__version__} on {jax.devices()[0].platform}: {jax.devices()[0]}")
    timings: Dict[str, Dict[str, common.Timing]] = {}
    notes: List[str] = []
    for case in (BIG, SMALL):
        reference = reference_run(make_problem(case))
        runners = {}
        for name, setup in contestants(case).items():
            trainer = setup()
            problem = check_trainer(trainer, reference)
            if problem:
                notes.append(f"{case}: {name} EXCLUDED, wrong result: {problem}")
            else:
                runners[name] = trainer
        print(f"timing {case}: {', '.join(runners)} ...", flush=True)
        timings[case] = settings.time(runners)
    print()
    print(common.ratio_table("MLP training step (forward + backward + SGD), float32, on JAX",
                             timings, COLUMNS, HAND))
    notes.append("background: " + load.report())
    common.print_notes(notes)
    verdicts = [common.Verdict(f"{case}: axgraph jax (keep_on_device) / jax.jit by hand",
                               common.ratio(t, KEPT, HAND), TARGET,
                               why_missing="a contestant failed its check")
                for case, t in timings.items()]
    print()
    common.print_verdicts(verdicts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
