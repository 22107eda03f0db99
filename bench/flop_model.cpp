#include "bench/flop_model.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <tuple>

namespace headgrad::bench {

double forward_flops(const train::RunConfig& c) {
  const double B = static_cast<double>(c.batch), T = static_cast<double>(c.max_len), d = static_cast<double>(c.d_model);
  const double M = B * T, L = static_cast<double>(c.layers), f = static_cast<double>(c.ffn),
               V = static_cast<double>(c.vocab);
  return L * (8 * M * d * d + 4 * B * T * T * d + 4 * M * d * f) + 2 * M * d * V;
}

double step_flops(const train::RunConfig& c) { return 3 * forward_flops(c); }

std::string GemmShape::str() const {
  std::string s = fmt::format("{}{} {}x{}x{}", ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k);
  if (batch > 1) s += fmt::format(" x{}", batch);
  return s;
}

std::vector<GemmShape> model_gemm_shapes(const train::RunConfig& c) {
  const std::int64_t M = c.batch * c.max_len, T = c.max_len, d = c.d_model, dh = c.d_model / c.heads,
                     BH = c.batch * c.heads, L = c.layers;
  std::vector<GemmShape> all;
  // y (M, out) = x (M, in) W^T, W (out, in); backward dx = dy W, dW = dy^T x (framework/ops/linear.cpp)
  auto linear = [&](const char* name, std::int64_t in, std::int64_t out, std::int64_t count) {
    all.push_back({false, true, M, out, in, 1, count, fmt::format("{} fwd", name)});
    all.push_back({false, false, M, in, out, 1, count, fmt::format("{} dx", name)});
    all.push_back({true, false, out, in, M, 1, count, fmt::format("{} dW", name)});
  };
  linear("W_qkvo", d, d, 4 * L);
  linear("ffn.dense1", d, c.ffn, L);
  linear("ffn.dense2", c.ffn, d, L);
  linear("dense", d, c.vocab, 1);
  // per (batch row, head): S (T, T) = Q K^T; O (T, dh) = P V; backward dP = dO V^T, dV = P^T dO,
  // dQ = dS K, dK = dS^T Q
  all.push_back({false, true, T, T, dh, BH, L, "scores fwd"});
  all.push_back({false, false, T, dh, T, BH, L, "context fwd"});
  all.push_back({false, true, T, T, dh, BH, L, "context dP"});
  all.push_back({true, false, T, dh, T, BH, L, "context dV"});
  all.push_back({false, false, T, dh, T, BH, L, "scores dQ"});
  all.push_back({true, false, T, dh, T, BH, L, "scores dK"});

  std::vector<GemmShape> merged;
  for (const auto& g : all) {
    auto it = std::find_if(merged.begin(), merged.end(), [&](const GemmShape& x) {
      return std::tie(x.ta, x.tb, x.m, x.n, x.k, x.batch) == std::tie(g.ta, g.tb, g.m, g.n, g.k, g.batch);
    });
    if (it == merged.end()) {
      merged.push_back(g);
    } else {
      it->count += g.count;
      it->what += ", " + g.what;
    }
  }
  return merged;
}

} // namespace headgrad::bench
