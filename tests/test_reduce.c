/*
 * test_reduce.c - unit test of the reduction kernels in src/reduce.c.
 *
 * Every kernel is compared with a reference written independently here:
 * integers are computed exactly in 128 bits and then wrapped, float32 in
 * double, float64 in long double (on values whose results are exact there),
 * and float16/bfloat16 through this file's own converters, which use ldexp
 * and nearbyint instead of bit tricks. Element values are compared bit for
 * bit; the one latitude is that a NaN expected from SUM, PROD or a division
 * may be any NaN (its payload follows the hardware).
 *
 * bool is one byte read as true when nonzero, and every kernel must write 0
 * or 1: the reference normalises its inputs first, and a sweep of every
 * pair of bytes checks each bool kernel. The bitwise ops are checked on
 * every integer width; floats and bool's AVG must have no kernel.
 *
 * Also: every dtype x op x length (0, 1, 7, 31, 1000, 1003) x start offset x aliasing
 * (dst separate, dst == a, dst == b) with guard elements around dst; the
 * conversions exhaustively over all 65536 halves and on floats around every
 * rounding tie, against the reference and against the F16C instructions
 * when the CPU has them; wraparound; NaN and signed zeros in MIN/MAX; and
 * AVG's truncating integer division. The kernels are tested in every ISA
 * tier that the CPU has (SSE2, AVX2, AVX-512). Then the fused sum with
 * streaming stores (baton__reduce_stream) against the pairwise kernels,
 * and the cases it must refuse.
 *
 * Prints "N passed, M failed" and exits 1 if anything failed.
 *
 *   test_reduce --bench [BYTES]
 *
 * times the kernels instead (no checks): every dtype and op that has one,
 * in every tier the CPU has, in place (dst == a, as a receive-reduce step)
 * on BYTES per operand (default 64 KiB, a pipelined collective's segment,
 * which stays in cache). GB/s is BYTES of the result per second; each
 * element reads two operands and writes one. Best of 7 runs of ~10 ms.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define HAVE_X86 1
#endif

/* Defined in reduce.c for tests: caps the ISA tier of the kernels (0 SSE2
 * baseline, 1 AVX2 + F16C, 2 AVX-512) and returns the tier in effect. */
int baton__reduce_cap_tier(int cap);

static int passed, failed;
static const char *tier_label = ""; /* prefixes failure lines */

/* Counts one check; prints the failures of a check, at most a few lines. */
static int fail_lines;
static void begin_check(void) { fail_lines = 0; }
static void end_check(void) {
  if (fail_lines == 0)
    passed++;
  else
    failed++;
}
#define REPORT(...)                                                                                \
  do {                                                                                             \
    if (fail_lines++ < 5) {                                                                        \
      printf("%s", tier_label);                                                                    \
      printf(__VA_ARGS__);                                                                         \
    }                                                                                              \
  } while (0)

