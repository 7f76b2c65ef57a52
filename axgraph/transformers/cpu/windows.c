/* axgraph windowed kernels: im2col, col2im, max/avg pool and their adjoints.
 *
 * Read by windows.py (its docstring gives the semantics). The text above the PER-TYPE
 * marker is compiled once; the text below it once per element type, with @T@ the C
 * type, @S@ the symbol suffix, @V@/@M@ its vector and mask types and @L@ the lanes per
 * vector. Each kernel takes (first input, second input or NULL, out, geometry) and
 * returns 0, or -1 when out of memory. The forward kernels walk the rows (p0, p1, p2)
 * in order; the scatter-adds walk them, and the lanes, in reverse.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

/* Below this many elements touched a call runs on one thread: waking the
   other costs more than it saves. */
#define PARALLEL_MIN 65536
/* Output positions of the lane dim computed together, in local arrays. */
#define LANES 256

/* Planes (q / inner, q % inner) are independent: the threads split them.
   Four dims, the last one the "lane" dim whose output positions the inner
   loops run over (vectorized); unused dims have length 1, window 1.
   a, b, o: element strides of the first input, the second input and out:
   [0], [1] the two plane indices, then dims 0..3 for images, or for columns
   positions 0..3 ([2..5]) and window offsets 0..3 ([6..9]). */
typedef struct {
    int64_t planes, inner;
    int64_t s[4], p[4], w[4], step[4], dil[4], below[4];
    int64_t a[10], b[10], o[10];
} geometry;

typedef struct { int64_t lo, hi; } span;

/* Derived once per call, read by every thread. */
typedef struct {
    span* sp[4];    /* per dim, per output position: window offsets [lo, hi) on real input */
    span* lanes;    /* per window offset of dim 3: output positions [lo, hi) it is real for */
    int64_t* at;    /* per window index (row-major over offsets): its element offset in out */
    int64_t* cell;  /* per window index: its offset in a columns operand (strides c[6..9]) */
    span* memory;
} tables;

static inline int64_t ceil_div(int64_t a, int64_t b)   /* b > 0 */
{
    return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}

static inline int64_t clamp(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

static int make_tables(const geometry* g, tables* t, const int64_t* c)
{
    const int64_t spans = g->p[0] + g->p[1] + g->p[2] + g->p[3] + g->w[3];
    const int64_t window = g->w[0] * g->w[1] * g->w[2] * g->w[3];
    t->memory = (span*)malloc((size_t)spans * sizeof(span)
                              + (size_t)window * 2 * sizeof(int64_t) + 1);
    if (!t->memory) return -1;
    span* next = t->memory;
    for (int k = 0; k < 4; ++k) {
        t->sp[k] = next;
        for (int64_t p = 0; p < g->p[k]; ++p, ++next) {   /* 0 <= base + o*dil < s */
            const int64_t base = p * g->step[k] - g->below[k];
            next->lo = clamp(ceil_div(-base, g->dil[k]), 0, g->w[k]);
            next->hi = clamp(ceil_div(g->s[k] - base, g->dil[k]), next->lo, g->w[k]);
        }
    }
    t->lanes = next;
    for (int64_t o = 0; o < g->w[3]; ++o, ++next) {        /* 0 <= p*step + base < s */
        const int64_t base = o * g->dil[3] - g->below[3];
        next->lo = clamp(ceil_div(-base, g->step[3]), 0, g->p[3]);
        next->hi = clamp(ceil_div(g->s[3] - base, g->step[3]), next->lo, g->p[3]);
    }
    t->at = (int64_t*)next;
    t->cell = t->at + window;
    int64_t k = 0;
    for (int64_t o0 = 0; o0 < g->w[0]; ++o0)
    for (int64_t o1 = 0; o1 < g->w[1]; ++o1)
    for (int64_t o2 = 0; o2 < g->w[2]; ++o2)
    for (int64_t o3 = 0; o3 < g->w[3]; ++o3, ++k) {
        t->at[k] = o0 * g->dil[0] * g->o[2] + o1 * g->dil[1] * g->o[3]
                 + o2 * g->dil[2] * g->o[4] + o3 * g->dil[3] * g->o[5];
        t->cell[k] = c ? o0 * c[6] + o1 * c[7] + o2 * c[8] + o3 * c[9] : 0;
    }
    return 0;
}

/* Element offset of plane q in an operand with strides st. */
#define PLANE(q, st) (((q) / g->inner) * (st)[0] + ((q) % g->inner) * (st)[1])

/* Run the statements for j in [lo, hi) with s_ == step; s_ is a constant in
   the usual cases 1 and 2, so that gcc vectorizes those loops with plain or
   deinterleaving loads instead of gathers. */
#define BY_STEP(step, lo, hi, ...)                                                      \
    do {                                                                                \
        const int64_t lo_ = (lo), hi_ = (hi);                                           \
        if ((step) == 1) {                                                              \
            const int64_t s_ = 1;                                                       \
            for (int64_t j = lo_; j < hi_; ++j) { __VA_ARGS__; }                        \
        } else if ((step) == 2) {                                                       \
            const int64_t s_ = 2;                                                       \
            for (int64_t j = lo_; j < hi_; ++j) { __VA_ARGS__; }                        \
        } else {                                                                        \
            const int64_t s_ = (step);                                                  \
            for (int64_t j = lo_; j < hi_; ++j) { __VA_ARGS__; }                        \
        }                                                                               \
    } while (0)

/* Zero the (S0, S1, S2, S3) image of plane dst, whose dim strides are st[2..5]. */
#define ZERO_PLANE(dst, st)                                                             \
    for (int64_t i0 = 0; i0 < g->s[0]; ++i0)                                           \
    for (int64_t i1 = 0; i1 < g->s[1]; ++i1)                                           \
    for (int64_t i2 = 0; i2 < g->s[2]; ++i2) {                                         \
        const int64_t row_ = i0 * (st)[2] + i1 * (st)[3] + i2 * (st)[4];               \
        BY_STEP((st)[5], 0, g->s[3], (dst)[row_ + j * s_] = 0);                        \
    }

/* Loops over the window offsets of dims 0..2 that are real for (p0, p1, p2). */
#define FOR_REAL_012(t)                                                                 \
    for (int64_t o0 = (t).sp[0][p0].lo; o0 < (t).sp[0][p0].hi; ++o0)                   \
    for (int64_t o1 = (t).sp[1][p1].lo; o1 < (t).sp[1][p1].hi; ++o1)                   \
    for (int64_t o2 = (t).sp[2][p2].lo; o2 < (t).sp[2][p2].hi; ++o2)

/* Whether window offsets (o0, o1, o2) are real for (p0, p1, p2). */
#define REAL_012 (o0 >= t.sp[0][p0].lo && o0 < t.sp[0][p0].hi                           \
               && o1 >= t.sp[1][p1].lo && o1 < t.sp[1][p1].hi                           \
               && o2 >= t.sp[2][p2].lo && o2 < t.sp[2][p2].hi)

