"""Where a jax computation's call spends its time, beside the hand-written `jax.jit` step.

    python -m benchmarks.jax_call_profile [--case small|big] [--calls N]

`benchmarks.jax_mlp` says how much slower a call of the computation is than the hand-written
step; this says why, on whatever device JAX finds (a GPU where there is one). It times,
interleaved, each layer of the call: the hand-written step, the plan's jitted program, the
plan's compiled program, the computation's call with results kept on the device, and reading
the checks' flag. Then it profiles the computation's calls (cProfile, by own time), so the
Python functions a call passes through and the waits inside them are named.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from typing import Callable, Dict, List, Tuple

import numpy as np

from . import common
from .jax_mlp import AxgraphJax, HandJit
from .mlp import BIG, SMALL, make_problem


def _median_us(fn: Callable[[], object], calls: int) -> float:
    """The median of `calls` timed calls of `fn`, in microseconds."""
    times: List[float] = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2] * 1e6


def layers(case: str) -> Tuple[Dict[str, Callable[[], object]], AxgraphJax]:
    """Each layer of a call, as a function doing one step and waiting for it; and the
    computation's step (keep_on_device) that the cProfile follows."""
    jax = common.import_jax()
    hand = HandJit(make_problem(case), "highest")
    kept = AxgraphJax(make_problem(case), keep_on_device=True)
    for _ in range(3):
        kept()  # the general route, then the plan
    computation = kept.computation
    plan = next(p for p in computation._plans.values() if p is not None)
    state = kept.transformer.state

    def arguments():
        return plan._arrange(kept.feeds + plan._read_stored(state))

    def through(fn):
        def step():
            results, flag = fn(*arguments())
            state.update(zip(plan._written_tensors, plan._written_outputs(results)))
            plan._expected = plan._read_stored(state)
            jax.block_until_ready(results[0])
        return step

    def jitted(*args):
        with jax.enable_x64(True):
            return plan.call.jitted(*args)

    def flag_read():
        results, flag = plan._compiled(*arguments())
        state.update(zip(plan._written_tensors, plan._written_outputs(results)))
        plan._expected = plan._read_stored(state)
        jax.block_until_ready(results[0])
        bool(np.asarray(flag))

    timed = {"hand jax.jit": hand, "plan jitted (x64 scope)": through(jitted),
             "computation keep_on_device": kept}
    if plan._compiled is not None:
        timed["plan compiled"] = through(plan._compiled)
        timed["compiled + flag read"] = flag_read
    return timed, kept


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", choices=["small", "big"], default="small")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    jax = common.import_jax()
    print(f"jax {jax.__version__} on {jax.devices()[0]}")
    case = SMALL if args.case == "small" else BIG
    timed, kept = layers(case)
    rounds: Dict[str, List[float]] = {name: [] for name in timed}
    for fn in timed.values():
        _median_us(fn, 20)  # warm
    for _ in range(args.rounds):
        for name, fn in timed.items():
            rounds[name].append(_median_us(fn, args.calls // args.rounds))
    for name, values in rounds.items():
        values.sort()
        print(f"  {name:30s} {values[len(values) // 2]:9.1f} us")
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(args.calls):
        kept()
    profile.disable()
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(25)
    print(f"cProfile of {args.calls} calls of the computation (keep_on_device), by own time:")
    print(text.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
