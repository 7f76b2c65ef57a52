"""Shape inference without data: how long `ng.infer_shapes` takes on a deep conv/pool stack
whose height, width and batch are symbolic (`ng.dim`), and how the time grows with the
number of ops.

Each block of the stack relabels the channels (cast_axes), convolves 3x3 with padding 1,
adds a bias and applies relu; every fourth block also max-pools 3x3 with padding 1
(the size is kept), and every 32nd pools 2x2 with stride 2 (the size halves, so the
solver meets nested floors and a window check that grows with depth). The target: the
2,000-op graph in under 1 s. Times are medians of several runs on the 2-core development
machine; the growth column is time per op relative to the smallest graph (1.0 = linear).

    python -m benchmarks.shape_inference            # the table and the verdict
    python -m benchmarks.shape_inference --quick    # fewer sizes and runs
"""
from __future__ import annotations

import argparse
import statistics
import time
from typing import List, Optional, Tuple

import axgraph as ng
from axgraph.frontends.neon import ar
from axgraph.op_graph.op import Op, upstream_ops

TARGET_OPS = 2000
TARGET_SECONDS = 1.0


def _axis(length, name: str, *roles):
    return ng.make_axis(length=length, name=name, roles=roles)


def build(blocks: int) -> Tuple[Op, int]:
    """The stack with `blocks` blocks: its last op and how many ops infer_shapes visits."""
    H, W, N = ng.dim("H"), ng.dim("W"), ng.dim("N")
    x = ng.placeholder([_axis(3, "C", ar.Channel), _axis(H, "H", ar.Height),
                        _axis(W, "W", ar.Width), _axis(N, "N")])
    y: Op = x
    for block in range(blocks):
        channels = _axis(y.axes[0].length, "Ci", ar.Channel)
        y = ng.cast_axes(y, [channels] + list(y.axes[1:]))
        out = _axis(8, "K", ar.Channelout)
        w = ng.variable([channels, _axis(3, "R", ar.Height), _axis(3, "S", ar.Width), out],
                        initial_value=0.01)
        y = ng.convolution(None, y, w, padding=1)
        bias = ng.variable([y.axes[0]], initial_value=0.0)
        y = ng.relu(y + bias)
        if block % 4 == 3:
            y = ng.pooling(None, y, window=3, strides=1, padding=1)
        if block % 32 == 31:
            y = ng.pooling(None, y, window=2, strides=2)
    return y, len(upstream_ops([y], include_control=True))


def graph_of(ops: int) -> Tuple[Op, int]:
    """The smallest stack with at least `ops` ops, and its op count."""
    _, per_16 = build(16)
    blocks = max(1, ops * 16 // per_16)
    result, count = build(blocks)
    while count < ops:
        blocks += 1
        result, count = build(blocks)
    return result, count


def time_inference(result: Op, runs: int) -> float:
    """The median time of `runs` calls of infer_shapes on `result`'s graph (seconds)."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        ng.infer_shapes(result)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer sizes and runs")
    parser.add_argument("--runs", type=int, default=None, help="runs per size (median)")
    args = parser.parse_args(argv)
    sizes = [250, 1000, TARGET_OPS] if args.quick else [250, 500, 1000, TARGET_OPS, 4000]
    runs = args.runs or (3 if args.quick else 5)
    rows = []
    for size in sizes:
        result, ops = graph_of(size)
        seconds = time_inference(result, runs)
        rows.append((ops, seconds))
    report = ng.infer_shapes(result)
    base = rows[0][1] / rows[0][0]
    print("ng.infer_shapes on a conv/pool stack with symbolic H, W, N "
          f"(median of {runs} runs)\n")
    print(f"{'ops':>6}  {'seconds':>8}  {'us/op':>7}  {'growth':>6}")
    for ops, seconds in rows:
        print(f"{ops:>6}  {seconds:>8.3f}  {1e6 * seconds / ops:>7.1f}  "
              f"{seconds / ops / base:>6.2f}")
    print(f"\nlast graph's output: {result.axes}")
    print("its checks when data is fed:")
    for residual in report.residuals:
        print(f"  {residual.constraint}")
    target = next(seconds for ops, seconds in rows if ops >= TARGET_OPS)
    target_ops = next(ops for ops, seconds in rows if ops >= TARGET_OPS)
    verdict = "met" if target < TARGET_SECONDS else "MISSED"
    print(f"\ntarget: {target_ops} ops in < {TARGET_SECONDS:.0f} s: {target:.3f} s -> {verdict}")
    return 0 if target < TARGET_SECONDS else 1


if __name__ == "__main__":
    raise SystemExit(main())