/* Offset of the first window element of (p0, p1, p2) in dims 0..2, strides st[2..4]. */
#define ROW(st) ((p0 * g->step[0] - g->below[0]) * (st)[2]                              \
               + (p1 * g->step[1] - g->below[1]) * (st)[3]                              \
               + (p2 * g->step[2] - g->below[2]) * (st)[4])
/* Offset of window offset (o0, o1, o2) from there. */
#define OFFSET(st) (o0 * g->dil[0] * (st)[2] + o1 * g->dil[1] * (st)[3]                 \
                  + o2 * g->dil[2] * (st)[4])

#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* The window offsets of row (p0, p1, p2) that are real in dims 0..2, with every
   offset of dim 3, in window order: their element offsets (strides st) and,
   if index is not NULL, their window indices. Returns how many there are. */
static int64_t row_offsets(const geometry* g, const tables* t, int64_t p0, int64_t p1,
                           int64_t p2, const int64_t* st, int64_t* offs, int32_t* index)
{
    /* offs[-8..-2] remember the spans the list was built for (most rows share one) */
    int64_t* key = offs - 8;
    const int64_t spans[6] = {t->sp[0][p0].lo, t->sp[0][p0].hi, t->sp[1][p1].lo,
                              t->sp[1][p1].hi, t->sp[2][p2].lo, t->sp[2][p2].hi};
    if (key[6] >= 0 && key[0] == spans[0] && key[1] == spans[1] && key[2] == spans[2]
        && key[3] == spans[3] && key[4] == spans[4] && key[5] == spans[5])
        return key[6];
    int64_t n = 0;
    FOR_REAL_012(*t)
    for (int64_t o3 = 0; o3 < g->w[3]; ++o3, ++n) {
        offs[n] = OFFSET(st) + o3 * g->dil[3] * st[5];
        if (index) index[n] = (int32_t)(((o0 * g->w[1] + o1) * g->w[2] + o2) * g->w[3] + o3);
    }
    for (int k = 0; k < 6; ++k) key[k] = spans[k];
    key[6] = n;
    return n;
}

/* Scratch for one thread: a row's window offsets, then their indices, after the
   8-word key of row_offsets (NULL if out of memory). */
static int64_t* new_scratch(const geometry* g)
{
    const int64_t window = g->w[0] * g->w[1] * g->w[2] * g->w[3];
    int64_t* memory = (int64_t*)malloc((size_t)(8 + window) * sizeof(int64_t)
                                       + (size_t)window * sizeof(int32_t));
    if (!memory) return NULL;
    memory[6] = -1;  /* no list built yet */
    return memory + 8;
}

static void free_scratch(int64_t* offs)
{
    if (offs) free(offs - 8);
}

/* Dim-3 input position, relative to the window's row, of lane j at offset o3. */
#define LANE(j, o3) ((j) * g->step[3] + (o3) * g->dil[3] - g->below[3])

/* Lanes [b_lo, b_hi) of the chunk [c0, c1) computed in vector blocks of L: those
   whose dim-3 window is all real ([ilo, ihi)), if there are at least L of them. */
static inline int64_t blocks_from(int64_t ilo, int64_t ihi, int64_t c0, int64_t c1, int64_t L)
{
    return MIN(ihi, c1) - MAX(ilo, c0) >= L ? MAX(ilo, c0) : c1;
}
static inline int64_t blocks_to(int64_t ilo, int64_t ihi, int64_t c0, int64_t c1, int64_t L)
{
    return MIN(ihi, c1) - MAX(ilo, c0) >= L ? MIN(ihi, c1) : c1;
}

/* Run the statements with s_ == step: a constant in the usual cases 1 and 2,
   for which the vector loads below become plain or deinterleaving loads. */
#define WITH_STEP(step, ...)                                                            \
    do {                                                                                \
        if ((step) == 1) { const int64_t s_ = 1; __VA_ARGS__; }                         \
        else if ((step) == 2) { const int64_t s_ = 2; __VA_ARGS__; }                    \
        else { const int64_t s_ = (step); __VA_ARGS__; }                                \
    } while (0)

/* The lanes j of [c0, c1) outside the vector blocks' lanes [b_lo, b_hi), in order. */
#define FOR_SCALAR_LANES(j, c0, c1, b_lo, b_hi)                                         \
    for (int64_t j = ((c0) == (b_lo) ? (b_hi) : (c0)); j < (c1);                        \
         j = (j + 1 == (b_lo) ? (b_hi) : j + 1))

/* Starts b of blocks of L lanes covering [b_lo, b_hi) (at least L lanes); the
   last block is moved back to end at b_hi, overlapping the one before it. */
