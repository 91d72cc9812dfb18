/*
 * process_group.cpp - ProcessGroupBaton and WorkBaton (process_group.hpp
 * says what they are and the words used here).
 *
 * Every torch call checks its tensors (dense, CPU, contiguous, a dtype baton
 * has, sizes that fit together), then issues one baton i-call under the
 * group's issue lock and returns its work at once. Where torch's layout is
 * baton's (one tensor in, one tensor out) the call works on the caller's
 * tensors themselves; _allgather_base, _reduce_scatter_base and
 * alltoall_base always do. Where torch hands a list of tensors and baton
 * wants one buffer (allgather, gather, scatter, reduce_scatter, alltoall,
 * allreduce_coalesced, allgather_coalesced), a list whose tensors already
 * lie one after the other in one piece of memory is used as that buffer;
 * allgather and alltoall take any other list where its tensors lie, through
 * baton's v-form (allgatherv, alltoallv) with each tensor's displacement
 * from the lowest of them; the others pack the inputs into a staging buffer
 * leased from the group's pool (StagingPool) when the call is issued, and
 * copy the result out of it when the call completes, in whichever thread
 * completes it (wait(), isCompleted() or a completer), before anybody is
 * told it is done.
 *
 * Nothing is ever converted silently: a tensor that baton cannot use as it
 * is (sparse, not on the CPU, not contiguous, a dtype baton lacks) is refused
 * with an error that names the call, the argument and why.
 */
#include <Python.h> /* first, as Python asks: only to let go of the GIL in ~ProcessGroupBaton */

#include "process_group.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <pthread.h>
#include <stdexcept>

namespace baton_torch {

using Clock = std::chrono::steady_clock;
using c10d::OpType;

/* ------------------------------------------------------------ the store */

/*
 * baton_kv_t over the group's c10d::Store (a PrefixStore of the group's
 * name). baton numbers the communicators made through one ctx in a process
 * ("baton.<n>/" before their keys, n counted per ctx pointer), and the ranks
 * must agree on n: so each group needs a ctx pointer that this process has
 * never handed baton before, and a KvStore is never freed (one small
 * allocation per group). A freed one's address could come back for a later
 * group on one rank and not on another. The store itself is let go when the
 * group is destroyed. baton makes one call through it at a time.
 */
struct KvStore {
  c10::intrusive_ptr<c10d::Store> store;
  baton_kv_t kv{};
  std::string last_error; /* what the store said when a call through it failed */

  static int set(void *ctx, const char *key, const void *value, size_t len) {
    auto *self = static_cast<KvStore *>(ctx);
    try {
      const auto *p = static_cast<const uint8_t *>(value);
      self->store->set(key, std::vector<uint8_t>(p, p + len));
      return 0;
    } catch (const std::exception &e) {
      self->last_error = c10::str("set \"", key, "\": ", e.what());
    } catch (...) {
      self->last_error = c10::str("set \"", key, "\": an exception that is not a std::exception");
    }
    return -1;
  }

