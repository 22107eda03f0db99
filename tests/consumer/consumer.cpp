// Builds against the installed package and checks a gradient: d/dx sum(x * x) = 2x.
#include <cstdio>
#include <framework/ops/ops.hpp>

int main() {
  using namespace headgrad;
  Tensor x = Tensor::from({1.0, -2.0, 3.0}, {3});
  x.set_requires_grad();
  ops::sum(x * x).backward();
  const auto g = x.grad().to_vector();
  const bool ok = g.size() == 3 && g[0] == 2.0 && g[1] == -4.0 && g[2] == 6.0;
  std::printf("consumer: grad = [%g, %g, %g] %s\n", g[0], g[1], g[2], ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
