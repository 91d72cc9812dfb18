/*
 * ref.h - the tests' independent reference: element access, float16 and
 * bfloat16 conversions, deterministic input values and the naive reduction.
 *
 * Nothing here calls the library. The conversions are written from the
 * IEEE 754 definitions so that a bug in the library's own kernels cannot hide
 * in the reference.
 *
 * Inputs are a pure function of (seed, rank, index): every rank can compute
 * what every other rank sends, so the expected result of a collective is
 * computed locally, reducing in rank order, without any communication.
 */
#ifndef BATON_TEST_REF_H
#define BATON_TEST_REF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "baton.h"

/* ------------------------------------------------------------ dtypes */

static inline size_t ref_size(baton_dtype_t dt) {
  static const size_t sizes[BATON_DTYPE_COUNT] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8, 2, 2, 1};
  return sizes[dt];
}

static inline int ref_is_float(baton_dtype_t dt) {
  return dt == BATON_FLOAT16 || dt == BATON_BFLOAT16 || dt == BATON_FLOAT32 || dt == BATON_FLOAT64;
}

static inline int ref_is_signed(baton_dtype_t dt) {
  return dt == BATON_INT8 || dt == BATON_INT16 || dt == BATON_INT32 || dt == BATON_INT64;
}

static inline int ref_is_bitwise(baton_op_t op) {
  return op == BATON_BAND || op == BATON_BOR || op == BATON_BXOR;
}

/* Whether op reduces dt (baton.h): the bitwise ops take no floats, and
 * bool has no average. The others are BATON_EINVAL. */
static inline int ref_valid(baton_dtype_t dt, baton_op_t op) {
  if (ref_is_bitwise(op))
    return !ref_is_float(dt);
  return !(dt == BATON_BOOL && op == BATON_AVG);
}

static inline uint64_t ref_mask(baton_dtype_t dt) {
  return ref_size(dt) == 8 ? ~0ull : (1ull << (8 * ref_size(dt))) - 1;
}

/* Raw bits of element i, zero-extended. */
static inline uint64_t ref_load(const void *buf, baton_dtype_t dt, size_t i) {
  const unsigned char *p = (const unsigned char *)buf + i * ref_size(dt);
  uint8_t u8;
  uint16_t u16;
  uint32_t u32;
  uint64_t u64;
  switch (ref_size(dt)) {
  case 1:
    memcpy(&u8, p, 1);
    return u8;
  case 2:
    memcpy(&u16, p, 2);
    return u16;
  case 4:
    memcpy(&u32, p, 4);
    return u32;
  default:
    memcpy(&u64, p, 8);
    return u64;
  }
}

static inline void ref_store(void *buf, baton_dtype_t dt, size_t i, uint64_t bits) {
  unsigned char *p = (unsigned char *)buf + i * ref_size(dt);
  uint8_t u8 = (uint8_t)bits;
  uint16_t u16 = (uint16_t)bits;
  uint32_t u32 = (uint32_t)bits;
  switch (ref_size(dt)) {
  case 1:
    memcpy(p, &u8, 1);
    break;
  case 2:
    memcpy(p, &u16, 2);
    break;
  case 4:
    memcpy(p, &u32, 4);
    break;
  default:
    memcpy(p, &bits, 8);
    break;
  }
}

/* The bits of a signed element as an int64_t. */
static inline int64_t ref_sext(baton_dtype_t dt, uint64_t bits) {
  int width = 8 * (int)ref_size(dt);
  if (width < 64 && (bits >> (width - 1)) & 1)
    bits |= ~ref_mask(dt);
  return (int64_t)bits;
}

/* ------------------------------------------------- narrow float formats */

/*
 * A binary interchange format with `man` stored mantissa bits and `exp`
 * exponent bits: float16 is (10, 5), bfloat16 is (7, 8). Every value of
 * either is exactly a double.
 */
