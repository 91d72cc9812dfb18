/*
 * reduce.c - the element-wise reduction kernels: dst[i] = a[i] op b[i].
 *
 * Every collective that reduces calls one of these on each segment it
 * receives, so they sit on the data path of allreduce and must keep up with
 * memory. The loops are plain C that gcc -O3 vectorizes by itself; dst may be
 * the same pointer as a or b (in-place receive-reduce), which gcc's alias
 * check lets through to the vector loop because each iteration reads its
 * operands before it writes.
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
 *    back once, to nearest even. Widening a float16 NaN makes it quiet, as
 *    F16C does; narrowing keeps a NaN a NaN (quiet, with the payload's high
 *    bits). Infinities and subnormals convert exactly.
 *  - AVG's kernel is SUM; baton__reduce_div() divides by the rank count at
 *    the end, and integers truncate toward zero.
 *  - BAND, BOR and BXOR act on the bits of every integer width; floats have
 *    no kernel for them (NULL in the table; coll.c refuses the call first).
 *  - bool reads any nonzero byte as true and writes only 0 or 1: SUM, MAX
 *    and BOR are or, PROD, MIN and BAND and, BXOR xor; AVG has no kernel.
 *    Each kernel normalises what it writes, so a result that went through
 *    one is 0 or 1 whatever bytes came in.
 *
 * Tiers. Each kernel is compiled three times from the same source: for the
 * x86-64 baseline (SSE2), for AVX2 and for AVX-512, and baton__reduce_get()
 * picks by the CPU it runs on. Streaming from memory all three run alike,
 * but on the 64 KiB segments of a pipelined collective, in cache, AVX2 runs
 * MIN, MAX and PROD about twice as fast as SSE2 (which lacks blends, 32-bit
 * multiplies and 64-bit compares), and AVX-512 adds another 1.5x for float
 * MIN/MAX and 2.5x for bfloat16. float16 SUM and PROD use the F16C
 * conversions in both vector tiers. All tiers give identical bits: integer
 * and IEEE arithmetic do not depend on the vector width, and the tests
 * check the F16C conversions against the portable ones over every half and
 * around every rounding tie.
 */
#include <assert.h>
#include <stdatomic.h>
#include <string.h>

#include "internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define HAVE_X86 1
#define TARGET_AVX2 __attribute__((target("avx2,f16c")))
#define TARGET_AVX512 __attribute__((target("avx2,f16c,avx512f,avx512bw,avx512dq,avx512vl")))
#endif

enum { TIER_BASE, TIER_AVX2, TIER_AVX512, TIER_COUNT };

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

static inline float sum_f32(float x, float y) { return x + y; }
static inline float prod_f32(float x, float y) { return x * y; }

/* MIN and MAX as described at the top. When x == y the operands differ at
 * most in the sign of a zero, so OR of the bits picks -0 and AND picks +0. */
static inline float min_f32(float x, float y) {
  uint32_t ux = f32_bits(x), uy = f32_bits(y);
  return f32_from(x < y ? ux : y < x ? uy : x == y ? (ux | uy) : 0x7fc00000);
}

static inline float max_f32(float x, float y) {
  uint32_t ux = f32_bits(x), uy = f32_bits(y);
  return f32_from(x > y ? ux : y > x ? uy : x == y ? (ux & uy) : 0x7fc00000);
}

static inline double min_f64(double x, double y) {
  uint64_t ux = f64_bits(x), uy = f64_bits(y), nan = UINT64_C(0x7ff8) << 48;
  return f64_from(x < y ? ux : y < x ? uy : x == y ? (ux | uy) : nan);
}

static inline double max_f64(double x, double y) {
  uint64_t ux = f64_bits(x), uy = f64_bits(y), nan = UINT64_C(0x7ff8) << 48;
  return f64_from(x > y ? ux : y > x ? uy : x == y ? (ux & uy) : nan);
}

/* MIN and MAX of float16 or bfloat16 straight on the bits, which vectorizes
 * at 16 bits a lane. Widening, comparing in float and narrowing would give
 * the same: the result is an operand (or their OR/AND when they are -0 and
 * +0) or the quiet NaN. key16() maps sign-magnitude to two's complement, so
 * that integer order is float order and -0 equals +0. inf is the encoding
 * of +infinity; anything above it, sign aside, is NaN. */