#define FOR_BLOCKS(b, L, b_lo, b_hi)                                                    \
    for (int64_t b = (b_lo); b < (b_hi);                                                \
         b = (b + (L) >= (b_hi) ? (b_hi) : MIN(b + (L), (b_hi) - (L))))

/* A block of lanes held in registers: GCC/clang vector extensions, 32 bytes
   (one AVX register; compilers split it where vectors are narrower). */
typedef float vf32 __attribute__((vector_size(32)));
typedef int32_t vm32 __attribute__((vector_size(32)));
typedef double vf64 __attribute__((vector_size(32)));
typedef int64_t vm64 __attribute__((vector_size(32)));
/* a > b ? a : b lane by lane: what x86's max instructions compute exactly (ties
   and NaN in a give b), so np.maximum(a, b) wherever a is not NaN. */
#if defined(__AVX__)
#include <immintrin.h>
static inline vf32 vmax_f32(vf32 a, vf32 b) { return (vf32)_mm256_max_ps((__m256)a, (__m256)b); }
static inline vf64 vmax_f64(vf64 a, vf64 b) { return (vf64)_mm256_max_pd((__m256d)a, (__m256d)b); }
#else
static inline vf32 vmax_f32(vf32 a, vf32 b)
{
    const vm32 m = a > b;
    return (vf32)((m & (vm32)a) | (~m & (vm32)b));
}
static inline vf64 vmax_f64(vf64 a, vf64 b)
{
    const vm64 m = a > b;
    return (vf64)((m & (vm64)a) | (~m & (vm64)b));
}
#endif
/* The even lanes of p[0..2L-2], given low = p[0..L-1] and high = p[L-1..2L-2]. */
/* ZIP_LOW/ZIP_HIGH: the first and second halves of a0 b0 a1 b1 a2 b2 ... */
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12)
#define EVEN_f32(low, high) __builtin_shufflevector(low, high, 0, 2, 4, 6, 9, 11, 13, 15)
#define EVEN_f64(low, high) __builtin_shufflevector(low, high, 0, 2, 5, 7)
#define ZIP_LOW_f32(a, b) __builtin_shufflevector(a, b, 0, 8, 1, 9, 2, 10, 3, 11)
#define ZIP_HIGH_f32(a, b) __builtin_shufflevector(a, b, 4, 12, 5, 13, 6, 14, 7, 15)
#define ZIP_LOW_f64(a, b) __builtin_shufflevector(a, b, 0, 4, 1, 5)
#define ZIP_HIGH_f64(a, b) __builtin_shufflevector(a, b, 2, 6, 3, 7)
#else
#define EVEN_f32(low, high) __builtin_shuffle(low, high, (vm32){0, 2, 4, 6, 9, 11, 13, 15})
#define EVEN_f64(low, high) __builtin_shuffle(low, high, (vm64){0, 2, 5, 7})
#define ZIP_LOW_f32(a, b) __builtin_shuffle(a, b, (vm32){0, 8, 1, 9, 2, 10, 3, 11})
#define ZIP_HIGH_f32(a, b) __builtin_shuffle(a, b, (vm32){4, 12, 5, 13, 6, 14, 7, 15})
#define ZIP_LOW_f64(a, b) __builtin_shuffle(a, b, (vm64){0, 4, 1, 5})
#define ZIP_HIGH_f64(a, b) __builtin_shuffle(a, b, (vm64){2, 6, 3, 7})
#endif

/* ==== PER-TYPE ==== */
/* L lanes p[0], p[step], ..., p[(L-1)*step]; reads nothing past the last one. */
static inline __attribute__((always_inline)) @V@ load_@S@(const @T@* p, int64_t step)
{
    @V@ v;
    if (step == 1) {
        __builtin_memcpy(&v, p, sizeof v);
    } else if (step == 2) {
        @V@ low, high;
        __builtin_memcpy(&low, p, sizeof low);
        __builtin_memcpy(&high, p + @L@ - 1, sizeof high);
        v = EVEN_@S@(low, high);
    } else {
        for (int l = 0; l < @L@; ++l) v[l] = p[l * step];
    }
    return v;
}

/* Lanes to p[0], p[step], ... */
static inline __attribute__((always_inline)) void store_@S@(@T@* p, int64_t step, @V@ v)
{
    if (step == 1) {
        __builtin_memcpy(p, &v, sizeof v);
    } else {
        for (int l = 0; l < @L@; ++l) p[l * step] = v[l];
    }
}

/* mask ? a : b, lane by lane (mask lanes are all ones or all zeros). */
static inline __attribute__((always_inline)) @V@ select_@S@(@M@ mask, @V@ a, @V@ b)
{
    return (@V@)((mask & (@M@)a) | (~mask & (@M@)b));
}