static inline double ref_narrow_to_double(uint32_t bits, int man, int exp) {
  int bias = (1 << (exp - 1)) - 1;
  int e = (int)((bits >> man) & ((1u << exp) - 1));
  uint32_t m = bits & ((1u << man) - 1);
  double v;
  if (e == 0)
    v = ldexp(m, 1 - bias - man); /* subnormal: no implicit bit */
  else if (e == (1 << exp) - 1)
    v = m ? NAN : INFINITY;
  else
    v = ldexp(m + (1u << man), e - bias - man);
  return (bits >> (man + exp)) & 1 ? -v : v;
}

/*
 * Rounds d to the nearest value of the format, ties to even, from the bits
 * of the double: its 53-bit significand M (value M * 2^(E - 52)) loses
 * `drop` low bits, where the format's quantum is 2^(E - man) for normals
 * and the fixed 2^(1 - bias - man) below them. Writing the result as
 * ((E' + bias - 1) << man) + q, with q the rounded significand, lets a
 * rounding carry, and the step from the subnormals to the first normal
 * binade, fall out of the addition; a carry out of the top gives infinity.
 */
static inline uint32_t ref_double_to_narrow(double d, int man, int exp) {
  int bias = (1 << (exp - 1)) - 1;
  uint32_t inf = ((1u << exp) - 1) << man;
  uint64_t b;
  memcpy(&b, &d, 8);
  uint32_t sign = (uint32_t)(b >> 63) << (man + exp);
  int e = (int)((b >> 52) & 0x7ff) - 1023;
  uint64_t m = (b & ((1ull << 52) - 1)) | (1ull << 52);
  if (e == 1024) /* infinity or NaN; a NaN stays quiet */
    return sign | inf | ((b << 12) ? 1u << (man - 1) : 0);
  if (e > bias)
    return sign | inf;
  if (e < 1 - bias - man - 2) /* less than a quarter of the least subnormal */
    return sign;
  int efmt = e < 1 - bias ? 1 - bias : e;
  int drop = 52 - man + (efmt - e);
  uint64_t q = m >> drop, rest = m & ((1ull << drop) - 1);
  uint64_t half = 1ull << (drop - 1);
  if (rest > half || (rest == half && (q & 1)))
    q++;
  uint32_t bits = ((uint32_t)(efmt + bias - 1) << man) + (uint32_t)q;
  return sign | (bits >= inf ? inf : bits);
}

/* ------------------------------------------------ elements as doubles */

/* The value of a 16-bit float, from a table decoded once: the reference
 * decodes hundreds of millions of them. */
static inline double ref_narrow_value(baton_dtype_t dt, uint16_t bits) {
  static double table[2][65536];
  static int ready;
  if (!ready) {
    for (uint32_t i = 0; i < 65536; i++) {
      table[0][i] = ref_narrow_to_double(i, 10, 5);
      table[1][i] = ref_narrow_to_double(i, 7, 8);
    }
    ready = 1;
  }
  return table[dt == BATON_BFLOAT16][bits];
}

/* The value of a float element. */
static inline double ref_to_double(baton_dtype_t dt, uint64_t bits) {
  float f;
  double d;
  uint32_t b32 = (uint32_t)bits;
  switch (dt) {
  case BATON_FLOAT16:
  case BATON_BFLOAT16:
    return ref_narrow_value(dt, (uint16_t)bits);
  case BATON_FLOAT32:
    memcpy(&f, &b32, 4);
    return f;
  default:
    memcpy(&d, &bits, 8);
    return d;
  }
}

/* d rounded to the nearest float element (ties to even), as bits. */
static inline uint64_t ref_from_double(baton_dtype_t dt, double d) {
  float f;
  uint32_t b32;
  uint64_t b64;
  switch (dt) {
  case BATON_FLOAT16:
    return ref_double_to_narrow(d, 10, 5);
  case BATON_BFLOAT16:
    return ref_double_to_narrow(d, 7, 8);
  case BATON_FLOAT32:
    f = (float)d;
    memcpy(&b32, &f, 4);
    return b32;
  default:
    memcpy(&b64, &d, 8);
    return b64;
  }
}

