// dropout_regression_net.hpp - the model of a user's own that the Trainer tests train: Linear,
// ReLU, Dropout, Linear to one output (dropout included: its masks are part of what a checkpoint
// must keep). Shared by tests/test_fit.cpp, tests/mpi/rank_program.cpp and the program built
// against the installed package (tests/trainer_consumer/trainer.cpp). It includes no headgrad
// header itself: the in-tree tests include framework/nn/layers.hpp and framework/ops/ops.hpp before
// it, the installed-package program <headgrad/headgrad.hpp>.
#pragma once
#include <cstdint>
#include <memory>

namespace test_models {

struct DropoutRegressionNet : headgrad::nn::Module {
  DropoutRegressionNet(std::int64_t in, std::int64_t hidden, double dropout, std::uint64_t seed) {
    headgrad::Generator g(seed);
    fc1 = register_module("fc1", std::make_shared<headgrad::nn::Linear>(in, hidden, true, g));
    drop = register_module("drop", std::make_shared<headgrad::nn::Dropout>(dropout));
    fc2 = register_module("fc2", std::make_shared<headgrad::nn::Linear>(hidden, 1, true, g));
  }
  headgrad::Tensor forward(const headgrad::Tensor& x) {
    return fc2->forward(drop->forward(headgrad::ops::relu(fc1->forward(x))));
  }
  std::shared_ptr<headgrad::nn::Linear> fc1, fc2;
  std::shared_ptr<headgrad::nn::Dropout> drop;
};

} // namespace test_models