static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static uint64_t rnd(void) { /* splitmix64 */
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

/* ------------------------------------------------------------- dtypes */

typedef struct {
  const char *name;
  size_t size;
  int is_float, is_signed;
} dtype_info_t;

static const dtype_info_t info[BATON_DTYPE_COUNT] = {
    [BATON_INT8] = {"int8", 1, 0, 1},       [BATON_UINT8] = {"uint8", 1, 0, 0},
    [BATON_INT32] = {"int32", 4, 0, 1},     [BATON_UINT32] = {"uint32", 4, 0, 0},
    [BATON_INT64] = {"int64", 8, 0, 1},     [BATON_UINT64] = {"uint64", 8, 0, 0},
    [BATON_FLOAT16] = {"float16", 2, 1, 1}, [BATON_BFLOAT16] = {"bfloat16", 2, 1, 1},
    [BATON_FLOAT32] = {"float32", 4, 1, 1}, [BATON_FLOAT64] = {"float64", 8, 1, 1},
    [BATON_INT16] = {"int16", 2, 0, 1},     [BATON_UINT16] = {"uint16", 2, 0, 0},
    [BATON_BOOL] = {"bool", 1, 0, 0},
};
static const char *const op_names[BATON_OP_COUNT] = {"sum", "prod", "min", "max",
                                                     "avg", "band", "bor", "bxor"};

/* Whether (t, op) has a meaning: no bitwise floats, no bool average. */
static int valid_pair(baton_dtype_t t, baton_op_t op) {
  if (op >= BATON_BAND)
    return !info[t].is_float;
  return !(t == BATON_BOOL && op == BATON_AVG);
}

/* Element i of p as raw bits, zero-extended. */
static uint64_t ld(baton_dtype_t t, const void *p, size_t i) {
  const char *c = (const char *)p + i * info[t].size;
  uint8_t u8;
  uint16_t u16;
  uint32_t u32;
  uint64_t u64;
  switch (info[t].size) {
  case 1:
    memcpy(&u8, c, 1);
    return u8;
  case 2:
    memcpy(&u16, c, 2);
    return u16;
  case 4:
    memcpy(&u32, c, 4);
    return u32;
  default:
    memcpy(&u64, c, 8);
    return u64;
  }
}

static void st(baton_dtype_t t, void *p, size_t i, uint64_t v) {
  char *c = (char *)p + i * info[t].size;
  uint8_t u8 = (uint8_t)v;
  uint16_t u16 = (uint16_t)v;
  uint32_t u32 = (uint32_t)v;
  switch (info[t].size) {
  case 1:
    memcpy(c, &u8, 1);
    break;
  case 2:
    memcpy(c, &u16, 2);
    break;
  case 4:
    memcpy(c, &u32, 4);
    break;
  default:
    memcpy(c, &v, 8);
    break;
  }
}

static float f32_of(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static uint32_t bits_f32(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static double f64_of(uint64_t u) {
  double f;
  memcpy(&f, &u, 8);
  return f;
}
static uint64_t bits_f64(double f) {
  uint64_t u;
  memcpy(&u, &f, 8);
  return u;
}

/* ------------------------------------------- reference 16-bit converters */

/* mbits: explicit mantissa bits (10 or 7); ebias: 15 or 127. */
static float ref_widen16(uint16_t h, int mbits, int ebias) {
  int emax = (1 << (15 - mbits)) - 1, e = (h & 0x7fff) >> mbits;
  uint32_t m = h & ((1u << mbits) - 1), sign = (uint32_t)(h >> 15) << 31;
  if (e == emax) /* F16C makes a half NaN quiet; bfloat16 widens bit for bit */
    return f32_of(sign | 0x7f800000 | m << (23 - mbits) | (m && mbits == 10 ? 0x400000 : 0));
  double v = e ? ldexp(m + ldexp(1, mbits), e - ebias - mbits) : ldexp(m, 1 - ebias - mbits);
  return (float)(h >> 15 ? -v : v);
}

static uint16_t ref_narrow16(float f, int mbits, int ebias) {
  uint16_t sign = signbit(f) ? 0x8000 : 0, inf = (uint16_t)(0x7fff >> mbits << mbits);
  if (isnan(f))
    return sign | inf | (uint16_t)(1u << (mbits - 1)) |
           (uint16_t)((bits_f32(f) & 0x7fffff) >> (23 - mbits));
  if (isinf(f))
    return sign | inf;
  double v = fabs((double)f);
  int ex;
  frexp(v, &ex);                    /* v in [2^(ex-1), 2^ex) */
  if (v == 0 || ex - 1 < 1 - ebias) /* zero or subnormal: units of 2^(1-ebias-mbits) */
    return sign | (uint16_t)nearbyint(ldexp(v, ebias - 1 + mbits));
  double q = nearbyint(ldexp(v, mbits - (ex - 1))); /* in [2^mbits, 2^(mbits+1)] */
  int e = ex - 1 + ebias;
  if (q == ldexp(1, mbits + 1)) {
    q /= 2;
    e++;
  }
  if (e >= (1 << (15 - mbits)) - 1)
    return sign | inf;
  return sign | (uint16_t)(e << mbits) | (uint16_t)(q - ldexp(1, mbits));
}

static float ref_h2f(uint16_t h) { return ref_widen16(h, 10, 15); }
static uint16_t ref_f2h(float f) { return ref_narrow16(f, 10, 15); }
static float ref_b2f(uint16_t h) { return ref_widen16(h, 7, 127); }
static uint16_t ref_f2b(float f) { return ref_narrow16(f, 7, 127); }

/* --------------------------------------------------- element reference */

static int is_nan_bits(baton_dtype_t t, uint64_t v) {
  switch (t) {
  case BATON_FLOAT16:
    return (v & 0x7fff) > 0x7c00;
  case BATON_BFLOAT16:
    return (v & 0x7fff) > 0x7f80;
  case BATON_FLOAT32:
    return isnan(f32_of((uint32_t)v));
  case BATON_FLOAT64:
    return isnan(f64_of(v));
  default:
    return 0;
  }
}

static const uint64_t qnan_bits[BATON_DTYPE_COUNT] = {[BATON_FLOAT16] = 0x7e00,
                                                      [BATON_BFLOAT16] = 0x7fc0,
                                                      [BATON_FLOAT32] = 0x7fc00000,
                                                      [BATON_FLOAT64] = 0x7ff8000000000000};

/* A float element's value, exactly. */
static long double fval(baton_dtype_t t, uint64_t v) {
  switch (t) {
  case BATON_FLOAT16:
    return ref_h2f((uint16_t)v);
  case BATON_BFLOAT16:
    return ref_b2f((uint16_t)v);
  case BATON_FLOAT32:
    return f32_of((uint32_t)v);
  default:
    return f64_of(v);
  }
}

/* An exact value rounded to the type: via float (double rounding is
 * harmless for one + or * of floats computed exactly in double). */
static uint64_t fround(baton_dtype_t t, long double r) {
  switch (t) {
  case BATON_FLOAT16:
    return ref_f2h((float)(double)r);
  case BATON_BFLOAT16:
    return ref_f2b((float)(double)r);
  case BATON_FLOAT32:
    return bits_f32((float)(double)r);
  default:
    return bits_f64((double)r);
  }
}

static __int128 ival(baton_dtype_t t, uint64_t v) {
  int sh = 64 - 8 * (int)info[t].size;
  if (info[t].is_signed)
    return (__int128)((int64_t)(v << sh) >> sh);
  return v;
}

/* The low 8 * size bits. */
static uint64_t wrap(baton_dtype_t t, unsigned __int128 v) {
  return (uint64_t)v & (~(uint64_t)0 >> (64 - 8 * info[t].size));
}

/* bool: true when nonzero; SUM and MAX are or, PROD and MIN and. */
static uint64_t ref_bool(baton_op_t op, uint64_t a, uint64_t b) {
  int x = a != 0, y = b != 0;
  switch (op) {
  case BATON_SUM:
  case BATON_MAX:
  case BATON_BOR:
    return x || y;
  case BATON_BXOR:
    return x != y;
  default: /* PROD, MIN, BAND */
    return x && y;
  }
}

static uint64_t ref_op(baton_dtype_t t, baton_op_t op, uint64_t a, uint64_t b) {
  if (op == BATON_AVG)
    op = BATON_SUM;
  if (t == BATON_BOOL)
    return ref_bool(op, a, b);
  if (op >= BATON_BAND) /* on the bits as they are */
    return op == BATON_BAND ? a & b : op == BATON_BOR ? a | b : a ^ b;
  if (!info[t].is_float) {
    __int128 x = ival(t, a), y = ival(t, b);
    unsigned __int128 r;
    switch (op) {
    case BATON_SUM:
      r = (unsigned __int128)x + (unsigned __int128)y;
      break;
    case BATON_PROD:
      r = (unsigned __int128)x * (unsigned __int128)y;
      break;
    case BATON_MIN:
      r = (unsigned __int128)(x < y ? x : y);
      break;
    default:
      r = (unsigned __int128)(x > y ? x : y);
      break;
    }
    return wrap(t, r);
  }
  long double x = fval(t, a), y = fval(t, b);
  if (op == BATON_SUM || op == BATON_PROD) { /* float64 in long double, others double */
    long double r = op == BATON_SUM ? x + y : x * y;
    double dr = op == BATON_SUM ? (double)x + (double)y : (double)x * (double)y;
    return fround(t, t == BATON_FLOAT64 ? r : dr);
  }
  if (isnan(x) || isnan(y))
    return qnan_bits[t];
  int want_b =
      op == BATON_MIN ? (y < x || (y == x && signbit(y))) : (y > x || (y == x && !signbit(y)));
  return want_b ? b : a;
}

static uint64_t ref_div(baton_dtype_t t, uint64_t a, int d) {
  if (!info[t].is_float) {
    __int128 v = ival(t, a), q = v < 0 ? -(-v / d) : v / d;
    return wrap(t, (unsigned __int128)q);
  }
  long double x = fval(t, a);
  if (t == BATON_FLOAT64)
    return bits_f64((double)(x / d));
  return fround(t, (double)x / d); /* one division, exact enough in double */
}

/* ------------------------------------------------------- test values */

static const double specials[] = {0.0, -0.0, 1.0, -1.0, 0.5, 3.0, NAN, INFINITY, -INFINITY, -NAN};

/* A random element: mostly small or full-range values, sometimes special.
 * float64 takes 21-bit mantissas times 2^-40 .. 2^-1, so that any sum or
 * product of two fits the 64 bits of long double and the reference is
 * exact. */
static uint64_t gen(baton_dtype_t t) {
  uint64_t kind = rnd() % 8, r = rnd();
  if (!info[t].is_float)
    return kind < 4 ? r : (uint64_t)((int)(r % 11) - (info[t].is_signed ? 5 : 0));
  double v;
  if (kind < 2)
    v = specials[r % (sizeof specials / sizeof specials[0])];
  else if (kind < 4)
    v = (double)((int)(r % 33) - 16) / 4;
  else if (t != BATON_FLOAT64)
    return r; /* any bit pattern, NaNs and subnormals included */
  else
    v = ldexp((double)(r & 0x1fffff) * (r >> 21 & 1 ? -1 : 1), (int)((r >> 22) % 40) - 40);
  switch (t) {
  case BATON_FLOAT16:
    return ref_f2h((float)v);
  case BATON_BFLOAT16:
    return ref_f2b((float)v);
  case BATON_FLOAT32:
    return bits_f32((float)v);
  default:
    return bits_f64(v);
  }
}

static void fmt(baton_dtype_t t, uint64_t v, char *out, size_t cap) {
  if (info[t].is_float)
    snprintf(out, cap, "%.9Lg (0x%" PRIx64 ")", fval(t, v), v);
  else if (info[t].is_signed)
    snprintf(out, cap, "%" PRId64 " (0x%" PRIx64 ")", (int64_t)ival(t, v), v);
  else
    snprintf(out, cap, "%" PRIu64, v);
}

/* Compares element i; NaN-for-NaN is enough where the payload is the
 * hardware's choice. */
static void expect(const char *what, baton_dtype_t t, size_t i, uint64_t got, uint64_t want,
                   int any_nan) {
  if (got == want || (any_nan && is_nan_bits(t, want) && is_nan_bits(t, got)))
    return;
  char g[64], w[64];
  fmt(t, got, g, sizeof g);
  fmt(t, want, w, sizeof w);
  REPORT("FAIL %s [%zu]: got %s, expected %s\n", what, i, g, w);
}

/* ---------------------------------------------------- kernel sweeps */

#define GUARD 4 /* elements before and after each array that must not change */

enum { SEPARATE, DST_IS_A, DST_IS_B };
static const char *const alias_names[] = {"dst separate", "dst==a", "dst==b"};

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) {
    printf("out of memory\n");
    exit(1);
  }
  return p;
}

static void *xaligned(size_t n) { /* n a multiple of 64 */
  void *p = aligned_alloc(64, n);
  if (!p) {
    printf("out of memory\n");
    exit(1);
  }
  return p;
}

/* Every element of buf outside [from, to) still equals its copy in saved. */
static void expect_untouched(const char *what, const char *name, baton_dtype_t t, const char *buf,
                             const char *saved, size_t cap, size_t from, size_t to) {
  for (size_t i = 0; i < cap; i++)
    if ((i < from || i >= to) && ld(t, buf, i) != ld(t, saved, i))
      REPORT("FAIL %s: %s changed at element %td of the array\n", what, name,
             (ptrdiff_t)i - (ptrdiff_t)(GUARD));
}

/* One kernel call on n elements that start off elements (plus the guard)
 * into their buffers; every element of every buffer other than dst's n
 * must come out unchanged. */
static void kernel_case(baton_dtype_t t, baton_op_t op, size_t n, size_t off, int alias) {
  size_t cap = n + off + 2 * GUARD, es = info[t].size, at = GUARD + off;
  char *buf[3], *saved[3]; /* a, b, separate dst */
  uint64_t *want = xmalloc(n * sizeof *want);
  char what[128];
  snprintf(what, sizeof what, "%s %s n=%zu off=%zu %s", info[t].name, op_names[op], n, off,
           alias_names[alias]);
  begin_check();
  for (int k = 0; k < 3; k++) {
    buf[k] = xmalloc(cap * es), saved[k] = xmalloc(cap * es);
    for (size_t i = 0; i < cap; i++)
      st(t, buf[k], i, gen(t));
    memcpy(saved[k], buf[k], cap * es);
  }
  int dst = alias == SEPARATE ? 2 : alias == DST_IS_A ? 0 : 1;
  char *pa = buf[0] + at * es, *pb = buf[1] + at * es, *pd = buf[dst] + at * es;
  for (size_t i = 0; i < n; i++)
    want[i] = ref_op(t, op, ld(t, pa, i), ld(t, pb, i));
  baton__reduce_fn fn = baton__reduce_get(t, op);
  if (!fn) {
    REPORT("FAIL %s: no kernel\n", what);
  } else {
    fn(pd, pa, pb, n);
    for (size_t i = 0; i < n; i++)
      expect(what, t, i, ld(t, pd, i), want[i], op != BATON_MIN && op != BATON_MAX);
  }
  static const char *const names[] = {"a", "b", "dst"};
  for (int k = 0; k < 3; k++)
    expect_untouched(what, names[k], t, buf[k], saved[k], cap, k == dst ? at : cap,
                     k == dst ? at + n : cap);
  end_check();
  for (int k = 0; k < 3; k++)
    free(buf[k]), free(saved[k]);
  free(want);
}

static void div_case(baton_dtype_t t, size_t n, size_t off, int divisor) {
  size_t es = info[t].size, cap = n + off + 2 * GUARD, at = GUARD + off;
  char *buf = xmalloc(cap * es), *saved = xmalloc(cap * es), *p = buf + at * es;
  uint64_t *want = xmalloc(n * sizeof *want);
  char what[96];
  snprintf(what, sizeof what, "%s div n=%zu off=%zu by %d", info[t].name, n, off, divisor);
  begin_check();
  for (size_t i = 0; i < cap; i++)
    st(t, buf, i, gen(t));
  memcpy(saved, buf, cap * es);
  for (size_t i = 0; i < n; i++)
    want[i] = ref_div(t, ld(t, p, i), divisor);
  baton__reduce_div(p, n, t, divisor);
  for (size_t i = 0; i < n; i++)
    expect(what, t, i, ld(t, p, i), want[i], 1);
  expect_untouched(what, "buf", t, buf, saved, cap, at, at + n);
  end_check();
  free(buf), free(saved), free(want);
}

static void test_kernels(void) {
  static const size_t lens[] = {0, 1, 7, 31, 1000, 1003};
  static const size_t offs[] = {0, 1, 3};
  for (int t = 0; t < BATON_DTYPE_COUNT; t++)
    for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++)
      for (size_t o = 0; o < sizeof offs / sizeof offs[0]; o++) {
        for (int op = 0; op < BATON_OP_COUNT; op++)
          for (int alias = SEPARATE; alias <= DST_IS_B && valid_pair(t, op); alias++)
            kernel_case(t, op, lens[l], offs[o], alias);
        if (t == BATON_BOOL) /* no average, so nothing divides a bool */
          continue;
        div_case(t, lens[l], offs[o], 3);
        div_case(t, lens[l], offs[o], 8);
      }
}