/* ---------------------------------------------------------- inputs */

/* splitmix64's finalizer: a bijection with full avalanche. */
static inline uint64_t ref_mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

typedef enum {
  GEN_BITS,    /* uniformly random bits (integers, or any bytes) */
  GEN_INT,     /* integer k in [lo, hi], times 2^-shift for floats */
  GEN_NONZERO, /* like GEN_INT but never 0 */
  GEN_POW2,    /* +-2^k with k in [lo, hi] */
  GEN_REAL,    /* uniform real in [lo, hi), rounded to the type */
  GEN_BOOL     /* 0 with probability lo, else any other byte (true) */
} gen_kind_t;

/* How the inputs of one case are drawn. */
typedef struct {
  gen_kind_t kind;
  double lo, hi;
  int shift;
} gen_spec_t;

/* A signed integer value, as bits of dt (an integer or float type). */
static inline uint64_t ref_from_int(baton_dtype_t dt, int64_t k, int shift) {
  if (ref_is_float(dt)) /* dividing by a power of two is exact */
    return ref_from_double(dt, (double)k / (double)(1ull << shift));
  return (uint64_t)k & ref_mask(dt);
}

/* The bits of the element that `rank` contributes at index i. */
static inline uint64_t ref_gen(baton_dtype_t dt, const gen_spec_t *g, uint64_t seed, int rank,
                               size_t i) {
  uint64_t r = ref_mix64(seed + ((uint64_t)rank << 40) + i);
  int64_t lo = (int64_t)g->lo, k;
  uint64_t span = (uint64_t)((int64_t)g->hi - lo) + 1; /* integer kinds */
  switch (g->kind) {
  case GEN_BITS:
    return r & ref_mask(dt);
  case GEN_INT:
    return ref_from_int(dt, lo + (int64_t)(r % span), g->shift);
  case GEN_NONZERO:
    k = lo + (int64_t)(r % (span - 1));
    return ref_from_int(dt, k >= 0 ? k + 1 : k, g->shift);
  case GEN_POW2:
    k = lo + (int64_t)(r % span);
    return ref_from_double(dt, ((r >> 63) ? -1.0 : 1.0) *
                                   (k < 0 ? 1.0 / (double)(1ull << -k) : (double)(1ull << k)));
  case GEN_BOOL: /* 1 half the time, 2..255 the rest: bytes a C bool never holds */
    if ((double)(r >> 11) * 0x1p-53 < g->lo)
      return 0;
    return (r & 1) ? 1 : 2 + (r >> 1 & 0xff) % 254;
  default: /* 53 random bits as a fraction in [0, 1) */
    return ref_from_double(dt, g->lo + (g->hi - g->lo) * ((double)(r >> 11) * 0x1p-53));
  }
}

/* buf[j] = what `rank` contributes at index first + j, for j < n. */
static inline void ref_fill(void *buf, baton_dtype_t dt, const gen_spec_t *g, uint64_t seed,
                            int rank, size_t first, size_t n) {
  for (size_t j = 0; j < n; j++)
    ref_store(buf, dt, j, ref_gen(dt, g, seed, rank, first + j));
}

/* ------------------------------------------------------- exact inputs */

/*
 * Inputs for which every reduction order is exact, per dtype and op. Partial
 * sums of up to 8 ranks stay within the type's significand (bfloat16 has 8
 * bits: halves up to 4 sum to at most 32, 64 steps of 0.5; float32 sixteenths
 * up to 4096 need 20 bits); products of 8 are powers of two within 2^+-8.
 * Integer SUM and PROD wrap only where wrapping is defined: unsigned types,
 * and int8, which C computes in int. Signed 32- and 64-bit values stay small
 * enough not to overflow. AVG keeps its sums exact and unwrapped, so that
 * sum / N is well defined. MIN and MAX take any value but NaN.
 */
#define BITS                                                                                       \
  { GEN_BITS, 0, 0, 0 }
#define INT(lo, hi, shift)                                                                         \
  { GEN_INT, lo, hi, shift }
