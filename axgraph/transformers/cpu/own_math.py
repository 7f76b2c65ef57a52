"""The C math functions the fused kernels bring themselves, instead of calling libm/libmvec.

Why own code: on AVX2 a call into libmvec's vector ``expf`` or ``tanhf``
costs as much as the rest of ``tanh(a*b+c) * sigmoid(d) - e`` (the call
spills every vector register it clobbers, and the polynomial runs without
FMA), and that kernel ran slower than XLA's, which inlines both. Inline
code lets gcc interleave the math of neighbouring elements.

Each function is keyed by its libm-style name (``"expf"``; a float name
ends in "f") and is written ``axgraph_<name>`` in the kernel text; helpers
no op names directly start with "_". An entry lists what it uses: other
entries here (emitted before it) and libm functions (declared for libmvec
like any other). Accuracy, measured over
every float in the range that matters with the kernel's own flags, is in
each entry's comment and checked on samples by tests/test_vectorization.py.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, List, Tuple


@dataclass(frozen=True)
class OwnFunction:
    """The C text of a function (or of helpers and macros), and the names it uses."""

    code: str
    uses: Tuple[str, ...] = ()


#: fma where the target has it in hardware (x86-64-v3 and up, aarch64), else a multiply and an
#: add. The two round differently (by under 1 ulp of the exp below), so kernels built for
#: x86-64-v2 and for v3 may differ in the last bit, as libmvec's variants already do.
_FMA = OwnFunction("""\
#if defined(__FP_FAST_FMAF)
#define AXGRAPH_FMAF(a, b, c) __builtin_fmaf(a, b, c)
#else
#define AXGRAPH_FMAF(a, b, c) ((a) * (b) + (c))
#endif""")

#: e^x = e^r 2^n for x in [-104, 89] (or NaN): x = n ln2 + r with |r| <= ln2 / 2 (Cody-Waite,
#: ln2 in two parts), e^r by a degree-6 polynomial fitted here (least squares on the relative
#: error, reweighted towards minimax: 3.1e-9 in exact arithmetic). Returns e^r and stores n,
#: in [-150, 128], read from the bits of x/ln2 + 1.5 * 2^23 (no float-to-int conversion,
#: which NaN would make undefined). No branch: it vectorizes.
_EXPF_PARTS = OwnFunction("""\
static inline float axgraph_expf_parts(float x, int32_t* n)
{
    const float shifted = AXGRAPH_FMAF(x, 0x1.715476p+0f, 0x1.8p+23f);
    const float whole = shifted - 0x1.8p+23f;
    const float r = AXGRAPH_FMAF(whole, -0x1.7f7d1cp-20f, AXGRAPH_FMAF(whole, -0x1.62e4p-1f, x));
    float q = AXGRAPH_FMAF(0x1.6a232ep-10f, r, 0x1.123a68p-7f);
    q = AXGRAPH_FMAF(q, r, 0x1.5558f4p-5f);
    q = AXGRAPH_FMAF(q, r, 0x1.55549p-3f);
    q = AXGRAPH_FMAF(q, r, 0x1.fffffcp-2f);
    __builtin_memcpy(n, &shifted, sizeof *n);
    *n -= 0x4b400000;  /* the bits of 1.5 * 2^23 */
    return AXGRAPH_FMAF(r * r, q, r) + 1.0f;
}""", uses=("_fmaf",))


def _power_of_two(name: str, exponent: str) -> str:
    """C statements setting float `name` to 2^`exponent` (an int expression in [-126, 127])."""
    return (f"const int32_t {name}_bits = ({exponent} + 127) << 23;\n"
            f"    float {name};\n"
            f"    __builtin_memcpy(&{name}, &{name}_bits, sizeof {name});")