  static int get(void *ctx, const char *key, void *value, size_t cap, size_t *len,
                 double timeout_s) {
    auto *self = static_cast<KvStore *>(ctx);
    try {
      std::vector<std::string> keys{key};
      if (timeout_s > 0)
        self->store->wait(keys, std::chrono::milliseconds(static_cast<int64_t>(
                                    std::ceil(std::min(timeout_s, 1e9) * 1000))));
      else
        self->store->wait(keys);
      std::vector<uint8_t> v = self->store->get(keys[0]);
      if (cap && !v.empty())
        std::memcpy(value, v.data(), std::min(cap, v.size()));
      *len = v.size();
      return 0;
    } catch (const std::exception &e) {
      self->last_error = c10::str("get \"", key, "\": ", e.what());
    } catch (...) {
      self->last_error = c10::str("get \"", key, "\": an exception that is not a std::exception");
    }
    return -1;
  }
};

/* ------------------------------------------------------------ checking tensors */

/* An argument, as error messages name it: "baton allgather: output_tensors[0][2]". */
struct Arg {
  const char *method;
  const char *name;
  int64_t i = -1, j = -1;
};

/* The same without "baton method: ", for a second argument in one message. */
struct Bare {
  const Arg &a;
};

static std::ostream &operator<<(std::ostream &os, const Bare &b) {
  os << b.a.name;
  if (b.a.i >= 0)
    os << "[" << b.a.i << "]";
  if (b.a.j >= 0)
    os << "[" << b.a.j << "]";
  return os;
}

static std::ostream &operator<<(std::ostream &os, const Arg &a) {
  return os << "baton " << a.method << ": " << Bare{a};
}

/* torch's dtypes that baton has, one row each. */
static const struct {
  at::ScalarType torch;
  baton_dtype_t baton;
} kDtypes[] = {
    {at::kFloat, BATON_FLOAT32},     {at::kDouble, BATON_FLOAT64}, {at::kHalf, BATON_FLOAT16},
    {at::kBFloat16, BATON_BFLOAT16}, {at::kChar, BATON_INT8},      {at::kByte, BATON_UINT8},
    {at::kShort, BATON_INT16},       {at::kInt, BATON_INT32},      {at::kLong, BATON_INT64},
    {at::kBool, BATON_BOOL},
};

static bool batonDtype(at::ScalarType t, baton_dtype_t *out) {
  for (const auto &d : kDtypes)
    if (d.torch == t) {
      *out = d.baton;
      return true;
    }
  return false;
}

/* A tensor baton may read and write where it lies; its baton dtype. */
static baton_dtype_t checkTensor(const Arg &a, const at::Tensor &t) {
  TORCH_CHECK(t.defined(), a, " is an undefined tensor");
  TORCH_CHECK(t.layout() == c10::kStrided, a, " is a ", t.layout(),
              " tensor; baton takes dense (strided) tensors only");
  TORCH_CHECK(
      t.device().is_cpu(), a, " is on ", t.device(),
      "; baton moves CPU tensors only (copy it to the CPU, or use a backend for its device)");
  TORCH_CHECK(t.is_contiguous(), a, " is not contiguous (sizes ", t.sizes(), ", strides ",
              t.strides(),
              "); baton works on the tensor's memory as it lies and does not copy it silently: "
              "pass t.contiguous() and copy the result back");
  TORCH_CHECK(!t.is_neg() && !t.is_conj(), a,
              " is a negated or conjugated view; baton reads memory as it lies: pass "
              "t.resolve_neg() or t.resolve_conj()");
  baton_dtype_t dt = BATON_FLOAT32;
  TORCH_CHECK(batonDtype(t.scalar_type(), &dt), a, " has dtype ", t.scalar_type(),
              ", which baton does not support (it takes float32, float64, float16, bfloat16, "
              "int8, uint8, int16, int32, int64 and bool)");
  return dt;
}

/* t, checked, has the dtype and the number of elements of ref. */
static void checkLike(const Arg &a, const at::Tensor &t, const Arg &ref_name, const at::Tensor &ref,
                      int64_t numel) {
  checkTensor(a, t);
  TORCH_CHECK(t.scalar_type() == ref.scalar_type() && t.numel() == numel, a, " has ", t.numel(),
              " elements of ", t.scalar_type(), " where ", Bare{ref_name}, " asks for ", numel,
              " of ", ref.scalar_type());
}

static at::Tensor &one(const char *method, const char *name, std::vector<at::Tensor> &ts) {
  TORCH_CHECK(ts.size() == 1, "baton ", method, ": ", name, " holds ", ts.size(),
              " tensors; baton takes exactly one (one CPU tensor per process and call)");
  return ts[0];
}

static void checkCount(const char *method, const char *name, size_t have, int want) {
  TORCH_CHECK(have == static_cast<size_t>(want), "baton ", method, ": ", name, " holds ", have,
              " tensors; it needs one per rank of the group (", want, ")");
}

static void checkRoot(const char *method, int64_t root, int size) {
  TORCH_CHECK(root >= 0 && root < size, "baton ", method, ": root rank ", root,
              " is outside the group's ranks [0, ", size, ")");
}

static baton_op_t batonOp(const char *method, const c10d::ReduceOp &op) {
  switch (op.op_) {
  case c10d::ReduceOp::SUM:
    return BATON_SUM;
  case c10d::ReduceOp::AVG:
    return BATON_AVG;
  case c10d::ReduceOp::PRODUCT:
    return BATON_PROD;
  case c10d::ReduceOp::MIN:
    return BATON_MIN;
  case c10d::ReduceOp::MAX:
    return BATON_MAX;
  case c10d::ReduceOp::BAND:
    return BATON_BAND;
  case c10d::ReduceOp::BOR:
    return BATON_BOR;
  case c10d::ReduceOp::BXOR:
    return BATON_BXOR;
  case c10d::ReduceOp::PREMUL_SUM:
    TORCH_CHECK(false, "baton ", method,
                ": ReduceOp.PREMUL_SUM is not supported (it multiplies by a factor before the "
                "sum); scale the tensor first and use ReduceOp.SUM");
    break;
  default:
    TORCH_CHECK(false, "baton ", method, ": unknown ReduceOp ", static_cast<int>(op.op_));
  }
  return BATON_SUM;
}

static char *bytes(const at::Tensor &t) { return static_cast<char *>(t.data_ptr()); }

static size_t count(const at::Tensor &t) { return static_cast<size_t>(t.numel()); }

static void copyBytes(void *dst, const void *src, size_t n) {
  if (n)
    std::memcpy(dst, src, n);
}

static at::Tensor byteTensor(size_t nbytes) {
  return at::empty({static_cast<int64_t>(nbytes)}, at::TensorOptions().dtype(at::kByte));
}

/* Whether ts, each block bytes, lie one after the other in memory, in
 * order: then baton can use them as the one buffer it wants. */
static bool run(const std::vector<at::Tensor> &ts, size_t block) {
  if (block == 0)
    return false;
  const char *base = bytes(ts[0]);
  for (size_t i = 0; i < ts.size(); i++)
    if (bytes(ts[i]) != base + i * block)
      return false;
  return true;
}

/* Whether t may be baton's other buffer beside a run of n blocks at base:
 * apart from it, or exactly at block `slot` (baton's in-place position). */
static bool apartOrAt(const at::Tensor &t, const char *base, size_t block, size_t n, size_t slot) {
  auto p = reinterpret_cast<uintptr_t>(bytes(t)), b = reinterpret_cast<uintptr_t>(base);
  size_t len = t.nbytes();
  if (len == 0 || p + len <= b || p >= b + block * n)
    return true;
  return p == b + block * slot && len == block;
}

/* A piece of memory that one block of a call reads or writes. */
struct Block {
  const char *at;
  size_t len;
};

/* Whether no two of the blocks share a byte (empty ones share none). */
static bool disjoint(std::vector<Block> blocks) {
  blocks.erase(std::remove_if(blocks.begin(), blocks.end(), [](const Block &b) { return !b.len; }),
               blocks.end());
  std::sort(blocks.begin(), blocks.end(), [](const Block &a, const Block &b) { return a.at < b.at; });
  for (size_t i = 1; i < blocks.size(); i++)
    if (blocks[i - 1].at + blocks[i - 1].len > blocks[i].at)
      return false;
  return true;
}

/* The lowest of the blocks (nullptr when all are empty) and, in displs,
 * each one's displacement from it in bytes: a list of tensors where they
 * lie, as baton's v-calls take it (on uint8). */
static char *displace(const std::vector<Block> &blocks, size_t *displs) {
  const char *base = nullptr;
  for (const Block &b : blocks)
    if (b.len && (!base || b.at < base))
      base = b.at;
  for (size_t i = 0; i < blocks.size(); i++)
    displs[i] = blocks[i].len ? static_cast<size_t>(blocks[i].at - base) : 0;
  return const_cast<char *>(base);
}

static std::vector<Block> blocksOf(const std::vector<at::Tensor> &ts) {
  std::vector<Block> blocks;
  for (const at::Tensor &t : ts)
    blocks.push_back({bytes(t), t.nbytes()});
  return blocks;
}

/* ------------------------------------------------------------ staging */

StagingPool::~StagingPool() {
  for (Buffer &b : buffers_)
    std::free(b.at);
}

at::Tensor StagingPool::lease(size_t nbytes) {
  if (nbytes == 0)
    return byteTensor(0);
  std::unique_lock<std::mutex> lock(mu_);
  Buffer *fit = nullptr, *grow = nullptr;
  for (Buffer &b : buffers_) {
    if (b.leased)
      continue;
    if (b.cap >= nbytes && (!fit || b.cap < fit->cap))
      fit = &b;
    if (b.cap < nbytes && (!grow || b.cap > grow->cap))
      grow = &b;
  }
  Buffer *b = fit ? fit : grow;
  if (!b && buffers_.size() < kMost) {
    buffers_.emplace_back();
    b = &buffers_.back();
  }
  if (!b) {
    lock.unlock();
    return byteTensor(nbytes);
  }
  if (b->cap < nbytes) {
    void *p = nullptr;
    TORCH_CHECK(posix_memalign(&p, 64, nbytes) == 0, "baton: cannot allocate a staging buffer of ",
                nbytes, " bytes");
    std::memset(p, 0, nbytes); /* the page faults now, once, rather than in every call */
    std::free(b->at);
    b->at = p, b->cap = nbytes;
  }
  b->leased = true;
  void *at = b->at;
  lock.unlock();
  auto self = shared_from_this();
  return at::from_blob(
      at, {static_cast<int64_t>(nbytes)}, [self](void *p) { self->giveBack(p); },
      at::TensorOptions().dtype(at::kByte));
}

void StagingPool::giveBack(void *at) {
  std::lock_guard<std::mutex> lock(mu_);
  for (Buffer &b : buffers_)
    if (b.at == at)
      b.leased = false;
}

/* ------------------------------------------------------------ WorkBaton */

WorkBaton::WorkBaton(ProcessGroupBaton *pg, int rank, OpType type, const char *name, Order order,
                     std::vector<at::Tensor> inputs, std::vector<at::Tensor> outputs,
                     std::chrono::milliseconds timeout)
    : c10d::Work(rank, type), pg_(pg), name_(name), order_(order), inputs_(std::move(inputs)),
      outputs_(std::move(outputs)), timeout_(timeout) {}

/* The group tracks every work it issued until it completes, so a work that
 * is destroyed holds no request (its issue failed, or it is done). */
WorkBaton::~WorkBaton() = default;

/* To its end, or until the deadline: baton_wait_for sleeps until the call
 * completes, so a wait that must end by a deadline (the group's timeout,
 * or wait()'s) wakes when the call does. A loop of baton_test and sleeps
 * woke up to a sleep late: all_to_all_single of 512 KiB at N=2 took 80.7
 * us that way and 54.8 with baton_wait_for (medians, docs/performance.md,
 * "Issue 19"). */
bool WorkBaton::drive(bool block, const Clock::time_point *deadline) {
  if (!req)
    return true;
  if (block && !deadline) {
    status_ = baton_wait(req);
    req = nullptr;
    return true;
  }
  double left = 0;
  if (block) {
    auto now = Clock::now();
    left = *deadline > now ? std::chrono::duration<double>(*deadline - now).count() : 0;
  }
  int done = 0, rc = block ? baton_wait_for(req, left, &done) : baton_test(req, &done);
  if (!done)
    return false;
  status_ = rc;
  req = nullptr;
  return true;
}

static void completeFuture(const c10::intrusive_ptr<c10::ivalue::Future> &future,
                           const std::exception_ptr &error, const std::vector<at::Tensor> &outputs,
                           const char *name) {
  try {
    if (error)
      future->setError(error);
    else
      future->markCompleted(c10::IValue(outputs));
  } catch (const std::exception &e) { /* a callback of the future's threw */
    TORCH_WARN("baton ", name, ": completing the work's future: ", e.what());
  }
}

/* The request is done: copy the result out of staging, let go of the
 * buffers, tell the group, then everybody waiting. Runs in the thread that
 * claimed the work, which holds a reference to it. */
void WorkBaton::finish() {
  std::exception_ptr error;
  try {
    if (status_ != BATON_OK)
      throw std::runtime_error(pg_->failure(name_, status_));
    if (copy_out)
      copy_out();
  } catch (...) {
    error = std::current_exception();
  }
  copy_out = nullptr;
  staging.clear();
  counts.clear();
  inputs_.clear();
  c10::intrusive_ptr<c10::ivalue::Future> future;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pg_->retire(this); /* the last use of pg_, under the lock drop() takes: the group may go now */
    completed_ = true;
    claimed_ = false;
    exception_ = error;
    future = future_;
  }
  cv_.notify_all();
  if (future)
    completeFuture(future, error, outputs_, name_);
}

