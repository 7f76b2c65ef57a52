"""Causal attention core, forward and backward: axgraph's cpu transformer against PyTorch eager.

    python -m benchmarks.attention [--quick] [--profile] [--march x86-64-v3]

Target (issue 27) measured here:
  Attention core forward+backward (batch 16, T 128, 4 heads, head size 32):
  cpu <= 1.0x PyTorch eager (`F.scaled_dot_product_attention` and its backward).

The attention core: scores = q . k over the head size, per example and head (N and H are
batch axes of one batched product), scaled by 1/sqrt(32); a causal mask; softmax over the
keys; the weighted sum of v. The backward takes an upstream gradient g of the output and
gives dq, dk and dv. axgraph writes it with `ng.dot(..., reduction_axes=[D])`,
`ng.causal_mask`, `ng.where` and `ng.softmax`, and differentiates it with `ng.deriv` of
sum(out * g); PyTorch calls `scaled_dot_product_attention(q, k, v, is_causal=True)` and
`out.backward(g)` (2 threads). Both return the output and the three gradients, checked
against a float64 NumPy version written out by hand before anything is timed.

`--march x86-64-v3` adds a column with the fused C kernels built for AVX2
(`$AXGRAPH_MARCH`), measured in the same interleaved rounds. `--profile` shows where
axgraph's time goes: each statement of the generated program, timed on its own.
"""
from __future__ import annotations

import math
import sys
import time
from typing import Dict, List, Optional, Sequence

import numpy as np

from . import common
from .common import Case, Verdict

BATCH, HEADS, T, HEAD = 16, 4, 128, 32
SHAPE = (BATCH, HEADS, T, HEAD)
CASE = f"attention fwd+bwd, N {BATCH}, H {HEADS}, T {T}, D {HEAD}"
AXGRAPH, TORCH = "axgraph cpu", "torch eager"
TOLERANCE = 1e-4  # largest error against float64 that a float32 contestant may have


def inputs(seed: int = 0) -> List[np.ndarray]:
    """q, k, v and the upstream gradient g, each (N, H, T, D) float32."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(SHAPE, dtype=np.float32) for _ in range(4)]


def reference(q, k, v, g) -> List[np.ndarray]:
    """out, dq, dk, dv in float64, by hand: softmax(mask(q k^T / sqrt(D))) v and its adjoint."""
    q, k, v, g = (x.astype(np.float64) for x in (q, k, v, g))
    scale = 1 / math.sqrt(HEAD)
    scores = np.einsum("nhtd,nhkd->nhtk", q, k) * scale
    scores = np.where(np.tril(np.ones((T, T), bool)), scores, -np.inf)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    out = np.einsum("nhtk,nhkd->nhtd", weights, v)
    d_weights = np.einsum("nhtd,nhkd->nhtk", g, v)
    d_scores = weights * (d_weights - (d_weights * weights).sum(axis=-1, keepdims=True)) * scale
    dq = np.einsum("nhtk,nhkd->nhtd", d_scores, k)
    dk = np.einsum("nhtk,nhtd->nhkd", d_scores, q)
    dv = np.einsum("nhtk,nhtd->nhkd", weights, g)
    return [out, dq, dk, dv]


# -- contestants ----------------------------------------------------------------------------

def attention_graph():
    """(out, dq, dk, dv) and the placeholders (q, k, v, g) of axgraph's attention core."""
    import axgraph as ng

    N, H = ng.make_axis(BATCH, name="N"), ng.make_axis(HEADS, name="H")
    Tq, Tk, D = ng.make_axis(T, name="T"), ng.make_axis(T, name="K"), ng.make_axis(HEAD, name="D")
    q, g = ng.placeholder([N, H, Tq, D]), ng.placeholder([N, H, Tq, D])
    k, v = ng.placeholder([N, H, Tk, D]), ng.placeholder([N, H, Tk, D])
    scores = ng.dot(q, k, reduction_axes=[D]) * (1 / math.sqrt(HEAD))  # (N, H, T, K)
    weights = ng.softmax(ng.where(ng.causal_mask(Tq, Tk), scores, -np.inf), Tk)
    out = ng.dot(weights, v, reduction_axes=[Tk])  # (N, H, T, D)
    cost = ng.sum(out * g, out_axes=())
    return [out, *(ng.deriv(cost, x) for x in (q, k, v))], [q, k, v, g]


def axgraph_setup(march: Optional[str] = None):
    """A runner of the compiled attention core on the cpu transformer (fused if that works)."""
    import axgraph as ng

    results, places = attention_graph()
    arrays = inputs()
    with common.kernel_march(march):
        options, note = common.cpu_transformer_options(
            lambda t: t.computation(results, *places)(*arrays))
        transformer = ng.make_transformer("cpu", **options)
        computation = transformer.computation(results, *places)
        computation(*arrays)  # compiles (and builds the C kernels) inside the march block

    def run():
        return computation(*arrays)

    run.note = common.describe_options(options) + (f", -march={march}" if march else "") + \
        (f"; {note}" if note else "")
    run.computation = computation
    run.arrays = arrays
    return run