/* Out-of-range arguments and the pairs without a meaning give NULL; AVG
 * uses the SUM kernel; n = 0 with NULL pointers is fine (the sanitizer
 * build checks that). */
static void test_table(void) {
  begin_check();
  if (baton__reduce_get(BATON_DTYPE_COUNT, BATON_SUM) ||
      baton__reduce_get((baton_dtype_t)-1, BATON_SUM) ||
      baton__reduce_get(BATON_FLOAT32, BATON_OP_COUNT) ||
      baton__reduce_get(BATON_FLOAT32, (baton_op_t)-1))
    REPORT("FAIL reduce_get: a kernel for an out-of-range dtype or op\n");
  for (int t = 0; t < BATON_DTYPE_COUNT; t++) {
    if (t != BATON_BOOL && baton__reduce_get(t, BATON_AVG) != baton__reduce_get(t, BATON_SUM))
      REPORT("FAIL reduce_get %s: AVG is not the SUM kernel\n", info[t].name);
    for (int op = 0; op < BATON_OP_COUNT; op++) {
      baton__reduce_fn fn = baton__reduce_get(t, op);
      if (!fn != !valid_pair(t, op))
        REPORT("FAIL reduce_get %s %s: %s\n", info[t].name, op_names[op],
               fn ? "a kernel for a pair without a meaning" : "no kernel");
      if (!!baton__reduce_ok(t, op) != valid_pair(t, op))
        REPORT("FAIL baton__reduce_ok %s %s: says %d\n", info[t].name, op_names[op],
               baton__reduce_ok(t, op));
      if (fn) /* a count of 0 may come with NULL buffers */
        fn(NULL, NULL, NULL, 0);
    }
    baton__reduce_div(NULL, 0, t, 3);
  }
  end_check();
}