bool WorkBaton::advance(bool block, const Clock::time_point *deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!completed_ && claimed_) { /* another thread drives it: wait for that one */
    if (!block)
      return false;
    if (!deadline)
      cv_.wait(lock);
    else if (cv_.wait_until(lock, *deadline) == std::cv_status::timeout && !completed_ && claimed_)
      return false;
  }
  if (completed_)
    return true;
  claimed_ = true;
  lock.unlock();
  if (drive(block, deadline)) {
    finish();
    return true;
  }
  lock.lock();
  claimed_ = false;
  lock.unlock();
  cv_.notify_all();
  return false;
}

/* Under the work's lock: finish() retires a work and marks it completed
 * under that lock, and ~ProcessGroupBaton waits for every work it has not
 * retired, so the group and its completers are there while a work is not
 * completed. */
void WorkBaton::drop() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!completed_)
    pg_->watch(c10::intrusive_ptr<WorkBaton>::unsafe_reclaim_from_nonowning(this));
}

bool WorkBaton::isCompleted() { return advance(false, nullptr); }

bool WorkBaton::isSuccess() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ && !exception_;
}

bool WorkBaton::wait(std::chrono::milliseconds timeout) {
  std::chrono::milliseconds limit = timeout.count() > 0 ? timeout : timeout_;
  bool done;
  if (limit.count() > 0) {
    Clock::time_point deadline = Clock::now() + limit;
    done = advance(true, &deadline);
  } else {
    done = advance(true, nullptr);
  }
  if (!done)
    throw std::runtime_error(c10::str("baton ", name_, ": wait timed out after ", limit.count(),
                                      " ms; the call is still in flight (wait again, or destroy "
                                      "the group)"));
  std::lock_guard<std::mutex> lock(mutex_);
  if (exception_)
    std::rethrow_exception(exception_);
  return true;
}

std::vector<at::Tensor> WorkBaton::result() { return outputs_; }

/* Made on the first call. A work already complete gets a completed future;
 * one in flight is handed to a completer, because DDP's reducer waits on the
 * future and never calls wait() (finish() completes the future, whoever
 * drives the work to its end). */
c10::intrusive_ptr<c10::ivalue::Future> WorkBaton::getFuture() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (future_)
    return future_;
  future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
  auto future = future_;
  if (!completed_) { /* under the lock, as drop() */
    pg_->watch(c10::intrusive_ptr<WorkBaton>::unsafe_reclaim_from_nonowning(this));
    return future;
  }
  std::exception_ptr error = exception_;
  lock.unlock();
  completeFuture(future, error, outputs_, name_);
  return future;
}

/* ------------------------------------------------------------ Completer */

void Completer::add(c10::intrusive_ptr<WorkBaton> work) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_)
      return;
    if (!thread_.joinable())
      thread_ = std::thread([this] { run(); });
    queue_.push_back(std::move(work));
  }
  cv_.notify_one();
}

void Completer::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable())
    thread_.join();
}

void Completer::run() {
  pthread_setname_np(pthread_self(), "baton-complete"); /* what top -H and perf show */
  if (order_ == Order::kIssue)
    runInIssueOrder();
  else
    runInAnyOrder();
}

/* Waits for each work in turn: they complete in this order anyway. */
void Completer::runInIssueOrder() {
  for (;;) {
    c10::intrusive_ptr<WorkBaton> work;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty())
        return;
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    work->advance(true, nullptr);
  }
}

/* Looks at every work it holds in turn, pausing longer the longer none
 * completes, so that one that completes late holds up none of the others. */
