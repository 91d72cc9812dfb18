/*
 * test_api.c - argument validation and the small public functions. Run it
 * under `baton-run -n 1` or `-n 2`.
 *
 * Bad arguments must be rejected locally with BATON_EINVAL, before any
 * communication, and baton_comm_last_error() must name the argument; so
 * every rank makes the same invalid calls and then the same valid ones,
 * and the communicator must still work afterwards. baton_comm_init() is
 * checked with a broken environment in forked children, which cannot
 * disturb the parent's communicator and are killed if they hang.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "baton.h"
#include "common.h"

#define BAD_DTYPE_HI ((baton_dtype_t)99)
#define BAD_DTYPE_LO ((baton_dtype_t)-1)
#define BAD_OP_HI ((baton_op_t)99)
#define BAD_OP_LO ((baton_op_t)-1)

static tally_t T;

static int check(int ok, const char *what) {
  if (!ok)
    tally_say(&T, "%s", what);
  return tally_record(&T, ok);
}

/* --------------------------------------------------- strings and names */

/* Every code of the list in baton.h, with its name and text. */
typedef struct {
  int code;
  const char *name, *msg;
} code_t;

#define CODE_ROW(name, value, msg) {BATON_##name, "BATON_" #name, msg},
static const code_t codes[] = {{BATON_OK, "BATON_OK", NULL}, BATON_ERRNO_MAP(CODE_ROW)};
#undef CODE_ROW
enum { NCODES = sizeof codes / sizeof codes[0] };

static void test_strerror(void) {
  int ok = 1;
  for (int i = 0; i < NCODES; i++) {
    const char *s = baton_strerror(codes[i].code);
    const char *name = baton_err_name(codes[i].code);
    ok &= s && *s && (!codes[i].msg || strcmp(s, codes[i].msg) == 0) && name &&
          strcmp(name, codes[i].name) == 0;
    for (int j = 0; ok && j < i; j++)
      ok &= strcmp(s, baton_strerror(codes[j].code)) != 0;
  }
  check(ok, "baton_strerror/baton_err_name: NULL, empty, duplicate, or not "
            "the text and name of BATON_ERRNO_MAP");
  static const int unknown[] = {1, -99, -1000, 12345, INT32_MIN};
  for (int i = 0; i < 5; i++) {
    const char *s = baton_strerror(unknown[i]);
    const char *name = baton_err_name(unknown[i]);
    int fine = s && *s && name && *name;
    for (int j = 0; fine && j < NCODES; j++)
      fine = strcmp(s, baton_strerror(codes[j].code)) != 0 && strcmp(name, codes[j].name) != 0;
    check(fine, "baton_strerror/baton_err_name of an unknown code: NULL, "
                "empty or the text of a known code");
  }
}

static void test_dtype_names(void) {
  static const size_t sizes[BATON_DTYPE_COUNT] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8, 2, 2, 1};
  int ok = 1;
  for (int d = 0; d < BATON_DTYPE_COUNT; d++) {
    const char *s = baton_dtype_name((baton_dtype_t)d);
    ok &= baton_dtype_size((baton_dtype_t)d) == sizes[d] && s && strcmp(s, "unknown") != 0;
    for (int e = 0; ok && e < d; e++)
      ok &= strcmp(s, baton_dtype_name((baton_dtype_t)e)) != 0;
  }
  check(ok, "baton_dtype_size/baton_dtype_name wrong for a valid dtype");
  check(strcmp(baton_dtype_name(BATON_FLOAT32), "float32") == 0 &&
            strcmp(baton_op_name(BATON_SUM), "sum") == 0,
        "baton_dtype_name(BATON_FLOAT32) != \"float32\" or "
        "baton_op_name(BATON_SUM) != \"sum\"");
  check(baton_dtype_size(BAD_DTYPE_HI) == 0 && baton_dtype_size(BAD_DTYPE_LO) == 0 &&
            strcmp(baton_dtype_name(BAD_DTYPE_HI), "unknown") == 0 &&
            strcmp(baton_dtype_name(BAD_DTYPE_LO), "unknown") == 0 &&
            strcmp(baton_op_name(BAD_OP_HI), "unknown") == 0 &&
            strcmp(baton_op_name(BAD_OP_LO), "unknown") == 0,
        "out-of-range dtype/op: size not 0 or name not \"unknown\"");
  ok = 1;
  for (int o = 0; o < BATON_OP_COUNT; o++)
    for (int p = 0; p < o; p++)
      ok &= strcmp(baton_op_name((baton_op_t)o), baton_op_name((baton_op_t)p)) != 0;
  check(ok, "baton_op_name: two ops share a name");
  /* The enums grew at their ends: the values of the older ones stay. */
  check(BATON_FLOAT64 == 9 && BATON_INT16 == 10 && BATON_UINT16 == 11 && BATON_BOOL == 12 &&
            BATON_AVG == 4 && BATON_BAND == 5 && BATON_BOR == 6 && BATON_BXOR == 7,
        "the values of baton_dtype_t or baton_op_t moved");
  check(strcmp(baton_dtype_name(BATON_INT16), "int16") == 0 &&
            strcmp(baton_dtype_name(BATON_UINT16), "uint16") == 0 &&
            strcmp(baton_dtype_name(BATON_BOOL), "bool") == 0 &&
            strcmp(baton_op_name(BATON_BAND), "band") == 0 &&
            strcmp(baton_op_name(BATON_BOR), "bor") == 0 &&
            strcmp(baton_op_name(BATON_BXOR), "bxor") == 0,
        "the names of int16, uint16, bool, band, bor or bxor are wrong");
}

