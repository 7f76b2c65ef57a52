/* axgraph: stacks of small matrix products, out[b] = left[b] @ right[b], any strides.
 *
 * Read by batched.py (its docstring says why and when it runs: on AVX-512 builds; the
 * code builds for any vector width and is tested on each). A call is given the
 * three NumPy arrays themselves and reads their data pointers, ranks, shapes, strides
 * and flags from NumPy's array struct at the byte offsets batched.py checked and
 * handed to axg_batched_layout. It returns 0 when it wrote out, and 1, touching
 * nothing, where it does not apply (the caller then runs np.matmul): ranks or batch
 * dims that differ (a batch dim of 1 is broadcast), a product larger than MAX_MACS or
 * summing more than MAX_DEPTH terms, rows of out no longer than half a vector,
 * strides that are not whole elements, unaligned or read-only arrays, out overlapping
 * an operand or itself, empty arrays.
 *
 * Each product is computed by one thread (the threads split the stack, from
 * PARALLEL_MIN multiply-adds), in tiles of ROWS rows of out by one vector of columns:
 * the tile's accumulators live in registers and each element's sum runs over k in
 * order, one multiply and one add (rounded each) per term, starting from 0. So the
 * values depend neither on the thread count nor on the vector width. A strip of
 * right's columns is read in place where its rows are contiguous and whole, else
 * packed first (zero-padded) into the thread's local array; out is written through
 * its strides. Where out's rows are contiguous but not its columns, the transposed
 * product is computed (out^T = right^T left^T), so the stores stay vectors (unless
 * out's columns are too few to fill them).
 */
#include <stdint.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
static int64_t threads(void) { return omp_get_max_threads(); }
static int64_t thread(void) { return omp_get_thread_num(); }
static int64_t team(void) { return omp_get_num_threads(); }
#else
static int64_t threads(void) { return 1; }
static int64_t thread(void) { return 0; }
static int64_t team(void) { return 1; }
#endif

/* Bytes of the vectors the tiles are made of. */
#if defined(__AVX512F__)
#define VECTOR_BYTES 64
#elif defined(__AVX__)
#define VECTOR_BYTES 32
#else
#define VECTOR_BYTES 16
#endif
/* Rows of out one tile computes. */
#define ROWS 8
/* The most terms a sum may run over (a thread's strip of right: MAX_DEPTH vectors on its
   stack), and the most multiply-adds of one product: with AVX-512 vectors, products up
   to 16 million (the most tried) took 0.5-0.8 the time of one-thread OpenBLAS (its AVX2
   kernels) here, attention's 128 x 128 x 32 heads (half a million) 0.6; larger products
   go to BLAS, which also blocks for the caches (this kernel does not). */
#define MAX_DEPTH 1024
#define MAX_MACS (1 << 20)
/* Below this many multiply-adds in all a call runs on one thread: the idle OpenMP
   threads sleep (kernel_c.py says why), and waking one cost about 7 us here beside a
   busy neighbour process (the transformer block's stacks of 32 heads, half a million
   multiply-adds: 6.6 us on one thread, 13.4 us on two). */
#define PARALLEL_MIN (1 << 20)
/* The most batch dims, and NumPy's flags checked here (numpy/ndarraytypes.h). */
#define MAX_BATCH_DIMS 8
#define ALIGNED 0x0100
#define WRITEABLE 0x0400

typedef float vf32 __attribute__((vector_size(VECTOR_BYTES)));
typedef double vf64 __attribute__((vector_size(VECTOR_BYTES)));
typedef int32_t vi32 __attribute__((vector_size(VECTOR_BYTES)));
typedef int64_t vi64 __attribute__((vector_size(VECTOR_BYTES)));
/* Lanes of two vectors picked by an index vector, for transposing blocks: GCC's builtin
   where AVX-512 has the instruction (a 16 x 16 float block: 64 two-source permutes; on
   AVX2 they took longer than packing element by element, measured), elsewhere (and on
   clang, whose shuffles take constant indices only) a transposed right is packed
   element by element. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
#define SHUFFLES 1
#define SHUFFLE(x, y, index) __builtin_shuffle(x, y, index)
#else
#define SHUFFLES 0
#define SHUFFLE(x, y, index) ((void)(y), (void)(index), (x))
#endif

/* Byte offsets of PyArrayObject_fields' members (set once by axg_batched_layout). */
static int64_t at_data, at_nd, at_dims, at_strides, at_flags;

/* The vector width built for (batched.py uses the kernel only where it is wide). */
int64_t axg_batched_vector_bytes(void) { return VECTOR_BYTES; }