void Completer::runInAnyOrder() {
  std::vector<c10::intrusive_ptr<WorkBaton>> live;
  unsigned idle = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      auto more = [this] { return stop_ || !queue_.empty(); };
      if (live.empty())
        cv_.wait(lock, more);
      else if (idle >= 64)
        cv_.wait_for(lock, std::chrono::microseconds(idle < 256 ? 20 : 200), more);
      for (; !queue_.empty(); queue_.pop_front())
        live.push_back(std::move(queue_.front()));
      if (live.empty() && stop_)
        return;
    }
    if (idle > 0 && idle < 64)
      std::this_thread::yield();
    size_t before = live.size();
    live.erase(std::remove_if(live.begin(), live.end(),
                              [](const c10::intrusive_ptr<WorkBaton> &w) {
                                return w->advance(false, nullptr);
                              }),
               live.end());
    idle = live.size() < before ? 0 : idle + 1;
  }
}

/* ------------------------------------------------------------ the group */

ProcessGroupBaton::ProcessGroupBaton(const c10::intrusive_ptr<c10d::Store> &store, int rank,
                                     int size, std::chrono::duration<float> timeout)
    : ProcessGroup(rank, size), kv_(new KvStore) {
  kv_->store = store;
  kv_->kv.ctx = kv_;
  kv_->kv.set = KvStore::set;
  kv_->kv.get = KvStore::get;
  double t = timeout.count();
  kv_->kv.timeout_s = std::isfinite(t) && t > 0 ? t : 0;
  /* new_group: torch calls a backend's creator on the group's members only
   * (the others return before it, in _new_process_group_helper), while
   * baton_comm_split is collective over every rank of the parent; so each
   * group meets through its own prefix store, as the world does. */
  int rc = baton_comm_init_kv(&comm_, size, rank, &kv_->kv);
  if (rc != BATON_OK) {
    std::string why =
        c10::str("baton: cannot make the communicator of rank ", rank, " of ", size,
                 " through the group's store: ", baton_err_name(rc), ": ", baton_last_init_error());
    if (!kv_->last_error.empty())
      why += c10::str(" (the store: ", kv_->last_error, ")");
    kv_->store.reset();
    throw std::runtime_error(why);
  }
  registered_->pg = this;
  init();
}

/* Works still in flight, dropped ones included, must end before the
 * communicator does (baton_comm_destroy refuses requests in flight); they
 * complete because the other ranks make the same calls, or fail after the
 * group's timeout. The GIL is let go meanwhile: a future's callback may need
 * it in a completer. */
ProcessGroupBaton::~ProcessGroupBaton() {
  PyThreadState *saved = nullptr;
  if (Py_IsInitialized() && PyGILState_Check())
    saved = PyEval_SaveThread();
  drain();
  in_order_.stop();
  any_order_.stop();
  {
    std::lock_guard<std::mutex> lock(issue_mu_);
    std::lock_guard<std::mutex> reg(registered_->mu);
    freeUnfreed();
    registered_->pg = nullptr; /* the tensors still alive keep their memory */
  }
  int rc = baton_comm_destroy(comm_);
  if (rc != BATON_OK)
    TORCH_WARN("baton: destroying the group's communicator: ", baton_err_name(rc));
  kv_->store.reset();
  if (saved)
    PyEval_RestoreThread(saved);
}

static std::string describe(baton_comm_t *comm, const char *what, int rc) {
  const char *detail = baton_comm_last_error(comm);
  return c10::str("baton ", what, ": ", baton_err_name(rc), " (", baton_strerror(rc), ")",
                  *detail ? ": " : "", detail);
}

std::string ProcessGroupBaton::failure(const char *what, int rc) {
  std::lock_guard<std::mutex> lock(issue_mu_);
  return describe(comm_, what, rc);
}

void ProcessGroupBaton::retire(WorkBaton *w) {
  c10::intrusive_ptr<WorkBaton> last; /* let go after the lock */
  std::lock_guard<std::mutex> lock(works_mu_);
  auto it = outstanding_.find(w);
  if (it != outstanding_.end()) {
    last = std::move(it->second);
    outstanding_.erase(it);
  }
}

void ProcessGroupBaton::watch(const c10::intrusive_ptr<WorkBaton> &w) {
  (w->order() == Order::kIssue ? in_order_ : any_order_).add(w);
}

c10::intrusive_ptr<WorkBaton> ProcessGroupBaton::work(OpType type, const char *name, Order order,
                                                      std::vector<at::Tensor> inputs,
                                                      std::vector<at::Tensor> outputs,
                                                      std::chrono::milliseconds timeout) {
  if (timeout.count() < 0) /* kUnsetTimeout: the group's, which baton enforces */
    timeout = std::chrono::milliseconds(0);
  return c10::make_intrusive<WorkBaton>(this, rank_, type, name, order, std::move(inputs),
                                        std::move(outputs), timeout);
}

/* Issues the call and tracks its work until it completes. A failed i-call
 * makes no request (baton.h), so its error is thrown here at once. */
c10::intrusive_ptr<c10d::Work>
ProcessGroupBaton::post(c10::intrusive_ptr<WorkBaton> w,
                        const std::function<int(baton_request_t **)> &call) {
  std::lock_guard<std::mutex> lock(issue_mu_);
  reclaim();
  int rc = call(&w->req);
  if (rc != BATON_OK && !w->req)
    throw std::runtime_error(describe(comm_, w->name(), rc));
  /* Tracked before issue_mu_ is let go, so that a thread holding it and
   * finding nothing in flight knows that baton has no request either. */
  std::lock_guard<std::mutex> works(works_mu_);
  outstanding_.emplace(w.get(), w);
  return c10::make_intrusive<WorkHandle>(std::move(w), rank_);
}

size_t ProcessGroupBaton::inFlight() {
  std::lock_guard<std::mutex> lock(works_mu_);
  return outstanding_.size();
}

/* ------------------------------------------------------------ registered memory */

void Registered::release(const std::shared_ptr<Registered> &r, void *ptr) {
  std::lock_guard<std::mutex> lock(r->mu);
  if (!r->pg) /* the group is gone: the memory stays this process's (baton.h) */
    return;
  r->unfreed.push_back(ptr);
  r->pg->freeIfIdle();
}

void ProcessGroupBaton::freeIfIdle() {
  /* Never waits for issue_mu_: a tensor may die in a thread that issues. */
  std::unique_lock<std::mutex> lock(issue_mu_, std::try_to_lock);
  if (lock.owns_lock())
    freeUnfreed();
}

void ProcessGroupBaton::reclaim() {
  std::lock_guard<std::mutex> reg(registered_->mu);
  freeUnfreed();
}

void ProcessGroupBaton::freeUnfreed() {
  if (registered_->unfreed.empty() || inFlight() > 0)
    return;
  for (void *ptr : registered_->unfreed) {
    int rc = baton_mem_free(comm_, ptr);
    if (rc != BATON_OK) /* not baton's memory: cannot be, since only empty() adds to it */
      TORCH_WARN(describe(comm_, "freeing the memory of a baton.torch.empty tensor", rc));
  }
  registered_->unfreed.clear();
}

