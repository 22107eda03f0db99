// trainer DIR STEPS THREADS: trains a small regression net of its own (dropout included) with
// train::Trainer into DIR, continuing DIR's checkpoint if there is one, 2 shards a batch on THREADS
// threads. Prints "step N: parameters crc32c XXXXXXXX" at the end: the CRC-32C of every
// parameter's bytes, which a resumed run must end with too.
#include <cstdio>
#include <cstdlib>
#include <string>

#include <headgrad/headgrad.hpp>

#include "../dropout_regression_net.hpp"

using namespace headgrad;

// the same net the in-tree Trainer tests train: Linear, ReLU, Dropout, Linear
struct Net : test_models::DropoutRegressionNet {
  Net() : DropoutRegressionNet(8, 64, 0.1, 42) {}
};

// Batch i: 32 rows of x ~ N(0, 1), y = the sum of the squares of x (a function to fit).
struct Squares {
  train::Batch batch(std::uint64_t i) const {
    Generator g(mix_seed(2024, i));
    Tensor x = Tensor::normal({32, 8}, 0.0, 1.0, g);
    return {{"x", x}, {"y", ops::sum(x * x, {1}, true)}};
  }
};

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: trainer DIR STEPS THREADS\n");
    return 2;
  }
  train::install_interrupt_handler();
  train::TrainerOptions options{.out_dir = argv[1], .steps = std::atoll(argv[2]), .seed = 7,
                                .threads = std::atoi(argv[3]), .shards = 2, .clip = 5.0};
  options.save_every = 3; // saves often: a kill lands during one now and then
  options.quiet = true;
  train::Trainer<Net> trainer(
      [] { return std::make_unique<Net>(); },
      [](Net& net, const train::Batch& b) {
        const Tensor d = net.forward(b["x"]) - b["y"];
        return ops::mean(d * d);
      },
      [](nn::NamedTensors p) { return std::make_unique<optim::Adam>(std::move(p), optim::AdamOptions{.lr = 3e-3}); },
      Squares{}, options);
  const std::int64_t start = trainer.step();
  const train::FitSummary done = trainer.fit();
  std::uint32_t crc = 0;
  for (const auto& [name, p] : trainer.model().named_parameters())
    crc = io::crc32c(p.data<float>(), static_cast<std::size_t>(p.numel()) * sizeof(float), crc);
  std::printf("step %lld (from %lld): loss %.6f, parameters crc32c %08x\n", static_cast<long long>(done.steps),
              static_cast<long long>(start), done.losses.empty() ? 0.0 : done.losses.back(), crc);
  return done.interrupted ? 1 : 0;
}