#define NONZERO(lo, hi)                                                                            \
  { GEN_NONZERO, lo, hi, 0 }
#define POW2(lo, hi)                                                                               \
  { GEN_POW2, lo, hi, 0 }
#define REAL(lo, hi)                                                                               \
  { GEN_REAL, lo, hi, 0 }
#define BOOLS(p_false)                                                                             \
  { GEN_BOOL, p_false, 0, 0 }
#define P20 0x1p20
#define P40 0x1p40

static const gen_spec_t exact_specs[BATON_DTYPE_COUNT][4] = {
    /*                  SUM                     PROD            MIN, MAX           AVG */
    [BATON_INT8] = {BITS, NONZERO(-2, 3), BITS, INT(-15, 15, 0)},
    [BATON_UINT8] = {BITS, INT(1, 7, 0), BITS, INT(0, 31, 0)},
    [BATON_INT32] = {INT(-P20, P20, 0), NONZERO(-2, 3), BITS, INT(-P20, P20, 0)},
    [BATON_UINT32] = {BITS, BITS, BITS, INT(0, P20, 0)},
    [BATON_INT64] = {INT(-P40, P40, 0), NONZERO(-2, 3), BITS, INT(-P40, P40, 0)},
    [BATON_UINT64] = {BITS, BITS, BITS, INT(0, P40, 0)},
    [BATON_FLOAT16] = {INT(-8, 8, 1), POW2(-1, 1), REAL(-1000, 1000), INT(-8, 8, 1)},
    [BATON_BFLOAT16] = {INT(-8, 8, 1), POW2(-1, 1), REAL(-1000, 1000), INT(-8, 8, 1)},
    [BATON_FLOAT32] = {INT(-65536, 65536, 4), POW2(-1, 1), REAL(-1000, 1000),
                       INT(-65536, 65536, 4)},
    [BATON_FLOAT64] = {INT(-P40, P40, 10), POW2(-1, 1), REAL(-1000, 1000), INT(-P40, P40, 10)},
    [BATON_INT16] = {BITS, NONZERO(-2, 3), BITS, INT(-4000, 4000, 0)},
    [BATON_UINT16] = {BITS, INT(1, 7, 0), BITS, INT(0, 8000, 0)},
};

/*
 * The bitwise ops take any bits, as MIN and MAX do. bool draws false often
 * for the ors (SUM, MAX, BOR) and seldom for the ands (PROD, MIN, BAND), so
 * that on 2 to 8 ranks both results come up; true is any byte but 0.
 */
static inline gen_spec_t exact_spec(baton_dtype_t dt, baton_op_t op) {
  static const int column[BATON_OP_COUNT] = {0, 1, 2, 2, 3, 2, 2, 2};
  static const gen_spec_t bools[BATON_OP_COUNT] = {
      [BATON_SUM] = BOOLS(0.75),  [BATON_MAX] = BOOLS(0.75), [BATON_BOR] = BOOLS(0.75),
      [BATON_PROD] = BOOLS(0.25), [BATON_MIN] = BOOLS(0.25), [BATON_BAND] = BOOLS(0.25),
      [BATON_BXOR] = BOOLS(0.5),  [BATON_AVG] = BOOLS(0.5)};
  return dt == BATON_BOOL ? bools[op] : exact_specs[dt][column[op]];
}

/* ------------------------------------------------------- reduction */

/*
 * The naive reduction, one element at a time and in rank order, in wide
 * arithmetic: doubles for floats (exact for the inputs exact_spec() draws),
 * modulo 2^64 for integer SUM and PROD (wraparound is the same in any
 * order), int64 or uint64 for MIN, MAX and AVG.
 */