at::Tensor ProcessGroupBaton::emptyRegistered(int64_t nbytes) {
  TORCH_CHECK(nbytes >= 0, "baton.torch.empty: ", nbytes, " bytes: must be 0 or more");
  std::lock_guard<std::mutex> lock(issue_mu_);
  size_t busy = inFlight();
  TORCH_CHECK(busy == 0, "baton.torch.empty: ", busy, " call", busy == 1 ? " is" : "s are",
              " of this group in flight; registered memory is made with none (baton_mem_alloc is "
              "collective): wait for them first");
  reclaim();
  void *ptr = nullptr;
  int rc = baton_mem_alloc(comm_, nbytes > 0 ? static_cast<size_t>(nbytes) : 1, &ptr);
  if (rc != BATON_OK)
    throw std::runtime_error(describe(comm_, "baton.torch.empty (baton_mem_alloc)", rc));
  std::shared_ptr<Registered> r = registered_;
  return at::from_blob(
      ptr, {nbytes}, [r](void *p) { Registered::release(r, p); },
      at::TensorOptions().dtype(at::kByte).device(at::kCPU));
}

void ProcessGroupBaton::drain() {
  for (;;) {
    std::unordered_map<WorkBaton *, c10::intrusive_ptr<WorkBaton>> left;
    {
      std::lock_guard<std::mutex> lock(works_mu_);
      left.swap(outstanding_);
    }
    if (left.empty())
      return;
    for (auto &kv : left)
      kv.second->advance(true, nullptr);
  }
}

/* ------------------------------------------------------------ one tensor, in place */