/* ----------------------------------------------------- explicit cases */

/* One element of dtype t: a op b must give want (bits), in both orders. */
static void pair_case(baton_dtype_t t, baton_op_t op, uint64_t a, uint64_t b, uint64_t want) {
  char x[8], y[8], d[8], what[96];
  snprintf(what, sizeof what, "%s %s (0x%" PRIx64 ", 0x%" PRIx64 ")", info[t].name, op_names[op], a,
           b);
  begin_check();
  st(t, x, 0, a);
  st(t, y, 0, b);
  baton__reduce_get(t, op)(d, x, y, 1);
  expect(what, t, 0, ld(t, d, 0), want, 0);
  baton__reduce_get(t, op)(d, y, x, 1);
  expect(what, t, 0, ld(t, d, 0), want, 0);
  end_check();
}

static void test_wraparound(void) {
  pair_case(BATON_INT8, BATON_SUM, 127, 1, 0x80);
  pair_case(BATON_INT8, BATON_PROD, 16, 16, 0);
  pair_case(BATON_INT8, BATON_PROD, 0x80, 0xff, 0x80); /* -128 * -1 */
  pair_case(BATON_UINT8, BATON_SUM, 255, 1, 0);
  pair_case(BATON_INT32, BATON_SUM, INT32_MAX, 1, 0x80000000u);
  pair_case(BATON_INT32, BATON_PROD, 65536, 65536, 0);
  pair_case(BATON_INT32, BATON_PROD, 0x80000000u, 0xffffffffu, 0x80000000u);
  pair_case(BATON_UINT32, BATON_SUM, UINT32_MAX, 2, 1);
  pair_case(BATON_INT64, BATON_SUM, INT64_MAX, 1, 0x8000000000000000u);
  pair_case(BATON_INT64, BATON_PROD, 0x8000000000000000u, ~0ull, 0x8000000000000000u);
  pair_case(BATON_INT64, BATON_PROD, 1ull << 32, 1ull << 32, 0);
  pair_case(BATON_UINT64, BATON_SUM, UINT64_MAX, 1, 0);
  pair_case(BATON_UINT64, BATON_PROD, UINT64_MAX, UINT64_MAX, 1);
  pair_case(BATON_INT16, BATON_SUM, INT16_MAX, 1, 0x8000);
  pair_case(BATON_INT16, BATON_PROD, 256, 256, 0);
  pair_case(BATON_INT16, BATON_PROD, 0x8000, 0xffff, 0x8000); /* -32768 * -1 */
  pair_case(BATON_INT16, BATON_MIN, 0x8000, 0x7fff, 0x8000);
  pair_case(BATON_UINT16, BATON_SUM, UINT16_MAX, 2, 1);
  pair_case(BATON_UINT16, BATON_MAX, 0x8000, 0x7fff, 0x8000);
}

/* The bitwise ops on hand-picked bits of every integer width: signed types
 * too act on the bits, sign bit included. */
