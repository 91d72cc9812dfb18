/*
 * process_group.hpp - baton as a torch.distributed backend: a
 * c10d::ProcessGroup (PyTorch 1.13's API) whose every call is one baton
 * i-call on the group's communicator, and the c10d::Work that stands for it.
 *
 * Vocabulary:
 *  - a *work* is one torch call in flight: one baton request, the tensors it
 *    reads and writes (kept alive until it completes), and where torch's
 *    layout is not baton's (a list of tensors where baton wants one buffer),
 *    a *staging* buffer leased from the group's pool for the call and the
 *    *copy-out* that moves the result from it into the caller's tensors on
 *    completion;
 *  - a work is *claimed* by the one thread that drives its request
 *    (baton_wait or baton_test may be called once per request, and frees
 *    it); every other thread that wants it done waits for that one;
 *  - a *completer* is a thread of the process group that drives the works
 *    whose future was asked for, so that the future completes although
 *    nobody calls wait() (DDP's reducer only ever waits on the future),
 *    and the *dropped* works, which torch let go of before they completed
 *    (async_op=True and no wait), so that each is freed, with its tensors
 *    and staging, when its request completes;
 *  - a *handle* (WorkHandle) is what torch holds of a work: when torch lets
 *    go of the last one, the work is dropped.
 */
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "baton.h"

namespace baton_torch {

class ProcessGroupBaton;

/* How a work's request completes relative to the others of its group:
 * baton completes the collectives of one communicator in the order they
 * were issued, so one thread may wait for them one after the other without
 * ever holding a later one up (alltoallv included: it is one of them);
 * point-to-point messages complete in any order, so their completer polls
 * them all instead. */
enum class Order { kIssue, kAny };

class WorkBaton : public c10d::Work {
public:
  WorkBaton(ProcessGroupBaton *pg, int rank, c10d::OpType type, const char *name, Order order,
            std::vector<at::Tensor> inputs, std::vector<at::Tensor> outputs,
            std::chrono::milliseconds timeout);
  ~WorkBaton() override;

  /* Looks whether the request is done (baton_test), without waiting. */
  bool isCompleted() override;
  /* Done and without an error. */
  bool isSuccess() const override;
  /* Waits for the request (baton_wait; with a timeout, baton_wait_for
   * until it passes), copies the result out where the call staged it, and throws
   * the call's error, which names baton_comm_last_error(). timeout 0: the
   * call's own (the options'), else none but the group's, which baton
   * itself enforces. */
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  /* The output tensors. */
  std::vector<at::Tensor> result() override;
  /* A future that completes with the output tensors (a list) when the call
   * does, whether or not anybody calls wait(). */
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

  /* Drives the request as far as block allows: false when it is not done,
   * because block is false or the deadline (when given) passed first.
   * Never throws; the error, if any, stays for wait() and the future. */
  bool advance(bool block, const std::chrono::steady_clock::time_point *deadline);

  /* Torch let go of it (~WorkHandle): a work not yet completed goes to a
   * completer, which frees it when it completes. */
  void drop();

  Order order() const { return order_; }
  const char *name() const { return name_; }

  /* Set by the process group while it issues the call, before anybody else
   * can see the work. */
  baton_request_t *req = nullptr;
  std::vector<at::Tensor> staging; /* buffers baton uses in place of the caller's */
  std::function<void()> copy_out;  /* staging -> the caller's tensors, on success */
  std::vector<size_t> counts;      /* alltoallv's counts and displacements */

private:
  bool drive(bool block, const std::chrono::steady_clock::time_point *deadline);
  void finish();

  ProcessGroupBaton *pg_; /* valid while the work is not completed (see ~ProcessGroupBaton) */
  const char *name_;
  Order order_;
  std::vector<at::Tensor> inputs_;
  std::vector<at::Tensor> outputs_;
  std::chrono::milliseconds timeout_;
  int status_ = BATON_OK; /* the request's, once driven to its end */
  bool claimed_ = false;  /* under mutex_, with completed_ and exception_ of Work */
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

/* What post() returns to torch: each call goes to the work, and the last
 * reference's end drops it. The work itself is held by the group until it
 * completes, and by its completer. */
class WorkHandle : public c10d::Work {
public:
  WorkHandle(c10::intrusive_ptr<WorkBaton> work, int rank)
      : c10d::Work(rank, work->retrieveOpType()), work_(std::move(work)) {}
  ~WorkHandle() override { work_->drop(); }

  bool isCompleted() override { return work_->isCompleted(); }
  bool isSuccess() const override { return work_->isSuccess(); }
  std::exception_ptr exception() const override { return work_->exception(); }
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override {
    return work_->wait(timeout);
  }
  std::vector<at::Tensor> result() override { return work_->result(); }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return work_->getFuture(); }

private:
  c10::intrusive_ptr<WorkBaton> work_;
};

/* One thread that completes the works handed to it (see Order). Started by
 * the first work; stop() returns once it has drained what it holds. */
class Completer {
public:
  explicit Completer(Order order) : order_(order) {}
  ~Completer() { stop(); }
  void add(c10::intrusive_ptr<WorkBaton> work);
  void stop();

private:
  void run();
  void runInIssueOrder();
  void runInAnyOrder();

  Order order_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<c10::intrusive_ptr<WorkBaton>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

/* The staging buffers of one group, kept from call to call: a buffer is
 * leased to one work at a time as a byte tensor and comes back to the pool
 * when the last copy of that tensor goes (the work let go of it when it
 * completed); a lease finds the smallest free buffer that is large enough,
 * else grows a free one to the size asked (its pages touched then, so that
 * no later call pays their faults), else adds one, up to kMost. Past kMost
 * buffers leased at once a call gets a buffer of its own, freed with it. A
 * lease holds the pool, so the pool outlives every buffer it lent. */
class StagingPool : public std::enable_shared_from_this<StagingPool> {
public:
  static constexpr size_t kMost = 4;
  StagingPool() { buffers_.reserve(kMost); }
  ~StagingPool();
  at::Tensor lease(size_t nbytes);

private:
  struct Buffer {
    void *at = nullptr;
    size_t cap = 0;
    bool leased = false;
  };
  void giveBack(void *at);