static inline uint64_t ref_reduce_float(baton_dtype_t dt, baton_op_t op, const gen_spec_t *g,
                                        uint64_t seed, int nranks, size_t i) {
  double acc = ref_to_double(dt, ref_gen(dt, g, seed, 0, i));
  for (int r = 1; r < nranks; r++) {
    double v = ref_to_double(dt, ref_gen(dt, g, seed, r, i));
    switch (op) {
    case BATON_PROD:
      acc *= v;
      break;
    case BATON_MIN:
      acc = v < acc ? v : acc;
      break;
    case BATON_MAX:
      acc = v > acc ? v : acc;
      break;
    default:
      acc += v;
      break; /* SUM, AVG */
    }
  }
  if (op == BATON_AVG)
    acc /= nranks;
  return ref_from_double(dt, acc);
}

/* bool: each input true when nonzero; SUM and MAX are or, PROD and MIN and;
 * the result 0 or 1. */
static inline uint64_t ref_reduce_bool(baton_op_t op, const gen_spec_t *g, uint64_t seed,
                                       int nranks, size_t i) {
  int any = 0, all = 1, odd = 0;
  for (int r = 0; r < nranks; r++) {
    int v = ref_gen(BATON_BOOL, g, seed, r, i) != 0;
    any |= v, all &= v, odd ^= v;
  }
  if (op == BATON_BXOR)
    return (uint64_t)odd;
  return (uint64_t)(op == BATON_PROD || op == BATON_MIN || op == BATON_BAND ? all : any);
}

/* The bitwise ops on the bits as they are; any order gives the same. */
static inline uint64_t ref_reduce_bits(baton_dtype_t dt, baton_op_t op, const gen_spec_t *g,
                                       uint64_t seed, int nranks, size_t i) {
  uint64_t u = ref_gen(dt, g, seed, 0, i);
  for (int r = 1; r < nranks; r++) {
    uint64_t v = ref_gen(dt, g, seed, r, i);
    u = op == BATON_BAND ? u & v : op == BATON_BOR ? u | v : u ^ v;
  }
  return u;
}

static inline uint64_t ref_reduce_int(baton_dtype_t dt, baton_op_t op, const gen_spec_t *g,
                                      uint64_t seed, int nranks, size_t i) {
  if (dt == BATON_BOOL)
    return ref_reduce_bool(op, g, seed, nranks, i);
  if (ref_is_bitwise(op))
    return ref_reduce_bits(dt, op, g, seed, nranks, i);
  int sgn = ref_is_signed(dt);
  uint64_t u = ref_gen(dt, g, seed, 0, i);
  int64_t s = ref_sext(dt, u);
  for (int r = 1; r < nranks; r++) {
    uint64_t vu = ref_gen(dt, g, seed, r, i);
    int64_t vs = ref_sext(dt, vu);
    switch (op) {
    case BATON_PROD:
      u *= vu;
      break;
    case BATON_MIN:
      if (sgn ? vs < s : vu < u) {
        u = vu;
        s = vs;
      }
      break;
    case BATON_MAX:
      if (sgn ? vs > s : vu > u) {
        u = vu;
        s = vs;
      }
      break;
    default:
      u += vu;
      s = (int64_t)((uint64_t)s + (uint64_t)vs);
      break;
    }
  }
  if (op == BATON_AVG) /* C division truncates toward zero */
    u = sgn ? (uint64_t)(s / nranks) : u / (uint64_t)nranks;
  return u & ref_mask(dt);
}

/* out[j] = the reduction over all ranks of index first + j, for j < n. */
static inline void ref_reduce(void *out, baton_dtype_t dt, baton_op_t op, const gen_spec_t *g,
                              uint64_t seed, int nranks, size_t first, size_t n) {
  for (size_t j = 0; j < n; j++) {
    uint64_t bits = ref_is_float(dt) ? ref_reduce_float(dt, op, g, seed, nranks, first + j)
                                     : ref_reduce_int(dt, op, g, seed, nranks, first + j);
    ref_store(out, dt, j, bits);
  }
}

/* ---------------------------------------------------------- hashing */

/* FNV-1a over bytes: a fingerprint of a result to compare across ranks. */
static inline uint64_t ref_hash(const void *buf, size_t len) {
  const unsigned char *p = (const unsigned char *)buf;
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < len; i++)
    h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

#endif /* BATON_TEST_REF_H */
