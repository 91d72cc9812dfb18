/*
 * reduce_stream.c - a reduction fused with its stores into the outputs, for the
 * direct path on registered buffers (exec_direct.c).
 *
 * Without it, direct reduces each piece of its chunk from every rank's
 * input into a scratch piece in L1, then streams the piece into one
 * output or into every rank's. The scratch costs a store and a load per
 * vector on top of the memory traffic, and a second pass over the piece:
 * measured alone on one core (64 MiB halves), that pattern took 6.5-7.0
 * ms where one loop that adds and stores each vector straight to the
 * outputs took 4.9-5.6.
 * This is that loop, for the sums that dominate training (float32,
 * float64, and the integers, whose sum is the same bits signed or not),
 * with streaming stores, or plain ones where the outputs are the inputs
 * just read (in place), whose lines are in the cache already.
 *
 * The sources are combined in rank order, ((in0 + in1) + in2) + ..., as
 * the scratch path does, so both give identical bits. Everything else
 * (other ops and dtypes, AVG, a CPU without AVX2, outputs that do not
 * share an alignment) returns 0 and takes the scratch path.
 */
#include <stdint.h>

#include "internal.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define LINE 64

#define AVX2 __attribute__((target("avx2")))

/* The stores, one per vector type, each to a line-aligned output:
 * streaming, and plain for outputs whose lines the loop has just read. */
AVX2 static inline void stream_ps(char *p, __m256 x) { _mm256_stream_ps((float *)p, x); }
AVX2 static inline void stream_pd(char *p, __m256d x) { _mm256_stream_pd((double *)p, x); }
AVX2 static inline void stream_si(char *p, __m256i x) { _mm256_stream_si256((__m256i *)p, x); }
AVX2 static inline void plain_ps(char *p, __m256 x) { _mm256_store_ps((float *)p, x); }
AVX2 static inline void plain_pd(char *p, __m256d x) { _mm256_store_pd((double *)p, x); }
AVX2 static inline void plain_si(char *p, __m256i x) { _mm256_store_si256((__m256i *)p, x); }

/* One line of every source combined, streamed to every output. The
 * sources may be unaligned (an input's offset is the caller's). */
#define DEFINE_LINES(name, vec, load, add, store)                                                  \
  AVX2 static size_t name(char *const *dst, int ndst, const char *const *src, int nsrc,            \
                          size_t bytes) {                                                          \
    size_t at = 0;                                                                                 \
    for (; bytes - at >= LINE; at += LINE) {                                                       \
      vec x0 = load((const void *)(src[0] + at)), x1 = load((const void *)(src[0] + at + 32));     \
      for (int q = 1; q < nsrc; q++) {                                                             \
        x0 = add(x0, load((const void *)(src[q] + at)));                                           \
        x1 = add(x1, load((const void *)(src[q] + at + 32)));                                      \
      }                                                                                            \
      for (int j = 0; j < ndst; j++) {                                                             \
        store(dst[j] + at, x0);                                                                    \
        store(dst[j] + at + 32, x1);                                                               \
      }                                                                                            \
    }                                                                                              \
    return at;                                                                                     \
  }

AVX2 static inline __m256 load_ps(const void *p) { return _mm256_loadu_ps(p); }
AVX2 static inline __m256d load_pd(const void *p) { return _mm256_loadu_pd(p); }
AVX2 static inline __m256i load_si(const void *p) { return _mm256_loadu_si256(p); }

DEFINE_LINES(stream_f32, __m256, load_ps, _mm256_add_ps, stream_ps)
DEFINE_LINES(stream_f64, __m256d, load_pd, _mm256_add_pd, stream_pd)
DEFINE_LINES(stream_i32, __m256i, load_si, _mm256_add_epi32, stream_si)
DEFINE_LINES(stream_i64, __m256i, load_si, _mm256_add_epi64, stream_si)
DEFINE_LINES(plain_f32, __m256, load_ps, _mm256_add_ps, plain_ps)
DEFINE_LINES(plain_f64, __m256d, load_pd, _mm256_add_pd, plain_pd)
DEFINE_LINES(plain_i32, __m256i, load_si, _mm256_add_epi32, plain_si)
DEFINE_LINES(plain_i64, __m256i, load_si, _mm256_add_epi64, plain_si)

typedef size_t (*lines_fn)(char *const *, int, const char *const *, int, size_t);

static lines_fn lines_for(baton_dtype_t dtype, int streaming) {
  switch (dtype) {
  case BATON_FLOAT32:
    return streaming ? stream_f32 : plain_f32;
  case BATON_FLOAT64:
    return streaming ? stream_f64 : plain_f64;
  case BATON_INT32:
  case BATON_UINT32:
    return streaming ? stream_i32 : plain_i32;
  case BATON_INT64:
  case BATON_UINT64:
    return streaming ? stream_i64 : plain_i64;
  default:
    return NULL;
  }
}

size_t baton__reduce_stream(baton_dtype_t dtype, baton_op_t op, size_t elsize, char *const *dst,
                            int ndst, const char *const *src, int nsrc, size_t n, int streaming,
                            size_t *first) {
  lines_fn lines = op == BATON_SUM ? lines_for(dtype, streaming) : NULL;
  if (!lines || nsrc < 2 || ndst < 1 || nsrc > BATON__REDUCE_STREAM_MAX ||
      ndst > BATON__REDUCE_STREAM_MAX || !baton__reduce_avx2())
    return 0;
  size_t head = ((uintptr_t)0 - (uintptr_t)dst[0]) & (LINE - 1);
  if (head % elsize)
    return 0;
  for (int j = 1; j < ndst; j++)
    if (((uintptr_t)dst[j] - (uintptr_t)dst[0]) & (LINE - 1))
      return 0;
  head /= elsize;
  if (head >= n)
    return 0;
  char *d[BATON__REDUCE_STREAM_MAX];
  const char *s[BATON__REDUCE_STREAM_MAX];
  for (int j = 0; j < ndst; j++)
    d[j] = dst[j] + head * elsize;
  for (int q = 0; q < nsrc; q++)
    s[q] = src[q] + head * elsize;
  *first = head;
  return lines(d, ndst, s, nsrc, (n - head) * elsize) / elsize;
}

#else

size_t baton__reduce_stream(baton_dtype_t dtype, baton_op_t op, size_t elsize, char *const *dst,
                            int ndst, const char *const *src, int nsrc, size_t n, int streaming,
                            size_t *first) {
  (void)dtype, (void)op, (void)elsize, (void)dst, (void)ndst, (void)src, (void)nsrc, (void)n,
      (void)streaming;
  *first = 0;
  return 0;
}

#endif
