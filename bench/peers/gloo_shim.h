/*
 * gloo_shim.h - the few Gloo calls gloo_bench.c makes, as C functions, so
 * that the benchmark stays the C code of tools/bench_common.h and only
 * gloo_shim.cc is C++. Every function returns 0, or -1 with the text of
 * Gloo's exception in gb_error().
 */
#ifndef GLOO_SHIM_H
#define GLOO_SHIM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { GB_INT32, GB_INT64, GB_FLOAT32, GB_FLOAT64 } gb_dtype_t;
typedef enum { GB_SUM, GB_PROD, GB_MIN, GB_MAX } gb_op_t;
/* ring: gloo::allreduce() with AllreduceOptions::Algorithm::RING (in and
 * out of place); hd: the class AllreduceHalvingDoubling (in place only);
 * bcube: AllreduceOptions::Algorithm::BCUBE. */
typedef enum { GB_RING, GB_HD, GB_BCUBE } gb_algo_t;

typedef struct gb_ctx gb_ctx_t;

/* Connects rank of size through a FileStore in store_dir, with the TCP
 * device bound to host; timeout_s bounds every later call. */
gb_ctx_t *gb_connect(int rank, int size, const char *store_dir, const char *host, double timeout_s);
void gb_close(gb_ctx_t *g);
const char *gb_error(void);

int gb_allreduce(gb_ctx_t *g, const void *send, void *recv, size_t count, gb_dtype_t dt, gb_op_t op,
                 gb_algo_t algo);
/* In place when send is NULL: rank r's part is already at recv + r parts. */
int gb_allgather(gb_ctx_t *g, const void *send, void *recv, size_t count, gb_dtype_t dt);
/* In place when send is NULL: the root's data are in recv. */
int gb_broadcast(gb_ctx_t *g, const void *send, void *recv, size_t count, gb_dtype_t dt, int root);
int gb_barrier(gb_ctx_t *g);
/* x[i] = MAX over ranks of x[i]; *n = SUM over ranks of *n. */
int gb_max_doubles(gb_ctx_t *g, double *x, size_t n);
int gb_sum_int64(gb_ctx_t *g, long long *n);

#ifdef __cplusplus
}
#endif

#endif /* GLOO_SHIM_H */