void axg_batched_layout(int64_t data, int64_t nd, int64_t dims, int64_t strides, int64_t flags)
{
    at_data = data;
    at_nd = nd;
    at_dims = dims;
    at_strides = strides;
    at_flags = flags;
}

/* One array as read from its struct; strides in elements. */
typedef struct {
    char* data;
    int nd;
    const int64_t* dims;
    int64_t strides[MAX_BATCH_DIMS + 2];
    int flags;
} array;

/* A call's whole geometry: the product dims, each operand's (row, column) strides
   and the batch dims with each operand's strides along them (0 where broadcast). */
typedef struct {
    int64_t m, n, k, batch, batch_dims;
    int64_t sizes[MAX_BATCH_DIMS];
    int64_t step[3][MAX_BATCH_DIMS];
    int64_t rows[3], cols[3];
} geometry;

/* The array at `object`, or 1 where its strides are not whole elements of `size`. */
static int read_array(const void* object, int64_t size, array* x)
{
    const char* base = (const char*)object;
    memcpy(&x->data, base + at_data, sizeof x->data);
    memcpy(&x->nd, base + at_nd, sizeof x->nd);
    memcpy(&x->dims, base + at_dims, sizeof x->dims);
    memcpy(&x->flags, base + at_flags, sizeof x->flags);
    if (x->nd < 3 || x->nd > MAX_BATCH_DIMS + 2) return 1;
    const int64_t* strides;
    memcpy(&strides, base + at_strides, sizeof strides);
    for (int d = 0; d < x->nd; ++d) {
        if (strides[d] % size) return 1;
        x->strides[d] = strides[d] / size;
    }
    return 0;
}

/* Bytes [lo, hi) that x's elements span. */
static void extent(const array* x, int64_t size, char** lo, char** hi)
{
    int64_t below = 0, above = 0;
    for (int d = 0; d < x->nd; ++d) {
        const int64_t reach = (x->dims[d] - 1) * x->strides[d] * size;
        if (reach < 0) below += reach; else above += reach;
    }
    *lo = x->data + below;
    *hi = x->data + above + size;
}

/* Whether no two of x's elements share memory: sorted by stride, each dim's stride
   steps past everything the dims of smaller strides reach. */
static int distinct(const array* x)
{
    int64_t stride[MAX_BATCH_DIMS + 2], dim[MAX_BATCH_DIMS + 2];
    int used = 0;
    for (int d = 0; d < x->nd; ++d) {
        if (x->dims[d] == 1) continue;
        int64_t s = x->strides[d] < 0 ? -x->strides[d] : x->strides[d];
        int at = used++;
        for (; at > 0 && stride[at - 1] > s; --at) {
            stride[at] = stride[at - 1];
            dim[at] = dim[at - 1];
        }
        stride[at] = s;
        dim[at] = x->dims[d];
    }
    int64_t reach = 0;  /* the largest element offset the smaller dims reach */
    for (int d = 0; d < used; ++d) {
        if (stride[d] <= reach) return 0;
        reach += (dim[d] - 1) * stride[d];
    }
    return 1;
}

