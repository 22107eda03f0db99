// Builds against the installed package only (headers under <headgrad/...>, headgrad::headgrad):
// d/dx sum(x * x) = 2x, then multi-head self-attention from the models library - its output
// shape, a gradient for every parameter, and the float64 gradient check of its parameters.
// `consumer --configure` takes headgrad's start-up path first (runtime::configure); without it the
// program runs whatever BLAS kernel OpenBLAS picked, and is told at its first gemm if that is a slow
// fallback. Either way it prints the kernel it ran and the one this CPU would prefer.
#include <cmath>
#include <cstdio>
#include <string>

#include <headgrad/framework/core/gradcheck.hpp>
#include <headgrad/framework/ops/ops.hpp>
#include <headgrad/framework/engine/runtime/startup.hpp>
#include <headgrad/framework/engine/runtime/threads.hpp>
#include <headgrad/models/attention.hpp>

namespace {

using namespace headgrad;

bool square_gradient() {
  Tensor x = Tensor::from({1.0, -2.0, 3.0}, {3});
  x.set_requires_grad();
  ops::sum(x * x).backward();
  const auto g = x.grad().to_vector();
  const bool ok = g.size() == 3 && g[0] == 2.0 && g[1] == -4.0 && g[2] == 6.0;
  std::printf("consumer: grad of sum(x * x) = [%g, %g, %g] %s\n", g[0], g[1], g[2], ok ? "ok" : "WRONG");
  return ok;
}

bool attention_from_models() {
  Generator gen(7);
  models::MultiHeadAttention mha(/*embed_dim=*/8, /*num_heads=*/2, gen, DType::f64);
  const Tensor x = Tensor::normal({2, 5, 8}, 0.0, 1.0, gen, DType::f64);
  const Tensor y = mha.forward(x);
  ops::sum(y * y).backward();
  bool ok = y.shape() == Dims{2, 5, 8};
  for (const auto& [name, p] : mha.named_parameters()) {
    const Tensor g = p.grad();
    bool finite = g.defined();
    if (finite)
      for (double v : g.to_vector()) finite = finite && std::isfinite(v);
    if (!finite) std::printf("consumer: no finite gradient for %s\n", name.c_str());
    ok = ok && finite;
  }
  const GradcheckResult check = gradcheck_leaves([&] { return mha.forward(x); }, mha.parameters());
  std::printf("consumer: MultiHeadAttention(8, 2) output %s, %zu parameters, gradcheck %s\n",
              y.shape().str().c_str(), mha.parameters().size(), check.ok ? "ok" : "FAILED");
  if (!check.ok) std::printf("%s\n", check.summary().c_str());
  return ok && check.ok;
}

} // namespace

int main(int argc, char** argv) {
  const bool configure = argc > 1 && std::string(argv[1]) == "--configure";
  if (configure) runtime::configure(argc, argv);
  const bool ok = square_gradient() && attention_from_models();
  const std::string better = runtime::preferred_core("Prescott", runtime::cpu_features());
  std::printf("consumer: BLAS kernel %s (%s runtime::configure; this CPU's kernel in place of a fallback: %s)\n",
              runtime::blas_info().core.c_str(), configure ? "after" : "without", better.empty() ? "none" : better.c_str());
  return ok ? 0 : 1;
}