static void test_params_describe(void) {
  const char *d = baton_params_describe();
  check(d && strstr(d, "BATON_TIMEOUT") && strstr(d, "BATON_SEGMENT_BYTES") &&
            strstr(d, "BATON_SECRET"),
        "baton_params_describe does not list BATON_TIMEOUT, BATON_SEGMENT_BYTES and "
        "BATON_SECRET");
  check(d == baton_params_describe(), "baton_params_describe: not the same text twice");
}

/* ------------------------------------------------------------ the comm */

static void test_comm_queries(void) {
  const char *r = getenv("BATON_RANK"), *s = getenv("BATON_SIZE");
  check(r && s && baton_comm_rank(T.comm) == atoi(r) && baton_comm_size(T.comm) == atoi(s),
        "baton_comm_rank/size disagree with BATON_RANK/BATON_SIZE");
  check(baton_comm_rank(NULL) == -1 && baton_comm_size(NULL) == -1,
        "baton_comm_rank/size(NULL) is not -1");
  check(baton_comm_last_error(NULL) != NULL, "baton_comm_last_error(NULL) is NULL");
  const char *e = baton_comm_last_error(T.comm);
  check(e && *e == '\0', "baton_comm_last_error is not \"\" before any failure");
  check(baton_comm_destroy(NULL) == BATON_OK, "baton_comm_destroy(NULL) failed");
}

/*
 * One invalid call: it must return BATON_EINVAL and the comm's last error
 * must mention `word`, the argument at fault.
 */
static void expect_einval(int rc, const char *call, const char *word) {
  const char *e = baton_comm_last_error(T.comm);
  int ok = rc == BATON_EINVAL && e && strstr(e, word);
  if (!ok)
    tally_say(&T,
              "%s: returned %s, last error \"%s\"; expected BATON_EINVAL "
              "naming '%s'",
              call, baton_err_name(rc), e ? e : "(null)", word);
  tally_record(&T, ok);
}

/* Like expect_einval, naming both words: an op and a dtype that do not go
 * together. */
static void expect_einval2(int rc, const char *call, const char *w1, const char *w2) {
  const char *e = baton_comm_last_error(T.comm);
  int ok = rc == BATON_EINVAL && e && strstr(e, w1) && strstr(e, w2);
  if (!ok)
    tally_say(&T, "%s: returned %s, last error \"%s\"; expected BATON_EINVAL naming '%s' and '%s'",
              call, baton_err_name(rc), e ? e : "(null)", w1, w2);
  tally_record(&T, ok);
}

/* A NULL comm must be rejected without being dereferenced. */
static void expect_null_comm(int rc, const char *call) { check(rc == BATON_EINVAL, call); }

static void test_allreduce_args(void) {
  float a[4] = {0}, b[4];
  baton_comm_t *c = T.comm;
  expect_einval(baton_allreduce(NULL, b, 4, BATON_FLOAT32, BATON_SUM, c), "allreduce(sendbuf NULL)",
                "sendbuf");
  expect_einval(baton_allreduce(a, NULL, 4, BATON_FLOAT32, BATON_SUM, c), "allreduce(recvbuf NULL)",
                "recvbuf");
  expect_einval(baton_allreduce(a, b, 4, BAD_DTYPE_HI, BATON_SUM, c), "allreduce(dtype 99)",
                "dtype");
  expect_einval(baton_allreduce(a, b, 4, BAD_DTYPE_LO, BATON_SUM, c), "allreduce(dtype -1)",
                "dtype");
  expect_einval(baton_allreduce(a, b, 0, BAD_DTYPE_HI, BATON_SUM, c),
                "allreduce(count 0, dtype 99)", "dtype");
  expect_einval(baton_allreduce(a, b, 4, BATON_FLOAT32, BAD_OP_HI, c), "allreduce(op 99)", "op");
  expect_einval(baton_allreduce(a, b, 4, BATON_FLOAT32, BAD_OP_LO, c), "allreduce(op -1)", "op");
  expect_einval(baton_allreduce(a, b, 0, BATON_FLOAT32, BAD_OP_HI, c), "allreduce(count 0, op 99)",
                "op");
  expect_einval(baton_allreduce(a, b, SIZE_MAX / 2, BATON_FLOAT32, BATON_SUM, c),
                "allreduce(count SIZE_MAX/2 float32)", "count");
  expect_null_comm(baton_allreduce(a, b, 4, BATON_FLOAT32, BATON_SUM, NULL),
                   "allreduce(comm NULL) did not return BATON_EINVAL");
}

/*
 * The bitwise ops with a float dtype, and bool's average: BATON_EINVAL from
 * every reducing call, naming the op and the dtype, even for count 0, and
 * an i-call makes no request. The valid pairs next to them still work.
 */