/* The geometry of out = left @ right, or 1 where the kernel does not apply. */
static int plan(const void* left, const void* right, const void* out, int64_t size,
                geometry* g, char* data[3])
{
    array x[3];
    const void* objects[3] = {left, right, out};
    for (int i = 0; i < 3; ++i) {
        if (read_array(objects[i], size, &x[i]) || !(x[i].flags & ALIGNED)) return 1;
        data[i] = x[i].data;
    }
    if (!(x[2].flags & WRITEABLE) || x[0].nd != x[2].nd || x[1].nd != x[2].nd) return 1;
    const int nd = x[2].nd;
    g->m = x[2].dims[nd - 2];
    g->n = x[2].dims[nd - 1];
    g->k = x[0].dims[nd - 1];
    if (x[0].dims[nd - 2] != g->m || x[1].dims[nd - 2] != g->k || x[1].dims[nd - 1] != g->n
        || g->m < 1 || g->n < 1 || g->k < 1 || g->k > MAX_DEPTH
        || g->m * g->n * g->k > MAX_MACS)
        return 1;
    g->batch = 1;
    g->batch_dims = nd - 2;
    for (int d = 0; d < nd - 2; ++d) {
        const int64_t size_d = x[2].dims[d];
        g->sizes[d] = size_d;
        g->batch *= size_d;
        for (int i = 0; i < 3; ++i) {
            if (x[i].dims[d] != size_d && x[i].dims[d] != 1) return 1;
            g->step[i][d] = x[i].dims[d] == 1 ? 0 : x[i].strides[d];
        }
    }
    if (g->batch < 1 || !distinct(&x[2])) return 1;
    char *out_lo, *out_hi;
    extent(&x[2], size, &out_lo, &out_hi);
    for (int i = 0; i < 2; ++i) {
        char *lo, *hi;
        extent(&x[i], size, &lo, &hi);
        if (lo < out_hi && out_lo < hi) return 1;
    }
    for (int i = 0; i < 3; ++i) {
        g->rows[i] = x[i].strides[nd - 2];
        g->cols[i] = x[i].strides[nd - 1];
    }
    const int64_t c_rows = g->rows[2] < 0 ? -g->rows[2] : g->rows[2];
    const int64_t c_cols = g->cols[2] < 0 ? -g->cols[2] : g->cols[2];
    if (c_cols != 1 && c_rows == 1 && 2 * g->m * size > VECTOR_BYTES) {
        /* out^T = right^T left^T */
        int64_t t = g->m; g->m = g->n; g->n = t;
        for (int d = 0; d < g->batch_dims; ++d) {
            t = g->step[0][d]; g->step[0][d] = g->step[1][d]; g->step[1][d] = t;
        }
        int64_t r0 = g->rows[0], c0 = g->cols[0];
        g->rows[0] = g->cols[1]; g->cols[0] = g->rows[1];
        g->rows[1] = c0; g->cols[1] = r0;
        t = g->rows[2]; g->rows[2] = g->cols[2]; g->cols[2] = t;
        char* d0 = data[0]; data[0] = data[1]; data[1] = d0;
    }
    /* rows of half a vector or less: most lanes padding (64 products of 4 x 64 x 4 took
       2.8 times np.matmul's time) */
    if (2 * g->n * size <= VECTOR_BYTES) return 1;
    return 0;
}

/* The element offset of product `index` in operand `i`. */
static inline int64_t offset(const geometry* g, int i, int64_t index)
{
    int64_t at = 0;
    for (int64_t d = g->batch_dims - 1; d >= 0; --d) {
        at += index % g->sizes[d] * g->step[i][d];
        index /= g->sizes[d];
    }
    return at;
}

#define BATCHED(T, S, V, I)                                                              \
/* strip[p] = lanes p of rows 0..lanes-1 of `from` (row j at from + j * stride), a square  \
   block transposed in registers: log2(lanes) rounds, each swapping the off-diagonal     \
   blocks of half the size of the last. */                                               \
static inline void transpose_##S(V* strip, const T* from, int64_t stride)               \
{                                                                                        \
    enum { L = sizeof(V) / sizeof(T) };                                                  \
    V v[L];                                                                              \
    for (int j = 0; j < L; ++j) memcpy(&v[j], from + j * stride, sizeof(V));             \
    _Pragma("GCC unroll 8")                                                              \
    for (int h = L / 2; h >= 1; h /= 2) {                                                \
        I low, high;                                                                     \
        for (int t = 0; t < L; ++t) {                                                    \
            low[t] = t & h ? L + t - h : t;                                              \
            high[t] = t & h ? L + t : t + h;                                             \
        }                                                                                \
        _Pragma("GCC unroll 16")                                                         \
        for (int i = 0; i < L; ++i) {                                                    \
            if (i & h) continue;                                                         \
            const V x = v[i], y = v[i + h];                                              \
            v[i] = SHUFFLE(x, y, low);                                                   \
            v[i + h] = SHUFFLE(x, y, high);                                              \
        }                                                                                \
    }                                                                                    \
    for (int p = 0; p < L; ++p) strip[p] = v[p];                                         \
}                                                                                        \
                                                                                         \
/* strip[p] = b[p, 0..width-1] (b's strides br, bc), zero-padded to whole vectors. */   \
static void pack_##S(V* strip, const T* b, int64_t width, int64_t k, int64_t br,       \
                     int64_t bc)                                                         \
{                                                                                        \
    const int64_t lanes = (int64_t)(sizeof(V) / sizeof(T));                             \
    int64_t done = 0;                                                                    \
    if (SHUFFLES && br == 1 && width == lanes)  /* a transposed right: its rows */       \
        for (; done + lanes <= k; done += lanes) transpose_##S(strip + done, b + done, bc); \
    T* to = (T*)strip;   /* the rest column by column */                                 \
    for (int64_t j = 0; j < lanes; ++j) {                                                \
        const T* from = b + j * bc;                                                      \
        if (j < width) for (int64_t p = done; p < k; ++p) to[p * lanes + j] = from[p * br]; \
        else for (int64_t p = done; p < k; ++p) to[p * lanes + j] = 0;                   \
    }                                                                                    \
}                                                                                        \
                                                                                         \