int axg_im2col_@S@(const @T@* x, const @T@* unused, @T@* out, const geometry* g)
{
    (void)unused;
    tables t;
    if (make_tables(g, &t, g->o)) return -1;
    const int64_t *a = g->a, *o = g->o;
    const int64_t window = g->w[0] * g->w[1] * g->w[2] * g->w[3];
    const int64_t work = g->planes * g->p[0] * g->p[1] * g->p[2] * g->p[3] * window;
    const int64_t ilo = t.lanes[0].lo, ihi = t.lanes[g->w[3] - 1].hi;  /* all-real lanes */
    const int64_t in_step = g->step[3] * a[5];
    /* As in col2im: where the lanes are whole unit-stride rows of channels after
       undilated dim-2 offsets, a window row's offsets and lanes are one run. */
    const int runs = a[5] == 1 && o[5] == 1 && g->w[3] == 1 && g->step[3] == 1
                  && g->below[3] == 0 && g->s[3] == g->p[3] && g->dil[2] == 1
                  && a[4] == g->p[3] && o[8] == g->p[3];
    int failed = 0;
    #pragma omp parallel if(work >= PARALLEL_MIN)
    {
    int64_t* offs = new_scratch(g);
    if (!offs) {
        #pragma omp atomic write
        failed = 1;
    }
    #pragma omp for schedule(static)
    for (int64_t q = 0; q < g->planes; ++q) {
        if (!offs) continue;
        const @T@* src = x + PLANE(q, a);
        @T@* dst = out + PLANE(q, o);
        for (int64_t p0 = 0; p0 < g->p[0]; ++p0)
        for (int64_t p1 = 0; p1 < g->p[1]; ++p1)
        for (int64_t p2 = 0; p2 < g->p[2]; ++p2) {
            const int64_t row = ROW(a);
            const int64_t n = row_offsets(g, &t, p0, p1, p2, a, offs, NULL);
            const int bulk = n == window && ilo < ihi;
            if (bulk) {
                /* the lanes whose whole window is real, one window offset at a time: a
                   run of lanes (channels, in columns that keep them innermost) per copy */
                @T@* cells = dst + p0 * o[2] + p1 * o[3] + p2 * o[4];
                const @T@* from = src + row + LANE(0, 0) * a[5];
                if (runs) {
                    for (int64_t o0 = 0; o0 < g->w[0]; ++o0)
                    for (int64_t o1 = 0; o1 < g->w[1]; ++o1)
                        memcpy(cells + o0 * o[6] + o1 * o[7],
                               from + o0 * g->dil[0] * a[2] + o1 * g->dil[1] * a[3],
                               (size_t)(g->w[2] * g->p[3]) * sizeof(@T@));
                    continue;
                }
                for (int64_t k = 0; k < window; ++k) {
                    @T@* into = cells + t.cell[k];
                    const @T@* at = from + offs[k];
                    if (o[5] == 1) BY_STEP(in_step, ilo, ihi, into[j] = at[j * s_]);
                    else BY_STEP(in_step, ilo, ihi, into[j * o[5]] = at[j * s_]);
                }
            }
            for (int64_t p3 = 0; p3 < g->p[3]; ++p3) {
                if (bulk && p3 == ilo) p3 = ihi;
                if (p3 >= g->p[3]) break;
                @T@* cells = dst + p0 * o[2] + p1 * o[3] + p2 * o[4] + p3 * o[5];
                const @T@* from = src + row + LANE(p3, 0) * a[5];
                if (n == window && t.sp[3][p3].lo == 0 && t.sp[3][p3].hi == g->w[3]) {
                    /* all real: one indexed copy of the whole window */
                    for (int64_t k = 0; k < window; ++k) cells[t.cell[k]] = from[offs[k]];
                    continue;
                }
                int64_t k = 0;
                for (int64_t o0 = 0; o0 < g->w[0]; ++o0)
                for (int64_t o1 = 0; o1 < g->w[1]; ++o1)
                for (int64_t o2 = 0; o2 < g->w[2]; ++o2)
                for (int64_t o3 = 0; o3 < g->w[3]; ++o3, ++k) {
                    const int real = REAL_012 && o3 >= t.sp[3][p3].lo && o3 < t.sp[3][p3].hi;
                    cells[t.cell[k]] = real ? from[OFFSET(a) + o3 * g->dil[3] * a[5]] : 0;
                }
            }
        }
    }
    free_scratch(offs);
    }
    free(t.memory);
    return failed ? -1 : 0;
}

int axg_col2im_@S@(const @T@* cols, const @T@* unused, @T@* out, const geometry* g)
{
    (void)unused;
    tables t;
    if (make_tables(g, &t, g->a)) return -1;
    const int64_t *a = g->a, *o = g->o;
    const int64_t work = g->planes * (g->s[0] * g->s[1] * g->s[2] * g->s[3]
                       + g->p[0] * g->p[1] * g->p[2] * g->p[3]
                       * g->w[0] * g->w[1] * g->w[2] * g->w[3]);
    const int64_t window = g->w[0] * g->w[1] * g->w[2] * g->w[3];
    const int overlap3 = g->step[3] < (g->w[3] - 1) * g->dil[3] + 1;  /* dim-3 windows */
    /* Lanes that are a whole unit-stride row of channels, in both operands, after
       undilated dim-2 offsets (NHWC images, channels-innermost columns): a window
       row's dim-2 offsets and lanes are then one run in each, added as one. Each
       element still gets one term per run, in the same order. */
    const int runs = !overlap3 && a[5] == 1 && o[5] == 1 && g->w[3] == 1 && g->step[3] == 1
                  && g->below[3] == 0 && g->s[3] == g->p[3] && g->dil[2] == 1
                  && o[4] == g->p[3] && a[8] == g->p[3];
    #pragma omp parallel for schedule(static) if(work >= PARALLEL_MIN)
    for (int64_t q = 0; q < g->planes; ++q) {
        const @T@* src = cols + PLANE(q, a);
        @T@* dst = out + PLANE(q, o);
        ZERO_PLANE(dst, o)
        for (int64_t p0 = g->p[0] - 1; p0 >= 0; --p0)
        for (int64_t p1 = g->p[1] - 1; p1 >= 0; --p1)
        for (int64_t p2 = g->p[2] - 1; p2 >= 0; --p2) {
            const int64_t row = ROW(o);
            const int64_t block = p0 * a[2] + p1 * a[3] + p2 * a[4];
            if (runs) {
                const int64_t lo2 = t.sp[2][p2].lo, hi2 = t.sp[2][p2].hi;
                const int64_t length = (hi2 - lo2) * g->p[3];
                for (int64_t o0 = t.sp[0][p0].lo; o0 < t.sp[0][p0].hi; ++o0)
                for (int64_t o1 = t.sp[1][p1].lo; o1 < t.sp[1][p1].hi; ++o1) {
                    const @T@* col = src + block + o0 * a[6] + o1 * a[7] + lo2 * a[8];
                    @T@* into = dst + row + o0 * g->dil[0] * o[2] + o1 * g->dil[1] * o[3]
                              + lo2 * o[4];
                    for (int64_t j = 0; j < length; ++j) into[j] += col[j];
                }
                continue;
            }
            if (!overlap3) {
                /* each element gets one term per visit: lanes may run in any order */
                FOR_REAL_012(t)
                for (int64_t o3 = 0; o3 < g->w[3]; ++o3) {
                    const @T@* col = src + block + o0 * a[6] + o1 * a[7] + o2 * a[8] + o3 * a[9];
                    const int64_t at = row + OFFSET(o) + LANE(0, o3) * o[5];
                    if (a[5] == 1)   /* columns with their lanes innermost */
                        BY_STEP(g->step[3] * o[5], t.lanes[o3].lo, t.lanes[o3].hi,
                                dst[at + j * s_] += col[j]);
                    else
                        BY_STEP(g->step[3] * o[5], t.lanes[o3].lo, t.lanes[o3].hi,
                                dst[at + j * s_] += col[j * a[5]]);
                }
                continue;
            }
            /* overlapping windows: one position at a time (vector lanes would
               reload what the previous offset's lanes just stored) */
            const int interior012 = t.sp[0][p0].lo == 0 && t.sp[0][p0].hi == g->w[0]
                                 && t.sp[1][p1].lo == 0 && t.sp[1][p1].hi == g->w[1]
                                 && t.sp[2][p2].lo == 0 && t.sp[2][p2].hi == g->w[2];
            for (int64_t p3 = g->p[3] - 1; p3 >= 0; --p3) {
                const @T@* cells = src + block + p3 * a[5];
                @T@* into = dst + row + LANE(p3, 0) * o[5];
                if (interior012 && t.sp[3][p3].lo == 0 && t.sp[3][p3].hi == g->w[3]) {
                    for (int64_t k = 0; k < window; ++k) into[t.at[k]] += cells[t.cell[k]];
                    continue;
                }
                FOR_REAL_012(t) {
                    const int64_t k012 = ((o0 * g->w[1] + o1) * g->w[2] + o2) * g->w[3];
                    for (int64_t o3 = t.sp[3][p3].lo; o3 < t.sp[3][p3].hi; ++o3)
                        into[t.at[k012 + o3]] += cells[t.cell[k012 + o3]];
                }
            }
        }
    }
    free(t.memory);
    return 0;
}

