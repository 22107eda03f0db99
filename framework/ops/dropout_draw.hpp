// dropout_draw.hpp - the one rule by which dropout draws its mask, shared by ops::dropout and the
// fused attention's dropout on the weights (attention.cpp): one uniform draw per element, in the
// elements' order, the element kept unless the draw falls below p. Two ops drawing n flags from
// the same generator state therefore draw the same flags and leave the generator in the same
// state. Private: only .cpp files include it.
#pragma once
#include "framework/core/random.hpp"

namespace headgrad::ops {

inline bool dropout_keeps(Generator& gen, double p) { return !(gen.uniform() < p); }

} // namespace headgrad::ops