static void test_op_dtype_pairs(void) {
  static const baton_dtype_t floats[] = {BATON_FLOAT16, BATON_BFLOAT16, BATON_FLOAT32,
                                         BATON_FLOAT64};
  static const baton_op_t bitwise[] = {BATON_BAND, BATON_BOR, BATON_BXOR};
  baton_comm_t *c = T.comm;
  double a[8] = {0}, b[8];
  size_t counts[16];
  for (int r = 0; r < 16; r++)
    counts[r] = 1;
  char what[96];
  for (int f = 0; f < 4; f++)
    for (int o = 0; o < 3; o++) {
      const char *dn = baton_dtype_name(floats[f]), *on = baton_op_name(bitwise[o]);
      snprintf(what, sizeof what, "allreduce(%s, %s)", dn, on);
      expect_einval2(baton_allreduce(a, b, 4, floats[f], bitwise[o], c), what, on, dn);
      snprintf(what, sizeof what, "allreduce(count 0, %s, %s)", dn, on);
      expect_einval2(baton_allreduce(a, b, 0, floats[f], bitwise[o], c), what, on, dn);
    }
  expect_einval2(baton_reduce_scatter(a, b, 1, BATON_FLOAT32, BATON_BAND, c),
                 "reduce_scatter(float32, band)", "band", "float32");
  expect_einval2(baton_reduce(a, b, 1, BATON_BFLOAT16, BATON_BXOR, 0, c), "reduce(bfloat16, bxor)",
                 "bxor", "bfloat16");
  if (T.size <= 16)
    expect_einval2(baton_reduce_scatterv(a, b, counts, BATON_FLOAT64, BATON_BOR, c),
                   "reduce_scatterv(float64, bor)", "bor", "float64");
  baton_request_t *req = (baton_request_t *)&req;
  expect_einval2(baton_iallreduce(a, b, 4, BATON_FLOAT16, BATON_BAND, c, &req),
                 "iallreduce(float16, band)", "band", "float16");
  check(req == NULL, "iallreduce(float16, band): *req is not NULL");
  expect_einval2(baton_allreduce(a, b, 4, BATON_BOOL, BATON_AVG, c), "allreduce(bool, avg)", "avg",
                 "bool");
  /* The valid neighbours: bitwise on integers, bool's or, int16's average. */
  int16_t s[2] = {(int16_t)(0x0f0f | T.rank << 4), -1}, t[2];
  int ok =
      tally_rc(&T, baton_allreduce(s, t, 2, BATON_INT16, BATON_BAND, c), "allreduce(int16, band)");
  check(ok && t[0] == 0x0f0f && t[1] == -1, "allreduce(int16, band): wrong result");
  uint8_t yes[2] = {(uint8_t)(T.rank == 0 ? 7 : 0), 0}, got[2];
  ok = tally_rc(&T, baton_allreduce(yes, got, 2, BATON_BOOL, BATON_SUM, c), "allreduce(bool, sum)");
  check(ok && got[0] == 1 && got[1] == 0, "allreduce(bool, sum): not 1 and 0");
  uint16_t u[1] = {(uint16_t)(60000 + T.rank)}, v[1];
  ok = tally_rc(&T, baton_allreduce(u, v, 1, BATON_UINT16, BATON_MAX, c), "allreduce(uint16, max)");
  check(ok && v[0] == 60000 + T.size - 1, "allreduce(uint16, max): wrong result");
}

/*
 * reduce_scatter's send buffer is size * recvcount elements, so a recvcount
 * whose own byte size fits can still overflow once multiplied by the size:
 * 2^61 float32 are 2^63 bytes, times 2 ranks is 2^64.
 */
static void test_reduce_scatter_args(void) {
  float a[8] = {0}, b[4];
  baton_comm_t *c = T.comm;
  expect_einval(baton_reduce_scatter(NULL, b, 4, BATON_FLOAT32, BATON_SUM, c),
                "reduce_scatter(sendbuf NULL)", "sendbuf");
  expect_einval(baton_reduce_scatter(a, NULL, 4, BATON_FLOAT32, BATON_SUM, c),
                "reduce_scatter(recvbuf NULL)", "recvbuf");
  expect_einval(baton_reduce_scatter(a, b, 4, BAD_DTYPE_HI, BATON_SUM, c),
                "reduce_scatter(dtype 99)", "dtype");
  expect_einval(baton_reduce_scatter(a, b, 4, BAD_DTYPE_LO, BATON_SUM, c),
                "reduce_scatter(dtype -1)", "dtype");
  expect_einval(baton_reduce_scatter(a, b, 4, BATON_FLOAT32, BAD_OP_HI, c), "reduce_scatter(op 99)",
                "op");
  expect_einval(baton_reduce_scatter(a, b, 4, BATON_FLOAT32, BAD_OP_LO, c), "reduce_scatter(op -1)",
                "op");
  expect_einval(baton_reduce_scatter(a, b, 0, BAD_DTYPE_HI, BATON_SUM, c),
                "reduce_scatter(count 0, dtype 99)", "dtype");
  expect_einval(baton_reduce_scatter(a, b, 0, BATON_FLOAT32, BAD_OP_HI, c),
                "reduce_scatter(count 0, op 99)", "op");
  expect_einval(baton_reduce_scatter(a, b, SIZE_MAX / 2, BATON_FLOAT32, BATON_SUM, c),
                "reduce_scatter(recvcount SIZE_MAX/2 float32)", "count");
  if (T.size >= 2)
    expect_einval(baton_reduce_scatter(a, b, (size_t)1 << 61, BATON_FLOAT32, BATON_SUM, c),
                  "reduce_scatter(recvcount 2^61 float32, size*bytes overflows)", "count");
  expect_null_comm(baton_reduce_scatter(a, b, 4, BATON_FLOAT32, BATON_SUM, NULL),
                   "reduce_scatter(comm NULL) did not return BATON_EINVAL");
}

