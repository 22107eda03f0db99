// dims.hpp - a fixed-capacity list of sizes (shape or strides). Tensors are built on every op, so
// their shape must not cost a heap allocation; 8 dims covers every model here
// (attention's head split needs 4).
#pragma once
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace headgrad {

inline constexpr int kMaxDims = 8;

class Dims {
public:
  Dims() = default;
  Dims(std::initializer_list<std::int64_t> v) { assign(v.begin(), v.end()); }
  Dims(const std::vector<std::int64_t>& v) { assign(v.begin(), v.end()); }
  template <typename It> Dims(It first, It last) { assign(first, last); }

  int size() const { return n_; }
  bool empty() const { return n_ == 0; }
  std::int64_t& operator[](int i) { return d_[i]; }
  std::int64_t operator[](int i) const { return d_[i]; }
  std::int64_t back() const { return d_[n_ - 1]; }
  std::int64_t* begin() { return d_; }
  std::int64_t* end() { return d_ + n_; }
  const std::int64_t* begin() const { return d_; }
  const std::int64_t* end() const { return d_ + n_; }
  void push_back(std::int64_t v) {
    if (n_ == kMaxDims) throw std::invalid_argument("tensor: more than 8 dimensions are not supported");
    d_[n_++] = v;
  }
  void pop_back() { --n_; }
  void resize(int n, std::int64_t fill = 0) {
    if (n > kMaxDims) throw std::invalid_argument("tensor: more than 8 dimensions are not supported");
    for (int i = n_; i < n; ++i) d_[i] = fill;
    n_ = static_cast<std::uint8_t>(n);
  }
  std::int64_t numel() const {
    std::int64_t p = 1;
    for (int i = 0; i < n_; ++i) p *= d_[i];
    return p;
  }
  friend bool operator==(const Dims& a, const Dims& b) {
    return a.n_ == b.n_ && std::equal(a.begin(), a.end(), b.begin());
  }
  std::string str() const; // "[2, 3]"

private:
  template <typename It> void assign(It first, It last) {
    n_ = 0;
    for (; first != last; ++first) push_back(static_cast<std::int64_t>(*first));
  }
  std::int64_t d_[kMaxDims] = {};
  std::uint8_t n_ = 0;
};

// A contiguous tensor seen as (outer, len, inner) around one axis: the layout in which the
// reductions, softmax and indexing along an axis walk it.
struct AxisLayout {
  std::int64_t outer = 1, len = 1, inner = 1;
};
AxisLayout axis_layout(const Dims& shape, int axis); // axis already wrapped

// Strides under which a tensor of (shape, strides) reads as `new_shape` with the same elements in
// the same row-major order and no copy, or nothing when no such strides exist (PyTorch's
// computeStride, the rule behind torch.Tensor.view): each run of axes that is contiguous in
// memory may be split or merged, axes of size 1 come and go freely.
std::optional<Dims> view_strides(const Dims& shape, const Dims& strides, const Dims& new_shape);

// Row-major strides of a contiguous tensor of this shape.
Dims contiguous_strides(const Dims& shape);
// Normalises a possibly negative axis against rank; throws invalid_argument naming the op.
int wrap_axis(int axis, int rank, const char* op);

} // namespace headgrad
