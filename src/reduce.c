/*
 * reduce.c - the element-wise reduction kernels: dst[i] = a[i] op b[i].
 *
 * Every collective that reduces calls one of these on each segment it
 * receives, so they sit on the data path of allreduce and must run at memory
 * speed. The loops are plain C that gcc -O3 vectorizes by itself; dst may be
 * the same pointer as a or b (in-place receive-reduce), which gcc's alias
 * check lets through to the vector loop because the accesses of one
 * iteration read before they write.
 *
 * Semantics that every rank must agree on, bit for bit:
 *  - Integer SUM and PROD wrap modulo 2^bits; signed types compute in the
 *    unsigned type of the same width, so that overflow is not undefined.
 *  - Floating-point MIN and MAX propagate NaN: if either operand is NaN the
 *    result is the default quiet NaN (positive, all-zero payload), whichever
 *    operand it was and whatever its payload, so the result does not depend
 *    on the order in which ranks combine their values. For the same reason
 *    -0.0 counts as smaller than +0.0: MIN(-0, +0) = -0, MAX(-0, +0) = +0.
 *  - float16 and bfloat16 are widened to float, combined in float and rounded
 *    back once, to nearest even. Conversions keep NaN a NaN (quiet, with the
 *    payload's high bits), and handle infinities and subnormals exactly.
 *  - AVG's kernel is SUM; baton__reduce_div() divides by the rank count at
 *    the end, and integers truncate toward zero.
 *
 * float16 is converted in blocks through a codec: portable C everywhere, or
 * the F16C instructions when the CPU has them, which are several times
 * faster and give bitwise the same results (tests/test_reduce.c checks all
 * 65536 halves and the rounding of floats near every tie). bfloat16 has no
 * such path: AVX512-BF16's conversion flushes subnormals to zero, and the
 * portable code vectorizes well anyway.
 */
#include <assert.h>
#include <string.h>

#include "internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define BATON__HAVE_F16C_PATH 1
#endif

#define QNAN32 UINT32_C(0x7fc00000)
#define QNAN64 UINT64_C(0x7ff8000000000000)

