"""The fused C kernels vectorize on every common CPU target: checked in gcc's vectorizer report.

Why: gcc leaves a loop scalar when its body has a branch it will not if-convert. Without
AVX-512's masked instructions that is any branch around an operation that might trap (a
division under the default trapping-math), so the 4M-element chain
``tanh(a*b+c) * sigmoid(d) - e`` ran scalar on AVX2 machines, ~30x slower. Here the C text
`kernel_c` generates for representative groups is compiled (to assembly only: nothing is
linked or run, so any target of a compiler can be checked) with kernel_c's own flags and
``-fopt-info-vec-optimized -fopt-info-vec-missed``, for x86-64-v2, v3 (AVX2) and v4
(AVX-512) and for armv8-a (AdvSIMD), by this machine's gcc and any cross gcc on PATH. Every
loop over elements must be reported vectorized, and must call glibc's vector math (libmvec)
at the target's vector width. Besides the representative groups, one kernel holds every
elementwise op with a C expression, found from the ops' traits. The one function the
kernels compute themselves (float tanh, a rational: libmvec's was most of the time of the
chain) is checked against float64 here too.
"""
from __future__ import annotations

import concurrent.futures
import functools
import os
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, FrozenSet, List, Tuple

import numpy as np
import pytest

from axgraph import core
from axgraph.core.traits import c_code, is_elementwise
from axgraph.transformers.cpu import kernel_c
from axgraph.transformers.cpu.fusion import find_fusion_groups

#: -march targets per machine, with the libmvec symbol prefixes (`_ZGV` + ISA letter) a
#: vectorized call may use there: SSE4 'b', AVX2 'd', AVX-512 'e' (gcc may prefer 256-bit
#: vectors on AVX-512), AdvSIMD 'n'.
TARGETS: Dict[str, Dict[str, Tuple[str, ...]]] = {
    "x86_64": {"x86-64-v2": ("_ZGVb",), "x86-64-v3": ("_ZGVd",),
               "x86-64-v4": ("_ZGVd", "_ZGVe")},
    "aarch64": {"armv8-a": ("_ZGVn",)},
}
HOST = platform.machine().lower().replace("amd64", "x86_64").replace("arm64", "aarch64")
#: The loops over elements in the generated C (reductions also loop over rows and blocks).
ELEMENT_LOOP = re.compile(r"for \(int64_t i = ")
REPORT = re.compile(r":(\d+):\d+: (optimized|missed): (.*)")
#: libm functions the generated code may call, float and double names. The kernels are
#: generated as for a libmvec that has them all (glibc >= 2.35 on x86-64): only the code is
#: checked here, so the answer does not depend on this machine's glibc.
MATH_NAMES = frozenset(n + suffix for n in kernel_c.MATH_FUNCTIONS for suffix in ("", "f"))


def _is_gcc(path: str) -> bool:
    run = subprocess.run([path, "--version"], capture_output=True, text=True)
    return run.returncode == 0 and "clang" not in run.stdout and \
        re.search(r"\bgcc\b|GCC", run.stdout) is not None


@functools.lru_cache(maxsize=None)
def compilers() -> Dict[str, str]:
    """machine -> a GNU gcc building for it: this machine's (the report flags are gcc's own;
    `cc` may be clang elsewhere) and any cross gcc on PATH (`aarch64-linux-gnu-gcc-12`)."""
    found: Dict[str, str] = {}
    for name in (os.environ.get("AXGRAPH_CC"), os.environ.get("CC"), "gcc", "cc"):
        path = shutil.which(name) if name else None
        if path and _is_gcc(path):
            found[HOST] = path
            break
    directories = [d for d in os.environ.get("PATH", "").split(os.pathsep) if os.path.isdir(d)]
    for machine in TARGETS:
        pattern = re.compile(rf"{machine}-linux-gnu-gcc(-\d+)?$")
        for directory in directories:
            cross = sorted(n for n in os.listdir(directory) if pattern.match(n))
            if machine not in found and cross and _is_gcc(os.path.join(directory, cross[-1])):
                found[machine] = os.path.join(directory, cross[-1])
    return {machine: path for machine, path in found.items() if machine in TARGETS}


def all_targets() -> List[Tuple[str, str]]:
    """(machine, -march target) for every target a gcc here builds for."""
    return [(machine, target) for machine in compilers() for target in TARGETS[machine]]


def flags(target: str) -> List[str]:
    """kernel_c's flags for -march=`target`, compiling to assembly instead of linking."""
    return [f for f in kernel_c.BASE_FLAGS if f != "-shared"] + [f"-march={target}", "-fopenmp"]