def torch_setup():
    torch = common.import_torch()
    sdpa = torch.nn.functional.scaled_dot_product_attention
    q, k, v, g = (torch.from_numpy(x) for x in inputs())
    leaves = [x.clone().requires_grad_(True) for x in (q, k, v)]

    def run():
        for leaf in leaves:
            leaf.grad = None
        out = sdpa(*leaves, is_causal=True)
        out.backward(g)
        return [out.detach(), *(leaf.grad for leaf in leaves)]

    return run


def marched(march: str) -> str:
    return f"{AXGRAPH} [{march}]"


def make_cases(marches: Sequence[str] = ()) -> List[Case]:
    contestants = {AXGRAPH: axgraph_setup, TORCH: torch_setup}
    for march in marches:
        contestants[marched(march)] = lambda march=march: axgraph_setup(march)
    return [Case(CASE, contestants)]


def errors(runners) -> Dict[str, float]:
    """Each contestant's largest error (out and the three gradients) against float64."""
    want = reference(*inputs())
    found = {}
    for name, run in runners.items():
        got = [np.asarray(x) for x in run()]
        found[name] = max(float(np.max(np.abs(a - b))) for a, b in zip(got, want))
    return found


# -- where the time goes ---------------------------------------------------------------------

def statement_profile(run, calls: int = 10, top: int = 16) -> str:
    """Each statement of the generated program timed on its own (wall clock, `calls` runs)."""
    program = run.computation._compiled().last_program
    namespace = dict(program.namespace)
    namespace.update({f"v{i}": a for i, a in enumerate(run.arrays)})  # the parameters
    namespace["outs"] = program.no_outs
    lines = [line.strip() for line in program.source.splitlines()[1:]
             if line.strip() and not line.strip().startswith("return")]
    codes = [compile(line.split("  # ")[0], "<statement>", "exec") for line in lines]
    spent = [0.0] * len(lines)
    for _ in range(calls):
        for i, code in enumerate(codes):
            start = time.perf_counter()
            exec(code, namespace)
            spent[i] += time.perf_counter() - start
    total = sum(spent)
    ranked = sorted(zip(spent, lines), reverse=True)[:top]
    rows = [f"  {s / calls * 1e3:7.2f} ms {s / total:5.1%}  {line[:100]}" for s, line in ranked]
    return (f"statements of the generated program, {calls} runs, total "
            f"{total / calls * 1e3:.2f} ms per run:\n" + "\n".join(rows))


def main(argv=None) -> int:
    p = common.parser(__doc__.splitlines()[0])
    p.add_argument("--march", default="",
                   help="comma-separated -march targets (x86-64-v3, ...): an axgraph column "
                        "each, its fused kernels built for that target")
    p.add_argument("--profile", action="store_true",
                   help="after timing, show where axgraph's time goes")
    args = p.parse_args(argv)
    marches = [m.strip() for m in args.march.split(",") if m.strip()]
    cases = make_cases(marches)
    if args.probe:
        return common.run_probe_child(cases, args)
    settings, reference_name, only, load = common.start_run(args, TORCH)

    notes: List[str] = []
    case = cases[0]
    runners, skipped = common.setup_contestants(case, only)
    notes += [f"{name} skipped: {why}" for name, why in skipped.items()]
    found = errors(runners)
    for name, error in found.items():
        if not error <= TOLERANCE:
            notes.append(f"{name} EXCLUDED, wrong result (max error {error:.1e})")
            del runners[name]
    for name in [AXGRAPH, *map(marched, marches)]:
        if name in runners:
            notes.append(f"{name}: {runners[name].note}")
    print(f"timing {case.name}: {', '.join(runners)} ...", flush=True)
    timings = {case.name: settings.time(runners)}
    print()
    columns = [c for c in [AXGRAPH, *map(marched, marches), TORCH] if c in timings[case.name]]
    print(common.ratio_table("Attention core, forward + backward, float32", timings, columns,
                             reference_name))
    print()
    print(common.value_table("Largest error against float64 (output and gradients)",
                             {case.name: found}, columns, lambda e: f"{e:.1e}"))
    if args.profile and AXGRAPH in runners:
        print()
        print(statement_profile(runners[AXGRAPH]))
        print()
        print(common.profile_runner(runners[AXGRAPH], 10, top=12))
    notes.append("background: " + load.report())
    common.print_notes(notes)
    print()
    verdicts = [Verdict("attention fwd+bwd (N 16, T 128, H 4, D 32): cpu / torch eager",
                        common.ratio(timings[case.name], AXGRAPH, TORCH), 1.0,
                        why_missing="axgraph or torch missing")]
    verdicts += [Verdict(f"the same, kernels for -march={m}",
                         common.ratio(timings[case.name], marched(m), TORCH), 1.0,
                         why_missing="not run") for m in marches]
    common.print_verdicts(verdicts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