int axg_max_pool_@S@(const @T@* x, const @T@* unused, @T@* out, const geometry* g)
{
    (void)unused;
    tables t;
    if (make_tables(g, &t, NULL)) return -1;
    const int64_t *a = g->a, *o = g->o;
    const int64_t work = g->planes * g->p[0] * g->p[1] * g->p[2] * g->p[3]
                       * g->w[0] * g->w[1] * g->w[2] * g->w[3];
    const int64_t ilo = t.lanes[0].lo, ihi = t.lanes[g->w[3] - 1].hi;  /* all-real lanes */
    int failed = 0;
    #pragma omp parallel if(work >= PARALLEL_MIN)
    {
    int64_t* offs = new_scratch(g);
    if (!offs) {
        #pragma omp atomic write
        failed = 1;
    }
    #pragma omp for schedule(static)
    for (int64_t q = 0; q < g->planes; ++q) {
        if (!offs) continue;
        const @T@* src = x + PLANE(q, a);
        @T@* dst = out + PLANE(q, o);
        for (int64_t p0 = 0; p0 < g->p[0]; ++p0)
        for (int64_t p1 = 0; p1 < g->p[1]; ++p1)
        for (int64_t p2 = 0; p2 < g->p[2]; ++p2) {
            const int64_t row = ROW(a);
            @T@* line = dst + p0 * o[2] + p1 * o[3] + p2 * o[4];
            const int64_t n = row_offsets(g, &t, p0, p1, p2, a, offs, NULL);
            const int64_t b_lo = blocks_from(ilo, ihi, 0, g->p[3], @L@);
            const int64_t b_hi = blocks_to(ilo, ihi, 0, g->p[3], @L@);
            /* lanes at the borders (or too few for a block), one at a time */
            FOR_SCALAR_LANES(j, 0, g->p[3], b_lo, b_hi) {
                @T@ best = -INFINITY;
                FOR_REAL_012(t)
                for (int64_t o3 = t.sp[3][j].lo; o3 < t.sp[3][j].hi; ++o3) {
                    const @T@ v = src[row + OFFSET(a) + LANE(j, o3) * a[5]];
                    best = (best > v || best != best) ? best : v;   /* np.maximum */
                }
                line[j * o[5]] = best;
            }
            if (b_lo < b_hi) WITH_STEP(g->step[3] * a[5], FOR_BLOCKS(b, @L@, b_lo, b_hi) {
                const @T@* base = src + row + LANE(b, 0) * a[5];
                @V@ best = (@V@){0} - (@T@)INFINITY;
                @M@ had_nan = (@M@){0};
                for (int64_t k = 0; k < n; ++k) {
                    const @V@ v = load_@S@(base + offs[k], s_);
                    best = vmax_@S@(best, v);   /* exact np.maximum until a NaN */
                    had_nan |= v != v;
                }
                for (int l = 0; l < @L@; ++l) {
                    if (!had_nan[l]) continue;      /* the first NaN, as np.maximum keeps */
                    for (int64_t k = 0; k < n; ++k) {
                        const @T@ v = base[offs[k] + l * s_];
                        if (v != v) { best[l] = v; break; }
                    }
                }
                store_@S@(line + b * o[5], o[5], best);
            });
        }
    }
    free_scratch(offs);
    }
    free(t.memory);
    return failed ? -1 : 0;
}