@dataclass
class Built:
    """One kernel compiled for one target: its source, the vectorizer report, the assembly."""

    source: str
    report: str
    assembly: str

    def element_loops(self) -> List[Tuple[int, int]]:
        """(first, last) line of every loop over elements: from `for` to its closing brace."""
        lines = self.source.splitlines()
        loops = []
        for start, line in enumerate(lines, 1):
            if ELEMENT_LOOP.search(line):
                depth, end = 0, start
                # gcc reports a loop with reductions at its `#pragma omp simd` line
                first = start - 1 if "#pragma omp simd" in lines[start - 2] else start
                for end, text in enumerate(lines[start - 1:], start):
                    depth += text.count("{") - text.count("}")
                    if depth <= 0 and "}" in text:
                        break
                loops.append((first, end))
        return loops

    def scalar_loops(self) -> List[str]:
        """Every element loop gcc did not vectorize, with the reasons it gave."""
        notes = [(int(line), kind, text) for line, kind, text in REPORT.findall(self.report)]
        failures = []
        for first, last in self.element_loops():
            inside = [(kind, text) for line, kind, text in notes if first <= line <= last]
            if not any(kind == "optimized" and text.startswith("loop vectorized")
                       for kind, text in inside):
                reasons = sorted({text for kind, text in inside if kind == "missed"})
                failures.append(f"lines {first}-{last}: {'; '.join(reasons) or 'no report'}")
        return failures

    def vector_calls(self) -> FrozenSet[str]:
        return frozenset(re.findall(r"_ZGV\w+", self.assembly))


