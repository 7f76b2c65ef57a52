"""Per-call overhead of a batch length known only when fed, against the same graph with it fixed.

    python -m benchmarks.symbolic_overhead [--quick] [--transformers cpu,interpreter,numpy]

A computation over a batch axis without a length accepts any batch; each call
binds the length from the fed arrays, checks them and (on cpu) finds the
program built for that binding. This measures what that costs per call,
binding and checks included, against the graph built with the batch length
fixed, on two cases: the digits MLP training step (64-32-10, SGD with
momentum, batch 32), and a tiny elementwise graph (x * 2 + 1 over 4 x 32
values) where the per-call path is nearly all there is. Calls go through
`computation(*arrays)`, as a user's do. Target: symbolic within 10 % of
fixed (<= 1.10x) on cpu; the other transformers are shown for comparison.
"""
from __future__ import annotations

import sys
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

import axgraph as ng
from axgraph.frontends.neon import (Affine, GlorotUniform, GradientDescentMomentum, Sequential,
                                    Softmax, Tanh)
from benchmarks import common

FIXED, SYMBOLIC = "fixed length", "symbolic length"
BATCH = 32
MLP, TINY = "digits MLP step 64-32-10, batch 32", "x * 2 + 1, 4 x 32"

Graph = Tuple[List, object]  # (placeholders, result)


def mlp_graph(N) -> Graph:
    """One training step of the digits MLP over the batch axis N; it returns the mean loss."""
    F, Y = ng.make_axis(64, name="F"), ng.make_axis(10, name="Y")
    images = ng.placeholder([F, N], name="images")
    labels = ng.placeholder([N], dtype=np.int32, name="labels")
    model = Sequential([
        Affine(nout=32, weight_init=GlorotUniform(seed=0), bias_init=0.0, activation=Tanh()),
        Affine(axes=Y, weight_init=GlorotUniform(seed=1), bias_init=0.0, activation=Softmax()),
    ])
    loss = ng.cross_entropy_multi(model(images), ng.one_hot(labels, axis=Y))
    step = ng.sequential([GradientDescentMomentum(0.1, momentum_coef=0.9)(loss),
                          ng.mean(loss, out_axes=())])
    return [images, labels], step


def tiny_graph(N) -> Graph:
    x = ng.placeholder([ng.make_axis(4, name="F"), N], name="x")
    return [x], x * 2.0 + 1.0


def inputs(case: str) -> List[np.ndarray]:
    rng = np.random.default_rng(0)
    if case == MLP:
        return [rng.random((64, BATCH), dtype=np.float32),
                rng.integers(0, 10, BATCH).astype(np.int32)]
    return [rng.random((4, BATCH), dtype=np.float32)]


def contestant(build: Callable[[object], Graph], length: Optional[int], transformer: str,
               arrays: List[np.ndarray]) -> common.Setup:
    """A setup making the computation (batch axis of `length`, None: none) and its runner."""
    def setup() -> common.Runner:
        placeholders, result = build(ng.make_axis(length, name="N"))
        computation = ng.make_transformer(transformer).computation(result, *placeholders)
        return lambda: computation(*arrays)

    return setup


def first_values(runners: Dict[str, common.Runner]) -> Dict[str, float]:
    """Each contestant's first result (fresh state on both sides: they must agree)."""
    return {name: float(np.sum(runner())) for name, runner in runners.items()}


def main(argv=None) -> int:
    p = common.parser(__doc__.splitlines()[0])
    p.add_argument("--transformers", default="cpu",
                   help="comma-separated transformers to measure (default cpu, the target's)")
    args = p.parse_args(argv)
    transformers = [t.strip() for t in args.transformers.split(",") if t.strip()]
    settings, _, _, load = common.start_run(args, FIXED)
    timings: Dict[str, Dict[str, Optional[common.Timing]]] = {}
    notes: List[str] = []
    for transformer in transformers:
        for case, build in ((MLP, mlp_graph), (TINY, tiny_graph)):
            arrays = inputs(case)
            runners = {FIXED: contestant(build, BATCH, transformer, arrays)(),
                       SYMBOLIC: contestant(build, None, transformer, arrays)()}
            values = first_values(runners)
            if not np.isclose(values[FIXED], values[SYMBOLIC], rtol=1e-6):
                notes.append(f"{case} ({transformer}): results differ {values}")
            name = f"{case} ({transformer})"
            print(f"timing {name} ...", flush=True)
            timings[name] = dict(settings.time(runners))
    print()
    print(common.ratio_table("Per call, binding and checks included", timings, [FIXED, SYMBOLIC],
                             FIXED))
    notes.append("background: " + load.report())
    common.print_notes(notes)
    print()
    verdicts = [common.Verdict(f"{name}: symbolic / fixed", common.ratio(t, SYMBOLIC, FIXED), 1.10)
                for name, t in timings.items() if name.endswith("(cpu)")]
    common.print_verdicts(verdicts)
    return 0 if all(v.met is not False for v in verdicts) and not notes[:-1] else 1


if __name__ == "__main__":
    sys.exit(main())
