/* axgraph float32 matrix product for AVX-512 and AVX2 (with FMA) builds: C = A B, any
 * strides.
 *
 * Read by gemm.py (its docstring says why and when it runs). Blocked as BLIS
 * does: for each block of KC along k, B is packed once into panels of NR
 * columns (shared by the threads), then each thread runs the MR x NR register
 * tile over its block of rows of A: read in place where A is row-major, else
 * packed into micro-panels of MR rows. Panels are zero-padded at the edges (A's
 * last partial tile is always packed), so the tile always runs whole; an edge
 * tile (or a C whose columns are not unit stride) is written through a small
 * local array. Every element of C is the sum over k of its
 * products in k order, each KC block summed in registers from 0 and then
 * added to C (the first block stored), so the result depends neither on the
 * number of threads nor on the vector width: AVX-512 and AVX2 builds give the
 * same bits (one fused multiply-add per term in both).
 *
 * The tile is MR rows by two vectors of columns: 8 x 32 with AVX-512's 32
 * registers (16 sums), 6 x 16 with AVX2's 16 (12 sums, two rows of B and the
 * broadcast element of A beside them).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define KC 512
/* Below this many multiply-adds a call runs on one thread. */
#define PARALLEL_MIN (1 << 20)

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>

#if defined(__AVX512F__)
typedef __m512 vec;
#define VW 16
#define MR 8
#define V_LOAD _mm512_loadu_ps
#define V_STORE _mm512_storeu_ps
#define V_SET1 _mm512_set1_ps
#define V_ZERO _mm512_setzero_ps
#define V_FMA _mm512_fmadd_ps
#define V_ADD _mm512_add_ps
#define V_MAX _mm512_max_ps
#else
typedef __m256 vec;
#define VW 8
#define MR 6
#define V_LOAD _mm256_loadu_ps
#define V_STORE _mm256_storeu_ps
#define V_SET1 _mm256_set1_ps
#define V_ZERO _mm256_setzero_ps
#define V_FMA _mm256_fmadd_ps
#define V_ADD _mm256_add_ps
#define V_MAX _mm256_max_ps
#endif
#define NR (2 * VW)
/* Rows of A a thread packs at a time, at most (see row_block). */
#define MC_MAX (MR * 8)

int axg_gemm_available(void) { return 1; }

/* Bytes of `count` floats rounded up to whole 64-byte lines (aligned_alloc's rule). */
static size_t whole_lines(size_t count)
{
    return (count * sizeof(float) + 63) / 64 * 64;
}