def build(source: str, machine: str, target: str, directory: Path, name: str) -> Built:
    path = directory / f"{name}-{target}.c"
    path.write_text(source)
    run = subprocess.run([compilers()[machine], *flags(target), "-fopt-info-vec-optimized",
                          "-fopt-info-vec-missed", "-S", str(path), "-o",
                          str(path.with_suffix(".s"))], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, f"{name} for {target}: {run.stderr[-2000:]}"
    return Built(source, run.stderr, path.with_suffix(".s").read_text())


# -- representative groups -------------------------------------------------------------------

def _params(et: core.ElementType, count: int, shape=(4096,)):
    return [core.Parameter(et, core.Shape(*shape)) for _ in range(count)]


def chain(et):  # the chain: tanh, sigmoid
    a, b, c, d, e = _params(et, 5)
    return [core.Subtract(core.Multiply(core.Tanh(core.Add(core.Multiply(a, b), c)),
                                        core.Sigmoid(d)), e)], [a, b, c, d, e]


def log_exp_divide(et):  # softplus over a divisor, and a square root of a power
    x, y = _params(et, 2)
    one = core.Constant(et, x.shape, 1.0)
    softplus = core.Log(core.Add(one, core.Exp(x)))
    return [core.Add(core.Divide(softplus, y), core.Sqrt(core.Power(core.Abs(x), y)))], [x, y]


def relu_and_gradient(et):  # maximum (NaN-propagating) and a where-like select of a gradient
    x, g = _params(et, 2)
    zero = core.Constant(et, x.shape, 0.0)
    gradient = core.Select(core.Greater(x, zero), g, zero)
    return [core.Add(core.Maximum(x, zero), core.Multiply(gradient, core.Minimum(g, x)))], [x, g]


def logic_sign_floor(et):  # booleans as values, Sign, Floor, trigonometry, a scalar broadcast
    x, y = _params(et, 2)
    s = core.Parameter(et, core.Shape())
    wide = core.Broadcast(s, x.shape, (0,))
    mask = core.Or(core.And(core.Less(x, y), core.Not(core.Equal(x, wide))), core.GreaterEq(y, x))
    picked = core.Select(mask, core.Sign(x), core.Floor(core.Multiply(y, wide)))
    trig = core.Add(core.Sin(x), core.Cos(y))
    as_number = core.Convert(core.NotEqual(x, y), et)
    return [core.Add(core.Add(picked, trig), core.Negative(as_number))], [x, y, s]


def l2(et):  # the reduction
    x, y = _params(et, 2)
    difference = core.Subtract(x, y)
    return [core.Sum(core.Multiply(difference, difference), (0,))], [x, y]


def max_of_rows(et):  # a NaN-propagating reduction over the trailing dim
    x, y = _params(et, 2, (64, 512))
    return [core.Max(core.Multiply(core.Tanh(x), core.Sigmoid(y)), (1,))], [x, y]


def min_of_log(et):
    (x,) = _params(et, 1)
    return [core.Min(core.Log(core.Abs(x)), (0,))], [x]


def erf_tan_rsqrt(et):  # libm's erf and tan (libmvec has both), and a division by a root
    x, y = _params(et, 2)
    return [core.Multiply(core.Erf(core.Tan(x)), core.Rsqrt(y))], [x, y]


#: The elementwise core ops with a C expression, from their traits: each is in the group
#: below, so a new one is checked with nothing added here.
C_OPS = [op for op in core.CORE_OPS if is_elementwise(op) and c_code(op) is not None]


def every_elementwise_op(et):
    """Every op of C_OPS in one kernel, each on operands of its own (gcc would make sinf and
    cosf of one value a sincosf call, which stays scalar: tested below), booleans turned
    into values by a select."""
    parameters: List[core.Node] = []
    values = []
    for op in C_OPS:
        x, y = _params(et, 2)
        parameters += [x, y]
        less, greater = core.Less(x, y), core.GreaterEq(x, y)
        if op is core.Select:
            node = op(less, x, y)
        elif op is core.Convert:
            node = op(greater, et)
        else:
            operands = [less, greater] if getattr(op, "accepts", None) == "bool" else [x, y]
            node = op(*operands[:1 if issubclass(op, core.UnaryElementwise) else 2])
        values.append(core.Select(node, x, y) if node.element_type.is_boolean else node)
    total = values[0]
    for value in values[1:]:
        total = core.Add(total, value)
    return [total], parameters


def sin_and_cos_of_one_value(et):
    (x,) = _params(et, 1)
    return [core.Add(core.Sin(x), core.Cos(x))], [x]


GROUPS: Dict[str, Callable] = {f.__name__: f for f in (
    chain, log_exp_divide, relu_and_gradient, logic_sign_floor, l2, max_of_rows, min_of_log,
    erf_tan_rsqrt, every_elementwise_op, sin_and_cos_of_one_value)}
#: None known: gcc's joining of sinf(x) and cosf(x) into a scalar sincosf(x) is turned off
#: (kernel_c.NO_SINCOS_FLAGS), which the case `sin_and_cos_of_one_value` checks.
SCALAR_KNOWN: set = set()
CASES = [(name, et) for name in GROUPS for et in (core.f32, core.f64)]
IDS = [f"{name}-{et.name}" for name, et in CASES]
MARKED_CASES = [pytest.param(name, et, marks=pytest.mark.xfail(
    strict=True, reason="gcc makes sinf and cosf of one value a scalar sincosf call"))
    if name in SCALAR_KNOWN else (name, et) for name, et in CASES]


def sources(name: str, et: core.ElementType) -> Dict[str, str]:
    """The C text of the group (and of its variant reading broadcast inputs as one element)."""
    results, parameters = GROUPS[name](et)
    (group,) = find_fusion_groups(core.Function(results, parameters))
    texts = {"": kernel_c.generate_source(group, frozenset(), MATH_NAMES)}
    if len(group.inputs) > 1:
        texts["-scalar"] = kernel_c.generate_source(group, frozenset({1}), MATH_NAMES)
    return texts


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> Dict[Tuple[str, str], Built]:
    """(kernel, target) -> the kernel of every case built for every target, concurrently."""
    if not compilers():
        pytest.skip("no GNU gcc for a listed target (the check reads gcc's vectorizer report)")
    directory = tmp_path_factory.mktemp("vectorization")
    jobs = {}
    for name, et in CASES:
        for variant, source in sources(name, et).items():
            for machine, target in all_targets():
                jobs[(f"{name}-{et.name}{variant}", target)] = (source, machine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        futures = {key: pool.submit(build, source, machine, key[1], directory, key[0])
                   for key, (source, machine) in jobs.items()}
        return {key: future.result() for key, future in futures.items()}


@pytest.mark.parametrize("name,et", MARKED_CASES, ids=IDS)
def test_every_element_loop_vectorizes_on_every_target(compiled, name, et):
    checked = 0
    for (kernel, target), built in compiled.items():
        if kernel.startswith(f"{name}-{et.name}"):
            assert built.element_loops(), built.source
            assert built.scalar_loops() == [], f"{kernel} stays scalar for -march={target}"
            checked += 1
    assert checked == len(all_targets()) * len(sources(name, et))


@pytest.mark.parametrize("name,et", MARKED_CASES, ids=IDS)
def test_vector_math_comes_from_libmvec_at_the_target_width(compiled, name, et):
    prefixes = {target: p for per_machine in TARGETS.values() for target, p in per_machine.items()}
    for (kernel, target), built in compiled.items():
        if kernel != f"{name}-{et.name}":  # (a variant may call on a hoisted scalar)
            continue
        for function in {n for n in MATH_NAMES if re.search(rf"\b{n}\(", built.source)}:
            variants = {c for c in built.vector_calls() if c.endswith(f"_{function}")}
            assert any(v.startswith(prefixes[target]) for v in variants), \
                f"{kernel} -march={target}: {function} called as {sorted(variants)}, " \
                f"expected {prefixes[target]}"


def test_kernels_built_here_declare_the_vector_math_of_the_chain():
    """This machine's kernels use libmvec for what it exports; on x86-64 glibc >= 2.35 that
    includes tanh, exp and log."""
    libc, version = platform.libc_ver()
    if HOST != "x86_64" or libc != "glibc" or \
            tuple(int(v) for v in version.split(".")[:2]) < (2, 35):
        pytest.skip("libmvec has tanhf, expf and logf on x86-64 from glibc 2.35")
    assert {"expf", "logf", "tanhf", "exp", "log", "tanh"} <= kernel_c.vector_math_symbols()


def test_the_derived_group_holds_every_elementwise_op():
    results, parameters = every_elementwise_op(core.f32)
    (group,) = find_fusion_groups(core.Function(results, parameters))
    assert {type(node) for node in group.nodes} >= set(C_OPS)


def test_the_check_sees_a_scalar_loop(tmp_path):
    """A loop calling a function without a vector variant must be reported scalar."""
    if not compilers():
        pytest.skip("no GNU gcc for a listed target")
    source = ("#include <stdint.h>\nextern float opaque(float);\n"
              "void f(int64_t n, const float* x, float* out)\n{\n"
              "    #pragma omp simd\n"
              "    for (int64_t i = 0; i < n; ++i) {\n"
              "        out[i] = opaque(x[i]) + 1.0f;\n"
              "    }\n"
              "}\n")
    machine, target = all_targets()[0]
    built = build(source, machine, target, tmp_path, "scalar")
    assert built.element_loops() == [(5, 8)]  # from its `#pragma omp simd`
    (failure,) = built.scalar_loops()
    assert failure.startswith("lines 5-8")


def _element_lines(results, parameters) -> List[str]:
    """The statements of one element in the kernel of `results` (all but the parameters)."""
    function = core.Function(results, parameters)
    members = tuple(node for node in function.nodes if node not in parameters)
    group = kernel_c.FusedGroup(members, tuple(parameters), function.results[0])
    text = kernel_c.generate_source(group, frozenset(), MATH_NAMES)
    body = text.split("for (int64_t i = lo; i < hi; ++i) {")[1].split("}")[0]
    return [line.strip() for line in body.strip().splitlines()]


def test_sigmoid_is_one_select_and_one_division():
    """The form that vectorizes without masked instructions, and keeps the reference's
    roundings: (x >= 0 ? 1 : e) / (1 + e) with e = exp(-|x|)."""
    (x,) = _params(core.f32, 1)
    lines = _element_lines([core.Sigmoid(x)], [x])
    assert lines[1] == "const float e0 = axgraph_exp_nonpositivef(-fabsf(x0));"
    assert lines[2] == "const float v0 = ((x0 >= 0 ? ((float)1) : e0) / (((float)1) + e0));"


@pytest.mark.parametrize("et", [core.f32, core.f64], ids=["f32", "f64"])
def test_a_product_of_tanh_and_sigmoid_divides_once(et):
    """tanh(u) * sigmoid(v) (LSTM and GRU cells) is one quotient: the two values' own
    divisions are not computed. Where tanh is also read elsewhere, it keeps its own."""
    results, parameters = chain(et)
    lines = _element_lines(results, parameters)
    assert sum(line.count("/") for line in lines) == 1, lines
    assert not any("tanh(" in line or "tanhf(" in line for line in lines)
    u, v = _params(et, 2)
    tanh = core.Tanh(u)
    shared = _element_lines([core.Add(core.Multiply(tanh, core.Sigmoid(v)), tanh)], [u, v])
    call = "axgraph_tanhf(" if et == core.f32 else "tanh("
    assert any(call in line for line in shared) and not any("numerator" in line
                                                            for line in shared)


def test_the_one_division_product_keeps_the_values(own_cache, rng):
    """Against float64 tanh(u) * sigmoid(v): within 8 ulp of the result (each factor alone
    is within 6 and 1), exact at the special values, the sign of zero included."""
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], np.float32)
    awkward = np.array([9.2, -30.0, 1e-30, -100.0, 3e38], np.float32)
    both = np.concatenate([special, awkward])
    u = np.concatenate([rng.standard_normal(20000).astype(np.float32) * 4,
                        np.repeat(both, both.size), np.repeat(special, special.size)])
    v = np.concatenate([rng.standard_normal(20000).astype(np.float32) * 30,
                        np.tile(both, both.size), np.tile(special, special.size)])
    a, b = _params(core.f32, 2, (u.size,))
    function = core.Function([core.Multiply(core.Tanh(a), core.Sigmoid(b))], [a, b])
    (group,) = find_fusion_groups(function)
    kernel = kernel_c.CKernel(group, {node: (u.size,) for node in function.nodes})
    out = np.empty_like(u)
    kernel(u, v, out=out)
    wide_u, wide_v = u.astype(np.float64), v.astype(np.float64)
    with np.errstate(over="ignore"):
        exact = np.tanh(wide_u) / (1 + np.exp(-wide_v))
    close = np.abs(out - exact) <= 8 * np.spacing(np.abs(exact).astype(np.float32)) + 1e-45
    assert np.all(close | (np.isnan(out) & np.isnan(exact))), (u[~close], v[~close])
    tail = slice(u.size - special.size ** 2, None)
    expected = (np.tanh(wide_u) * (1 / (1 + np.exp(-wide_v)))).astype(np.float32)[tail]
    np.testing.assert_array_equal(out[tail], expected)
    numbers = ~np.isnan(expected)  # (a NaN's sign means nothing)
    assert np.array_equal(np.signbit(out[tail][numbers]), np.signbit(expected[numbers]))