static void test_bitwise(void) {
  static const baton_dtype_t ints[] = {BATON_INT8,  BATON_UINT8,  BATON_INT16, BATON_UINT16,
                                       BATON_INT32, BATON_UINT32, BATON_INT64, BATON_UINT64};
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
    baton_dtype_t t = ints[i];
    uint64_t all = ~0ull >> (64 - 8 * info[t].size), top = 1ull << (8 * info[t].size - 1);
    uint64_t x = 0xf0f0f0f0f0f0f0f0ull & all, y = 0xff00ff00ff00ff00ull & all;
    pair_case(t, BATON_BAND, x, y, 0xf000f000f000f000ull & all);
    pair_case(t, BATON_BOR, x, y, 0xfff0fff0fff0fff0ull & all);
    pair_case(t, BATON_BXOR, x, y, 0x0ff00ff00ff00ff0ull & all);
    pair_case(t, BATON_BAND, top | 1, all, top | 1);
    pair_case(t, BATON_BOR, top, 1, top | 1);
    pair_case(t, BATON_BXOR, all, top, all ^ top);
    pair_case(t, BATON_BXOR, all, all, 0);
  }
}

/* Every pair of bytes through every bool kernel, at a length with a vector
 * tail: the result is the reference's 0 or 1, in every tier. */
static void test_bool_bytes(void) {
  enum { N = 256 * 256 + 13 };
  static uint8_t x[N], y[N], d[N];
  for (size_t i = 0; i < N; i++)
    x[i] = (uint8_t)i, y[i] = (uint8_t)(i >> 8);
  for (int op = 0; op < BATON_OP_COUNT; op++) {
    if (!valid_pair(BATON_BOOL, op))
      continue;
    char what[64];
    snprintf(what, sizeof what, "bool %s every pair of bytes", op_names[op]);
    begin_check();
    memset(d, 0xcd, sizeof d);
    baton__reduce_get(BATON_BOOL, op)(d, x, y, N);
    for (size_t i = 0; i < N; i++)
      expect(what, BATON_BOOL, i, d[i], ref_bool(op, x[i], y[i]), 0);
    end_check();
  }
  begin_check();
  memcpy(d, x, N);
  baton__reduce_bool_normalize(d, N);
  for (size_t i = 0; i < N; i++)
    expect("baton__reduce_bool_normalize", BATON_BOOL, i, d[i], x[i] != 0, 0);
  end_check();
}

/* ±0 and NaN in MIN and MAX, for every float dtype and in both orders. */
static void test_minmax_specials(void) {
  static const struct {
    baton_dtype_t t;
    uint64_t pzero, nzero, one, nan, snan, ninf;
  } f[] = {
      {BATON_FLOAT16, 0, 0x8000, 0x3c00, 0x7e00, 0xfc01, 0xfc00},
      {BATON_BFLOAT16, 0, 0x8000, 0x3f80, 0x7fc0, 0xff81, 0xff80},
      {BATON_FLOAT32, 0, 0x80000000, 0x3f800000, 0x7fc00000, 0xff800001, 0xff800000},
      {BATON_FLOAT64, 0, 0x8000000000000000, 0x3ff0000000000000, 0x7ff8000000000000,
       0xfff0000000000001, 0xfff0000000000000},
  };
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
    pair_case(f[i].t, BATON_MIN, f[i].pzero, f[i].nzero, f[i].nzero);
    pair_case(f[i].t, BATON_MAX, f[i].pzero, f[i].nzero, f[i].pzero);
    pair_case(f[i].t, BATON_MIN, f[i].nzero, f[i].nzero, f[i].nzero);
    pair_case(f[i].t, BATON_MIN, f[i].one, f[i].nan, f[i].nan);
    pair_case(f[i].t, BATON_MAX, f[i].one, f[i].nan, f[i].nan);
    pair_case(f[i].t, BATON_MIN, f[i].ninf, f[i].snan, f[i].nan);
    pair_case(f[i].t, BATON_MAX, f[i].snan, f[i].nan, f[i].nan);
    pair_case(f[i].t, BATON_MAX, f[i].ninf, f[i].nzero, f[i].nzero);
  }
}

/* MIN and MAX give bitwise the same array whichever operand comes first. */
static void test_minmax_order(void) {
  enum { N = 4096 };
  static char a[N * 8], b[N * 8], ab[N * 8], ba[N * 8];
  for (int t = 0; t < BATON_DTYPE_COUNT; t++)
    for (int op = BATON_MIN; op <= BATON_MAX; op++) {
      char what[64];
      snprintf(what, sizeof what, "%s %s order", info[t].name, op_names[op]);
      begin_check();
      for (size_t i = 0; i < N; i++) {
        st(t, a, i, gen(t));
        uint64_t sign = info[t].is_float ? 1ull << (8 * info[t].size - 1) : 0;
        st(t, b, i, i % 3 ? gen(t) : ld(t, a, i) ^ sign); /* often ±x, ±0 */
      }
      baton__reduce_get(t, op)(ab, a, b, N);
      baton__reduce_get(t, op)(ba, b, a, N);
      for (size_t i = 0; i < N; i++)
        expect(what, t, i, ld(t, ab, i), ld(t, ba, i), 0);
      end_check();
    }
}