static void test_allgather_args(void) {
  float a[4] = {0}, b[8];
  baton_comm_t *c = T.comm;
  expect_einval(baton_allgather(NULL, b, 4, BATON_FLOAT32, c), "allgather(sendbuf NULL)",
                "sendbuf");
  expect_einval(baton_allgather(a, NULL, 4, BATON_FLOAT32, c), "allgather(recvbuf NULL)",
                "recvbuf");
  expect_einval(baton_allgather(a, b, 4, BAD_DTYPE_HI, c), "allgather(dtype 99)", "dtype");
  expect_einval(baton_allgather(a, b, 4, BAD_DTYPE_LO, c), "allgather(dtype -1)", "dtype");
  expect_einval(baton_allgather(a, b, 0, BAD_DTYPE_HI, c), "allgather(count 0, dtype 99)", "dtype");
  expect_einval(baton_allgather(a, b, SIZE_MAX / 2, BATON_FLOAT32, c),
                "allgather(sendcount SIZE_MAX/2 float32)", "count");
  if (T.size >= 2)
    expect_einval(baton_allgather(a, b, (size_t)1 << 61, BATON_FLOAT32, c),
                  "allgather(sendcount 2^61 float32, size*bytes overflows)", "count");
  expect_null_comm(baton_allgather(a, b, 4, BATON_FLOAT32, NULL),
                   "allgather(comm NULL) did not return BATON_EINVAL");
  expect_null_comm(baton_barrier(NULL), "barrier(comm NULL) did not return BATON_EINVAL");
}

static void test_broadcast_args(void) {
  float a[4] = {0}, b[4];
  baton_comm_t *c = T.comm;
  expect_einval(baton_broadcast(NULL, b, 4, BATON_FLOAT32, T.rank, c),
                "broadcast(sendbuf NULL on the root)", "sendbuf");
  expect_einval(baton_broadcast(a, NULL, 4, BATON_FLOAT32, 0, c), "broadcast(recvbuf NULL)",
                "recvbuf");
  expect_einval(baton_broadcast(a, b, 4, BAD_DTYPE_HI, 0, c), "broadcast(dtype 99)", "dtype");
  expect_einval(baton_broadcast(a, b, 4, BAD_DTYPE_LO, 0, c), "broadcast(dtype -1)", "dtype");
  expect_einval(baton_broadcast(a, b, 0, BAD_DTYPE_HI, 0, c), "broadcast(count 0, dtype 99)",
                "dtype");
  expect_einval(baton_broadcast(a, b, 4, BATON_FLOAT32, -1, c), "broadcast(root -1)", "root");
  expect_einval(baton_broadcast(a, b, 4, BATON_FLOAT32, T.size, c), "broadcast(root == size)",
                "root");
  expect_einval(baton_broadcast(a, b, 0, BATON_FLOAT32, T.size, c),
                "broadcast(count 0, root == size)", "root");
  expect_einval(baton_broadcast(a, b, SIZE_MAX / 2, BATON_FLOAT32, 0, c),
                "broadcast(count SIZE_MAX/2 float32)", "count");
  expect_null_comm(baton_broadcast(a, b, 4, BATON_FLOAT32, 0, NULL),
                   "broadcast(comm NULL) did not return BATON_EINVAL");
}

/* The rooted collectives of issue 4. A NULL buffer that only the root
 * touches is tested with every rank its own root, so that every rank
 * rejects the call. */
static void test_rooted_args(void) {
  float a[64] = {0}, b[64];
  baton_comm_t *c = T.comm;
  int me = T.rank;
  expect_einval(baton_reduce(a, b, 4, BATON_FLOAT32, BATON_SUM, -1, c), "reduce(root -1)", "root");
  expect_einval(baton_reduce(a, b, 0, BATON_FLOAT32, BATON_SUM, T.size, c),
                "reduce(count 0, root == size)", "root");
  expect_einval(baton_reduce(NULL, b, 4, BATON_FLOAT32, BATON_SUM, 0, c), "reduce(sendbuf NULL)",
                "sendbuf");
  expect_einval(baton_reduce(a, NULL, 4, BATON_FLOAT32, BATON_SUM, me, c),
                "reduce(recvbuf NULL on the root)", "recvbuf");
  expect_einval(baton_reduce(a, b, 4, BATON_FLOAT32, BAD_OP_HI, 0, c), "reduce(op 99)", "op");
  expect_einval(baton_reduce(a, b, 4, BAD_DTYPE_LO, BATON_SUM, 0, c), "reduce(dtype -1)", "dtype");
  expect_einval(baton_reduce(a, b, SIZE_MAX / 2, BATON_FLOAT32, BATON_SUM, 0, c),
                "reduce(count SIZE_MAX/2 float32)", "count");
  expect_einval(baton_gather(a, b, 1, BATON_FLOAT32, T.size, c), "gather(root == size)", "root");
  expect_einval(baton_gather(NULL, b, 1, BATON_FLOAT32, 0, c), "gather(sendbuf NULL)", "sendbuf");
  expect_einval(baton_gather(a, NULL, 1, BATON_FLOAT32, me, c), "gather(recvbuf NULL on the root)",
                "recvbuf");
  expect_einval(baton_gather(a, b, SIZE_MAX / 4, BATON_FLOAT32, 0, c),
                "gather(sendcount SIZE_MAX/4 float32)", "count");
  expect_einval(baton_scatter(a, b, 1, BATON_FLOAT32, -7, c), "scatter(root -7)", "root");
  expect_einval(baton_scatter(NULL, b, 1, BATON_FLOAT32, me, c),
                "scatter(sendbuf NULL on the root)", "sendbuf");
  expect_einval(baton_scatter(a, NULL, 1, BATON_FLOAT32, 0, c), "scatter(recvbuf NULL)", "recvbuf");
  expect_einval(baton_scatter(a, b, 1, BAD_DTYPE_HI, 0, c), "scatter(dtype 99)", "dtype");
  expect_null_comm(baton_reduce(a, b, 4, BATON_FLOAT32, BATON_SUM, 0, NULL),
                   "reduce(comm NULL) did not return BATON_EINVAL");
  expect_null_comm(baton_gather(a, b, 4, BATON_FLOAT32, 0, NULL),
                   "gather(comm NULL) did not return BATON_EINVAL");
  expect_null_comm(baton_scatter(a, b, 4, BATON_FLOAT32, 0, NULL),
                   "scatter(comm NULL) did not return BATON_EINVAL");
}