# -- the math the kernels bring themselves -------------------------------------------------------

def _one_op_kernel(op_class, n: int, et=core.f32):
    x = core.Parameter(et, core.Shape(n))
    function = core.Function([op_class(x)], [x])
    members = tuple(node for node in function.nodes if node is not x)
    group = kernel_c.FusedGroup(members, (x,), function.results[0])
    return kernel_c.CKernel(group, {node: (n,) for node in (x, *members)})


def _run_one_op(op_class, x: np.ndarray) -> np.ndarray:
    kernel = _one_op_kernel(op_class, x.size, core.f32 if x.dtype == np.float32 else core.f64)
    out = np.empty_like(x)
    kernel(x, out=out)
    return out


def _ulps(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """|got - exact| in units of the spacing of floats at the float nearest `exact`."""
    nearest = np.abs(exact).astype(np.float32)
    return np.abs(got - exact) / np.spacing(nearest).astype(np.float64)


def _floats_between(low: float, high: float, every: int) -> np.ndarray:
    """Every `every`-th float in [low, high] (low < 0 < high), both signs walked by bits."""
    positive = np.arange(0, np.float32(high).view(np.int32), every, dtype=np.int32)
    negative = np.arange(0, np.float32(-low).view(np.int32), every, dtype=np.int32)
    return np.concatenate([positive.view(np.float32), -negative.view(np.float32)])


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    if kernel_c.toolchain() is None:
        pytest.skip("no working C compiler here")
    monkeypatch.setenv("AXGRAPH_CACHE_DIR", str(tmp_path))


def test_own_tanhf_is_within_7_ulp_of_tanh_across_the_floats(own_cache):
    """Every 997th float from the smallest subnormal to 9.5 (past where tanh rounds to 1), and
    their negatives, against float64 tanh: at most 7 ulp, within 1 ulp for 97 % (checked once
    over every float: 5.7 ulp and 98.7 % with FMA, 6.9 ulp and 98.6 % without), never above 1
    in magnitude."""
    bits = np.arange(1, np.float32(9.5).view(np.int32), 997, dtype=np.int32)
    x = np.concatenate([bits.view(np.float32), -bits.view(np.float32)])
    assert "axgraph_tanhf(" in _one_op_kernel(core.Tanh, 8).source
    out = _run_one_op(core.Tanh, x)
    ulps = _ulps(out, np.tanh(x.astype(np.float64)))
    assert ulps.max() <= 7.0, x[np.argmax(ulps)]
    assert np.mean(ulps > 1) < 0.03
    assert np.all(np.abs(out) <= 1) and np.array_equal(np.signbit(out), np.signbit(x))


def test_own_tanhf_keeps_the_special_values(own_cache):
    limit = np.float32(float.fromhex("0x1.205968p+3"))  # the first float whose tanh rounds to 1
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, limit, -limit, 9.2, 30.0, 1e-30, -1e-42],
                 np.float32)
    out = _run_one_op(core.Tanh, x)
    expected = np.tanh(x.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(out, expected)  # NaN where NaN; exact 1 from `limit` on
    assert np.array_equal(np.signbit(out), np.signbit(x))  # -0 stays -0
    assert np.tanh(np.float64(np.nextafter(limit, np.float32(0)))).astype(np.float32) < 1


def test_own_expf_is_within_1_ulp_of_exp_across_its_range(own_cache):
    """Every 499th float of [-110, 95] (past both ends: 0 below -104, inf from 88.73) against
    float64 exp: within 1.02 ulp (checked once over every float there: 1.019 ulp with FMA,
    0.989 without), subnormal results included."""
    x = _floats_between(-110.0, 95.0, 499)
    source = _one_op_kernel(core.Exp, 8).source
    assert "axgraph_expf(" in source and "_ZGV" not in source
    out = _run_one_op(core.Exp, x)
    exact = np.exp(x.astype(np.float64))
    finite = exact <= np.finfo(np.float32).max
    ulps = _ulps(out[finite], exact[finite])
    assert ulps.max() <= 1.02, x[finite][np.argmax(ulps)]
    assert np.all(np.isinf(out[~finite]))
    nearest = exact[finite].astype(np.float32)
    subnormal = (nearest > 0) & (nearest < np.finfo(np.float32).tiny)
    assert subnormal.sum() > 100 and np.all(out[finite][subnormal] > 0)


def test_own_expf_keeps_the_special_values(own_cache):
    big = np.float32(np.log(np.finfo(np.float32).max))  # the last float with a finite exp
    x = np.array([0.0, -0.0, 1.0, np.inf, -np.inf, np.nan, big, np.nextafter(big, np.inf),
                  -87.3, -103.97, -104.0, np.nextafter(np.float32(-104), np.float32(-105)),
                  -1e30, 1e30], np.float32)
    out = _run_one_op(core.Exp, x)
    with np.errstate(over="ignore"):
        expected = np.exp(x.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(out, expected)


def test_sigmoid_exp_of_a_nonpositive_argument_is_expf(own_cache):
    """Sigmoid's e^-|x| takes a shortcut (one clamp, one scaling): the same values as expf,
    down to the subnormal sigmoids of x < -87.3; the double kernels keep libm's exp."""
    x = _floats_between(-110.0, 110.0, 4099)
    out = _run_one_op(core.Sigmoid, x)
    e = _run_one_op(core.Exp, -np.abs(x))
    np.testing.assert_array_equal(out, np.where(x >= 0, 1, e) / (1 + e))
    wide = x.astype(np.float64)
    np.testing.assert_allclose(_run_one_op(core.Sigmoid, wide), 1 / (1 + np.exp(-wide)),
                               rtol=1e-15, atol=0)
    assert "axgraph_exp_nonpositive(" in _one_op_kernel(core.Sigmoid, 8, core.f64).source


#: The reductions a fused C kernel accumulates, from their traits (`c_accumulate`): each ends
#: a kernel checked here, so a new one is checked with nothing added.
C_REDUCTIONS = [op for op in core.CORE_OPS if issubclass(op, core.Reduction)
                and op.c_accumulate is not None]


@pytest.mark.parametrize("op", C_REDUCTIONS, ids=lambda op: op.__name__)
def test_every_declared_reduction_accumulates_in_vector_loops(op, tmp_path):
    if not compilers():
        pytest.skip("no GNU gcc for a listed target (the check reads gcc's vectorizer report)")
    machine = HOST if HOST in compilers() else next(iter(compilers()))
    target = next(iter(TARGETS[machine]))  # the baseline target: the hardest to vectorize
    for et in (core.f32, core.f64):
        x, y = _params(et, 2, (64, 512))
        (group,) = find_fusion_groups(core.Function([op(core.Multiply(x, y), (1,))], [x, y]))
        source = kernel_c.generate_source(group, frozenset(), MATH_NAMES)
        built = build(source, machine, target, tmp_path, f"{op.__name__}-{et.name}")
        assert built.element_loops(), source
        assert built.scalar_loops() == [], f"{op.__name__} {et} stays scalar for {target}"