c10::intrusive_ptr<c10d::Work> ProcessGroupBaton::broadcast(std::vector<at::Tensor> &tensors,
                                                            const c10d::BroadcastOptions &opts) {
  const char *m = "broadcast";
  at::Tensor &t = one(m, "tensors", tensors);
  baton_dtype_t dt = checkTensor({m, "tensors", 0}, t);
  checkRoot(m, opts.rootRank, size_);
  TORCH_CHECK(opts.rootTensor == 0, "baton broadcast: rootTensor ", opts.rootTensor,
              " must be 0 (one tensor per process)");
  int root = static_cast<int>(opts.rootRank);
  auto w = work(OpType::BROADCAST, m, Order::kIssue, {}, {t}, opts.timeout);
  return post(w, [&](baton_request_t **r) {
    return baton_ibroadcast(t.data_ptr(), t.data_ptr(), count(t), dt, root, comm_, r);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBaton::allreduce(std::vector<at::Tensor> &tensors,
                                                            const c10d::AllreduceOptions &opts) {
  const char *m = "allreduce";
  at::Tensor &t = one(m, "tensors", tensors);
  baton_dtype_t dt = checkTensor({m, "tensors", 0}, t);
  baton_op_t op = batonOp(m, opts.reduceOp);
  auto w = work(OpType::ALLREDUCE, m, Order::kIssue, {}, {t}, opts.timeout);
  return post(w, [&](baton_request_t **r) {
    return baton_iallreduce(t.data_ptr(), t.data_ptr(), count(t), dt, op, comm_, r);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBaton::reduce(std::vector<at::Tensor> &tensors,
                                                         const c10d::ReduceOptions &opts) {
  const char *m = "reduce";
  at::Tensor &t = one(m, "tensors", tensors);
  baton_dtype_t dt = checkTensor({m, "tensors", 0}, t);
  baton_op_t op = batonOp(m, opts.reduceOp);
  checkRoot(m, opts.rootRank, size_);
  TORCH_CHECK(opts.rootTensor == 0, "baton reduce: rootTensor ", opts.rootTensor,
              " must be 0 (one tensor per process)");
  int root = static_cast<int>(opts.rootRank);
  void *out = rank_ == root ? t.data_ptr() : nullptr; /* only the root's tensor changes */
  auto w = work(OpType::REDUCE, m, Order::kIssue, {}, {t}, opts.timeout);
  return post(w, [&](baton_request_t **r) {
    return baton_ireduce(t.data_ptr(), out, count(t), dt, op, root, comm_, r);
  });
}

/* Several tensors of one dtype reduced as one: packed into a staging buffer
 * and copied back on completion (one tensor: in place). */
c10::intrusive_ptr<c10d::Work>
ProcessGroupBaton::allreduce_coalesced(std::vector<at::Tensor> &tensors,
                                       const c10d::AllreduceCoalescedOptions &opts) {
  const char *m = "allreduce_coalesced";
  TORCH_CHECK(!tensors.empty(), "baton allreduce_coalesced: tensors is empty");
  baton_dtype_t dt = checkTensor({m, "tensors", 0}, tensors[0]);
  size_t total = 0;
  for (size_t i = 0; i < tensors.size(); i++) {
    checkTensor({m, "tensors", static_cast<int64_t>(i)}, tensors[i]);
    TORCH_CHECK(tensors[i].scalar_type() == tensors[0].scalar_type(),
                (Arg{m, "tensors", (int64_t)i}), " has dtype ", tensors[i].scalar_type(),
                " but tensors[0] has ", tensors[0].scalar_type(),
                "; allreduce_coalesced reduces one buffer of one dtype: call it once per dtype");
    total += count(tensors[i]);
  }
  baton_op_t op = batonOp(m, opts.reduceOp);
  auto w = work(OpType::ALLREDUCE_COALESCED, m, Order::kIssue, {}, tensors, opts.timeout);
  void *buf = tensors[0].data_ptr();
  if (tensors.size() > 1) {
    at::Tensor flat = stage(total * tensors[0].element_size());
    char *p = bytes(flat);
    for (const at::Tensor &t : tensors)
      copyBytes(p, t.data_ptr(), t.nbytes()), p += t.nbytes();
    w->staging.push_back(flat);
    w->copy_out = [ts = tensors, flat] {
      const char *q = bytes(flat);
      for (const at::Tensor &t : ts)
        copyBytes(t.data_ptr(), q, t.nbytes()), q += t.nbytes();
    };
    buf = flat.data_ptr();
  }
  return post(
      w, [&](baton_request_t **r) { return baton_iallreduce(buf, buf, total, dt, op, comm_, r); });
}

/* ------------------------------------------------------------ allgather, gather, scatter */

c10::intrusive_ptr<c10d::Work>
ProcessGroupBaton::_allgather_base(at::Tensor &output, at::Tensor &input,
                                   const c10d::AllgatherOptions &opts) {
  const char *m = "_allgather_base";
  baton_dtype_t dt = checkTensor({m, "input"}, input);
  checkLike({m, "output"}, output, {m, "size * input"}, input, input.numel() * size_);
  auto w = work(OpType::_ALLGATHER_BASE, m, Order::kIssue, {input}, {output}, opts.timeout);
  return post(w, [&](baton_request_t **r) {
    return baton_iallgather(input.data_ptr(), output.data_ptr(), count(input), dt, comm_, r);
  });
}

/* Rank j's block lands in outputs[0][j]: straight there, by allgather when
 * the outputs lie one after the other, else by allgatherv at each output's
 * displacement; through a staging buffer only when they overlap. */
c10::intrusive_ptr<c10d::Work>
ProcessGroupBaton::allgather(std::vector<std::vector<at::Tensor>> &outputs,
                             std::vector<at::Tensor> &inputs, const c10d::AllgatherOptions &opts) {
  const char *m = "allgather";
  at::Tensor &in = one(m, "input_tensors", inputs);
  baton_dtype_t dt = checkTensor({m, "input_tensors", 0}, in);
  TORCH_CHECK(outputs.size() == 1, "baton allgather: output_tensors holds ", outputs.size(),
              " lists; baton takes exactly one");
  std::vector<at::Tensor> &outs = outputs[0];
  checkCount(m, "output_tensors[0]", outs.size(), size_);
  for (size_t j = 0; j < outs.size(); j++)
    checkLike({m, "output_tensors", 0, (int64_t)j}, outs[j], {m, "input_tensors", 0}, in,
              in.numel());
  auto w = work(OpType::ALLGATHER, m, Order::kIssue, {in}, outs, opts.timeout);
  size_t block = in.nbytes();
  if (run(outs, block) && apartOrAt(in, bytes(outs[0]), block, size_, rank_)) {
    return post(w, [&](baton_request_t **r) {
      return baton_iallgather(in.data_ptr(), outs[0].data_ptr(), count(in), dt, comm_, r);
    });
  }
  std::vector<Block> blocks = blocksOf(outs), all = blocks;
  if (bytes(in) != bytes(outs[rank_])) /* else in place: baton's rule for allgatherv */
    all.push_back({bytes(in), block});
  if (disjoint(all)) {
    w->counts.assign(2 * static_cast<size_t>(size_), block);
    size_t *counts = w->counts.data(), *displs = counts + size_;
    char *base = displace(blocks, displs);
    return post(w, [&](baton_request_t **r) {
      return baton_iallgatherv(in.data_ptr(), block, base, counts, displs, BATON_UINT8, comm_, r);
    });
  }
  at::Tensor flat = stage(block * size_); /* outputs that overlap: copied out in order */
  w->staging.push_back(flat);
  w->copy_out = [outs, flat, block] {
    for (size_t j = 0; j < outs.size(); j++)
      copyBytes(outs[j].data_ptr(), bytes(flat) + j * block, block);
  };
  return post(w, [&](baton_request_t **r) {
    return baton_iallgather(in.data_ptr(), flat.data_ptr(), count(in), dt, comm_, r);
  });
}

/* Inputs of any dtypes and sizes, gathered as bytes in one call: each rank's
 * block is its inputs one after the other; on completion block j's pieces
 * are copied into outputs[i][j]. */
c10::intrusive_ptr<c10d::Work>
ProcessGroupBaton::allgather_coalesced(std::vector<std::vector<at::Tensor>> &outputs,
                                       std::vector<at::Tensor> &inputs,
                                       const c10d::AllgatherOptions &opts) {
  const char *m = "allgather_coalesced";
  /* torch's layout: output_lists[r][i] is rank r's input i. */
  checkCount(m, "output_lists", outputs.size(), size_);
  size_t block = 0;
  std::vector<at::Tensor> flat_outs;
  for (size_t i = 0; i < inputs.size(); i++) {
    checkTensor({m, "input_list", (int64_t)i}, inputs[i]);
    block += inputs[i].nbytes();
  }
  for (size_t r = 0; r < outputs.size(); r++) {
    TORCH_CHECK(outputs[r].size() == inputs.size(), "baton allgather_coalesced: output_lists[", r,
                "] holds ", outputs[r].size(), " tensors for ", inputs.size(),
                " input tensors; it needs one each");
    for (size_t i = 0; i < inputs.size(); i++) {
      checkLike({m, "output_lists", (int64_t)r, (int64_t)i}, outputs[r][i],
                {m, "input_list", (int64_t)i}, inputs[i], inputs[i].numel());
      flat_outs.push_back(outputs[r][i]);
    }
  }
  auto w = work(OpType::ALLGATHER_COALESCED, m, Order::kIssue, inputs, flat_outs, opts.timeout);
  at::Tensor flat = stage(block * size_);
  char *mine = bytes(flat) + block * rank_; /* in place: this rank's block where it lands */
  for (const at::Tensor &t : inputs)
    copyBytes(mine, t.data_ptr(), t.nbytes()), mine += t.nbytes();
  w->staging.push_back(flat);
  w->copy_out = [outputs, flat, block, n = static_cast<size_t>(size_)] {
    for (size_t j = 0; j < n; j++) {
      const char *q = bytes(flat) + j * block;
      for (const auto &t : outputs[j])
        copyBytes(t.data_ptr(), q, t.nbytes()), q += t.nbytes();
    }
  };
  char *send = bytes(flat) + block * rank_;
  return post(w, [&](baton_request_t **r) {
    return baton_iallgather(send, flat.data_ptr(), block, BATON_UINT8, comm_, r);
  });
}

/* gather's outputs and scatter's inputs: one list of size tensors like
 * `like` on the root, nothing elsewhere. */
std::vector<at::Tensor> ProcessGroupBaton::rootList(const char *m, const char *name,
                                                    std::vector<std::vector<at::Tensor>> &lists,
                                                    int root, const char *likeName,
                                                    const at::Tensor &like) const {
  if (rank_ != root) {
    TORCH_CHECK(lists.empty(), "baton ", m, ": ", name, " must be empty on rank ", rank_,
                ", which is not the root (", root, ")");
    return {};
  }
  TORCH_CHECK(lists.size() == 1, "baton ", m, ": ", name, " holds ", lists.size(),
              " lists on the root; baton takes exactly one");
  std::string first = c10::str(name, "[0]");
  checkCount(m, first.c_str(), lists[0].size(), size_);
  for (size_t j = 0; j < lists[0].size(); j++)
    checkLike({m, name, 0, (int64_t)j}, lists[0][j], {m, likeName, 0}, like, like.numel());
  return lists[0];
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupBaton::gather(std::vector<std::vector<at::Tensor>> &outputs,
                          std::vector<at::Tensor> &inputs, const c10d::GatherOptions &opts) {
  const char *m = "gather";
  at::Tensor &in = one(m, "input_tensors", inputs);
  baton_dtype_t dt = checkTensor({m, "input_tensors", 0}, in);
  checkRoot(m, opts.rootRank, size_);
  int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> outs = rootList(m, "output_tensors", outputs, root, "input_tensors", in);
  auto w = work(OpType::GATHER, m, Order::kIssue, {in}, outs, opts.timeout);
  size_t block = in.nbytes();
  void *recv = nullptr;
  if (rank_ == root) {
    if (run(outs, block) && apartOrAt(in, bytes(outs[0]), block, size_, rank_)) {
      recv = outs[0].data_ptr();
    } else {
      at::Tensor flat = stage(block * size_);
      w->staging.push_back(flat);
      w->copy_out = [outs, flat, block] {
        for (size_t j = 0; j < outs.size(); j++)
          copyBytes(outs[j].data_ptr(), bytes(flat) + j * block, block);
      };
      recv = flat.data_ptr();
    }
  }
  return post(w, [&](baton_request_t **r) {
    return baton_igather(in.data_ptr(), recv, count(in), dt, root, comm_, r);
  });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupBaton::scatter(std::vector<at::Tensor> &outputs,
                           std::vector<std::vector<at::Tensor>> &inputs,
                           const c10d::ScatterOptions &opts) {
  const char *m = "scatter";
  at::Tensor &out = one(m, "output_tensors", outputs);
  baton_dtype_t dt = checkTensor({m, "output_tensors", 0}, out);
  checkRoot(m, opts.rootRank, size_);
  int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> ins = rootList(m, "input_tensors", inputs, root, "output_tensors", out);
  auto w = work(OpType::SCATTER, m, Order::kIssue, ins, {out}, opts.timeout);
  size_t block = out.nbytes();
  const void *send = nullptr;
  if (rank_ == root) {
    if (run(ins, block) && apartOrAt(out, bytes(ins[0]), block, size_, rank_)) {
      send = ins[0].data_ptr();
    } else { /* packed now: the inputs are read as they are when scatter is called */
      at::Tensor flat = stage(block * size_);
      for (size_t j = 0; j < ins.size(); j++)
        copyBytes(bytes(flat) + j * block, ins[j].data_ptr(), block);
      w->staging.push_back(flat);
      send = flat.data_ptr();
    }
  }
  return post(w, [&](baton_request_t **r) {
    return baton_iscatter(send, out.data_ptr(), count(out), dt, root, comm_, r);
  });
}

/* ------------------------------------------------------------ reduce-scatter */

c10::intrusive_ptr<c10d::Work>
ProcessGroupBaton::_reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                                        const c10d::ReduceScatterOptions &opts) {
  const char *m = "_reduce_scatter_base";
  baton_dtype_t dt = checkTensor({m, "output"}, output);
  checkLike({m, "input"}, input, {m, "size * output"}, output, output.numel() * size_);
  baton_op_t op = batonOp(m, opts.reduceOp);
  auto w = work(OpType::_REDUCE_SCATTER_BASE, m, Order::kIssue, {input}, {output}, opts.timeout);
  return post(w, [&](baton_request_t **r) {
    return baton_ireduce_scatter(input.data_ptr(), output.data_ptr(), count(output), dt, op, comm_,
                                 r);
  });
}

/* inputs[0][j] is the block reduced onto rank j: packed now into a staging
 * buffer unless they lie one after the other; the result lands in the
 * output itself. */
c10::intrusive_ptr<c10d::Work>
ProcessGroupBaton::reduce_scatter(std::vector<at::Tensor> &outputs,
                                  std::vector<std::vector<at::Tensor>> &inputs,
                                  const c10d::ReduceScatterOptions &opts) {
  const char *m = "reduce_scatter";
  at::Tensor &out = one(m, "output_tensors", outputs);
  baton_dtype_t dt = checkTensor({m, "output_tensors", 0}, out);
  TORCH_CHECK(inputs.size() == 1, "baton reduce_scatter: input_tensors holds ", inputs.size(),
              " lists; baton takes exactly one");
  std::vector<at::Tensor> &ins = inputs[0];
  checkCount(m, "input_tensors[0]", ins.size(), size_);
  for (size_t j = 0; j < ins.size(); j++)
    checkLike({m, "input_tensors", 0, (int64_t)j}, ins[j], {m, "output_tensors", 0}, out,
              out.numel());
  baton_op_t op = batonOp(m, opts.reduceOp);
  auto w = work(OpType::REDUCE_SCATTER, m, Order::kIssue, ins, {out}, opts.timeout);
  size_t block = out.nbytes();
  const void *send;
  if (run(ins, block) && apartOrAt(out, bytes(ins[0]), block, size_, rank_)) {
    send = ins[0].data_ptr();
  } else {
    at::Tensor flat = stage(block * size_);
    for (size_t j = 0; j < ins.size(); j++)
      copyBytes(bytes(flat) + j * block, ins[j].data_ptr(), block);
    w->staging.push_back(flat);
    send = flat.data_ptr();
  }
  return post(w, [&](baton_request_t **r) {
    return baton_ireduce_scatter(send, out.data_ptr(), count(out), dt, op, comm_, r);
  });
}

/* ------------------------------------------------------------ alltoall */

/* The elements of t that go to (or come from) each rank, and where they
 * start: split[q] rows of t's first dimension, or equal shares without
 * splits. */
static void splitCounts(const char *m, const char *name, const at::Tensor &t,
                        const std::vector<int64_t> &split, int size, size_t *counts,
                        size_t *displs) {
  TORCH_CHECK(t.dim() >= 1, "baton ", m, ": ", name,
              " has no dimension to split along; it needs at least one");
  int64_t rows = t.size(0), row = rows ? t.numel() / rows : 0;
  TORCH_CHECK(!split.empty() || rows % size == 0, "baton ", m, ": ", name, " has ", rows,
              " rows, which do not split evenly over ", size, " ranks; pass split sizes");
  TORCH_CHECK(split.empty() || split.size() == static_cast<size_t>(size), "baton ", m, ": ", name,
              " split sizes hold ", split.size(), " entries; they need one per rank (", size, ")");
  int64_t sum = 0;
  for (int q = 0; q < size; q++) {
    int64_t n = split.empty() ? rows / size : split[q];
    TORCH_CHECK(n >= 0, "baton ", m, ": ", name, " split size ", q, " is negative (", n, ")");
    counts[q] = static_cast<size_t>(n * row);
    displs[q] = static_cast<size_t>(sum * row);
    sum += n;
  }
  TORCH_CHECK(sum == rows, "baton ", m, ": ", name, " split sizes add up to ", sum,
              " rows, but it has ", rows);
}

/* Without split sizes every rank's share is equal: baton_ialltoall. With
 * them (on any rank: so every rank must pass them or none),
 * baton_ialltoallv. Both straight between the caller's tensors. */
c10::intrusive_ptr<c10d::Work> ProcessGroupBaton::alltoall_base(
    at::Tensor &output, at::Tensor &input, std::vector<int64_t> &outputSplitSizes,
    std::vector<int64_t> &inputSplitSizes, const c10d::AllToAllOptions &opts) {
  const char *m = "alltoall_base";
  baton_dtype_t dt = checkTensor({m, "input"}, input);
  checkTensor({m, "output"}, output);
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "baton alltoall_base: output has dtype ",
              output.scalar_type(), " but input ", input.scalar_type());
  if (outputSplitSizes.empty() && inputSplitSizes.empty()) {
    TORCH_CHECK(output.numel() == input.numel() && input.numel() % size_ == 0,
                "baton alltoall_base: input has ", input.numel(), " elements and output ",
                output.numel(), "; without split sizes both need the same number, a multiple of ",
                size_);
    size_t n = count(input) / size_;
    auto w = work(OpType::ALLTOALL_BASE, m, Order::kIssue, {input}, {output}, opts.timeout);
    return post(w, [&](baton_request_t **r) {
      return baton_ialltoall(input.data_ptr(), output.data_ptr(), n, dt, comm_, r);
    });
  }
  auto w = work(OpType::ALLTOALL_BASE, m, Order::kIssue, {input}, {output}, opts.timeout);
  w->counts.resize(4 * static_cast<size_t>(size_));
  size_t *sc = w->counts.data(), *sd = sc + size_, *rc = sd + size_, *rd = rc + size_;
  splitCounts(m, "input", input, inputSplitSizes, size_, sc, sd);
  splitCounts(m, "output", output, outputSplitSizes, size_, rc, rd);
  TORCH_CHECK(sc[rank_] == rc[rank_], "baton alltoall_base: this rank (", rank_, ") sends itself ",
              sc[rank_], " elements but receives ", rc[rank_]);
  return post(w, [&](baton_request_t **r) {
    return baton_ialltoallv(input.data_ptr(), sc, sd, output.data_ptr(), rc, rd, dt, comm_, r);
  });
}

/* inputs[q] goes to rank q, outputs[q] comes from it: one baton_ialltoallv
 * of bytes straight between them, each block at its displacement from the
 * lowest; where they overlap, the inputs packed now into one staging
 * buffer, moved into another, copied into the outputs on completion. */
c10::intrusive_ptr<c10d::Work> ProcessGroupBaton::alltoall(std::vector<at::Tensor> &outputs,
                                                           std::vector<at::Tensor> &inputs,
                                                           const c10d::AllToAllOptions &opts) {
  const char *m = "alltoall";
  checkCount(m, "input_tensor_list", inputs.size(), size_);
  checkCount(m, "output_tensor_list", outputs.size(), size_);
  auto w = work(OpType::ALLTOALL, m, Order::kIssue, inputs, outputs, opts.timeout);
  w->counts.resize(4 * static_cast<size_t>(size_));
  size_t *sc = w->counts.data(), *sd = sc + size_, *rc = sd + size_, *rd = rc + size_;
  size_t sent = 0, received = 0;
  for (int q = 0; q < size_; q++) {
    checkTensor({m, "input_tensor_list", q}, inputs[q]);
    checkTensor({m, "output_tensor_list", q}, outputs[q]);
    TORCH_CHECK(inputs[q].scalar_type() == inputs[0].scalar_type() &&
                    outputs[q].scalar_type() == inputs[0].scalar_type(),
                "baton alltoall: input_tensor_list[", q, "] and output_tensor_list[", q,
                "] must have the dtype of input_tensor_list[0] (", inputs[0].scalar_type(), ")");
    sc[q] = inputs[q].nbytes(), sd[q] = sent, sent += sc[q];
    rc[q] = outputs[q].nbytes(), rd[q] = received, received += rc[q];
  }
  TORCH_CHECK(sc[rank_] == rc[rank_], "baton alltoall: input_tensor_list[", rank_, "] has ",
              inputs[rank_].numel(), " elements but output_tensor_list[", rank_, "] ",
              outputs[rank_].numel(), "; this rank's block to itself must fit");
  std::vector<Block> ins = blocksOf(inputs), outs = blocksOf(outputs), all = ins;
  all.insert(all.end(), outs.begin(), outs.end());
  if (disjoint(all)) { /* straight between the caller's tensors */
    char *sbase = displace(ins, sd), *rbase = displace(outs, rd);
    return post(w, [&](baton_request_t **r) {
      return baton_ialltoallv(sbase, sc, sd, rbase, rc, rd, BATON_UINT8, comm_, r);
    });
  }
  at::Tensor send = stage(sent), recv = stage(received);
  for (int q = 0; q < size_; q++)
    copyBytes(bytes(send) + sd[q], inputs[q].data_ptr(), sc[q]);
  w->staging = {send, recv};
  w->copy_out = [outputs, recv, rd] {
    for (size_t q = 0; q < outputs.size(); q++)
      copyBytes(outputs[q].data_ptr(), bytes(recv) + rd[q], outputs[q].nbytes());
  };
  return post(w, [&](baton_request_t **r) {
    return baton_ialltoallv(send.data_ptr(), sc, sd, recv.data_ptr(), rc, rd, BATON_UINT8, comm_,
                            r);
  });
}

/* ------------------------------------------------------------ messages, barrier */

static void checkPeer(const char *m, const char *what, int peer, int rank, int size, int tag) {
  TORCH_CHECK(peer >= 0 && peer < size && peer != rank, "baton ", m, ": ", what, " rank ", peer,
              " is not another rank of the group (this is rank ", rank, " of ", size, ")");
  TORCH_CHECK(tag >= 0, "baton ", m, ": tag ", tag, " is negative; baton's tags are >= 0");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBaton::send(std::vector<at::Tensor> &tensors,
                                                       int dstRank, int tag) {
  const char *m = "send";
  at::Tensor &t = one(m, "tensors", tensors);
  baton_dtype_t dt = checkTensor({m, "tensors", 0}, t);
  checkPeer(m, "destination", dstRank, rank_, size_, tag);
  auto w = work(OpType::SEND, m, Order::kAny, {}, {t}, std::chrono::milliseconds(0));
  return post(w, [&](baton_request_t **r) {
    return baton_isend(t.data_ptr(), count(t), dt, dstRank, tag, comm_, r);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBaton::recv(std::vector<at::Tensor> &tensors,
                                                       int srcRank, int tag) {
  const char *m = "recv";
  at::Tensor &t = one(m, "tensors", tensors);
  baton_dtype_t dt = checkTensor({m, "tensors", 0}, t);
  checkPeer(m, "source", srcRank, rank_, size_, tag);
  auto w = work(OpType::RECV, m, Order::kAny, {}, {t}, std::chrono::milliseconds(0));
  return post(w, [&](baton_request_t **r) {
    return baton_irecv(t.data_ptr(), count(t), dt, srcRank, tag, comm_, r);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBaton::recvAnysource(std::vector<at::Tensor> &, int) {
  TORCH_CHECK(false, "baton recv: a receive from any source (src=None) is not supported: baton "
                     "matches a message by its peer and tag, so pass src");
  return {};
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBaton::barrier(const c10d::BarrierOptions &opts) {
  auto w = work(OpType::BARRIER, "barrier", Order::kIssue, {}, {}, opts.timeout);
  return post(w, [&](baton_request_t **r) { return baton_ibarrier(comm_, r); });
}

} // namespace baton_torch