int axg_avg_pool_@S@(const @T@* x, const @T@* unused, @T@* out, const geometry* g)
{
    (void)unused;
    tables t;
    if (make_tables(g, &t, NULL)) return -1;
    const int64_t *a = g->a, *o = g->o;
    const int64_t work = g->planes * g->p[0] * g->p[1] * g->p[2] * g->p[3]
                       * g->w[0] * g->w[1] * g->w[2] * g->w[3];
    const int64_t window = g->w[0] * g->w[1] * g->w[2] * g->w[3];
    const int64_t ilo = t.lanes[0].lo, ihi = t.lanes[g->w[3] - 1].hi;  /* all-real lanes */
    int failed = 0;
    #pragma omp parallel if(work >= PARALLEL_MIN)
    {
    int64_t* offs = new_scratch(g);
    if (!offs) {
        #pragma omp atomic write
        failed = 1;
    }
    #pragma omp for schedule(static)
    for (int64_t q = 0; q < g->planes; ++q) {
        if (!offs) continue;
        const @T@* src = x + PLANE(q, a);
        @T@* dst = out + PLANE(q, o);
        for (int64_t p0 = 0; p0 < g->p[0]; ++p0)
        for (int64_t p1 = 0; p1 < g->p[1]; ++p1)
        for (int64_t p2 = 0; p2 < g->p[2]; ++p2) {
            const int64_t row = ROW(a);
            @T@* line = dst + p0 * o[2] + p1 * o[3] + p2 * o[4];
            const int64_t n = row_offsets(g, &t, p0, p1, p2, a, offs, NULL);
            const int64_t count012 = n / g->w[3];
            const int64_t b_lo = blocks_from(ilo, ihi, 0, g->p[3], @L@);
            const int64_t b_hi = blocks_to(ilo, ihi, 0, g->p[3], @L@);
            /* the reference adds the padding's zeros too: a sum is -0 only
               when its window has no padding (and every term is -0) */
            FOR_SCALAR_LANES(j, 0, g->p[3], b_lo, b_hi) {
                const int64_t count = count012 * (t.sp[3][j].hi - t.sp[3][j].lo);
                @T@ sum = count == window ? (@T@)-0.0 : (@T@)0.0;
                FOR_REAL_012(t)
                for (int64_t o3 = t.sp[3][j].lo; o3 < t.sp[3][j].hi; ++o3)
                    sum += src[row + OFFSET(a) + LANE(j, o3) * a[5]];
                line[j * o[5]] = sum / (@T@)count;
            }
            if (b_lo < b_hi) WITH_STEP(g->step[3] * a[5], FOR_BLOCKS(b, @L@, b_lo, b_hi) {
                const @T@* base = src + row + LANE(b, 0) * a[5];
                @V@ sum = (@V@){0};
                if (n == window) sum = -sum;
                for (int64_t k = 0; k < n; ++k) sum += load_@S@(base + offs[k], s_);
                store_@S@(line + b * o[5], o[5], sum / (@T@)n);
            });
        }
    }
    free_scratch(offs);
    }
    free(t.memory);
    return failed ? -1 : 0;
}