/* The threads the next parallel region gets. */
static int64_t threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* Rows of A per block: whole tiles, at most MC_MAX, and as many blocks as a multiple of
   the threads (128 rows on 2 threads: 2 blocks of 64 with AVX-512, 4 of 36 with AVX2,
   where blocks of MC_MAX = 48 would give one thread twice the other's rows). */
static int64_t row_block(int64_t m)
{
    const int64_t t = threads();
    const int64_t rounds = (m + t * MC_MAX - 1) / (t * MC_MAX);
    const int64_t per_block = (m + t * rounds - 1) / (t * rounds);
    const int64_t rows = (per_block + MR - 1) / MR * MR;
    return rows < MR ? MR : rows;
}

/* tile = MR rows of A (element (i, k) at a[i * rs + k * cs]: packed k-major, rs 1 and cs
   MR; or A's own rows, cs 1) times b (kc x NR, packed k-major). Inlined where rs or cs
   is a constant, so each caller's loop has its own addressing. */
static inline __attribute__((always_inline)) void tile(int64_t kc, const float* a, int64_t rs,
                                                       int64_t cs, const float* b,
                                                       vec acc[2 * MR])
{
    for (int i = 0; i < 2 * MR; ++i) acc[i] = V_ZERO();
    for (int64_t k = 0; k < kc; ++k) {
        const vec b0 = V_LOAD(b + k * NR);
        const vec b1 = V_LOAD(b + k * NR + VW);
        const float* column = a + k * cs;
        #pragma GCC unroll 8
        for (int i = 0; i < MR; ++i) {
            const vec x = V_SET1(column[i * rs]);
            acc[2 * i] = V_FMA(x, b0, acc[2 * i]);
            acc[2 * i + 1] = V_FMA(x, b1, acc[2 * i + 1]);
        }
    }
}

/* What the last depth block adds to the product as it stores it: a term (a layer's bias:
   element (i, j) gets at[i * rs + j * cs]; `at` NULL: none), then, where `relu` is set,
   the ReLU max(x, 0), NaN kept (np.maximum's value, -0.0 included). */
typedef struct { const float* at; int64_t rs, cs; int relu; } addend;

/* C[mr x nr] (row stride rs, column stride cs) = (first ? 0 : C) + the tile, then the
   addend's term and ReLU where `add` points at it (the last depth block): each element
   rounded as the product's sum, the addition of the term and the ReLU would be */
static inline __attribute__((always_inline)) void store(float* c, int64_t rs, int64_t cs,
                                                        int64_t mr, int64_t nr, int first,
                                                        const vec acc[2 * MR],
                                                        const addend* add)
{
    const vec zero = V_ZERO();
    if (cs == 1 && mr == MR && nr == NR && (!add || add->cs == 1 || add->cs == 0)) {
        for (int i = 0; i < MR; ++i) {
            float* row = c + i * rs;
            vec lo = acc[2 * i], hi = acc[2 * i + 1];
            if (!first) {
                lo = V_ADD(V_LOAD(row), lo);
                hi = V_ADD(V_LOAD(row + VW), hi);
            }
            if (add && add->at) {
                const float* term = add->at + i * add->rs;
                const vec tlo = add->cs ? V_LOAD(term) : V_SET1(*term);
                const vec thi = add->cs ? V_LOAD(term + VW) : tlo;
                lo = V_ADD(lo, tlo);
                hi = V_ADD(hi, thi);
            }
            if (add && add->relu) {   /* (0 > x) ? 0 : x: a NaN or -0.0 is kept */
                lo = V_MAX(zero, lo);
                hi = V_MAX(zero, hi);
            }
            V_STORE(row, lo);
            V_STORE(row + VW, hi);
        }
        return;
    }
    float part[MR][NR];
    for (int i = 0; i < MR; ++i) {
        V_STORE(part[i], acc[2 * i]);
        V_STORE(part[i] + VW, acc[2 * i + 1]);
    }
    for (int64_t i = 0; i < mr; ++i)
        for (int64_t j = 0; j < nr; ++j) {
            float* at = c + i * rs + j * cs;
            float sum = first ? part[i][j] : *at + part[i][j];
            if (add && add->at) sum = sum + add->at[i * add->rs + j * add->cs];
            if (add && add->relu && sum < 0.0f) sum = 0.0f;
            *at = sum;
        }
}

/* Row k0 + k of B, all n columns, into row k of every panel of NR columns (panel p
   at into + p * kc * NR, k-major): B is read in its rows' order. */
static void pack_b_row(const float* b, int64_t brs, int64_t bcs, int64_t k0, int64_t kc,
                       int64_t n, int64_t k, float* into)
{
    const float* src = b + (k0 + k) * brs;
    for (int64_t j0 = 0, p = 0; j0 < n; j0 += NR, ++p) {
        const int64_t nr = n - j0 < NR ? n - j0 : NR;
        float* row = into + p * kc * NR + k * NR;
        if (bcs == 1 && nr == NR) {   /* a constant size: inlined, no call */
            memcpy(row, src + j0, NR * sizeof(float));
            continue;
        } else if (bcs == 1) {
            memcpy(row, src + j0, (size_t)nr * sizeof(float));
        } else {
            for (int64_t j = 0; j < nr; ++j) row[j] = src[(j0 + j) * bcs];
        }
        for (int64_t j = nr; j < NR; ++j) row[j] = 0.0f;
    }
}

/* Panel p (columns [p * NR, p * NR + NR) of B's rows [k0, k0 + kc)) where B's columns
   are runs (brs == 1: a transposed operand, such as a layer's weight W seen as W^T): each
   column read in its memory's order, in chunks of KB rows so the chunk's rows of the
   panel stay in the first-level cache while the NR columns fill them. Reading B rows
   at a time instead (pack_b_row) touches NR cache lines per row and was the larger part
   of a 128 x 512 x 512 product. */
#define KB 64
static void pack_b_panel(const float* b, int64_t bcs, int64_t k0, int64_t kc, int64_t n,
                         int64_t p, float* into)
{
    const int64_t j0 = p * NR, nr = n - j0 < NR ? n - j0 : NR;
    float* panel = into + p * kc * NR;
    for (int64_t c0 = 0; c0 < kc; c0 += KB) {
        const int64_t cb = kc - c0 < KB ? kc - c0 : KB;
        for (int64_t j = 0; j < nr; ++j) {
            const float* src = b + (j0 + j) * bcs + k0 + c0;
            float* dst = panel + c0 * NR + j;
            for (int64_t k = 0; k < cb; ++k) dst[k * NR] = src[k];
        }
        for (int64_t j = nr; j < NR; ++j)
            for (int64_t k = 0; k < cb; ++k) panel[(c0 + k) * NR + j] = 0.0f;
    }
}

/* A rows [i0, i0 + mc), columns [k0, k0 + kc), into micro-panels of MR rows, k-major
   (panel t at into + t * kc), each read in the order its memory runs. */
static void pack_a(const float* a, int64_t ars, int64_t acs, int64_t i0, int64_t mc,
                   int64_t k0, int64_t kc, float* into)
{
    if (ars == 1) {   /* a transposed operand: its columns are runs */
        for (int64_t k = 0; k < kc; ++k) {
            const float* src = a + i0 + (k0 + k) * acs;
            for (int64_t t = 0; t < mc; t += MR) {
                const int64_t mr = mc - t < MR ? mc - t : MR;
                float* dst = into + t * kc + k * MR;
                if (mr == MR) {   /* a constant size: inlined, no call */
                    memcpy(dst, src + t, MR * sizeof(float));
                    continue;
                }
                memcpy(dst, src + t, (size_t)mr * sizeof(float));
                for (int64_t i = mr; i < MR; ++i) dst[i] = 0.0f;
            }
        }
        return;
    }
    for (int64_t t = 0; t < mc; t += MR) {
        float* dst = into + t * kc;
        const int64_t mr = mc - t < MR ? mc - t : MR;
        for (int64_t i = 0; i < mr; ++i) {
            const float* src = a + (i0 + t + i) * ars + k0 * acs;
            if (acs == 1) {
                for (int64_t k = 0; k < kc; ++k) dst[k * MR + i] = src[k];
            } else {
                for (int64_t k = 0; k < kc; ++k) dst[k * MR + i] = src[k * acs];
            }
        }
        for (int64_t i = mr; i < MR; ++i)
            for (int64_t k = 0; k < kc; ++k) dst[k * MR + i] = 0.0f;
    }
}

/* Where the addend's element (i, j) is (NULL without one). */
static inline const float* t_at(const float* base, int64_t rs, int64_t cs, int64_t i, int64_t j)
{
    return base ? base + i * rs + j * cs : NULL;
}

/* C (m x n) = A (m x k) B (k x n) [+ T (m x n)], then max(C, 0) where `relu` is set;
   strides in elements (any sign, but C's must not overlap A's, B's or T's; T's may be 0:
   a broadcast bias). T is NULL for none. Returns 0, or -1 when out of memory. */
int axg_gemm_f32(int64_t m, int64_t n, int64_t k, const float* a, int64_t ars, int64_t acs,
                 const float* b, int64_t brs, int64_t bcs, float* c, int64_t crs, int64_t ccs,
                 const float* t_base, int64_t trs, int64_t tcs, int relu)
{
    if (m <= 0 || n <= 0) return 0;
    if (k <= 0) {
        for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
                float sum = t_base ? t_base[i * trs + j * tcs] : 0.0f;
                if (relu && sum < 0.0f) sum = 0.0f;
                c[i * crs + j * ccs] = sum;
            }
        return 0;
    }
    const int last_adds = t_base != NULL || relu;
    const int64_t panels = (n + NR - 1) / NR;
    const int64_t mc_rows = row_block(m), blocks = (m + mc_rows - 1) / mc_rows;
    /* Each task packs its rows of A again: split the panels into groups only where
       there are fewer row blocks than threads. */
    const int64_t per_group = blocks >= threads() ? panels
                            : (panels + threads() - 1) / threads();
    const int64_t groups = (panels + per_group - 1) / per_group;
    const int64_t tasks = blocks * groups;
    const int64_t kc_max = k < KC ? k : KC;
    /* Packing a row-major A is a transposition, element by element: about half the
       multiply-adds' time in a product of 64 columns. Its rows are read in place instead
       (a transposed A's packing copies runs: it stays, as the column reads of a
       power-of-two stride would crowd a few cache sets). */
    const int direct = acs == 1;
    float* bp = (float*)aligned_alloc(64, whole_lines((size_t)(panels * kc_max * NR)));
    if (!bp) return -1;
    int failed = 0;
    #pragma omp parallel if(m * n * k >= PARALLEL_MIN)
    {
    float* ap = (float*)aligned_alloc(64, whole_lines((size_t)(mc_rows * kc_max)));
    if (!ap) {
        #pragma omp atomic write
        failed = 1;
    }
    for (int64_t k0 = 0; k0 < k; k0 += KC) {
        const int64_t kc = k - k0 < KC ? k - k0 : KC;
        if (brs == 1 && bcs != 1) {
            #pragma omp for schedule(static)
            for (int64_t p = 0; p < panels; ++p) pack_b_panel(b, bcs, k0, kc, n, p, bp);
        } else {
            #pragma omp for schedule(static)
            for (int64_t kk = 0; kk < kc; ++kk) pack_b_row(b, brs, bcs, k0, kc, n, kk, bp);
        }
        /* (the implicit barrier: every panel packed before any is read) */
        #pragma omp for schedule(static)
        for (int64_t task = 0; task < tasks; ++task) {
            if (!ap) continue;
            const int64_t block = task / groups, group = task % groups;
            const int64_t i0 = block * mc_rows, mc = m - i0 < mc_rows ? m - i0 : mc_rows;
            const int64_t p_end = (group + 1) * per_group < panels ? (group + 1) * per_group
                                                                   : panels;
            /* A's rows are read where they are (row-major A: its rows are runs); packed
               otherwise, and its last partial tile always (padded with zero rows) */
            const int64_t whole = direct ? mc / MR * MR : 0;
            if (whole < mc)
                pack_a(a, ars, acs, i0 + whole, mc - whole, k0, kc, ap + whole * kc);
            for (int64_t p = group * per_group; p < p_end; ++p) {
                const int64_t j0 = p * NR, nr = n - j0 < NR ? n - j0 : NR;
                const float* panel = bp + p * kc * NR;
                for (int64_t t = 0; t < mc; t += MR) {
                    vec acc[2 * MR];
                    if (t < whole) tile(kc, a + (i0 + t) * ars + k0, ars, 1, panel, acc);
                    else tile(kc, ap + t * kc, 1, MR, panel, acc);
                    const addend block = {t_at(t_base, trs, tcs, i0 + t, j0), trs, tcs,
                                          relu};
                    store(c + (i0 + t) * crs + j0 * ccs, crs, ccs, mc - t < MR ? mc - t : MR,
                          nr, k0 == 0, acc, last_adds && k0 + kc == k ? &block : NULL);
                }
            }
        }
    }
    free(ap);
    }
    free(bp);
    return failed ? -1 : 0;
}

#else

int axg_gemm_available(void) { return 0; }

int axg_gemm_f32(int64_t m, int64_t n, int64_t k, const float* a, int64_t ars, int64_t acs,
                 const float* b, int64_t brs, int64_t bcs, float* c, int64_t crs, int64_t ccs,
                 const float* t, int64_t trs, int64_t tcs, int relu)
{
    (void)m; (void)n; (void)k; (void)a; (void)ars; (void)acs; (void)b; (void)brs; (void)bcs;
    (void)c; (void)crs; (void)ccs; (void)t; (void)trs; (void)tcs; (void)relu;
    return -1;
}

#endif