OWN_FUNCTIONS: Dict[str, OwnFunction] = {
    "_fmaf": _FMA,
    "_expf_parts": _EXPF_PARTS,
    # e^x over the floats: at most 1.02 ulp from exp with FMA (0.99 without), measured over
    # every float in [-110, 95]; exact 0, inf and NaN past the ends. Below -104 e^x
    # rounds to 0, from 89 on it overflows: the clamped arguments give exactly those. 2^n is
    # applied as two normal factors, so that subnormal results round once. Below -104 the
    # lane computes e^0 and selects 0: its products would otherwise underflow, and every
    # underflowing multiply takes a microcode assist (a causal mask's -inf entries made the
    # masked softmax 1.6x slower than the unmasked one).
    "expf": OwnFunction(f"""\
static inline float axgraph_expf(float x)
{{
    const int zero = x < -0x1.ap+6f;                         /* NaN stays NaN */
    int32_t n;
    const float er = axgraph_expf_parts(zero ? 0.0f : x > 0x1.64p+6f ? 0x1.64p+6f : x, &n);
    {_power_of_two("high", "(n >> 1)")}
    {_power_of_two("low_half", "(n - (n >> 1))")}
    return zero ? 0.0f : er * high * low_half;
}}""", uses=("_expf_parts",)),
    # e^x for x <= 0 (or NaN), as in Sigmoid's e^-|x|: the same values as expf (checked on
    # every float in [-110, 0]), in fewer instructions (one clamp; n <= 0, so 2^(n + 64) is normal and one constant 2^-64 takes
    # subnormal results down with a single rounding). 7 % of the chain's time on AVX2.
    "exp_nonpositivef": OwnFunction(f"""\
static inline float axgraph_exp_nonpositivef(float x)
{{
    const int zero = x < -0x1.ap+6f;  /* computed on 0, then 0: no underflowing lane */
    int32_t n;
    const float er = axgraph_expf_parts(zero ? 0.0f : x, &n);
    {_power_of_two("scale", "(n + 64)")}
    return zero ? 0.0f : er * scale * 0x1p-64f;
}}""", uses=("_expf_parts",)),
    # e^x where it is a normal float, x in [-87, 88] (or NaN), as erff's e^q (q in
    # [-17.5, 0.001]): expf's values there (2^n applied exactly, as one factor) without its
    # clamps and selects, which took a sixth of the erf GELU's time.
    "_exp_normalf": OwnFunction(f"""\
static inline float axgraph_exp_normalf(float x)
{{
    int32_t n;
    const float er = axgraph_expf_parts(x, &n);
    {_power_of_two("scale", "n")}
    return er * scale;
}}""", uses=("_expf_parts",)),
    "exp_nonpositive": OwnFunction("""\
static inline double axgraph_exp_nonpositive(double x) { return exp(x); }""", uses=("exp",)),
    # tanhf: libmvec's cost about as much as expf and a division together. The rational
    # x P(x^2) / Q(x^2) of degree (4, 4) was fitted here to tanh on [0, 9] (weighted least
    # squares on the relative error, reweighted towards minimax): 2.1e-8 relative error in
    # exact arithmetic. Evaluated as below, over every float: at most 5.7 ulp from tanh and
    # within 1 ulp for 98.7 % of them with FMA (6.9 ulp and 98.6 % without); NumPy's own float32
    # tanh allows 1.4 ulp, XLA's about 4.4. From 0x1.205968p+3 (9.0109138) on, tanh rounds
    # to 1: returned as is (the rational dips below 1 again up to 9.37), as where it passes 1.
    # The parts are the numerator, returned, and the denominator, stored: in [1, 420]. (The
    # selects are all float: an int mask among them keeps gcc's SSE4 loop scalar.)
    "_tanhf_parts": OwnFunction("""\
static inline float axgraph_tanhf_parts(float x, float* denominator)
{
    const float ax = fabsf(x);
    const float z = ax * ax;  /* inf past 1.8e19: selected away below */
    float p = AXGRAPH_FMAF(0x1.cadb52p-27f, z, 0x1.59c2c4p-16f);
    p = AXGRAPH_FMAF(p, z, 0x1.ca2c34p-9f);
    p = AXGRAPH_FMAF(p, z, 0x1.120b14p-3f);
    p = AXGRAPH_FMAF(p, z, 1.0f);
    float q = AXGRAPH_FMAF(0x1.a17f30p-21f, z, 0x1.5885bcp-12f);
    q = AXGRAPH_FMAF(q, z, 0x1.a7f7cep-6f);
    q = AXGRAPH_FMAF(q, z, 0x1.de5ad4p-2f);
    q = AXGRAPH_FMAF(q, z, 1.0f);
    const float ap = ax * p;
    const float capped = ap > q ? q : ap;  /* so tanh <= 1; NaN stays NaN */
    const int rounds_to_one = ax >= 0x1.205968p+3f;
    *denominator = rounds_to_one ? 1.0f : q;
    return copysignf(rounds_to_one ? 1.0f : capped, x);  /* odd, -0 kept */
}""", uses=("_fmaf",)),
    "tanhf": OwnFunction("""\
static inline float axgraph_tanhf(float x)
{
    float denominator;
    const float numerator = axgraph_tanhf_parts(x, &denominator);
    return numerator / denominator;
}""", uses=("_tanhf_parts",)),
    # tanh as a quotient for Multiply (see traits.Traits.c_quotient); double: libm's over 1
    "tanh_numeratorf": OwnFunction("""\
static inline float axgraph_tanh_numeratorf(float x)
{
    float denominator;
    return axgraph_tanhf_parts(x, &denominator);
}""", uses=("_tanhf_parts",)),
    "tanh_denominatorf": OwnFunction("""\
static inline float axgraph_tanh_denominatorf(float x)
{
    float denominator;
    axgraph_tanhf_parts(x, &denominator);
    return denominator;
}""", uses=("_tanhf_parts",)),
    # erff: libmvec's AVX-512 erff is 4 ulp off (it returns ±1 from |x| = 3.65 on, where
    # erf is still 1 - 2.4e-7) and its SSE/AVX2 ones 1.9 ulp. Two polynomials, both
    # computed (no branch): below |x| = 0.875, erf = x + x p(x^2), p of degree 6; above,
    # erf = 1 - e^q(|x|), q of degree 7 in |x| approximating log(erfc), on [0.875, 3.93]
    # (|x| is clamped there: from 3.9185 on erf rounds to 1, and so does 1 - e^q(3.93)).
    # Both fitted here (least squares on the absolute error of erf, reweighted towards
    # minimax): under 0.004 ulp in exact arithmetic. Evaluated as below, over every float:
    # at most 1.14 ulp from erf with FMA, 1.23 without; exact ±0, ±1 at ±inf, NaN for NaN.
    "erff": OwnFunction("""\
static inline float axgraph_erff(float x)
{
    const float a = fabsf(x);
    const float z = a * a;
    float p = AXGRAPH_FMAF(0x1.6bde84p-14f, z, -0x1.ae7f6p-11f);
    p = AXGRAPH_FMAF(p, z, 0x1.553ab6p-8f);
    p = AXGRAPH_FMAF(p, z, -0x1.b819a6p-6f);
    p = AXGRAPH_FMAF(p, z, 0x1.ce2e84p-4f);
    p = AXGRAPH_FMAF(p, z, -0x1.812744p-2f);
    p = AXGRAPH_FMAF(p, z, 0x1.06eba8p-3f);
    const float near = AXGRAPH_FMAF(a, p, a);
    const float t = a > 0x1.f70a3ep+1f ? 0x1.f70a3ep+1f : a;  /* NaN stays NaN */
    float q = AXGRAPH_FMAF(-0x1.58d5dp-16f, t, 0x1.c10622p-12f);
    q = AXGRAPH_FMAF(q, t, -0x1.0f6172p-8f);
    q = AXGRAPH_FMAF(q, t, 0x1.9a4352p-6f);
    q = AXGRAPH_FMAF(q, t, -0x1.bb048ep-4f);
    q = AXGRAPH_FMAF(q, t, -0x1.44546cp-1f);
    q = AXGRAPH_FMAF(q, t, -0x1.21245cp+0f);
    q = AXGRAPH_FMAF(q, t, 0x1.570baep-13f);
    const float far = 1.0f - axgraph_exp_normalf(q);
    return copysignf(a < 0x1.cp-1f ? near : far, x);  /* odd, -0 kept */
}""", uses=("_fmaf", "_exp_normalf")),
    # 64-bit integers to floats: x86 converts them in vectors only from AVX-512DQ on (which
    # the functions then use), and one scalar conversion leaves the whole loop scalar
    # (Convert(int64) * tanh(y) + y over 4M ran 2x slower than NumPy on AVX2). x is split
    # into 32-bit halves, each converted exactly through an int32 (2^31 off), and the halves
    # added: one rounding, as a C cast or NumPy's astype makes. To float, an x beyond 2^53
    # first keeps its bits below 2^11 only as one sticky bit (bit 11 set if any was): x is
    # then exact in a double, on the same side of every float midpoint as before, and the
    # one rounding to float is the correct one. Checked against NumPy on 3M values, edge
    # cases included, on x86-64-v2, v3 and v4.
    "_u32_exact": OwnFunction("""\
static inline double axgraph_u32_exact(uint32_t u)
{
    return (double)(int32_t)(u ^ 0x80000000u) + 0x1p31;
}"""),
    "_sticky": OwnFunction("""\
static inline uint64_t axgraph_sticky(uint64_t x)
{
    return (x & ~(uint64_t)0x7ff) | ((x & 0x7ff) != 0 ? 0x800 : 0);
}"""),
    "from_i64": OwnFunction("""\
static inline double axgraph_from_i64(int64_t x)
{
#if defined(__AVX512DQ__)
    return (double)x;
#else
    return (double)(int32_t)(x >> 32) * 0x1p32 + axgraph_u32_exact((uint32_t)x);
#endif
}""", uses=("_u32_exact",)),
    "from_u64": OwnFunction("""\
static inline double axgraph_from_u64(uint64_t x)
{
#if defined(__AVX512DQ__)
    return (double)x;
#else
    return axgraph_u32_exact((uint32_t)(x >> 32)) * 0x1p32 + axgraph_u32_exact((uint32_t)x);
#endif
}""", uses=("_u32_exact",)),
    "from_i64f": OwnFunction("""\
static inline float axgraph_from_i64f(int64_t x)
{
#if defined(__AVX512DQ__)
    return (float)x;
#else
    const int beyond = (uint64_t)x + ((uint64_t)1 << 53) > ((uint64_t)1 << 54);  /* |x| > 2^53 */
    return (float)axgraph_from_i64(beyond ? (int64_t)axgraph_sticky((uint64_t)x) : x);
#endif
}""", uses=("_sticky", "from_i64")),
    "from_u64f": OwnFunction("""\
static inline float axgraph_from_u64f(uint64_t x)
{
#if defined(__AVX512DQ__)
    return (float)x;
#else
    return (float)axgraph_from_u64(x > ((uint64_t)1 << 53) ? axgraph_sticky(x) : x);
#endif
}""", uses=("_sticky", "from_u64")),
    "tanh_numerator": OwnFunction("""\
static inline double axgraph_tanh_numerator(double x) { return tanh(x); }""", uses=("tanh",)),
    "tanh_denominator": OwnFunction("""\
static inline double axgraph_tanh_denominator(double x) { (void)x; return 1.0; }"""),
}


def closure(names: Iterable[str]) -> Tuple[List[str], List[str]]:
    """(own functions in definition order, library functions) that `names` need, directly
    or through what the own ones use."""
    own: List[str] = []
    library: List[str] = []

    def visit(name: str) -> None:
        if name in own or name in library:
            return
        entry = OWN_FUNCTIONS.get(name)
        if entry is None:
            library.append(name)
            return
        for used in entry.uses:
            visit(used)
        own.append(name)

    for name in sorted(names):
        visit(name)
    return own, sorted(library)