int axg_max_pool_backprop_@S@(const @T@* x, const @T@* delta, @T@* out, const geometry* g)
{
    tables t;
    if (make_tables(g, &t, NULL)) return -1;
    const int64_t *a = g->a, *b = g->b, *o = g->o;
    const int64_t work = g->planes * (g->s[0] * g->s[1] * g->s[2] * g->s[3]
                       + g->p[0] * g->p[1] * g->p[2] * g->p[3]
                       * g->w[0] * g->w[1] * g->w[2] * g->w[3]);
    const int64_t window = g->w[0] * g->w[1] * g->w[2] * g->w[3];
    const int64_t ilo = t.lanes[0].lo, ihi = t.lanes[g->w[3] - 1].hi;  /* all-real lanes */
    /* windows that never overlap (stride >= extent in every dim) */
    const int tiled = g->step[0] >= (g->w[0] - 1) * g->dil[0] + 1
                   && g->step[1] >= (g->w[1] - 1) * g->dil[1] + 1
                   && g->step[2] >= (g->w[2] - 1) * g->dil[2] + 1
                   && g->step[3] >= (g->w[3] - 1) * g->dil[3] + 1;
    const int pairs = g->w[3] == 2 && g->step[3] == 2 && g->dil[3] == 1 && g->o[5] == 1;
    /* windows that tile the whole image without padding (the common 2x2/2 on even
       sides): the stores below then write every element, so no zeroing first */
    int covers = tiled;
    for (int k = 0; k < 4; ++k)
        covers = covers && g->below[k] == 0 && g->dil[k] == 1 && g->step[k] == g->w[k]
                 && g->s[k] == g->p[k] * g->w[k];
    int failed = 0;
    #pragma omp parallel if(work >= PARALLEL_MIN)
    {
    int64_t* offs = new_scratch(g);
    int32_t* index = offs ? (int32_t*)(offs + window) : NULL;
    int32_t hits[LANES];
    if (!offs) {
        #pragma omp atomic write
        failed = 1;
    }
    #pragma omp for schedule(static)
    for (int64_t q = 0; q < g->planes; ++q) {
        if (!offs) continue;
        const @T@* src = x + PLANE(q, a);
        const @T@* grad = delta + PLANE(q, b);
        @T@* dst = out + PLANE(q, o);
        if (!covers) ZERO_PLANE(dst, o)
        for (int64_t p0 = g->p[0] - 1; p0 >= 0; --p0)
        for (int64_t p1 = g->p[1] - 1; p1 >= 0; --p1)
        for (int64_t p2 = g->p[2] - 1; p2 >= 0; --p2) {
            const int64_t row = ROW(a), target = ROW(o);
            const int64_t d_row = p0 * b[2] + p1 * b[3] + p2 * b[4];
            const int64_t n = row_offsets(g, &t, p0, p1, p2, a, offs, index);
            const int first012 = t.sp[0][p0].lo == 0 && t.sp[0][p0].hi > 0
                              && t.sp[1][p1].lo == 0 && t.sp[1][p1].hi > 0
                              && t.sp[2][p2].lo == 0 && t.sp[2][p2].hi > 0;
            for (int64_t c0 = (g->p[3] - 1) / LANES * LANES; c0 >= 0; c0 -= LANES) {
                const int64_t c1 = MIN(c0 + LANES, g->p[3]);
                const int64_t b_lo = blocks_from(ilo, ihi, c0, c1, @L@);
                const int64_t b_hi = blocks_to(ilo, ihi, c0, c1, @L@);
                /* hit[j]: window index of lane j's first maximum, or -1. Padding
                   is -inf: while the max is -inf the first maximum is offset 0
                   (routed only if real). Strict > keeps the first of equal maxima;
                   a NaN routes nothing (x == NaN is false). */
                int32_t* hit = hits - c0;
                FOR_SCALAR_LANES(j, c0, c1, b_lo, b_hi) {
                    @T@ best = -INFINITY;
                    int32_t h = first012 && t.sp[3][j].lo == 0 && t.sp[3][j].hi > 0 ? 0 : -1;
                    int had_nan = 0;
                    FOR_REAL_012(t)
                    for (int64_t o3 = t.sp[3][j].lo; o3 < t.sp[3][j].hi; ++o3) {
                        const @T@ v = src[row + OFFSET(a) + LANE(j, o3) * a[5]];
                        const int32_t k =
                            (int32_t)(((o0 * g->w[1] + o1) * g->w[2] + o2) * g->w[3] + o3);
                        h = v > best ? k : h;
                        best = v > best ? v : best;
                        had_nan |= v != v;
                    }
                    hit[j] = had_nan ? -1 : h;
                }
                if (b_lo < b_hi) WITH_STEP(g->step[3] * a[5], FOR_BLOCKS(c, @L@, b_lo, b_hi) {
                    const @T@* base = src + row + LANE(c, 0) * a[5];
                    @V@ best = (@V@){0} - (@T@)INFINITY;
                    @M@ h = (@M@){0} + (first012 ? 0 : -1);
                    @M@ had_nan = (@M@){0};
                    for (int64_t k = 0; k < n; ++k) {
                        const @V@ v = load_@S@(base + offs[k], s_);
                        const @M@ better = v > best;
                        h = (better & index[k]) | (~better & h);
                        best = vmax_@S@(best, v);   /* equal to the strict update but for -0/+0 */
                        had_nan |= v != v;
                    }
                    h |= had_nan;                       /* a NaN in the window routes nothing */
                    if (tiled) {
                        /* each input in one window: store 0 + delta * hit directly */
                        const @V@ d = load_@S@(grad + d_row + c * b[5], b[5]);
                        const @V@ d0 = d * 0;
                        @T@* into = dst + target + LANE(c, 0) * o[5];
                        if (pairs) {
                            /* 2-wide, stride-2 windows on unit-stride rows: the two
                               offsets' lanes interleave into 2L consecutive elements */
                            for (int64_t k = 0; k < n; k += 2) {
                                const @V@ v0 = select_@S@(h == index[k], d, d0) + 0;
                                const @V@ v1 = select_@S@(h == index[k + 1], d, d0) + 0;
                                const @V@ low = ZIP_LOW_@S@(v0, v1), high = ZIP_HIGH_@S@(v0, v1);
                                __builtin_memcpy(into + t.at[index[k]], &low, sizeof low);
                                __builtin_memcpy(into + t.at[index[k]] + @L@, &high, sizeof high);
                            }
                        } else {
                            for (int64_t k = 0; k < n; ++k)
                                store_@S@(into + t.at[index[k]], g->step[3] * o[5],
                                          select_@S@(h == index[k], d, d0) + 0);
                        }
                    } else {
                        for (int l = 0; l < @L@; ++l) hit[c + l] = (int32_t)h[l];
                    }
                });
                if (tiled) {
                    /* the scalar lanes, stored the same way */
                    FOR_SCALAR_LANES(j, c0, c1, b_lo, b_hi) {
                        const @T@ d = grad[d_row + j * b[5]];
                        const int64_t at = target + LANE(j, 0) * o[5];
                        FOR_REAL_012(t)
                        for (int64_t o3 = t.sp[3][j].lo; o3 < t.sp[3][j].hi; ++o3) {
                            const int64_t k = ((o0 * g->w[1] + o1) * g->w[2] + o2) * g->w[3] + o3;
                            dst[at + t.at[k]] = (k == hit[j] ? d : d * 0) + 0;
                        }
                    }
                    continue;
                }
                for (int64_t j = c1 - 1; j >= c0; --j) {
                    const @T@ d = grad[d_row + j * b[5]];
                    const int64_t at = target + LANE(j, 0) * o[5];
                    if (d - d == 0) {   /* finite: the reference's delta * 0 adds nothing */
                        if (hit[j] >= 0) dst[at + t.at[hit[j]]] += d;
                        continue;
                    }
                    /* inf or NaN: the reference's delta * hit adds NaN everywhere else */
                    FOR_REAL_012(t)
                    for (int64_t o3 = t.sp[3][j].lo; o3 < t.sp[3][j].hi; ++o3) {
                        const int64_t k = ((o0 * g->w[1] + o1) * g->w[2] + o2) * g->w[3] + o3;
                        dst[at + t.at[k]] += k == hit[j] ? d : d * 0;
                    }
                }
            }
        }
    }
    free_scratch(offs);
    }
    free(t.memory);
    return failed ? -1 : 0;
}

