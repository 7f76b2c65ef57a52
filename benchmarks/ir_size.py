"""Core IR size of the digits MLP training step, before and after the passes.

    python -m benchmarks.ir_size

Lowers one training step (forward, backward, SGD-momentum updates) to a
core Function and prints the node count after each pass of the default
pipeline, plus the number of core ops and passes.
"""
from __future__ import annotations

import time
from collections import Counter

import numpy as np

from axgraph import core, passes
from axgraph.frontends.neon import ArrayIterator
from axgraph.lowering import lower
from axgraph.op_graph.execution_order import schedule
from examples import digits_mlp


def main() -> None:
    rng = np.random.default_rng(0)
    images = rng.random((256, 64), dtype=np.float32)
    labels = rng.integers(0, 10, 256).astype(np.int32)
    train_set = ArrayIterator({"image": images, "label": labels}, 32)
    _, step, _, _ = digits_mlp.build(train_set, test_count=64)
    ops = schedule([step])
    started = time.perf_counter()
    function = lower(ops, [step]).function
    lowered_at = time.perf_counter()
    manager = passes.PassManager(passes.default_passes(), max_rounds=4)
    optimized = manager.run(function)
    optimized_at = time.perf_counter()
    print(f"axes-graph ops in the step:   {len(ops)}")
    print(f"core ops available:           {len(core.CORE_OPS)}")
    print(f"passes in the default pipeline: {len(passes.default_passes())}")
    print(f"core nodes after lowering:    {len(function.nodes)}  ({lowered_at - started:.3f} s)")
    print(f"core nodes after the passes:  {len(optimized.nodes)}  ({optimized_at - lowered_at:.3f} s)")
    print()
    print(manager.format_report())
    print()
    before, after = Counter(n.op for n in function.nodes), Counter(n.op for n in optimized.nodes)
    print(f"{'op':<14}{'before':>8}{'after':>8}")
    for op in sorted(before | after, key=lambda o: -before[o]):
        print(f"{op:<14}{before[op]:>8}{after[op]:>8}")


if __name__ == "__main__":
    main()