static inline int16_t key16(uint16_t h) {
  int16_t mag = (int16_t)(h & 0x7fff);
  return (int16_t)(h & 0x8000 ? -mag : mag);
}

static inline uint16_t min_16(uint16_t x, uint16_t y, uint16_t inf, uint16_t qnan) {
  int16_t kx = key16(x), ky = key16(y);
  int nan = (x & 0x7fff) > inf || (y & 0x7fff) > inf;
  return nan ? qnan : kx < ky ? x : ky < kx ? y : (uint16_t)(x | y);
}

static inline uint16_t max_16(uint16_t x, uint16_t y, uint16_t inf, uint16_t qnan) {
  int16_t kx = key16(x), ky = key16(y);
  int nan = (x & 0x7fff) > inf || (y & 0x7fff) > inf;
  return nan ? qnan : kx > ky ? x : ky > kx ? y : (uint16_t)(x & y);
}

/* ----------------------------------------- float16 and bfloat16 scalars */

/* A branch-free select. gcc turns chains of ?: back into branches, which
 * keep the vectorizer away from the conversions below. */
static inline uint32_t pick(int cond, uint32_t a, uint32_t b) {
  uint32_t mask = 0u - (uint32_t)cond;
  return (a & mask) | (b & ~mask);
}

/* The conversions compute every case and pick one, so that loops over them
 * vectorize; they are static so that kernels can inline them (with -fPIC gcc
 * may not inline the exported baton__ wrappers below). */
static inline float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, em = h & 0x7fff;
  uint32_t normal = (em << 13) + (UINT32_C(112) << 23); /* exponent 15 -> 127 */
  uint32_t special = 0x7f800000 | em << 13 | pick(em > 0x7c00, 0x400000, 0);
  uint32_t sub = f32_bits((float)(int32_t)em * 0x1p-24f); /* exact */
  return f32_from(sign | pick(em >= 0x7c00, special, pick(em >= 0x400, normal, sub)));
}

static inline uint16_t float_to_half(float f) {
  uint32_t u = f32_bits(f), a = u & 0x7fffffff, sign = u >> 16 & 0x8000;
  /* NaN stays quiet NaN with the payload's high bits. */
  uint32_t nan = 0x7e00 | (a >> 13 & 0x3ff);
  /* Normal (a >= 2^-14): rebias, round to nearest even at bit 13; the carry
   * may bump the exponent, up to inf from 65520 (the tie above 65504). */
  uint32_t normal = (a - (UINT32_C(112) << 23) + 0xfff + (a >> 13 & 1)) >> 13;
  /* Subnormal: |f| * 2^24 < 1024 is exact in float. Truncating it and
   * rounding the exact fraction by hand keeps MXCSR's mode out of it. The
   * result may be 0x400, the smallest normal, which is the right encoding. */
  float v = f32_from(pick(a < 0x38800000, a, 0)) * 0x1p24f;
  int32_t t = (int32_t)v;
  float frac = v - (float)t;
  uint32_t sub = (uint32_t)t + ((frac > 0.5f) | ((frac == 0.5f) & t));
  return (uint16_t)(sign | pick(a > 0x7f800000, nan,
                                pick(a >= 0x477ff000, 0x7c00, pick(a >= 0x38800000, normal, sub))));
}

static inline float bf16_to_float(uint16_t h) { return f32_from((uint32_t)h << 16); }

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

/* --------------------------------------------------------------- kernels */

/* One kernel in one tier. x and y are loaded before the store, so dst may
 * be a or b. */
#define KERNEL_IN(fn, attr, T, expr)                                                               \
  attr static void fn(void *dst, const void *pa, const void *pb, size_t n) {                       \
    T *d = dst;                                                                                    \
    const T *a = pa, *b = pb;                                                                      \
    for (size_t i = 0; i < n; i++) {                                                               \
      T x = a[i], y = b[i];                                                                        \
      d[i] = (expr);                                                                               \
    }                                                                                              \
  }