/* AVG's division by hand-computed values: integers truncate toward zero. */
static void test_avg_div(void) {
  static const struct {
    baton_dtype_t t;
    int divisor;
    uint64_t in, want;
  } c[] = {
      {BATON_INT8, 2, 0xf9, 0xfd}, /* -7 / 2 = -3 */
      {BATON_INT8, 2, 7, 3},
      {BATON_INT8, 3, 0x80, 0xd6}, /* -128 / 3 = -42 */
      {BATON_INT8, 2, 0xff, 0},    /* -1 / 2 = 0 */
      {BATON_UINT8, 2, 255, 127},
      {BATON_INT16, 2, 0xfff9, 0xfffd}, /* -7 / 2 = -3 */
      {BATON_INT16, 3, 0x8000, 0xd556}, /* -32768 / 3 = -10922 */
      {BATON_UINT16, 2, 0xffff, 0x7fff},
      {BATON_INT32, 4, 0xfffffff6, 0xfffffffe}, /* -10 / 4 = -2 */
      {BATON_INT32, 3, 0x80000000, 0xd5555556}, /* INT32_MIN / 3 */
      {BATON_UINT32, 3, 0xffffffff, 0x55555555},
      {BATON_INT64, 2, 0xfffffffffffffffd, 0xffffffffffffffff}, /* -3 / 2 = -1 */
      {BATON_INT64, 3, 0x8000000000000000, 0xd555555555555556},
      {BATON_UINT64, 2, 0xffffffffffffffff, 0x7fffffffffffffff},
      {BATON_FLOAT32, 3, 0x3f800000, 0x3eaaaaab}, /* 1 / 3 */
      {BATON_FLOAT64, 3, 0x3ff0000000000000, 0x3fd5555555555555},
      {BATON_FLOAT16, 3, 0x3c00, 0x3555},         /* 1 / 3 */
      {BATON_FLOAT16, 2, 0x0001, 0x0000},         /* 2^-24 / 2: tie to even 0 */
      {BATON_FLOAT16, 2, 0x0003, 0x0002},         /* 1.5 * 2^-24: tie to even 2 */
      {BATON_BFLOAT16, 3, 0x3f80, 0x3eab},        /* 1 / 3 */
      {BATON_FLOAT32, 2, 0xff800000, 0xff800000}, /* -inf */
  };
  for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
    char buf[8], what[64];
    snprintf(what, sizeof what, "%s div by %d", info[c[i].t].name, c[i].divisor);
    begin_check();
    st(c[i].t, buf, 0, c[i].in);
    baton__reduce_div(buf, 1, c[i].t, c[i].divisor);
    expect(what, c[i].t, 0, ld(c[i].t, buf, 0), c[i].want, 0);
    end_check();
  }
}

/* ------------------------------------------------------- conversions */

/* Floats at and around every rounding boundary of a 16-bit format: each
 * representable value, the midpoint to the next one (a tie), and one float
 * ulp either side of both. Calls fn on each, with the sweep of all floats
 * at a prime stride as well. */
static void for_test_floats(float (*widen)(uint16_t), void (*fn)(float, void *), void *ctx) {
  for (uint32_t h = 0; h < 0x10000; h++) {
    float lo = widen((uint16_t)h), hi = widen((uint16_t)(h + 1));
    if (isnan(lo) || isinf(lo))
      continue;
    /* Above the largest finite value the next one would be 2^16 or 2^128. */
    float mid = isnan(hi) || isinf(hi) ? lo + (lo - widen((uint16_t)(h - 1))) / 2
                                       : (float)(((double)lo + hi) / 2);
    float pts[] = {lo,  nextafterf(lo, INFINITY),  nextafterf(lo, -INFINITY),
                   mid, nextafterf(mid, INFINITY), nextafterf(mid, -INFINITY)};
    for (size_t i = 0; i < sizeof pts / sizeof pts[0]; i++)
      fn(pts[i], ctx);
  }
  for (uint64_t u = 0; u <= 0xffffffffu; u += 65521)
    fn(f32_of((uint32_t)u), ctx);
}

typedef struct {
  const char *what;
  uint16_t (*got)(float), (*want)(float);
} narrow_cmp_t;

static void narrow_one(float f, void *ctx) {
  narrow_cmp_t *c = ctx;
  uint16_t g = c->got(f), w = c->want(f);
  if (g != w)
    REPORT("FAIL %s: %.9g (0x%08x): got 0x%04x, expected 0x%04x\n", c->what, f, bits_f32(f), g, w);
}

static void narrow_check(const char *what, float (*widen)(uint16_t), uint16_t (*got)(float),
                         uint16_t (*want)(float)) {
  narrow_cmp_t c = {what, got, want};
  begin_check();
  for_test_floats(widen, narrow_one, &c);
  end_check();
}

static void widen_check(const char *what, float (*got)(uint16_t), float (*want)(uint16_t)) {
  begin_check();
  for (uint32_t h = 0; h < 0x10000; h++)
    if (bits_f32(got((uint16_t)h)) != bits_f32(want((uint16_t)h)))
      REPORT("FAIL %s: 0x%04x: got 0x%08x, expected 0x%08x\n", what, h, bits_f32(got((uint16_t)h)),
             bits_f32(want((uint16_t)h)));
  end_check();
}

#ifdef HAVE_X86
__attribute__((target("f16c"))) static float hw_h2f(uint16_t h) { return _cvtsh_ss(h); }
__attribute__((target("f16c"))) static uint16_t hw_f2h(float f) {
  return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}
#endif

static void test_conversions(void) {
  widen_check("half_to_float vs reference", baton__half_to_float, ref_h2f);
  widen_check("bf16_to_float vs reference", baton__bf16_to_float, ref_b2f);
  narrow_check("float_to_half vs reference", ref_h2f, baton__float_to_half, ref_f2h);
  narrow_check("float_to_bf16 vs reference", ref_b2f, baton__float_to_bf16, ref_f2b);
#ifdef HAVE_X86
  unsigned eax, ebx, ecx, edx;
  if (__builtin_cpu_supports("avx") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C)) {
    widen_check("half_to_float vs F16C", baton__half_to_float, hw_h2f);
    narrow_check("float_to_half vs F16C", ref_h2f, baton__float_to_half, hw_f2h);
    narrow_check("F16C vs reference", ref_h2f, hw_f2h, ref_f2h);
  } else {
    printf("SKIP: no F16C on this CPU: the hardware comparison\n");
  }
#endif
}

/* The 16-bit kernels (F16C for float16 where the CPU has it) on every
 * value: x * 1 must give x back, NaNs quieted, and x / 3 must match the
 * reference. Then random pairs, whose sums and products hit rounding ties. */
