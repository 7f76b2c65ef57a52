/* axgraph: a layer's bias and ReLU in one pass, out = max(x + bias, 0).
 *
 * Read by epilogue.py (its docstring says when it runs). x and out are (rows, cols)
 * row-major matrices (out may be x itself), bias a vector of cols. Each element is
 * rounded as NumPy's np.add then np.maximum(v, 0) round it: a NaN sum stays NaN, a
 * -0 sum gives +0. Narrow rows (a few channels) are taken GROUP at a time against the
 * bias repeated GROUP times, so the inner loop runs whole vectors; the threads split
 * the groups. Returns 0, or -1 when out of memory.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Below this many elements a call runs on one thread. */
#define PARALLEL_MIN (1 << 16)
/* Rows narrower than WIDE are taken GROUP at a time. */
#define GROUP 16
#define WIDE 256

#define BIAS_RELU(T, S)                                                                 \
int axg_bias_relu_##S(const T* x, const T* bias, T* out, int64_t rows, int64_t cols)   \
{                                                                                       \
    const int64_t group = cols < WIDE && rows >= GROUP ? GROUP : 1;                     \
    const int64_t run = group * cols, runs = rows / group;                              \
    T* repeated = NULL;                                                                 \
    if (group > 1) {                                                                    \
        repeated = (T*)malloc((size_t)run * sizeof(T));                                 \
        if (!repeated) return -1;                                                       \
        for (int64_t r = 0; r < group; ++r)                                             \
            memcpy(repeated + r * cols, bias, (size_t)cols * sizeof(T));                \
    }                                                                                   \
    const T* b = group > 1 ? repeated : bias;                                           \
    _Pragma("omp parallel for schedule(static) if(rows * cols >= PARALLEL_MIN)")        \
    for (int64_t i = 0; i < runs; ++i) {                                                \
        const T* in = x + i * run;                                                      \
        T* to = out + i * run;                                                          \
        for (int64_t j = 0; j < run; ++j) {                                             \
            const T v = in[j] + b[j];                                                   \
            to[j] = (v > 0 || v != v) ? v : (T)0;                                       \
        }                                                                               \
    }                                                                                   \
    for (int64_t j = runs * run; j < rows * cols; ++j) {   /* the rows left */          \
        const T v = x[j] + bias[j % cols];                                              \
        out[j] = (v > 0 || v != v) ? v : (T)0;                                          \
    }                                                                                   \
    free(repeated);                                                                     \
    return 0;                                                                           \
}

BIAS_RELU(float, f32)
BIAS_RELU(double, f64)
