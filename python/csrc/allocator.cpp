/*
 * allocator.cpp - torch's CPU allocator over baton's local memory.
 *
 * baton_mem_alloc_local hands out memory that the peers on the host map the
 * first time a call uses it (baton.h), so a collective whose tensors lie in
 * it on every rank runs direct: each byte read where it lies and written
 * where it goes once. With this allocator installed, torch's own CPU
 * tensors of min_bytes and more (what the collectives move: gradients,
 * DDP's buckets, all_to_all's outputs) are such memory, with no change to
 * the caller's code. Smaller ones, and any the pool refuses (past its file
 * descriptor budget), come from the allocator torch had before.
 *
 * Torch frees a tensor's memory through the DataPtr's deleter, which for
 * local memory gives the block back to baton's pool; raw_deleter serves
 * the code that allocates through raw_allocate, for either kind, so one
 * deleter asks which kind it has before it frees.
 */
#include "allocator.hpp"

#include <atomic>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include "baton.h"

namespace baton_torch {
namespace {

std::atomic<long> held{0};
at::DeleterFnPtr fallbackRaw = nullptr;

/* Local memory back to the pool, in one visit to the pool's lock. A
 * local block a forked child inherited is not the child's to free
 * (baton.h: baton_mem_free_local refuses it), so it stays mapped. */
void freeLocal(void *p) {
  if (p && baton_mem_free_local(p) == BATON_OK)
    held.fetch_sub(1, std::memory_order_relaxed);
}

/* What raw_allocate handed out: local memory, or the previous
 * allocator's. */
void freeRaw(void *p) {
  if (p && baton_mem_is_local(p))
    freeLocal(p);
  else if (p && fallbackRaw)
    fallbackRaw(p);
}

class LocalAllocator final : public at::Allocator {
public:
  explicit LocalAllocator(at::Allocator *fallback) : fallback_(fallback) {}

  at::DataPtr allocate(size_t n) const override {
    if (n >= min_bytes_.load(std::memory_order_relaxed)) {
      void *p = nullptr;
      if (baton_mem_alloc_local(n, &p) == BATON_OK) {
        held.fetch_add(1, std::memory_order_relaxed);
        return {p, p, &freeLocal, at::Device(at::DeviceType::CPU)};
      }
    }
    return fallback_->allocate(n);
  }

  at::DeleterFnPtr raw_deleter() const override { return &freeRaw; }

  void setMin(size_t b) { min_bytes_.store(b ? b : 1, std::memory_order_relaxed); }

private:
  at::Allocator *fallback_;
  std::atomic<size_t> min_bytes_{1};
};

} // namespace

bool installLocalAllocator(size_t min_bytes) {
  /* Made once and never freed: tensors made through it may outlive any
   * owner (torch keeps the pointer for the process's life). */
  static LocalAllocator *alloc = [] {
    at::Allocator *before = c10::GetCPUAllocator();
    fallbackRaw = before->raw_deleter();
    return new LocalAllocator(before);
  }();
  alloc->setMin(min_bytes);
  c10::SetCPUAllocator(alloc, /*priority=*/1);
  return c10::GetCPUAllocator() == alloc;
}

long localBlocksHeld() { return held.load(std::memory_order_relaxed); }

} // namespace baton_torch