int axg_avg_pool_backprop_@S@(const @T@* delta, const @T@* unused, @T@* out, const geometry* g)
{
    (void)unused;
    tables t;
    if (make_tables(g, &t, NULL)) return -1;
    const int64_t *a = g->a, *o = g->o;
    const int64_t work = g->planes * (g->s[0] * g->s[1] * g->s[2] * g->s[3]
                       + g->p[0] * g->p[1] * g->p[2] * g->p[3]
                       * g->w[0] * g->w[1] * g->w[2] * g->w[3]);
    const int64_t ilo = t.lanes[0].lo, ihi = t.lanes[g->w[3] - 1].hi;  /* all-real lanes */
    const int overlap3 = g->step[3] < (g->w[3] - 1) * g->dil[3] + 1;  /* dim-3 windows */
    const int tiled = !overlap3 && g->step[0] >= (g->w[0] - 1) * g->dil[0] + 1
                   && g->step[1] >= (g->w[1] - 1) * g->dil[1] + 1
                   && g->step[2] >= (g->w[2] - 1) * g->dil[2] + 1;
    const int pairs = g->w[3] == 2 && g->step[3] == 2 && g->dil[3] == 1 && g->o[5] == 1;
    int failed = 0;
    #pragma omp parallel if(work >= PARALLEL_MIN)
    {
    int64_t* offs = new_scratch(g);
    @T@ shares[LANES];
    if (!offs) {
        #pragma omp atomic write
        failed = 1;
    }
    #pragma omp for schedule(static)
    for (int64_t q = 0; q < g->planes; ++q) {
        if (!offs) continue;
        const @T@* grad = delta + PLANE(q, a);
        @T@* dst = out + PLANE(q, o);
        ZERO_PLANE(dst, o)
        for (int64_t p0 = g->p[0] - 1; p0 >= 0; --p0)
        for (int64_t p1 = g->p[1] - 1; p1 >= 0; --p1)
        for (int64_t p2 = g->p[2] - 1; p2 >= 0; --p2) {
            const int64_t row = ROW(o);
            const int64_t d_row = p0 * a[2] + p1 * a[3] + p2 * a[4];
            const int64_t count012 = (t.sp[0][p0].hi - t.sp[0][p0].lo)
                                   * (t.sp[1][p1].hi - t.sp[1][p1].lo)
                                   * (t.sp[2][p2].hi - t.sp[2][p2].lo);
            if (tiled) {
                /* each input in one window: store 0 + share directly */
                const int64_t n = row_offsets(g, &t, p0, p1, p2, o, offs, NULL);
                const int64_t b_lo = blocks_from(ilo, ihi, 0, g->p[3], @L@);
                const int64_t b_hi = blocks_to(ilo, ihi, 0, g->p[3], @L@);
                FOR_SCALAR_LANES(j, 0, g->p[3], b_lo, b_hi) {
                    const int64_t count = count012 * (t.sp[3][j].hi - t.sp[3][j].lo);
                    if (count == 0) continue;   /* all padding: the reference crops it off */
                    const @T@ share = grad[d_row + j * a[5]] / (@T@)count + 0;
                    FOR_REAL_012(t)
                    for (int64_t o3 = t.sp[3][j].lo; o3 < t.sp[3][j].hi; ++o3)
                        dst[row + OFFSET(o) + LANE(j, o3) * o[5]] = share;
                }
                FOR_BLOCKS(c, @L@, b_lo, b_hi) {
                    const @V@ share = load_@S@(grad + d_row + c * a[5], a[5]) / (@T@)n + 0;
                    @T@* into = dst + row + LANE(c, 0) * o[5];
                    if (pairs) {   /* as in max_pool_backprop */
                        const @V@ low = ZIP_LOW_@S@(share, share);
                        const @V@ high = ZIP_HIGH_@S@(share, share);
                        for (int64_t k = 0; k < n; k += 2) {
                            __builtin_memcpy(into + offs[k], &low, sizeof low);
                            __builtin_memcpy(into + offs[k] + @L@, &high, sizeof high);
                        }
                    } else {
                        for (int64_t k = 0; k < n; ++k)
                            store_@S@(into + offs[k], g->step[3] * o[5], share);
                    }
                }
                continue;
            }
            if (!overlap3) {
                /* each element gets one term per visit: lanes may run in any order */
                for (int64_t c0 = 0; c0 < g->p[3]; c0 += LANES) {
                    const int64_t c1 = MIN(c0 + LANES, g->p[3]);
                    @T@* share = shares - c0;
                    for (int64_t j = c0; j < c1; ++j)
                        share[j] = grad[d_row + j * a[5]]
                                 / (@T@)(count012 * (t.sp[3][j].hi - t.sp[3][j].lo));
                    FOR_REAL_012(t)
                    for (int64_t o3 = 0; o3 < g->w[3]; ++o3) {
                        const int64_t at = row + OFFSET(o) + LANE(0, o3) * o[5];
                        BY_STEP(g->step[3] * o[5], MAX(t.lanes[o3].lo, c0),
                                MIN(t.lanes[o3].hi, c1), dst[at + j * s_] += share[j]);
                    }
                }
                continue;
            }
            /* overlapping windows: one position at a time (see col2im) */
            for (int64_t p3 = g->p[3] - 1; p3 >= 0; --p3) {
                const int64_t count = count012 * (t.sp[3][p3].hi - t.sp[3][p3].lo);
                if (count == 0) continue;   /* all padding: the reference crops it off */
                const @T@ share = grad[d_row + p3 * a[5]] / (@T@)count;
                @T@* into = dst + row + LANE(p3, 0) * o[5];
                FOR_REAL_012(t) {
                    const int64_t k012 = ((o0 * g->w[1] + o1) * g->w[2] + o2) * g->w[3];
                    for (int64_t o3 = t.sp[3][p3].lo; o3 < t.sp[3][p3].hi; ++o3)
                        into[t.at[k012 + o3]] += share;
                }
            }
        }
    }
    free_scratch(offs);
    }
    free(t.memory);
    return failed ? -1 : 0;
}
