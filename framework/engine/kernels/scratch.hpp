// scratch.hpp - a per-thread work buffer for the kernels built per instruction set.
#pragma once
#include <algorithm>
#include <cstddef>

#include "framework/engine/kernels/isa_namespace.hpp"

namespace headgrad::engine {
HEADGRAD_ISA_BEGIN

// A buffer that grows (its contents are not kept when it does; new space reads as zeros): what the
// kernels need of std::vector, without compiling std::vector's out-of-line code into a copy built
// per instruction set, which the linker would share with the rest of the program
// (isa_namespace.hpp).
template <typename T> class Scratch {
public:
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() { delete[] data_; }
  void resize(std::size_t n) {
    if (n <= size_) return;
    delete[] data_;
    data_ = new T[n];
    std::fill(data_, data_ + n, T(0));
    size_ = n;
  }
  T* data() { return data_; }
  T* begin() { return data_; }
  T& operator[](std::size_t i) { return data_[i]; }

private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

HEADGRAD_ISA_END
} // namespace headgrad::engine
