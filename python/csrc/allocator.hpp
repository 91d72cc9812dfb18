/*
 * allocator.hpp - torch's CPU allocator over baton's local memory
 * (allocator.cpp), installed by `import baton.torch` when BATON_MEM_LOCAL=1.
 */
#pragma once

#include <cstddef>

namespace baton_torch {

/* Makes tensors of at least min_bytes come from baton_mem_alloc_local and
 * the rest from the allocator torch had; once per process (a second call
 * only changes min_bytes). Returns whether torch now allocates through it
 * (false where an allocator of a higher priority was installed before). */
bool installLocalAllocator(size_t min_bytes);

/* The blocks it handed out that are still held, for the tests. */
long localBlocksHeld();

} // namespace baton_torch
