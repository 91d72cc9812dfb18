// gloo_shim.cc - gloo_shim.h's functions over Gloo's C++ API: the TCP
// transport, a FileStore for the rendezvous, the ring and bcube allreduce
// of gloo::allreduce(), the class AllreduceHalvingDoubling, allgather,
// broadcast and barrier. Exceptions stop here and become -1 plus a text.
#include "gloo_shim.h"

#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

struct gb_ctx {
  std::shared_ptr<gloo::rendezvous::Context> ctx;
  // AllreduceHalvingDoubling connects its pairs when constructed, so one
  // object serves every call on the same buffer and count.
  std::map<std::pair<void *, size_t>, std::shared_ptr<gloo::Algorithm>> hd;
};

static std::string last_error;

const char *gb_error(void) { return last_error.c_str(); }

template <typename F> static int guarded(F &&f) {
  try {
    f();
    return 0;
  } catch (const std::exception &e) {
    last_error = e.what();
    return -1;
  }
}

gb_ctx_t *gb_connect(int rank, int size, const char *store_dir, const char *host,
                     double timeout_s) {
  gb_ctx_t *g = new gb_ctx_t;
  int rc = guarded([&] {
    gloo::transport::tcp::attr attr(host);
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(store_dir);
    g->ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
    g->ctx->setTimeout(std::chrono::milliseconds((long long)(timeout_s * 1e3)));
    g->ctx->connectFullMesh(store, dev);
  });
  if (rc != 0) {
    delete g;
    return nullptr;
  }
  return g;
}

void gb_close(gb_ctx_t *g) { delete g; }

template <typename T> static gloo::AllreduceOptions::Func reduce_fn(gb_op_t op) {
  void (*fns[])(void *, const void *, const void *, size_t) = {&gloo::sum<T>, &gloo::product<T>,
                                                               &gloo::min<T>, &gloo::max<T>};
  return fns[op];
}

template <typename T> static const gloo::ReductionFunction<T> *reduction(gb_op_t op) {
  const gloo::ReductionFunction<T> *fns[] = {
      gloo::ReductionFunction<T>::sum, gloo::ReductionFunction<T>::product,
      gloo::ReductionFunction<T>::min, gloo::ReductionFunction<T>::max};
  return fns[op];
}

template <typename T>
static void allreduce_t(gb_ctx_t *g, const void *send, void *recv, size_t count, gb_op_t op,
                        gb_algo_t algo) {
  if (algo == GB_HD) {
    auto &a = g->hd[{recv, count}];
    if (!a)
      a = std::make_shared<gloo::AllreduceHalvingDoubling<T>>(
          g->ctx, std::vector<T *>{static_cast<T *>(recv)}, (int)count, reduction<T>(op));
    if (send && send != recv)
      throw std::runtime_error("halving-doubling runs in place only");
    a->run();
    return;
  }
  gloo::AllreduceOptions opts(g->ctx);
  opts.setAlgorithm(algo == GB_BCUBE ? gloo::AllreduceOptions::Algorithm::BCUBE
                                     : gloo::AllreduceOptions::Algorithm::RING);
  if (send && send != recv)
    opts.setInput(static_cast<T *>(const_cast<void *>(send)), count);
  opts.setOutput(static_cast<T *>(recv), count);
  opts.setReduceFunction(reduce_fn<T>(op));
  gloo::allreduce(opts);
}

int gb_allreduce(gb_ctx_t *g, const void *send, void *recv, size_t count, gb_dtype_t dt, gb_op_t op,
                 gb_algo_t algo) {
  return guarded([&] {
    switch (dt) {
    case GB_INT32:
      allreduce_t<int32_t>(g, send, recv, count, op, algo);
      break;
    case GB_INT64:
      allreduce_t<int64_t>(g, send, recv, count, op, algo);
      break;
    case GB_FLOAT32:
      allreduce_t<float>(g, send, recv, count, op, algo);
      break;
    case GB_FLOAT64:
      allreduce_t<double>(g, send, recv, count, op, algo);
      break;
    }
  });
}

static size_t elsize(gb_dtype_t dt) { return dt == GB_INT32 || dt == GB_FLOAT32 ? 4 : 8; }

int gb_allgather(gb_ctx_t *g, const void *send, void *recv, size_t count, gb_dtype_t dt) {
  return guarded([&] {
    gloo::AllgatherOptions opts(g->ctx);
    size_t es = elsize(dt);
    if (send)
      opts.setInput(static_cast<char *>(const_cast<void *>(send)), count * es);
    opts.setOutput(static_cast<char *>(recv), count * es * g->ctx->size);
    gloo::allgather(opts);
  });
}

int gb_broadcast(gb_ctx_t *g, const void *send, void *recv, size_t count, gb_dtype_t dt, int root) {
  return guarded([&] {
    gloo::BroadcastOptions opts(g->ctx);
    size_t es = elsize(dt);
    if (send && g->ctx->rank == root)
      opts.setInput(static_cast<char *>(const_cast<void *>(send)), count * es);
    opts.setOutput(static_cast<char *>(recv), count * es);
    opts.setRoot(root);
    gloo::broadcast(opts);
  });
}

int gb_barrier(gb_ctx_t *g) {
  return guarded([&] {
    gloo::BarrierOptions opts(g->ctx);
    gloo::barrier(opts);
  });
}

int gb_max_doubles(gb_ctx_t *g, double *x, size_t n) {
  return gb_allreduce(g, nullptr, x, n, GB_FLOAT64, GB_MAX, GB_RING);
}

int gb_sum_int64(gb_ctx_t *g, long long *n) {
  return gb_allreduce(g, nullptr, n, 1, GB_INT64, GB_SUM, GB_RING);
}