  std::mutex mu_;
  std::vector<Buffer> buffers_;
};

/* The adapter between baton_kv_t and the group's c10d::Store. */
struct KvStore;

/* What the tensors over a group's registered memory share with the group:
 * a tensor may outlive its group, and may die in any thread, a call of the
 * group in flight or not. baton_mem_free wants no request in flight, so a
 * block whose tensor dies while one is waits in `unfreed` for the group's
 * next call or its end. Once the group is gone (pg null) the memory stays
 * this process's, as plain memory (baton.h). */
struct Registered {
  std::mutex mu;
  ProcessGroupBaton *pg = nullptr;
  std::vector<void *> unfreed;
  static void release(const std::shared_ptr<Registered> &r, void *ptr);
};

class ProcessGroupBaton : public c10d::ProcessGroup {
public:
  /* Makes the group's communicator with baton_comm_init_kv through store
   * (the group's PrefixStore), each of baton's waits bounded by timeout.
   * Throws std::runtime_error, with baton_last_init_error(), on failure. */
  ProcessGroupBaton(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
                    std::chrono::duration<float> timeout);
  /* Waits for every work still in flight (dropped ones included), then
   * destroys the communicator. */
  ~ProcessGroupBaton() override;

  const std::string getBackendName() const override { return "baton"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &tensors,
                                           const c10d::BroadcastOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &tensors,
                                           const c10d::AllreduceOptions &opts) override;
  c10::intrusive_ptr<c10d::Work>
  allreduce_coalesced(std::vector<at::Tensor> &tensors,
                      const c10d::AllreduceCoalescedOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor> &tensors,
                                        const c10d::ReduceOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>> &outputs,
                                           std::vector<at::Tensor> &inputs,
                                           const c10d::AllgatherOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor &output, at::Tensor &input,
                                                 const c10d::AllgatherOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>> &outputs,
                                                     std::vector<at::Tensor> &inputs,
                                                     const c10d::AllgatherOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>> &outputs,
                                        std::vector<at::Tensor> &inputs,
                                        const c10d::GatherOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor> &outputs,
                                         std::vector<std::vector<at::Tensor>> &inputs,
                                         const c10d::ScatterOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor> &outputs,
                                                std::vector<std::vector<at::Tensor>> &inputs,
                                                const c10d::ReduceScatterOptions &opts) override;
  c10::intrusive_ptr<c10d::Work>
  _reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                       const c10d::ReduceScatterOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor &output, at::Tensor &input,
                                               std::vector<int64_t> &outputSplitSizes,
                                               std::vector<int64_t> &inputSplitSizes,
                                               const c10d::AllToAllOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor> &outputs,
                                          std::vector<at::Tensor> &inputs,
                                          const c10d::AllToAllOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &tensors, int dstRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &tensors, int srcRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor> &tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &opts) override;

  /* For WorkBaton. */
  std::string failure(const char *what, int rc);      /* the error text of a failed call */
  void retire(WorkBaton *work);                       /* it completed: stop tracking it */
  void watch(const c10::intrusive_ptr<WorkBaton> &w); /* complete it without a wait() */
  size_t inFlight();                                  /* works issued and not completed */

  /* baton.torch.empty: nbytes of registered memory (baton_mem_alloc, so
   * collective over the group, with no work of it in flight) as a uint8
   * tensor, given back with baton_mem_free when the tensor is gone. */
  at::Tensor emptyRegistered(int64_t nbytes);
  /* Under the Registered's lock: frees its unfreed blocks unless a work is
   * in flight or another thread is issuing (then the next call does). */
  void freeIfIdle();

private:
  c10::intrusive_ptr<WorkBaton> work(c10d::OpType type, const char *name, Order order,
                                     std::vector<at::Tensor> inputs,
                                     std::vector<at::Tensor> outputs,
                                     std::chrono::milliseconds timeout);
  c10::intrusive_ptr<c10d::Work> post(c10::intrusive_ptr<WorkBaton> w,
                                      const std::function<int(baton_request_t **)> &call);
  void drain();
  void freeUnfreed(); /* under issue_mu_ and the Registered's lock */
  void reclaim();     /* under issue_mu_: freeUnfreed under the Registered's lock */
  at::Tensor stage(size_t nbytes) { return staging_->lease(nbytes); }
  std::vector<at::Tensor> rootList(const char *m, const char *name,
                                   std::vector<std::vector<at::Tensor>> &lists, int root,
                                   const char *likeName, const at::Tensor &like) const;

  KvStore *kv_; /* never freed: see KvStore */
  baton_comm_t *comm_ = nullptr;
  /* baton refuses calls on one communicator from two threads at once, and
   * DDP's reducer may call from autograd's threads: every issue, and every
   * read of baton_comm_last_error(), holds this. */
  std::mutex issue_mu_;
  std::shared_ptr<StagingPool> staging_ = std::make_shared<StagingPool>();
  std::mutex works_mu_;
  std::unordered_map<WorkBaton *, c10::intrusive_ptr<WorkBaton>> outstanding_;
  std::shared_ptr<Registered> registered_ = std::make_shared<Registered>();
  Completer in_order_{Order::kIssue};
  Completer any_order_{Order::kAny};
};

} // namespace baton_torch
