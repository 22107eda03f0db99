// storage.hpp - the bytes behind tensors, shared by views. A Storage holds one block from the
// engine (kernels::allocate: its caching allocator, or plain allocation in reference mode) and
// gives it back when the last tensor viewing it dies.
#pragma once
#include <cstddef>

#include "framework/engine/kernels.hpp"

namespace headgrad {

class Storage {
public:
  explicit Storage(std::size_t nbytes) : nbytes_(nbytes), block_(kernels::allocate(nbytes)) {} // uninitialised
  ~Storage() { kernels::release(block_); }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return block_.data; }
  std::size_t nbytes() const { return nbytes_; }

private:
  std::size_t nbytes_;
  kernels::Block block_;
};

} // namespace headgrad