static void test_half_kernels(void) {
  enum { N = 1 << 16, PAIRS = 1 << 18 };
  static uint16_t x[PAIRS], y[PAIRS], d[PAIRS];
  for (int t = BATON_FLOAT16; t <= BATON_BFLOAT16; t++) {
    uint16_t one = t == BATON_FLOAT16 ? 0x3c00 : 0x3f80;
    uint16_t quiet = t == BATON_FLOAT16 ? 0x200 : 0x40;
    char what[64];
    snprintf(what, sizeof what, "%s all values * 1", info[t].name);
    begin_check();
    for (uint32_t i = 0; i < N; i++)
      x[i] = (uint16_t)i, y[i] = one;
    baton__reduce_get(t, BATON_PROD)(d, x, y, N);
    for (uint32_t i = 0; i < N; i++)
      expect(what, t, i, d[i], is_nan_bits(t, i) ? i | quiet : i, 0);
    end_check();
    snprintf(what, sizeof what, "%s all values / 3", info[t].name);
    begin_check();
    baton__reduce_div(x, N, t, 3);
    for (uint32_t i = 0; i < N; i++)
      expect(what, t, i, x[i], ref_div(t, i, 3), 1);
    end_check();
  }
  for (int op = 0; op < BATON_AVG; op++)
    for (int t = BATON_FLOAT16; t <= BATON_BFLOAT16; t++) {
      char what[64];
      snprintf(what, sizeof what, "%s %s random pairs", info[t].name, op_names[op]);
      begin_check();
      for (size_t i = 0; i < PAIRS; i++)
        x[i] = (uint16_t)rnd(), y[i] = (uint16_t)rnd();
      baton__reduce_get(t, op)(d, x, y, PAIRS);
      for (size_t i = 0; i < PAIRS; i++)
        expect(what, t, i, d[i], ref_op(t, op, x[i], y[i]), op <= BATON_PROD);
      end_check();
    }
}

/* ------------------------------------------- the fused sum (reduce_stream.c) */

/* One call of baton__reduce_stream: nsrc random sources (each at its own
 * offset from a line), ndst outputs that start dofs elements after a line,
 * with streaming stores or plain ones.
 * The elements it claims, [first, first + done), must be the rank-order
 * fold of the pairwise kernel, whole lines of the outputs; every other
 * element of every buffer, guards included, must be untouched. */
static void stream_case(baton_dtype_t t, int nsrc, int ndst, size_t n, size_t dofs, int streaming) {
  enum { MAXB = 8 };
  size_t es = info[t].size, cap = n + 64 + 2 * GUARD, bytes = (cap * es + 127) / 64 * 64;
  char *src[MAXB], *dst[MAXB], *saved[MAXB];
  const char *s[MAXB];
  char *d[MAXB], what[128];
  snprintf(what, sizeof what, "reduce_stream %s nsrc=%d ndst=%d n=%zu dst+%zu %s", info[t].name,
           nsrc, ndst, n, dofs, streaming ? "streaming" : "plain");
  begin_check();
  for (int q = 0; q < nsrc; q++) {
    src[q] = xaligned(bytes);
    for (size_t i = 0; i < cap; i++)
      st(t, src[q], i, gen(t));
    s[q] = src[q] + (GUARD + (size_t)q % 3) * es;
  }
  for (int j = 0; j < ndst; j++) {
    dst[j] = xaligned(bytes), saved[j] = xmalloc(cap * es);
    for (size_t i = 0; i < cap; i++)
      st(t, dst[j], i, gen(t));
    memcpy(saved[j], dst[j], cap * es);
    d[j] = dst[j] + 64 + dofs * es; /* the guard lies in the line before */
  }
  char *ref = xmalloc(n * es + 1);
  baton__reduce_fn fn = baton__reduce_get(t, BATON_SUM);
  fn(ref, s[0], s[1], n);
  for (int q = 2; q < nsrc; q++)
    fn(ref, ref, s[q], n);
  size_t first = 0,
         done = baton__reduce_stream(t, BATON_SUM, es, d, ndst, s, nsrc, n, streaming, &first);
  size_t lo = 64 / es + dofs + first, hi = lo + done; /* in elements of dst[j] */
#if HAVE_X86
  size_t head = (64 - dofs * es % 64) % 64; /* bytes before the first whole line */
  int expect_some = baton__reduce_avx2() && n * es >= head + 64;
#else
  int expect_some = 0;
#endif
  if (expect_some && !done)
    REPORT("FAIL %s: did nothing\n", what);
  if (done && ((uintptr_t)(d[0] + first * es) % 64 || (done * es) % 64 || first + done > n))
    REPORT("FAIL %s: claims [%zu, +%zu), not whole lines inside the range\n", what, first, done);
  for (int j = 0; j < ndst && done; j++)
    for (size_t i = first; i < first + done && i < n; i++)
      expect(what, t, i, ld(t, d[j], i), ld(t, ref, i), 1);
  for (int j = 0; j < ndst; j++)
    for (size_t i = 0; i < cap; i++)
      if ((!done || i < lo || i >= hi) && ld(t, dst[j], i) != ld(t, saved[j], i)) {
        REPORT("FAIL %s: output %d changed at element %zu outside [%zu, %zu)\n", what, j, i, lo,
               hi);
        break;
      }
  end_check();
  for (int q = 0; q < nsrc; q++)
    free(src[q]);
  for (int j = 0; j < ndst; j++)
    free(dst[j]), free(saved[j]);
  free(ref);
}

/* Where no fused kernel applies it must say so (0) and write nothing. */
static void stream_refusals(void) {
  _Alignas(64) static float a[64], b[64], out[2][64 + 16];
  const char *s[2] = {(const char *)a, (const char *)b};
  char *d[2] = {(char *)out[0], (char *)out[1] + 4}; /* alignments differ by 4 bytes */
  size_t first = 0;
  begin_check();
  if (baton__reduce_stream(BATON_FLOAT32, BATON_SUM, 4, d, 2, s, 2, 64, 1, &first))
    REPORT("FAIL reduce_stream: fused outputs of different alignments\n");
  d[1] = (char *)out[1];
  if (baton__reduce_stream(BATON_FLOAT32, BATON_MAX, 4, d, 2, s, 2, 64, 1, &first))
    REPORT("FAIL reduce_stream: fused a MAX\n");
  if (baton__reduce_stream(BATON_FLOAT32, BATON_AVG, 4, d, 2, s, 2, 64, 1, &first))
    REPORT("FAIL reduce_stream: fused an AVG (its division is the caller's)\n");
  if (baton__reduce_stream(BATON_FLOAT16, BATON_SUM, 2, d, 2, s, 2, 64, 1, &first))
    REPORT("FAIL reduce_stream: fused a float16 sum\n");
  d[0] = (char *)out[0] + 2; /* half an element from a line */
  if (baton__reduce_stream(BATON_FLOAT32, BATON_SUM, 4, d, 1, s, 2, 64, 1, &first))
    REPORT("FAIL reduce_stream: fused outputs that split an element at the line\n");
  end_check();
}

/* In place, as direct's allreduce has it: output j is input j, each read
 * before its line is written. */