/* alltoall and the v-variants: counts and displacements are checked before
 * anything moves. */
static void test_alltoall_v_args(void) {
  float a[64] = {0}, b[64];
  baton_comm_t *c = T.comm;
  size_t counts[16], displs[16], huge[16];
  int n = T.size < 16 ? T.size : 16;
  for (int r = 0; r < n; r++) {
    counts[r] = 1;
    displs[r] = (size_t)r;
    huge[r] = SIZE_MAX / 4;
  }
  expect_einval(baton_alltoall(NULL, b, 1, BATON_FLOAT32, c), "alltoall(sendbuf NULL)", "sendbuf");
  expect_einval(baton_alltoall(a, NULL, 1, BATON_FLOAT32, c), "alltoall(recvbuf NULL)", "recvbuf");
  expect_einval(baton_alltoall(a, b, SIZE_MAX / 4, BATON_FLOAT32, c),
                "alltoall(count SIZE_MAX/4 float32)", "count");
  expect_null_comm(baton_alltoall(a, b, 1, BATON_FLOAT32, NULL),
                   "alltoall(comm NULL) did not return BATON_EINVAL");
  if (T.size > 16)
    return; /* the arrays above hold 16 ranks */
  expect_einval(baton_allgatherv(a, 1, b, NULL, displs, BATON_FLOAT32, c),
                "allgatherv(recvcounts NULL)", "recvcounts");
  expect_einval(baton_allgatherv(a, 0, b, NULL, displs, BATON_FLOAT32, c),
                "allgatherv(sendcount 0, recvcounts NULL)", "recvcounts");
  expect_einval(baton_allgatherv(a, 1, b, counts, NULL, BATON_FLOAT32, c),
                "allgatherv(displs NULL)", "displs");
  expect_einval(baton_allgatherv(a, 2, b, counts, displs, BATON_FLOAT32, c),
                "allgatherv(sendcount 2, recvcounts[rank] 1)", "sendcount");
  expect_einval(baton_allgatherv(NULL, 1, b, counts, displs, BATON_FLOAT32, c),
                "allgatherv(sendbuf NULL)", "sendbuf");
  expect_einval(baton_allgatherv(a, 1, NULL, counts, displs, BATON_FLOAT32, c),
                "allgatherv(recvbuf NULL)", "recvbuf");
  size_t far[16];
  for (int r = 0; r < n; r++)
    far[r] = SIZE_MAX - 1;
  expect_einval(baton_allgatherv(a, 1, b, counts, far, BATON_FLOAT32, c),
                "allgatherv(displs SIZE_MAX - 1)", "overflows");
  expect_einval(baton_reduce_scatterv(a, b, NULL, BATON_FLOAT32, BATON_SUM, c),
                "reduce_scatterv(recvcounts NULL)", "recvcounts");
  expect_einval(baton_reduce_scatterv(a, b, huge, BATON_FLOAT32, BATON_SUM, c),
                "reduce_scatterv(recvcounts SIZE_MAX/4 each)", "overflows");
  expect_einval(baton_reduce_scatterv(a, b, counts, BATON_FLOAT32, BAD_OP_LO, c),
                "reduce_scatterv(op -1)", "op");
  expect_einval(baton_reduce_scatterv(NULL, b, counts, BATON_FLOAT32, BATON_SUM, c),
                "reduce_scatterv(sendbuf NULL)", "sendbuf");
  expect_einval(baton_reduce_scatterv(a, NULL, counts, BATON_FLOAT32, BATON_SUM, c),
                "reduce_scatterv(recvbuf NULL)", "recvbuf");
  expect_null_comm(baton_allgatherv(a, 1, b, counts, displs, BATON_FLOAT32, NULL),
                   "allgatherv(comm NULL) did not return BATON_EINVAL");
  expect_null_comm(baton_reduce_scatterv(a, b, counts, BATON_FLOAT32, BATON_SUM, NULL),
                   "reduce_scatterv(comm NULL) did not return BATON_EINVAL");
}

