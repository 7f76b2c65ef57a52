"""Differential fuzzing: random axes graphs on every backend and pass set, against the reference.

    python benchmarks/fuzz.py --examples 10000 [--seed S] [--jobs 2]
    python benchmarks/fuzz.py --seed S --example K       # replay one graph on every configuration
    python -m benchmarks.fuzz ...                          # the same

Each example is one `axgraph.testing_graphs.random_graph`, built from its own seed
(S, K). It runs on the reference and on the base configurations of every other
backend (default, unoptimized, cpu unfused and with every group fused on each
engine) plus `--passes` configurations that each leave one pass out, drawn at
random (`--all-configs`: every configuration, every time). Smooth graphs also
check deriv against float64 central differences. Each disagreement is printed
with the graph's listing and the command that replays it; the exit status is 1
when there was any.

Compiled C kernels go to a temporary cache (thousands of random kernels would
otherwise pile up in ~/.cache/axgraph) unless AXGRAPH_CACHE_DIR is set.
"""
from __future__ import annotations

import argparse
import collections
import concurrent.futures
import multiprocessing
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

if __package__ in (None, ""):  # run as a script: make the checkout importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from axgraph.testing_graphs import (Configuration, Disagreement, RandomChoices,  # noqa: E402
                                    UnsuitableGraph, check_derivatives, compare,
                                    configurations, random_graph)


@dataclass
class Outcome:
    """What one example found."""

    example: int
    status: str                  # "agrees", "disagrees" or "unsuitable" (values near overflow)
    listing: str = ""
    problems: List[str] = field(default_factory=list)
    configurations: List[str] = field(default_factory=list)


def chosen_configurations(every: List[Configuration], rng: np.random.Generator,
                          passes: Optional[int]) -> List[Configuration]:
    """The base configurations, and `passes` of those leaving one pass out (None: all)."""
    base = [c for c in every if c.without is None]
    without = [c for c in every if c.without is not None]
    if passes is not None and passes < len(without):
        without = [without[i] for i in sorted(rng.choice(len(without), passes, replace=False))]
    return base + without


def run_example(seed: int, example: int, passes: Optional[int]) -> Outcome:
    """Build example `example` of run `seed`, run it everywhere, and say what disagreed."""
    sequence = np.random.SeedSequence([seed, example])
    graph_seed, config_seed = sequence.spawn(2)
    try:
        graph = random_graph(RandomChoices(graph_seed))
    except Exception as error:  # noqa: BLE001 - a generator bug is a finding too
        return Outcome(example, "disagrees", "(the graph could not be built)",
                       [f"building it raised {type(error).__name__}: {error}"], ["(building)"])
    configs = chosen_configurations(_all_configurations(), np.random.default_rng(config_seed),
                                    passes)
    try:
        found = compare(graph, configs) + check_derivatives(graph)
    except UnsuitableGraph:
        return Outcome(example, "unsuitable")
    except Exception as error:  # noqa: BLE001 - the reference failed on a valid graph
        found = [Disagreement("numpy (reference)", "(run)",
                              f"raised {type(error).__name__}: {error}")]
    if not found:
        return Outcome(example, "agrees")
    return Outcome(example, "disagrees", str(graph), [str(p) for p in found],
                   sorted({p.configuration for p in found}))


_CONFIGURATIONS: List[Configuration] = []


def _all_configurations() -> List[Configuration]:
    if not _CONFIGURATIONS:
        _CONFIGURATIONS.extend(configurations())
    return _CONFIGURATIONS


def _progress(total: int):
    """A tqdm bar when tqdm is installed, else a line every few hundred examples."""
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, unit="graph", file=sys.stderr, dynamic_ncols=True)


