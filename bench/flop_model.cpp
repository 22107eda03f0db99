#include "bench/flop_model.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <stdexcept>
#include <tuple>

namespace headgrad::bench {

double forward_flops(const train::RunConfig& c) {
  const double B = static_cast<double>(c.batch), T = static_cast<double>(c.sequence_length()),
               d = static_cast<double>(c.d_model);
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
  const std::int64_t T = c.sequence_length(), M = c.batch * T, d = c.d_model, dh = c.d_model / c.heads,
                     BH = c.batch * c.heads, L = c.layers;
  std::vector<GemmShape> all;
  // y (M, out) = x (M, in) W^T, W (out, in); backward dx = dy W, dW = dy^T x (framework/ops/linear.cpp)
  auto linear = [&](const char* name, std::int64_t in, std::int64_t out, std::int64_t count) {
    all.push_back({false, true, M, out, in, 1, count, fmt::format("{} fwd", name), 'm'});
    all.push_back({false, false, M, in, out, 1, count, fmt::format("{} dx", name), 'm'});
    all.push_back({true, false, out, in, M, 1, count, fmt::format("{} dW", name), 'k'});
  };
  if (c.is_text()) { // models/gpt.cpp
    linear("attn.c_attn", d, 3 * d, L);
    linear("attn.c_proj", d, d, L);
    linear("mlp.c_fc", d, c.ffn, L);
    linear("mlp.c_proj", c.ffn, d, L);
    linear("lm_head", d, c.vocab, 1);
  } else { // models/transformer.cpp
    linear("W_qkvo", d, d, 4 * L);
    linear("ffn.dense1", d, c.ffn, L);
    linear("ffn.dense2", c.ffn, d, L);
    linear("dense", d, c.vocab, 1);
  }
  // per (batch row, head): S (T, T) = Q K^T; O (T, dh) = P V; backward dP = dO V^T, dV = P^T dO,
  // dQ = dS K, dK = dS^T Q
  all.push_back({false, true, T, T, dh, BH, L, "scores fwd", 'b'});
  all.push_back({false, false, T, dh, T, BH, L, "context fwd", 'b'});
  all.push_back({false, true, T, T, dh, BH, L, "context dP", 'b'});
  all.push_back({true, false, T, dh, T, BH, L, "context dV", 'b'});
  all.push_back({false, false, T, dh, T, BH, L, "scores dQ", 'b'});
  all.push_back({true, false, T, dh, T, BH, L, "scores dK", 'b'});

  std::vector<GemmShape> merged;
  for (const auto& g : all) {
    auto it = std::find_if(merged.begin(), merged.end(), [&](const GemmShape& x) {
      return std::tie(x.ta, x.tb, x.m, x.n, x.k, x.batch, x.rows_in) ==
             std::tie(g.ta, g.tb, g.m, g.n, g.k, g.batch, g.rows_in);
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

void check_flop_model(const train::RunConfig& c, const std::string& what) {
  double listed = 0;
  for (const auto& g : model_gemm_shapes(c)) listed += static_cast<double>(g.count) * g.flops();
  if (std::abs(listed - step_flops(c)) > 1e-9 * listed)
    throw std::logic_error(
        fmt::format("FLOP model mismatch for {}: formula {} vs gemm list {}", what, step_flops(c), listed));
}

} // namespace headgrad::bench