/* The new collectives still work after the rejected calls: count 0 with
 * NULL buffers, and the buffers only the root uses left NULL elsewhere.
 * gather and scatter may have no algorithm yet: BATON_EUSAGE saying so
 * is then a pass, as test_coll skips them. */
static void test_valid_new_calls(void) {
  baton_comm_t *c = T.comm;
  int n = T.size, rank = T.rank, root = n - 1;
  static const size_t zeros[16];
  tally_record(&T, tally_rc(&T, baton_reduce(NULL, NULL, 0, BATON_INT32, BATON_SUM, 0, c),
                            "reduce(NULL, NULL, count 0)"));
  tally_record(&T, tally_rc(&T, baton_alltoall(NULL, NULL, 0, BATON_INT32, c),
                            "alltoall(NULL, NULL, count 0)"));
  tally_record(&T, tally_rc(&T, baton_gather(NULL, NULL, 0, BATON_INT32, 0, c),
                            "gather(NULL, NULL, count 0)"));
  tally_record(&T, tally_rc(&T, baton_scatter(NULL, NULL, 0, BATON_INT32, 0, c),
                            "scatter(NULL, NULL, count 0)"));
  if (n <= 16) {
    tally_record(&T, tally_rc(&T, baton_allgatherv(NULL, 0, NULL, zeros, zeros, BATON_INT32, c),
                              "allgatherv(all counts 0)"));
    tally_record(&T,
                 tally_rc(&T, baton_reduce_scatterv(NULL, NULL, zeros, BATON_INT32, BATON_SUM, c),
                          "reduce_scatterv(all counts 0)"));
  }
  int64_t mine[2] = {rank + 1, -2}, sum[2] = {0, 0};
  int ok = tally_rc(
      &T, baton_reduce(mine, rank == root ? sum : NULL, 2, BATON_INT64, BATON_SUM, root, c),
      "reduce(recvbuf NULL off the root)");
  check(ok && (rank != root || (sum[0] == (int64_t)n * (n + 1) / 2 && sum[1] == -2 * n)),
        "reduce after invalid calls: wrong result");
  int64_t *all = calloc((size_t)n, sizeof *all), got = -1;
  int rc = baton_gather(&mine[0], rank == root ? all : NULL, 1, BATON_INT64, root, c);
  if (!(rc == BATON_EUSAGE && strstr(baton_comm_last_error(c), "no algorithm"))) {
    ok = tally_rc(&T, rc, "gather(recvbuf NULL off the root)");
    for (int r = 0; ok && rank == root && r < n; r++)
      ok = all[r] == r + 1;
    check(ok, "gather after invalid calls: wrong result");
    ok = tally_rc(&T, baton_scatter(rank == root ? all : NULL, &got, 1, BATON_INT64, root, c),
                  "scatter(sendbuf NULL off the root)");
    check(ok && got == rank + 1, "scatter after invalid calls: wrong result");
  }
  free(all);
}

/* After all the rejected calls, the same collectives must work: count 0
 * with NULL buffers, then a real allreduce, allgather and barrier. */
static void test_valid_calls(void) {
  baton_comm_t *c = T.comm;
  int n = T.size, rank = T.rank;
  tally_record(&T, tally_rc(&T, baton_allreduce(NULL, NULL, 0, BATON_INT32, BATON_SUM, c),
                            "allreduce(NULL, NULL, count 0)"));
  tally_record(&T, tally_rc(&T, baton_reduce_scatter(NULL, NULL, 0, BATON_INT32, BATON_SUM, c),
                            "reduce_scatter(NULL, NULL, count 0)"));
  tally_record(&T, tally_rc(&T, baton_allgather(NULL, NULL, 0, BATON_INT32, c),
                            "allgather(NULL, NULL, count 0)"));
  int32_t v[3] = {rank + 1, -rank, 7}, w[3] = {0};
  int ok = tally_rc(&T, baton_allreduce(v, w, 3, BATON_INT32, BATON_SUM, c),
                    "allreduce after invalid calls");
  check(ok && w[0] == n * (n + 1) / 2 && w[1] == -n * (n - 1) / 2 && w[2] == 7 * n,
        "allreduce after invalid calls: wrong result");
  int64_t mine = 1000 + rank, *all = calloc((size_t)n, sizeof *all);
  ok =
      tally_rc(&T, baton_allgather(&mine, all, 1, BATON_INT64, c), "allgather after invalid calls");
  for (int r = 0; ok && r < n; r++)
    ok = all[r] == 1000 + r;
  check(ok, "allgather after invalid calls: wrong result");
  free(all);
  /* Only the root reads sendbuf: the others may pass NULL. */
  int64_t b[2] = {0, 0}, src[2] = {-5, 1LL << 40};
  ok = tally_rc(&T, baton_broadcast(rank == n - 1 ? src : NULL, b, 2, BATON_INT64, n - 1, c),
                "broadcast(sendbuf NULL off the root)");
  check(ok && b[0] == -5 && b[1] == 1LL << 40, "broadcast after invalid calls: wrong result");
  tally_record(&T, tally_rc(&T, baton_barrier(c), "barrier after invalid calls"));
}

/* ------------------------------------------------ init in a child process */

typedef struct {
  const char *what;
  const char *var, *value; /* value NULL: unset var */
  int expect_rc;
  const char *word;     /* baton_last_init_error() must contain it */
  int null_arg;         /* call baton_comm_init(NULL) */
  int real_store;       /* keep the job's BATON_ADDR: the parent's store answers */
  const char *not_word; /* ... and must not contain it (a secret) */
} init_case_t;