static void stream_inplace_case(baton_dtype_t t, int nsrc, size_t n, size_t ofs, int streaming) {
  enum { MAXB = 8 };
  size_t es = info[t].size, bytes = ((n + ofs) * es + 127) / 64 * 64;
  char *buf[MAXB], *d[MAXB], what[128];
  const char *s[MAXB];
  snprintf(what, sizeof what, "reduce_stream in place %s nsrc=%d n=%zu +%zu %s", info[t].name, nsrc,
           n, ofs, streaming ? "streaming" : "plain");
  begin_check();
  char *ref = xmalloc(n * es + 1), *orig = xmalloc(n * es + 1);
  baton__reduce_fn fn = baton__reduce_get(t, BATON_SUM);
  for (int q = 0; q < nsrc; q++) {
    buf[q] = xaligned(bytes);
    for (size_t i = 0; i < n + ofs; i++)
      st(t, buf[q], i, gen(t));
    d[q] = buf[q] + ofs * es, s[q] = d[q];
    if (q == 0)
      memcpy(ref, s[0], n * es);
    else
      fn(ref, ref, s[q], n);
  }
  memcpy(orig, s[0], n * es);
  size_t first = 0,
         done = baton__reduce_stream(t, BATON_SUM, es, d, nsrc, s, nsrc, n, streaming, &first);
  for (int j = 0; j < nsrc; j++)
    for (size_t i = first; i < first + done; i++)
      expect(what, t, i, ld(t, d[j], i), ld(t, ref, i), 1);
  for (size_t i = 0; i < n && done; i++)
    if ((i < first || i >= first + done) && ld(t, d[0], i) != ld(t, orig, i)) {
      REPORT("FAIL %s: element %zu changed outside [%zu, +%zu)\n", what, i, first, done);
      break;
    }
  end_check();
  for (int q = 0; q < nsrc; q++)
    free(buf[q]);
  free(ref), free(orig);
}

static void test_stream(void) {
  static const baton_dtype_t types[] = {BATON_FLOAT32, BATON_FLOAT64, BATON_INT32,
                                        BATON_UINT32,  BATON_INT64,   BATON_UINT64};
  static const size_t lens[] = {1, 15, 16, 17, 40, 1000, 1027};
  static const int nsrcs[] = {2, 3, 5, 8}, ndsts[] = {1, 2, 8};
  for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
    for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++)
      for (size_t a = 0; a < sizeof nsrcs / sizeof nsrcs[0]; a++)
        for (size_t b = 0; b < sizeof ndsts / sizeof ndsts[0]; b++)
          for (size_t dofs = 0; dofs < 6; dofs += 5)
            for (int streaming = 0; streaming < 2; streaming++)
              stream_case(types[t], nsrcs[a], ndsts[b], lens[l], dofs, streaming);
  for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
    for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++)
      for (size_t a = 0; a < sizeof nsrcs / sizeof nsrcs[0]; a++)
        for (int streaming = 0; streaming < 2; streaming++)
          stream_inplace_case(types[t], nsrcs[a], lens[l], 3, streaming);
  stream_refusals();
}

/* ---------------------------------------------------------- benchmark */

/* GB/s of one kernel on n elements in place: the best of 7 runs, each of
 * enough calls to take about 10 ms. */
static double bench_kernel(baton__reduce_fn fn, char *a, const char *b, size_t n, size_t es) {
  int calls = 1;
  for (double t = 0; t < 0.01; calls *= 2) {
    double t0 = baton__now();
    for (int i = 0; i < calls; i++)
      fn(a, a, b, n);
    t = baton__now() - t0;
  }
  double best = 1e30;
  for (int r = 0; r < 7; r++) {
    double t0 = baton__now();
    for (int i = 0; i < calls; i++)
      fn(a, a, b, n);
    double t = (baton__now() - t0) / calls;
    best = t < best ? t : best;
  }
  return (double)(n * es) / best / 1e9;
}

static int bench(size_t bytes) {
  static const char *const tiers[] = {"base", "avx2", "avx512"};
  char *a = xmalloc(bytes), *b = xmalloc(bytes);
  int have[3];
  for (int tier = 0; tier < 3; tier++)
    have[tier] = baton__reduce_cap_tier(tier) == tier;
  printf("# reduction kernels in place, %zu bytes per operand, GB/s of the result\n", bytes);
  printf("%-9s %-5s", "dtype", "op");
  for (int tier = 0; tier < 3; tier++)
    if (have[tier])
      printf(" %8s", tiers[tier]);
  printf("\n");
  for (int t = 0; t < BATON_DTYPE_COUNT; t++)
    for (int op = 0; op < BATON_OP_COUNT; op++) {
      size_t es = info[t].size, n = bytes / es;
      if (op == BATON_AVG || !valid_pair(t, op)) /* AVG's kernel is SUM */
        continue;
      printf("%-9s %-5s", info[t].name, op_names[op]);
      for (int tier = 0; tier < 3; tier++) {
        if (!have[tier])
          continue;
        baton__reduce_cap_tier(tier);
        for (size_t i = 0; i < n; i++) /* small values: no NaN, no denormal */
          st(t, a, i, gen(t) & 0x3), st(t, b, i, i % 3 ? 1 : 0);
        printf(" %8.1f", bench_kernel(baton__reduce_get(t, op), a, b, n, es));
      }
      printf("\n");
      fflush(stdout);
    }
  baton__reduce_cap_tier(2);
  free(a), free(b);
  return 0;
}

int main(int argc, char **argv) {
  static const char *const tiers[] = {"[base] ", "[avx2] ", "[avx512] "};
  if (argc >= 2 && strcmp(argv[1], "--bench") == 0)
    return bench(argc >= 3 ? (size_t)strtoull(argv[2], NULL, 0) : 65536);
  test_conversions();
  for (int tier = 0; tier < 3; tier++) {
    if (baton__reduce_cap_tier(tier) != tier) {
      printf("note: this CPU lacks the %skernels, not tested\n", tiers[tier]);
      continue;
    }
    tier_label = tiers[tier];
    test_table();
    test_kernels();
    test_wraparound();
    test_bitwise();
    test_bool_bytes();
    test_minmax_specials();
    test_minmax_order();
    test_avg_div();
    test_half_kernels();
  }
  baton__reduce_cap_tier(2);
  tier_label = "";
  test_stream();
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