/* One product: out (m, n) = a (m, k) b (k, n), strides from g; `strip` holds k        \
   vectors. */                                                                           \
static void product_##S(const geometry* g, const T* a, const T* b, T* c, V* strip)     \
{                                                                                        \
    const int64_t lanes = (int64_t)(sizeof(V) / sizeof(T));                             \
    const int64_t m = g->m, n = g->n, k = g->k;                                          \
    const int64_t ar = g->rows[0], ac = g->cols[0], br = g->rows[1], bc = g->cols[1];    \
    const int64_t cr = g->rows[2], cc = g->cols[2];                                      \
    for (int64_t j0 = 0; j0 < n; j0 += lanes) {                                          \
        const int64_t width = n - j0 < lanes ? n - j0 : lanes;                           \
        const V* bv = strip;                                                             \
        const T* in_place = b + j0 * bc;                                                 \
        const int whole = bc == 1 && width == lanes;                                     \
        if (!whole) pack_##S(strip, in_place, width, k, br, bc);                          \
        for (int64_t i0 = 0; i0 < m; i0 += ROWS) {                                       \
            const int64_t rows = m - i0 < ROWS ? m - i0 : ROWS;                          \
            /* rows past the last are read as the last one and not stored */             \
            const T* x[ROWS];                                                            \
            for (int r = 0; r < ROWS; ++r) x[r] = a + (i0 + (r < rows ? r : rows - 1)) * ar; \
            const T *x0 = x[0], *x1 = x[1], *x2 = x[2], *x3 = x[3];                      \
            const T *x4 = x[4], *x5 = x[5], *x6 = x[6], *x7 = x[7];                      \
            V s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0}, s4 = {0}, s5 = {0}, s6 = {0}, s7 = {0}; \
            for (int64_t p = 0; p < k; ++p) {                                            \
                V v;                                                                     \
                if (whole) memcpy(&v, in_place + p * br, sizeof v);                      \
                else v = bv[p];                                                          \
                const int64_t q = p * ac;                                                \
                s0 += x0[q] * v; s1 += x1[q] * v; s2 += x2[q] * v; s3 += x3[q] * v;      \
                s4 += x4[q] * v; s5 += x5[q] * v; s6 += x6[q] * v; s7 += x7[q] * v;      \
            }                                                                            \
            const V sums[ROWS] = {s0, s1, s2, s3, s4, s5, s6, s7};                       \
            for (int64_t r = 0; r < rows; ++r) {                                         \
                T* to = c + (i0 + r) * cr + j0 * cc;                                     \
                if (cc == 1 && width == lanes) memcpy(to, &sums[r], sizeof sums[r]);     \
                else for (int64_t j = 0; j < width; ++j) to[j * cc] = sums[r][j];        \
            }                                                                            \
        }                                                                                \
    }                                                                                    \
}                                                                                        \
                                                                                         \
/* Products [lo, hi) of the stack, on the calling thread. */                            \
static void products_##S(const geometry* g, const T* a, const T* b, T* c, int64_t lo,  \
                         int64_t hi)                                                     \
{                                                                                        \
    V strip[MAX_DEPTH];                                                                  \
    for (int64_t i = lo; i < hi; ++i)                                                    \
        product_##S(g, a + offset(g, 0, i), b + offset(g, 1, i), c + offset(g, 2, i), strip); \
}                                                                                        \
                                                                                         \
int axg_batched_##S(const void* left, const void* right, const void* out)               \
{                                                                                        \
    geometry g;                                                                          \
    char* data[3];                                                                       \
    if (plan(left, right, out, (int64_t)sizeof(T), &g, data)) return 1;                 \
    const T* a = (const T*)data[0];                                                      \
    const T* b = (const T*)data[1];                                                      \
    T* c = (T*)data[2];                                                                  \
    if (g.batch < 2 || g.batch * g.m * g.n * g.k < PARALLEL_MIN || threads() < 2) {      \
        products_##S(&g, a, b, c, 0, g.batch);                                           \
        return 0;                                                                        \
    }                                                                                    \
    _Pragma("omp parallel")                                                              \
    {                                                                                    \
        const int64_t part = thread(), parts = team();                                   \
        products_##S(&g, a, b, c, g.batch * part / parts, g.batch * (part + 1) / parts); \
    }                                                                                    \
    return 0;                                                                            \
}

BATCHED(float, f32, vf32, vi32)
BATCHED(double, f64, vf64, vi64)
