"""Accuracy of the fused kernels' own float math (axgraph/transformers/cpu/own_math.py).

    python -m benchmarks.own_math_accuracy [--every N] [--march x86-64-v3,x86-64-v2]

Compiles the shipped C text of `axgraph_expf`, `axgraph_exp_nonpositivef`,
`axgraph_tanhf` and `axgraph_erff` with the kernels' own flags into a small checker that
walks every N-th float (default: every float, ~5 minutes per target on one core) and
prints, per function, the largest error in ulp against libm's double result
(the ulp of the float nearest the exact value; subnormals count in steps of
2^-149), where it occurs, and the share within 1 ulp. It fails (exit 1) if
exp_nonpositivef and expf ever differ on x <= 0 or |tanh| or |erf| exceeds 1. Builds for
x86-64-v3 use FMA (`AXGRAPH_FMAF`), x86-64-v2 does not: both are measured.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import subprocess
import sys
import tempfile
from pathlib import Path

from axgraph.transformers.cpu import kernel_c, own_math

CHECKER = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double ulps(float got, double want)
{
    if (isnan(want)) return isnan(got) ? 0 : 1e9;
    const float nearest = (float)want;
    if (isinf(nearest) || isinf(got)) return nearest == got ? 0 : 1e9;
    int e;
    frexpf(nearest == 0 ? 0x1p-149f : nearest, &e);
    return fabs((double)got - want) / ldexp(1.0, e - 24 < -149 ? -149 : e - 24);
}

typedef struct { double worst; float at; long n, over_one; } tally;

static void count(tally* t, float x, double error)
{
    ++t->n;
    t->over_one += error > 1;
    if (error > t->worst) { t->worst = error; t->at = x; }
}

static void report(const char* name, const tally* t)
{
    printf("%-18s %11ld floats: max %.3f ulp at %a, %.3f %% within 1 ulp\n", name, t->n,
           t->worst, t->at, 100.0 * (t->n - t->over_one) / t->n);
}

int main(int argc, char** argv)
{
    const long every = argc > 1 ? atol(argv[1]) : 1;
    tally e = {0}, n = {0}, t = {0}, r = {0};
    for (unsigned long long b = 0; b < 0x100000000ull; b += every) {
        const unsigned u = (unsigned)b;
        float x;
        memcpy(&x, &u, sizeof x);
        if (isnan(x)) continue;
        if (x >= -110.0f && x <= 95.0f) count(&e, x, ulps(axgraph_expf(x), exp((double)x)));
        if (x <= 0.0f && x >= -110.0f) {
            const float got = axgraph_exp_nonpositivef(x);
            if (memcmp(&got, &(float){axgraph_expf(x)}, sizeof got) != 0) {
                printf("exp_nonpositivef(%a) differs from expf\n", x);
                return 1;
            }
            count(&n, x, ulps(got, exp((double)x)));
        }
        const float th = axgraph_tanhf(x);
        if (fabsf(th) > 1.0f) { printf("|tanhf(%a)| > 1\n", x); return 1; }
        count(&t, x, ulps(th, tanh((double)x)));
        const float ef = axgraph_erff(x);
        if (fabsf(ef) > 1.0f) { printf("|erff(%a)| > 1\n", x); return 1; }
        count(&r, x, ulps(ef, erf((double)x)));
    }
    report("expf [-110, 95]", &e);
    report("exp_nonpositivef", &n);
    report("tanhf", &t);
    report("erff", &r);
    return 0;
}
"""


def checker_source() -> str:
    own, _ = own_math.closure({"expf", "exp_nonpositivef", "tanhf", "erff"})
    code = "\n".join(own_math.OWN_FUNCTIONS[name].code for name in own)
    return "#include <stdint.h>\n#include <math.h>\n" + code + "\n" + CHECKER


def measure(march: str, every: int, directory: Path) -> str:
    chain = kernel_c.toolchain()
    if chain is None:
        return f"{march}: no working C compiler"
    source = directory / "own_math_check.c"
    source.write_text(checker_source())
    binary = directory / f"check-{march}"
    flags = [f for f in kernel_c.BASE_FLAGS if f not in ("-fPIC", "-shared")]
    build = subprocess.run([chain.compiler, *flags, f"-march={march}", str(source), "-o",
                            str(binary), "-lm"], capture_output=True, text=True)
    if build.returncode:
        return f"{march}: build failed:\n{build.stderr[-2000:]}"
    run = subprocess.run([str(binary), str(every)], capture_output=True, text=True)
    status = "" if run.returncode == 0 else " FAILED"
    return f"-march={march}{status}:\n{run.stdout}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=int, default=1, help="check every N-th float")
    parser.add_argument("--march", default="x86-64-v3,x86-64-v2",
                        help="comma-separated targets (this CPU must run them)")
    args = parser.parse_args(argv)
    marches = [m.strip() for m in args.march.split(",") if m.strip()]
    with tempfile.TemporaryDirectory() as directory, \
            concurrent.futures.ThreadPoolExecutor(max_workers=len(marches)) as pool:
        folders = []
        for march in marches:
            folder = Path(directory) / march
            folder.mkdir()
            folders.append(folder)
        reports = list(pool.map(lambda pair: measure(pair[0], args.every, pair[1]),
                                zip(marches, folders)))
    print("\n".join(reports))
    return 1 if any("FAILED" in r or "failed" in r for r in reports) else 0


if __name__ == "__main__":
    sys.exit(main())