static inline uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float f32_from(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static inline uint64_t f64_bits(double f) {
  uint64_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline double f64_from(uint64_t u) {
  double f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* ---------------------------------------------------- element operations */

/* MIN and MAX as described at the top. When x == y the operands differ at
 * most in the sign of a zero, so OR of the bits picks -0 and AND picks +0. */
static inline float min_f32(float x, float y) {
  uint32_t ux = f32_bits(x), uy = f32_bits(y);
  return f32_from(x < y ? ux : y < x ? uy : x == y ? (ux | uy) : QNAN32);
}

static inline float max_f32(float x, float y) {
  uint32_t ux = f32_bits(x), uy = f32_bits(y);
  return f32_from(x > y ? ux : y > x ? uy : x == y ? (ux & uy) : QNAN32);
}

static inline double min_f64(double x, double y) {
  uint64_t ux = f64_bits(x), uy = f64_bits(y);
  return f64_from(x < y ? ux : y < x ? uy : x == y ? (ux | uy) : QNAN64);
}

static inline double max_f64(double x, double y) {
  uint64_t ux = f64_bits(x), uy = f64_bits(y);
  return f64_from(x > y ? ux : y > x ? uy : x == y ? (ux & uy) : QNAN64);
}

/* ------------------------------------------------ kernels on native types */

/* Loads both operands before the store, so dst == a or dst == b is safe. */
#define KERNEL(fn, T, expr)                                                    \
  static void fn(void *dst, const void *pa, const void *pb, size_t n) {       \
    T *d = dst;                                                                \
    const T *a = pa, *b = pb;                                                  \
    for (size_t i = 0; i < n; i++) {                                           \
      T x = a[i], y = b[i];                                                    \
      d[i] = (expr);                                                           \
    }                                                                          \
  }

/* U is the unsigned type of T's width, in which SUM and PROD wrap. */
#define INT_KERNELS(name, T, U)                                                \
  KERNEL(name##_sum, T, (T)((U)x + (U)y))                                      \
  KERNEL(name##_prod, T, (T)((U)x * (U)y))                                     \
  KERNEL(name##_min, T, x < y ? x : y)                                         \
  KERNEL(name##_max, T, x > y ? x : y)

#define FLOAT_KERNELS(name, T)                                                 \
  KERNEL(name##_sum, T, x + y)                                                 \
  KERNEL(name##_prod, T, x * y)                                                \
  KERNEL(name##_min, T, min_##name(x, y))                                      \
  KERNEL(name##_max, T, max_##name(x, y))

INT_KERNELS(i8, int8_t, uint8_t)
INT_KERNELS(u8, uint8_t, uint8_t)
INT_KERNELS(i32, int32_t, uint32_t)
INT_KERNELS(u32, uint32_t, uint32_t)
INT_KERNELS(i64, int64_t, uint64_t)
INT_KERNELS(u64, uint64_t, uint64_t)
FLOAT_KERNELS(f32, float)
FLOAT_KERNELS(f64, double)

/* ------------------------------------------- float16 and bfloat16 scalars */

/* Static so that the block loops can inline them (-fPIC forbids inlining
 * the exported baton__ wrappers below, which another object could
 * interpose). */
static inline float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (exp == 0x1f) /* inf, or NaN made quiet as F16C does */
    return f32_from(sign | 0x7f800000 | man << 13 | (man ? 0x400000 : 0));
  if (exp != 0) /* normal: rebias the exponent from 15 to 127 */
    return f32_from(sign | (exp + 112) << 23 | man << 13);
  /* zero or subnormal, man * 2^-24: both factors and the product exact */
  return f32_from(sign | f32_bits((float)man * 0x1p-24f));
}

static inline uint16_t float_to_half(float f) {
  uint32_t u = f32_bits(f);
  uint16_t sign = (uint16_t)(u >> 16 & 0x8000);
  uint32_t a = u & 0x7fffffff;
  if (a > 0x7f800000) /* NaN: quiet, keep the payload's high bits */
    return sign | 0x7e00 | (uint16_t)(a >> 13 & 0x3ff);
  if (a >= 0x477ff000) /* >= 65520, the tie above 65504, rounds to inf */
    return sign | 0x7c00;
  if (a >= 0x38800000) { /* >= 2^-14: normal; a carry may bump exponent */
    a = a - (UINT32_C(112) << 23) + 0xfff + (a >> 13 & 1);
    return sign | (uint16_t)(a >> 13);
  }
  /* Subnormal half: round |f| * 2^24 = m * 2^(e - 126) to an integer. The
   * result may be 0x400, the smallest normal, which is the right encoding. */
  uint32_t e = a >> 23, m = (a & 0x7fffff) | 0x800000;
  if (e < 102) /* below 2^-25, half the smallest subnormal */
    return sign;
  uint32_t shift = 126 - e, q = m >> shift, rem = m & ((1u << shift) - 1);
  uint32_t halfway = 1u << (shift - 1);
  q += rem > halfway || (rem == halfway && (q & 1));
  return sign | (uint16_t)q;
}

static inline float bf16_to_float(uint16_t h) {
  return f32_from((uint32_t)h << 16);
}

static inline uint16_t float_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffff) > 0x7f800000) /* NaN: rounding could make it inf */
    return (uint16_t)(u >> 16 | 0x40);
  return (uint16_t)((u + 0x7fff + (u >> 16 & 1)) >> 16);
}

float baton__half_to_float(uint16_t h) { return half_to_float(h); }
uint16_t baton__float_to_half(float f) { return float_to_half(f); }
float baton__bf16_to_float(uint16_t h) { return bf16_to_float(h); }
uint16_t baton__float_to_bf16(float f) { return float_to_bf16(f); }

/* ------------------------------------------ float16 and bfloat16 kernels */

/* A codec widens n 16-bit values to float and narrows them back. */
typedef struct {
  void (*widen)(float *f, const uint16_t *h, size_t n);
  void (*narrow)(uint16_t *h, const float *f, size_t n);
} half_codec_t;

#define CODEC_LOOPS(name, to_float, from_float)                                \
  static void name##_widen(float *f, const uint16_t *h, size_t n) {           \
    for (size_t i = 0; i < n; i++)                                             \
      f[i] = to_float(h[i]);                                                   \
  }                                                                            \
  static void name##_narrow(uint16_t *h, const float *f, size_t n) {          \
    for (size_t i = 0; i < n; i++)                                             \
      h[i] = from_float(f[i]);                                                 \
  }                                                                            \
  static const half_codec_t name##_codec = {name##_widen, name##_narrow};

CODEC_LOOPS(f16_portable, half_to_float, float_to_half)
CODEC_LOOPS(bf16, bf16_to_float, float_to_bf16)

#ifdef BATON__HAVE_F16C_PATH
/* Eight at a time in hardware; the tail goes through the portable code,
 * which rounds identically. The immediate rounding mode makes the result
 * independent of MXCSR. */
__attribute__((target("avx2,f16c"))) static void
f16c_widen(float *f, const uint16_t *h, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(f + i, _mm256_cvtph_ps(_mm_loadu_si128((const void *)(h + i))));
  f16_portable_widen(f + i, h + i, n - i);
}

__attribute__((target("avx2,f16c"))) static void
f16c_narrow(uint16_t *h, const float *f, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((void *)(h + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(f + i), _MM_FROUND_TO_NEAREST_INT));
  f16_portable_narrow(h + i, f + i, n - i);
}

static const half_codec_t f16c_codec = {f16c_widen, f16c_narrow};
#endif

/* libgcc fills in the CPU model from a constructor, so checking it on every
 * call costs a load and needs no state of our own. */
static const half_codec_t *f16_codec(void) {
#ifdef BATON__HAVE_F16C_PATH
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c"))
    return &f16c_codec;
#endif
  return &f16_portable_codec;
}

/* Elements per block: the two float blocks stay in L1 next to the data. */
#define HALF_BLOCK 512

/* Widens a block of each operand, combines in float, narrows into dst. Both
 * operands are read before dst is written, so dst may be a or b. */
static void half_apply(uint16_t *d, const uint16_t *a, const uint16_t *b,
                       size_t n, baton_op_t op, const half_codec_t *codec) {
  float x[HALF_BLOCK], y[HALF_BLOCK];
  for (size_t i = 0; i < n; i += HALF_BLOCK) {
    size_t m = n - i < HALF_BLOCK ? n - i : HALF_BLOCK;
    codec->widen(x, a + i, m);
    codec->widen(y, b + i, m);
    switch (op) {
    case BATON_PROD:
      for (size_t j = 0; j < m; j++)
        x[j] = x[j] * y[j];
      break;
    case BATON_MIN:
      for (size_t j = 0; j < m; j++)
        x[j] = min_f32(x[j], y[j]);
      break;
    case BATON_MAX:
      for (size_t j = 0; j < m; j++)
        x[j] = max_f32(x[j], y[j]);
      break;
    default: /* SUM and AVG */
      for (size_t j = 0; j < m; j++)
        x[j] = x[j] + y[j];
      break;
    }
    codec->narrow(d + i, x, m);
  }
}

#define HALF_KERNEL(fn, op, codec)                                             \
  static void fn(void *dst, const void *a, const void *b, size_t n) {         \
    half_apply(dst, a, b, n, op, codec);                                       \
  }

#define HALF_KERNELS(name, codec)                                              \
  HALF_KERNEL(name##_sum, BATON_SUM, codec)                                    \
  HALF_KERNEL(name##_prod, BATON_PROD, codec)                                  \
  HALF_KERNEL(name##_min, BATON_MIN, codec)                                    \
  HALF_KERNEL(name##_max, BATON_MAX, codec)

HALF_KERNELS(f16, f16_codec())
HALF_KERNELS(bf16, &bf16_codec)

/* --------------------------------------------------------- entry points */

/* Indexed by dtype and op, in the order of the enums; AVG reuses SUM. */
#define ROW(name) {name##_sum, name##_prod, name##_min, name##_max, name##_sum}
static const baton__reduce_fn kernels[BATON_DTYPE_COUNT][BATON_OP_COUNT] = {
    [BATON_INT8] = ROW(i8),       [BATON_UINT8] = ROW(u8),
    [BATON_INT32] = ROW(i32),     [BATON_UINT32] = ROW(u32),
    [BATON_INT64] = ROW(i64),     [BATON_UINT64] = ROW(u64),
    [BATON_FLOAT16] = ROW(f16),   [BATON_BFLOAT16] = ROW(bf16),
    [BATON_FLOAT32] = ROW(f32),   [BATON_FLOAT64] = ROW(f64),
};

baton__reduce_fn baton__reduce_get(baton_dtype_t dtype, baton_op_t op) {
  /* Compared as unsigned so that a negative value is out of range too. */
  if ((unsigned)dtype >= BATON_DTYPE_COUNT || (unsigned)op >= BATON_OP_COUNT)
    return NULL;
  return kernels[dtype][op];
}

#define DIV_LOOP(T, expr)                                                      \
  do {                                                                         \
    T *p = buf;                                                                \
    for (size_t i = 0; i < n; i++) {                                           \
      T x = p[i];                                                              \
      p[i] = (T)(expr);                                                        \
    }                                                                          \
  } while (0)

/* Divides in float and rounds once to the 16-bit type. */
static void half_div(uint16_t *p, size_t n, float d, const half_codec_t *codec) {
  float x[HALF_BLOCK];
  for (size_t i = 0; i < n; i += HALF_BLOCK) {
    size_t m = n - i < HALF_BLOCK ? n - i : HALF_BLOCK;
    codec->widen(x, p + i, m);
    for (size_t j = 0; j < m; j++)
      x[j] = x[j] / d;
    codec->narrow(p + i, x, m);
  }
}

void baton__reduce_div(void *buf, size_t n, baton_dtype_t dtype, int divisor) {
  /* The divisor is the rank count; C division of integers truncates toward
   * zero, and with divisor > 0 it cannot overflow. */
  assert(divisor > 0);
  if (divisor <= 0)
    return;
  switch (dtype) {
  case BATON_INT8: DIV_LOOP(int8_t, x / divisor); break;
  case BATON_UINT8: DIV_LOOP(uint8_t, x / divisor); break;
  case BATON_INT32: DIV_LOOP(int32_t, x / divisor); break;
  case BATON_UINT32: DIV_LOOP(uint32_t, x / (uint32_t)divisor); break;
  case BATON_INT64: DIV_LOOP(int64_t, x / (int64_t)divisor); break;
  case BATON_UINT64: DIV_LOOP(uint64_t, x / (uint64_t)divisor); break;
  case BATON_FLOAT16: half_div(buf, n, (float)divisor, f16_codec()); break;
  case BATON_BFLOAT16: half_div(buf, n, (float)divisor, &bf16_codec); break;
  case BATON_FLOAT32: DIV_LOOP(float, x / (float)divisor); break;
  case BATON_FLOAT64: DIV_LOOP(double, x / (double)divisor); break;
  default: break;
  }
}