def report(outcome: Outcome, seed: int, write) -> None:
    write(f"\n=== example {outcome.example} disagrees "
          f"(replay: python benchmarks/fuzz.py --seed {seed} --example {outcome.example})")
    write(outcome.listing)
    for problem in outcome.problems:
        write(f"  {problem}")


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=1000, help="graphs to run")
    parser.add_argument("--seed", type=int, default=0, help="the run's seed")
    parser.add_argument("--example", type=int, help="replay this one example on every "
                                                    "configuration")
    parser.add_argument("--passes", type=int, default=2,
                        help="configurations leaving a pass out, per example (default 2)")
    parser.add_argument("--all-configs", action="store_true",
                        help="every configuration for every example")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--memory-gb", type=float, default=4.0,
                        help="address space per process: a runaway graph then raises "
                             "MemoryError instead of exhausting the machine (0: no limit)")
    args = parser.parse_args(argv)
    _limit_memory(args.memory_gb)

    temporary = None
    if not os.environ.get("AXGRAPH_CACHE_DIR"):
        temporary = tempfile.mkdtemp(prefix="axgraph-fuzz-kernels-")
        os.environ["AXGRAPH_CACHE_DIR"] = temporary
    try:
        if args.example is not None:
            return _replay(args.seed, args.example)
        return _run(args)
    finally:
        if temporary is not None:
            shutil.rmtree(temporary, ignore_errors=True)


def _limit_memory(gigabytes: float) -> None:
    try:
        import resource
    except ImportError:  # not on POSIX: no limit
        return
    if gigabytes > 0:
        limit = int(gigabytes * 2**30)
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _replay(seed: int, example: int) -> int:
    outcome = run_example(seed, example, None)
    graph = random_graph(RandomChoices(np.random.SeedSequence([seed, example]).spawn(2)[0]))
    print(graph)
    print(f"\n{outcome.status} on {len(_all_configurations())} configurations")
    for problem in outcome.problems:
        print(f"  {problem}")
    return 1 if outcome.status == "disagrees" else 0


def _run(args) -> int:
    passes = None if args.all_configs else args.passes
    configs = _all_configurations()
    print(f"fuzzing {args.examples} random graphs (seed {args.seed}) against the numpy "
          f"reference; {len(configs)} configurations:")
    print("  " + ", ".join(c.name for c in configs))
    print(f"  per graph: the {sum(c.without is None for c in configs)} without a pass left "
          f"out, and {'all' if passes is None else passes} of the others")
    bar = _progress(args.examples)
    write = bar.write if bar is not None else print
    counts: collections.Counter = collections.Counter()
    by_config: collections.Counter = collections.Counter()
    started = time.perf_counter()
    for done, outcome in enumerate(_outcomes(args, passes), 1):
        counts[outcome.status] += 1
        by_config.update(outcome.configurations)
        if outcome.status == "disagrees":
            report(outcome, args.seed, write)
        if bar is not None:
            bar.update()
            bar.set_postfix(disagreements=counts["disagrees"], refresh=False)
        elif done % 200 == 0:
            print(f"  {done}/{args.examples} graphs, {counts['disagrees']} disagree "
                  f"({time.perf_counter() - started:.0f} s)", flush=True)
    if bar is not None:
        bar.close()
    elapsed = time.perf_counter() - started
    print(f"\n{sum(counts.values())} graphs in {elapsed:.0f} s: {counts['agrees']} agree, "
          f"{counts['disagrees']} disagree, {counts['unsuitable']} skipped (values near "
          f"overflow)")
    for name, count in by_config.most_common():
        print(f"  {count:5d} graphs disagree on {name}")
    print(f"disagreements: {counts['disagrees']}")
    return 1 if counts["disagrees"] else 0


def _outcomes(args, passes):
    examples = range(args.examples)
    if args.jobs <= 1:
        for k in examples:
            yield run_example(args.seed, k, passes)
        return
    # Spawned, not forked: the C kernels' OpenMP runtime (libgomp) is not fork-safe, and a
    # child forked after this process probed the compiler hangs in its first threaded
    # kernel (a known bug of the cpu backend's probe).
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(args.jobs, mp_context=context,
                                                initializer=_limit_memory,
                                                initargs=(args.memory_gb,)) as pool:
        futures = {pool.submit(run_example, args.seed, k, passes): k for k in examples}
        for future in concurrent.futures.as_completed(futures):
            try:
                yield future.result()
            except concurrent.futures.process.BrokenProcessPool:
                # A worker died (a crash in a kernel, or killed): the pool is lost, with
                # every example not finished. One of them did it; replay them alone.
                lost = sorted(k for f, k in futures.items() if not f.done() or f.exception())
                yield Outcome(futures[future], "disagrees", "(a worker process died)",
                              [f"examples not finished: {lost}"], ["(worker died)"])
                return


if __name__ == "__main__":
    sys.exit(main())