/*
 * In the child: a rank 1 of 2 whose store address, 127.0.0.1:1, has no
 * server, so even an environment wrongly accepted can only time out (after
 * BATON_TIMEOUT=2 s) and never reaches the parent's real store. Then the
 * case's change, then baton_comm_init(). Exit status 0 means it passed.
 */
static void init_child(const init_case_t *k) {
  alarm(20); /* a hung child dies and the parent reports it */
  /* baton-run also sets torchrun's variables (env://); these cases are
   * about BATON_* alone (test_launch_env.sh covers the others). */
  const char *launcher[] = {"RANK",        "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                            "MASTER_ADDR", "MASTER_PORT"};
  for (size_t i = 0; i < sizeof launcher / sizeof *launcher; i++)
    unsetenv(launcher[i]);
  setenv("BATON_RANK", "1", 1);
  setenv("BATON_SIZE", "2", 1);
  if (!k->real_store)
    setenv("BATON_ADDR", "127.0.0.1:1", 1);
  setenv("BATON_TIMEOUT", "2", 1);
  setenv("BATON_DEBUG", "NONE", 1);
  if (k->value)
    setenv(k->var, k->value, 1);
  else if (k->var)
    unsetenv(k->var);
  baton_comm_t *comm = (baton_comm_t *)&comm; /* must be reset to NULL */
  int rc = baton_comm_init(k->null_arg ? NULL : &comm);
  const char *e = baton_last_init_error();
  int ok = rc == k->expect_rc && (k->null_arg || comm == NULL) && e && *e && strstr(e, k->word) &&
           !(k->not_word && strstr(e, k->not_word));
  if (!ok)
    fprintf(stderr,
            "rank %d: baton_comm_init with %s: returned %s, comm %s, "
            "error \"%s\"; expected %s naming '%s'\n",
            T.rank, k->what, baton_err_name(rc), comm ? "not NULL" : "NULL", e ? e : "(null)",
            baton_err_name(k->expect_rc), k->word);
  _exit(ok ? 0 : 1); /* skip atexit handlers: they belong to the parent */
}

static void run_init_case(const init_case_t *k) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0)
    init_child(k);
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) {
    check(0, "fork/waitpid failed");
    return;
  }
  if (WIFSIGNALED(status))
    tally_say(&T, "baton_comm_init with %s: child killed by signal %d%s", k->what, WTERMSIG(status),
              WTERMSIG(status) == SIGALRM ? " (hung for 20 s)" : "");
  tally_record(&T, WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

#define X10 "xxxxxxxxxx"
#define X100 X10 X10 X10 X10 X10 X10 X10 X10 X10 X10
#define SECRET_300 X100 X100 X100

static void test_init_env(void) {
  static const init_case_t cases[] = {
      {"BATON_RANK unset", "BATON_RANK", NULL, BATON_EUSAGE, "BATON_RANK", 0, 0, NULL},
      {"BATON_RANK=abc", "BATON_RANK", "abc", BATON_EUSAGE, "BATON_RANK", 0, 0, NULL},
      {"BATON_RANK=5 of size 2", "BATON_RANK", "5", BATON_EUSAGE, "BATON_RANK", 0, 0, NULL},
      {"BATON_RANK=-1", "BATON_RANK", "-1", BATON_EUSAGE, "BATON_RANK", 0, 0, NULL},
      {"BATON_RANK=1x", "BATON_RANK", "1x", BATON_EUSAGE, "BATON_RANK", 0, 0, NULL},
      {"BATON_RANK empty", "BATON_RANK", "", BATON_EUSAGE, "BATON_RANK", 0, 0, NULL},
      {"BATON_SIZE unset", "BATON_SIZE", NULL, BATON_EUSAGE, "BATON_SIZE", 0, 0, NULL},
      {"BATON_SIZE=0", "BATON_SIZE", "0", BATON_EUSAGE, "BATON_SIZE", 0, 0, NULL},
      {"BATON_ADDR unset", "BATON_ADDR", NULL, BATON_EUSAGE, "BATON_ADDR", 0, 0, NULL},
      {"BATON_ADDR=nocolon", "BATON_ADDR", "nocolon", BATON_EUSAGE, "BATON_ADDR", 0, 0, NULL},
      {"BATON_TIMEOUT=abc", "BATON_TIMEOUT", "abc", BATON_EUSAGE, "BATON_TIMEOUT", 0, 0, NULL},
      {"BATON_SEGMENT_BYTES=abc", "BATON_SEGMENT_BYTES", "abc", BATON_EUSAGE, "BATON_SEGMENT_BYTES",
       0, 0, NULL},
      {"no store listening (BATON_TIMEOUT=2)", NULL, NULL, BATON_ETIMEDOUT, "", 0, 0, NULL},
      {"a NULL comm pointer", NULL, NULL, BATON_EINVAL, "comm", 1, 0, NULL},
      /* Every other knob, out of range or malformed. */
      {"BATON_SIZE=abc", "BATON_SIZE", "abc", BATON_EUSAGE, "BATON_SIZE", 0, 0, NULL},
      {"BATON_ADDR=:80", "BATON_ADDR", ":80", BATON_EUSAGE, "BATON_ADDR", 0, 0, NULL},
      {"BATON_ADDR=host:0", "BATON_ADDR", "host:0", BATON_EUSAGE, "BATON_ADDR", 0, 0, NULL},
      {"BATON_ADDR=::1:80", "BATON_ADDR", "::1:80", BATON_EUSAGE, "BATON_ADDR", 0, 0, NULL},
      {"BATON_TIMEOUT=0", "BATON_TIMEOUT", "0", BATON_EUSAGE, "BATON_TIMEOUT", 0, 0, NULL},
      {"BATON_TIMEOUT=-1", "BATON_TIMEOUT", "-1", BATON_EUSAGE, "BATON_TIMEOUT", 0, 0, NULL},
      {"BATON_DEBUG=LOUD", "BATON_DEBUG", "LOUD", BATON_EUSAGE, "BATON_DEBUG", 0, 0, NULL},
      {"BATON_DEBUG_SUBSYS=DISK", "BATON_DEBUG_SUBSYS", "DISK", BATON_EUSAGE, "BATON_DEBUG_SUBSYS",
       0, 0, NULL},
      {"BATON_DEBUG_SUBSYS empty", "BATON_DEBUG_SUBSYS", "", BATON_EUSAGE, "BATON_DEBUG_SUBSYS", 0,
       0, NULL},
      {"BATON_SEGMENT_BYTES=63", "BATON_SEGMENT_BYTES", "63", BATON_EUSAGE, "BATON_SEGMENT_BYTES",
       0, 0, NULL},
      {"BATON_SEGMENT_BYTES=128M", "BATON_SEGMENT_BYTES", "128M", BATON_EUSAGE,
       "BATON_SEGMENT_BYTES", 0, 0, NULL},
      {"BATON_SHM_SLOTS=3", "BATON_SHM_SLOTS", "3", BATON_EUSAGE, "BATON_SHM_SLOTS", 0, 0, NULL},
      {"BATON_SHM_SLOTS=2.5", "BATON_SHM_SLOTS", "2.5", BATON_EUSAGE, "BATON_SHM_SLOTS", 0, 0,
       NULL},
      {"BATON_SPIN_US=-2", "BATON_SPIN_US", "-2", BATON_EUSAGE, "BATON_SPIN_US", 0, 0, NULL},
      {"BATON_FLAT_BYTES=32M", "BATON_FLAT_BYTES", "32M", BATON_EUSAGE, "BATON_FLAT_BYTES", 0, 0,
       NULL},
      {"BATON_STREAM_BYTES=1X", "BATON_STREAM_BYTES", "1X", BATON_EUSAGE, "BATON_STREAM_BYTES", 0,
       0, NULL},
      {"BATON_SECRET of 300 bytes", "BATON_SECRET", SECRET_300, BATON_EUSAGE, "BATON_SECRET", 0, 0,
       "xxxxxxxx"},
      /* The job's real store, with the wrong secret and with none. */
      {"a wrong BATON_SECRET", "BATON_SECRET", "not-the-job-secret", BATON_EAUTH, "secret", 0, 1,
       "not-the-job-secret"},
      {"BATON_SECRET unset", "BATON_SECRET", NULL, BATON_EAUTH, "BATON_SECRET", 0, 1, NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    run_init_case(&cases[i]);
}

/* baton_comm_init_rank with a good id and bad arguments: BATON_EINVAL
 * naming the argument, *comm NULL. The last case adopts the id's store and
 * stops it, so nothing is left behind. */
static void test_init_rank_args(void) {
  baton_unique_id_t id;
  baton_comm_t *c = (baton_comm_t *)&c;
  /* The job's store holds BATON_ADDR's port: the id's store takes another. */
  int ok = baton_get_unique_id(&id) == BATON_OK;
  if (!ok)
    tally_say(&T, "baton_get_unique_id: %s", baton_last_init_error());
  if (!tally_record(&T, ok))
    return;
  static const struct {
    int size, rank;
    const char *word;
  } bad[] = {{0, 0, "size"}, {-1, 0, "size"}, {2, -1, "rank"}, {2, 2, "rank"}, {2, 5, "rank"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int rc = baton_comm_init_rank(&c, bad[i].size, &id, bad[i].rank);
    const char *e = baton_last_init_error();
    if (!tally_record(&T, rc == BATON_EINVAL && c == NULL && strstr(e, bad[i].word)))
      tally_say(&T,
                "baton_comm_init_rank(size %d, rank %d): %s, \"%s\"; want BATON_EINVAL "
                "naming %s",
                bad[i].size, bad[i].rank, baton_err_name(rc), e, bad[i].word);
  }
  int rc = baton_comm_init_rank(NULL, 1, &id, 0);
  if (!tally_record(&T, rc == BATON_EINVAL && strstr(baton_last_init_error(), "comm")))
    tally_say(&T, "baton_comm_init_rank(NULL comm): %s: %s", baton_err_name(rc),
              baton_last_init_error());
}

int main(void) {
  tally_init(&T);
  test_strerror();
  test_dtype_names();
  test_params_describe();
  test_comm_queries();
  test_allreduce_args();
  test_reduce_scatter_args();
  test_op_dtype_pairs();
  test_allgather_args();
  test_broadcast_args();
  test_rooted_args();
  test_alltoall_v_args();
  test_valid_calls();
  test_valid_new_calls();
  test_init_env();
  test_init_rank_args();
  return tally_finish(&T);
}