/* One kernel in every tier: fn##_base, fn##_avx2, fn##_avx512. */
#ifdef HAVE_X86
#define KERNEL(fn, T, expr)                                                                        \
  KERNEL_IN(fn##_base, , T, expr)                                                                  \
  KERNEL_IN(fn##_avx2, TARGET_AVX2, T, expr)                                                       \
  KERNEL_IN(fn##_avx512, TARGET_AVX512, T, expr)
#else
#define KERNEL(fn, T, expr) KERNEL_IN(fn##_base, , T, expr)
#endif

/* U is the unsigned type of T's width, in which SUM and PROD wrap. */
#define INT_KERNELS(name, T, U)                                                                    \
  KERNEL(name##_sum, T, (T)((U)x + (U)y))                                                          \
  KERNEL(name##_prod, T, (T)((U)x * (U)y))                                                         \
  KERNEL(name##_min, T, x < y ? x : y)                                                             \
  KERNEL(name##_max, T, x > y ? x : y)                                                             \
  KERNEL(name##_band, T, x &y)                                                                     \
  KERNEL(name##_bor, T, x | y)                                                                     \
  KERNEL(name##_bxor, T, x ^ y)

#define FLOAT_KERNELS(name, T)                                                                     \
  KERNEL(name##_sum, T, x + y)                                                                     \
  KERNEL(name##_prod, T, x *y)                                                                     \
  KERNEL(name##_min, T, min_##name(x, y))                                                          \
  KERNEL(name##_max, T, max_##name(x, y))

INT_KERNELS(i8, int8_t, uint8_t)
INT_KERNELS(u8, uint8_t, uint8_t)
INT_KERNELS(i16, int16_t, uint16_t)
INT_KERNELS(u16, uint16_t, uint16_t)
INT_KERNELS(i32, int32_t, uint32_t)
INT_KERNELS(u32, uint32_t, uint32_t)
INT_KERNELS(i64, int64_t, uint64_t)
INT_KERNELS(u64, uint64_t, uint64_t)
FLOAT_KERNELS(f32, float)
FLOAT_KERNELS(f64, double)

/* bool: three kernels serve its seven ops. The comparisons make a 0 or 1
 * of any byte, lane by lane. */
KERNEL(bool_or, uint8_t, (uint8_t)((x | y) != 0))
KERNEL(bool_and, uint8_t, (uint8_t)((x != 0) & (y != 0)))
KERNEL(bool_xor, uint8_t, (uint8_t)((x != 0) ^ (y != 0)))

/* 16-bit floats: MIN and MAX on the bits, SUM and PROD through float. */
KERNEL(bf16_sum, uint16_t, float_to_bf16(bf16_to_float(x) + bf16_to_float(y)))
KERNEL(bf16_prod, uint16_t, float_to_bf16(bf16_to_float(x) * bf16_to_float(y)))
KERNEL(bf16_min, uint16_t, min_16(x, y, 0x7f80, 0x7fc0))
KERNEL(bf16_max, uint16_t, max_16(x, y, 0x7f80, 0x7fc0))
KERNEL(f16_min, uint16_t, min_16(x, y, 0x7c00, 0x7e00))
KERNEL(f16_max, uint16_t, max_16(x, y, 0x7c00, 0x7e00))
KERNEL_IN(f16_sum_base, , uint16_t, float_to_half(half_to_float(x) + half_to_float(y)))
KERNEL_IN(f16_prod_base, , uint16_t, float_to_half(half_to_float(x) * half_to_float(y)))

#ifdef HAVE_X86
/* float16 SUM and PROD through F16C, W halves at a time (8 with AVX2, 16
 * with AVX-512); gcc keeps x and y in registers. The rounding mode is the
 * immediate 0, nearest even, not MXCSR's. The tail takes the portable path,
 * which rounds the same. */
TARGET_AVX2 static inline void widen8(float *f, const uint16_t *h) {
  _mm256_storeu_ps(f, _mm256_cvtph_ps(_mm_loadu_si128((const void *)h)));
}
TARGET_AVX2 static inline void narrow8(uint16_t *h, const float *f) {
  _mm_storeu_si128((void *)h, _mm256_cvtps_ph(_mm256_loadu_ps(f), 0));
}
TARGET_AVX512 static inline void widen16(float *f, const uint16_t *h) {
  _mm512_storeu_ps(f, _mm512_cvtph_ps(_mm256_loadu_si256((const void *)h)));
}
TARGET_AVX512 static inline void narrow16(uint16_t *h, const float *f) {
  _mm256_storeu_si256((void *)h, _mm512_cvtps_ph(_mm512_loadu_ps(f), 0));
}

#define F16C_KERNEL(op, tier, attr, W)                                                             \
  attr static void f16_##op##_##tier(void *dst, const void *pa, const void *pb, size_t n) {        \
    uint16_t *d = dst;                                                                             \
    const uint16_t *a = pa, *b = pb;                                                               \
    size_t i = 0;                                                                                  \
    for (; i + W <= n; i += W) {                                                                   \
      float x[W], y[W];                                                                            \
      widen##W(x, a + i);                                                                          \
      widen##W(y, b + i);                                                                          \
      for (int j = 0; j < W; j++)                                                                  \
        x[j] = op##_f32(x[j], y[j]);                                                               \
      narrow##W(d + i, x);                                                                         \
    }                                                                                              \
    if (i < n)                                                                                     \
      f16_##op##_base(d + i, a + i, b + i, n - i);                                                 \
  }

F16C_KERNEL(sum, avx2, TARGET_AVX2, 8)
F16C_KERNEL(prod, avx2, TARGET_AVX2, 8)
F16C_KERNEL(sum, avx512, TARGET_AVX512, 16)
F16C_KERNEL(prod, avx512, TARGET_AVX512, 16)
#endif

/* ----------------------------------------------------------- dispatch */

/* Indexed by tier, dtype and op, in the order of the enums; AVG is SUM.
 * The pairs without a meaning stay NULL. */
#define FLOAT_ROW(name, tier)                                                                      \
  {                                                                                                \
    [BATON_SUM] = name##_sum_##tier, [BATON_PROD] = name##_prod_##tier,                            \
    [BATON_MIN] = name##_min_##tier, [BATON_MAX] = name##_max_##tier,                              \
    [BATON_AVG] = name##_sum_##tier,                                                               \
  }
#define ROW(name, tier)                                                                            \
  {                                                                                                \
    [BATON_SUM] = name##_sum_##tier, [BATON_PROD] = name##_prod_##tier,                            \
    [BATON_MIN] = name##_min_##tier, [BATON_MAX] = name##_max_##tier,                              \
    [BATON_AVG] = name##_sum_##tier, [BATON_BAND] = name##_band_##tier,                            \
    [BATON_BOR] = name##_bor_##tier, [BATON_BXOR] = name##_bxor_##tier,                            \
  }
#define BOOL_ROW(tier)                                                                             \
  {                                                                                                \
    [BATON_SUM] = bool_or_##tier, [BATON_PROD] = bool_and_##tier, [BATON_MIN] = bool_and_##tier,   \
    [BATON_MAX] = bool_or_##tier, [BATON_BAND] = bool_and_##tier, [BATON_BOR] = bool_or_##tier,    \
    [BATON_BXOR] = bool_xor_##tier,                                                                \
  }
#define TABLE(tier)                                                                                \
  {                                                                                                \
    [BATON_INT8] = ROW(i8, tier), [BATON_UINT8] = ROW(u8, tier), [BATON_INT32] = ROW(i32, tier),   \
    [BATON_UINT32] = ROW(u32, tier), [BATON_INT64] = ROW(i64, tier),                               \
    [BATON_UINT64] = ROW(u64, tier), [BATON_FLOAT16] = FLOAT_ROW(f16, tier),                       \
    [BATON_BFLOAT16] = FLOAT_ROW(bf16, tier), [BATON_FLOAT32] = FLOAT_ROW(f32, tier),              \
    [BATON_FLOAT64] = FLOAT_ROW(f64, tier), [BATON_INT16] = ROW(i16, tier),                        \
    [BATON_UINT16] = ROW(u16, tier), [BATON_BOOL] = BOOL_ROW(tier),                                \
  }

static const baton__reduce_fn kernels[TIER_COUNT][BATON_DTYPE_COUNT][BATON_OP_COUNT] = {
    [TIER_BASE] = TABLE(base),
#ifdef HAVE_X86
    [TIER_AVX2] = TABLE(avx2),
    [TIER_AVX512] = TABLE(avx512),
#endif
};

/* Caps the tier that the kernels may use and returns the tier now in
 * effect, which is lower where the CPU lacks the capped one. Only tests call
 * it, to run every tier on one machine, so internal.h does not declare it. */
int baton__reduce_cap_tier(int cap);
static int tier_cap = TIER_COUNT - 1;

/* The best tier this CPU runs, found once. F16C is asked of CPUID because
 * clang's __builtin_cpu_supports() does not know it; AVX-512 must come with
 * AVX2. */
static int detect_tier(void) {
  int tier = TIER_BASE;
#ifdef HAVE_X86
  unsigned eax, ebx, ecx, edx;
  int f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
  if (f16c && __builtin_cpu_supports("avx2"))
    tier = TIER_AVX2;
  if (tier == TIER_AVX2 && __builtin_cpu_supports("avx512f") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl"))
    tier = TIER_AVX512;
#endif
  return tier;
}

static int cpu_tier(void) {
  static _Atomic int detected = -1; /* threads may race to store the same */
  int tier = atomic_load_explicit(&detected, memory_order_relaxed);
  if (tier < 0) {
    tier = detect_tier();
    atomic_store_explicit(&detected, tier, memory_order_relaxed);
  }
  return tier < tier_cap ? tier : tier_cap;
}

int baton__reduce_avx2(void) { return cpu_tier() >= TIER_AVX2; }

int baton__reduce_cap_tier(int cap) {
  tier_cap = cap < TIER_BASE ? TIER_BASE : cap;
  return cpu_tier();
}

baton__reduce_fn baton__reduce_get(baton_dtype_t dtype, baton_op_t op) {
  /* Compared as unsigned so that a negative value is out of range too. */
  if ((unsigned)dtype >= BATON_DTYPE_COUNT || (unsigned)op >= BATON_OP_COUNT)
    return NULL;
  return kernels[cpu_tier()][dtype][op];
}

void baton__reduce_bool_normalize(void *buf, size_t n) {
  uint8_t *p = buf;
  for (size_t i = 0; i < n; i++)
    p[i] = p[i] != 0;
}

/* --------------------------------------------------------------- average */

#define DIV_LOOP(T, expr)                                                                          \
  do {                                                                                             \
    T *p = buf;                                                                                    \
    for (size_t i = 0; i < n; i++) {                                                               \
      T x = p[i];                                                                                  \
      p[i] = (T)(expr);                                                                            \
    }                                                                                              \
  } while (0)

#ifdef HAVE_X86
/* Divides the first multiple of 8 elements and returns how many it did. */
TARGET_AVX2 static size_t f16c_div(uint16_t *p, size_t n, float d) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    float x[8];
    widen8(x, p + i);
    for (int j = 0; j < 8; j++)
      x[j] = x[j] / d;
    narrow8(p + i, x);
  }
  return i;
}
#endif

static void f16_div(uint16_t *p, size_t n, float d) {
  size_t i = 0;
#ifdef HAVE_X86
  if (cpu_tier() != TIER_BASE)
    i = f16c_div(p, n, d);
#endif
  for (; i < n; i++)
    p[i] = float_to_half(half_to_float(p[i]) / d);
}

void baton__reduce_div(void *buf, size_t n, baton_dtype_t dtype, int divisor) {
  /* The divisor is the rank count, so integer division (which truncates
   * toward zero in C) cannot overflow. Floats divide in their own type;
   * 16-bit floats divide in float and round once. */
  assert(divisor > 0);
  if (divisor <= 0)
    return;
  float fd = (float)divisor;
  switch (dtype) {
  case BATON_INT8:
    DIV_LOOP(int8_t, x / divisor);
    break;
  case BATON_UINT8:
    DIV_LOOP(uint8_t, x / divisor);
    break;
  case BATON_INT16:
    DIV_LOOP(int16_t, x / divisor);
    break;
  case BATON_UINT16:
    DIV_LOOP(uint16_t, x / divisor);
    break;
  case BATON_INT32:
    DIV_LOOP(int32_t, x / divisor);
    break;
  case BATON_UINT32:
    DIV_LOOP(uint32_t, x / (uint32_t)divisor);
    break;
  case BATON_INT64:
    DIV_LOOP(int64_t, x / divisor);
    break;
  case BATON_UINT64:
    DIV_LOOP(uint64_t, x / (uint64_t)divisor);
    break;
  case BATON_FLOAT16:
    f16_div(buf, n, fd);
    break;
  case BATON_BFLOAT16:
    DIV_LOOP(uint16_t, float_to_bf16(bf16_to_float(x) / fd));
    break;
  case BATON_FLOAT32:
    DIV_LOOP(float, x / fd);
    break;
  case BATON_FLOAT64:
    DIV_LOOP(double, x / divisor);
    break;
  default:
    break;
  }
}
