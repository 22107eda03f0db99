// SGD, Adam, AdamW, RMSprop and Adagrad against torch.optim (torch 1.13, foreach=False) in float32: 20 steps on three
// parameters, one of which has no gradient in some steps (fixture: tests/reference/fixtures/
// optim_steps.safetensors, written by tests/reference/make_optim_fixture.py), for every option
// (momentum, dampening, nesterov, maximize, amsgrad, decoupled decay) and both zero_grad modes.
// Every parameter after every step must equal PyTorch's bit for bit; the per-parameter step
// counts must be PyTorch's too, and survive state() / io::restore_optimizer_state mid-run.
#include <doctest/doctest.h>

#include <fmt/format.h>
#include <memory>
#include <set>
#include <string>

#include "framework/io/restore.hpp"
#include "framework/io/safetensors.hpp"
#include "framework/ops/ops.hpp"
#include "framework/optim/optimizer.hpp"
#include "tests/golden_compare.hpp"
#include "tests/test_support.hpp"

using namespace headgrad;

namespace {

const char* const kNames[] = {"a", "b", "c"};
constexpr int kSteps = 20;

struct Fixture {
  io::SafetensorsFile file;
  Tensor get(const std::string& name) const {
    for (const auto& [n, t] : file.tensors)
      if (n == name) return t;
    return Tensor();
  }
};

const Fixture& fixture() {
  static const Fixture f{io::load_safetensors(golden::fixture_path("optim_steps"))};
  return f;
}

// Fresh float32 leaves holding the fixture's starting values.
nn::NamedTensors fresh_params() {
  nn::NamedTensors ps;
  for (const char* n : kNames) ps.emplace_back(n, golden::leaf_copy(fixture().get(std::string("init.") + n)));
  return ps;
}

// The fixture's configurations (make_optim_fixture.py's OPTIMIZERS), as headgrad's options.
std::unique_ptr<optim::Optimizer> make(const std::string& which, const nn::NamedTensors& ps) {
  using optim::AdamOptions;
  using optim::SGDOptions;
  if (which == "sgd" || which == "sgd_zeros") return std::make_unique<optim::SGD>(ps, SGDOptions{0.1, 0.9, 0.01});
  if (which == "sgd_nesterov")
    return std::make_unique<optim::SGD>(ps, SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true});
  if (which == "sgd_dampening_maximize")
    return std::make_unique<optim::SGD>(
        ps, SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .dampening = 0.3, .maximize = true});
  if (which == "sgd_plain") return std::make_unique<optim::SGD>(ps, SGDOptions{.lr = 0.1});
  if (which == "adam" || which == "adam_zeros")
    return std::make_unique<optim::Adam>(ps, AdamOptions{0.01, 0.9, 0.999, 1e-8, 0.01, false});
  if (which == "adamw") return std::make_unique<optim::Adam>(ps, AdamOptions{0.01, 0.9, 0.999, 1e-8, 0.1, true});
  if (which == "adam_amsgrad")
    return std::make_unique<optim::Adam>(
        ps, AdamOptions{.lr = 0.01, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.01, .amsgrad = true});
  if (which == "adam_maximize")
    return std::make_unique<optim::Adam>(ps, AdamOptions{.lr = 0.01, .weight_decay = 0.01, .maximize = true});
  if (which == "rmsprop") return std::make_unique<optim::RMSprop>(ps, optim::RMSpropOptions{.lr = 0.01});
  if (which == "rmsprop_centered_momentum")
    return std::make_unique<optim::RMSprop>(ps, optim::RMSpropOptions{.lr = 0.01, .alpha = 0.9, .eps = 1e-6,
                                                                      .weight_decay = 0.01, .momentum = 0.8,
                                                                      .centered = true});
  if (which == "rmsprop_momentum_maximize")
    return std::make_unique<optim::RMSprop>(ps, optim::RMSpropOptions{.lr = 0.005, .momentum = 0.9, .maximize = true});
  if (which == "rmsprop_zeros") return std::make_unique<optim::RMSprop>(ps, optim::RMSpropOptions{.lr = 0.01, .momentum = 0.5});
  if (which == "adagrad") return std::make_unique<optim::Adagrad>(ps, optim::AdagradOptions{.lr = 0.1});
  if (which == "adagrad_decay_maximize")
    return std::make_unique<optim::Adagrad>(ps, optim::AdagradOptions{.lr = 0.1, .lr_decay = 0.05, .weight_decay = 0.01,
                                                                      .initial_accumulator_value = 0.1, .eps = 1e-8,
                                                                      .maximize = true});
  if (which == "adagrad_zeros")
    return std::make_unique<optim::Adagrad>(ps, optim::AdagradOptions{.lr = 0.1, .weight_decay = 0.01});
  REQUIRE(which == "adamw_amsgrad_maximize");
  return std::make_unique<optim::Adam>(ps, AdamOptions{.lr = 0.01, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-8,
                                                       .weight_decay = 0.1, .decoupled = true, .amsgrad = true,
                                                       .maximize = true});
}

const char* const kConfigs[] = {"sgd",           "adam",          "adamw",
                                "sgd_nesterov",  "sgd_dampening_maximize", "sgd_plain",
                                "adam_amsgrad",  "adam_maximize", "adamw_amsgrad_maximize",
                                "sgd_zeros",     "adam_zeros",    "rmsprop",
                                "rmsprop_centered_momentum",     "rmsprop_momentum_maximize",
                                "adagrad",       "adagrad_decay_maximize",  "rmsprop_zeros",
                                "adagrad_zeros"};

// Each configuration's zero_grad mode, from the fixture's metadata: "none" or "zeros".
std::string zero_grad_mode(const std::string& which) { return fixture().file.metadata.at(which + ".zero_grad"); }

// The gradients of `step` as torch 1.13's zero_grad(set_to_none=False) loop leaves them: the
// optimizer zeroes every gradient it has, then a backward adds the step's gradient into each
// parameter it reaches (a real backward of sum(p * g)); the others keep their zeros.
void backward_into_zeroed(optim::Optimizer& opt, const nn::NamedTensors& ps, int step) {
  opt.zero_grad(/*set_to_none=*/false);
  Tensor loss;
  for (const auto& [n, p] : ps) {
    const Tensor g = fixture().get(fmt::format("grad.{}.{}", step, n));
    if (!g.defined()) continue;
    const Tensor term = ops::sum(ops::mul(p, g));
    loss = loss.defined() ? ops::add(loss, term) : term;
  }
  loss.backward();
}

// Sets each parameter's gradient for `step` as the fixture has it: a copy, or none at all.
// zero_for_missing gives a zero gradient instead of none (the negative control).
void set_grads(const nn::NamedTensors& ps, int step, bool zero_for_missing = false) {
  for (const auto& [n, p] : ps) {
    Tensor g = fixture().get(fmt::format("grad.{}.{}", step, n));
    if (!g.defined() && zero_for_missing) g = Tensor::zeros(p.shape());
    Tensor(p).zero_grad();
    if (g.defined()) p.impl()->grad = g.clone().impl_ptr();
  }
}

// A fresh optimizer `which` on copies of ps, given deep copies of `state` (as from a checkpoint
// file named `source`).
struct Resumed {
  nn::NamedTensors params;
  std::unique_ptr<optim::Optimizer> opt;
};
Resumed resumed_copy(const std::string& which, const nn::NamedTensors& ps, const nn::NamedTensors& state,
                     const std::string& source) {
  Resumed r;
  for (const auto& [n, p] : ps) r.params.emplace_back(n, golden::leaf_copy(p));
  r.opt = make(which, r.params);
  nn::NamedTensors copy;
  for (const auto& [n, t] : state) copy.emplace_back(n, t.clone());
  io::restore_optimizer_state(*r.opt, copy, source);
  return r;
}

// Steps `opt` on ps and the resumed copy on its own parameters from step `first` to kSteps with the
// same gradients: every parameter must end equal bit for bit.
void check_same_to_the_end(optim::Optimizer& opt, const nn::NamedTensors& ps, const Resumed& resumed, int first) {
  for (int step = first; step <= kSteps; ++step) {
    set_grads(ps, step);
    set_grads(resumed.params, step);
    opt.step();
    resumed.opt->step();
  }
  for (std::size_t i = 0; i < ps.size(); ++i) CHECK(ps[i].second.to_vector() == resumed.params[i].second.to_vector());
}

} // namespace

TEST_CASE("optimizers match torch.optim float32 bit for bit over 20 steps, every option, both zero_grad modes") {
  const golden::Tolerance tol{0, 0, true}; // bit for bit
  for (const std::string which : kConfigs) {
    CAPTURE(which);
    golden::Report report("optim_steps " + which);
    const nn::NamedTensors ps = fresh_params();
    auto opt = make(which, ps);
    const bool zeros = zero_grad_mode(which) == "zeros";
    double max_rel = 0;
    for (int step = 1; step <= kSteps; ++step) {
      if (zeros) backward_into_zeroed(*opt, ps, step);
      else set_grads(ps, step);
      opt->step();
      for (const auto& param : ps) {
        const std::string name = fmt::format("{}.{}.{}", which, step, param.first);
        const Tensor want = fixture().get(name);
        const golden::Result r = golden::compare(name, param.second, want, tol);
        if (step % 5 == 0 || step == 1) report.expect(name, param.second, want, tol); // printed: steps 1, 5, 10, ...
        else CHECK_MESSAGE(r.ok, r.line);
        max_rel = std::max(max_rel, r.max_rel);
      }
    }
    report.summary();
    MESSAGE(which << ": max relative difference over 20 steps and 3 parameters " << max_rel);
    // PyTorch's state['step'] per parameter: c had no gradient in 7 steps, b in 3 - or, with
    // zeroed gradients, c only in step 1 (before it ever had one)
    CHECK(opt->steps() == kSteps);
    CHECK(opt->param_steps(0) == kSteps);
    CHECK(opt->param_steps(1) == (zeros ? kSteps : kSteps - 3));
    CHECK(opt->param_steps(2) == (zeros ? kSteps - 1 : kSteps - 7));
  }
}

TEST_CASE("optimizers: zero_grad drops gradients by default and zeroes them in place with set_to_none = false") {
  const nn::NamedTensors ps = fresh_params();
  optim::SGD opt(ps, {.lr = 0.1});
  set_grads(ps, 2);
  const Tensor before = ps[0].second.grad();
  opt.zero_grad(/*set_to_none=*/false);
  CHECK(ps[0].second.grad().same(before)); // the same buffer, now zeros
  CHECK(before.to_vector() == std::vector<double>(12, 0.0));
  CHECK(ps[1].second.grad().defined());
  opt.zero_grad();
  for (const auto& [n, p] : ps) CHECK_MESSAGE(!p.grad().defined(), n);
  opt.zero_grad(false); // nothing to zero: stays undefined, as PyTorch's None
  CHECK(!ps[0].second.grad().defined());
}

TEST_CASE("optimizers: nesterov without momentum or with dampening is refused, as torch.optim.SGD") {
  const nn::NamedTensors ps = fresh_params();
  CHECK(test_support::contains(test_support::error_of<std::invalid_argument>([&] {
                                 optim::SGD(ps, {.lr = 0.1, .nesterov = true});
                               }),
                               "nesterov needs momentum > 0 and dampening 0"));
  CHECK_THROWS_AS(optim::SGD(ps, {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .nesterov = true}),
                  std::invalid_argument);
}

TEST_CASE("optimizers: AMSGrad's running max is saved and loaded with the state") {
  const nn::NamedTensors ps = fresh_params();
  auto opt = make("adam_amsgrad", ps);
  for (int step = 1; step <= 6; ++step) {
    set_grads(ps, step);
    opt->step();
  }
  const nn::NamedTensors state = opt->state();
  int maxes = 0;
  for (const auto& [n, t] : state) maxes += n.rfind("max_exp_avg_sq.", 0) == 0;
  CHECK(maxes == 3);
  const Resumed resumed = resumed_copy("adam_amsgrad", ps, state, "ams.st");
  check_same_to_the_end(*opt, ps, resumed, 7);
  // a state without the running max (written without amsgrad) is refused by name
  nn::NamedTensors plain;
  for (const auto& [n, t] : state)
    if (n.rfind("max_exp_avg_sq.", 0) != 0) plain.emplace_back(n, t.clone());
  CHECK(test_support::contains(
      test_support::error_of<std::invalid_argument>([&] { io::restore_optimizer_state(*resumed.opt, plain, "p.st"); }),
      "'max_exp_avg_sq.a' is missing"));
}

TEST_CASE("optimizers: a zero gradient is not a missing one (negative control)") {
  // Treating "no gradient" as a zero gradient advances c's step and decays its moments: Adam's
  // trajectory for c must then leave the fixture's.
  golden::Report report("optim_steps adam, zero instead of no gradient");
  const nn::NamedTensors ps = fresh_params();
  auto opt = make("adam", ps);
  for (int step = 1; step <= kSteps; ++step) {
    set_grads(ps, step, /*zero_for_missing=*/true);
    opt->step();
  }
  report.expect_mismatch("adam.20.c", ps[2].second, fixture().get("adam.20.c"), {1e-7, 1e-6, false});
  report.expect("adam.20.a", ps[0].second, fixture().get("adam.20.a"), {1e-7, 1e-6, false}); // a always had one
}

TEST_CASE("optimizers: per-parameter steps survive state() and restore_optimizer_state mid-run") {
  for (const std::string which : {"sgd", "adam", "adamw", "rmsprop_centered_momentum", "adagrad_decay_maximize"}) {
    CAPTURE(which);
    const nn::NamedTensors ps = fresh_params();
    auto opt = make(which, ps);
    for (int step = 1; step <= 10; ++step) {
      set_grads(ps, step);
      opt->step();
    }
    // after 10 steps: b missed steps 8-10, c missed 1, 4, 7, 10
    const auto state = opt->state();
    std::set<std::string> names;
    for (const auto& [n, t] : state) names.insert(n);
    CHECK(names.count("step") == 1);
    CHECK(names.count("step.a") == 0); // equal to "step": not stored
    CHECK(names.count("step.b") == 1);
    CHECK(names.count("step.c") == 1);

    // a fresh optimizer on copies, given deep copies of the state (as from a checkpoint file)
    const Resumed resumed = resumed_copy(which, ps, state, "mid.st");
    CHECK(resumed.opt->param_steps(1) == 7);
    CHECK(resumed.opt->param_steps(2) == 6);
    check_same_to_the_end(*opt, ps, resumed, 11);
  }
}

TEST_CASE("optimizers: a state with one step count (written before per-parameter counts) still loads") {
  const nn::NamedTensors ps = fresh_params();
  auto opt = make("adam", ps);
  nn::NamedTensors old_state;
  for (const auto& [n, t] : opt->state())
    if (n == "step") old_state.emplace_back(n, Tensor::from_ints({4}, {}));
    else old_state.emplace_back(n, t.clone());
  io::restore_optimizer_state(*opt, old_state, "old.st");
  CHECK(opt->steps() == 4);
  for (std::size_t i = 0; i < ps.size(); ++i) CHECK(opt->param_steps(i) == 4);
  // and a negative per-parameter count is refused, naming the entry
  old_state.emplace_back("step.b", Tensor::from_ints({-1}, {}));
  CHECK(test_support::contains(
      test_support::error_of<std::invalid_argument>([&] { io::restore_optimizer_state(*opt, old_state, "old.st"); }),
      "'step.b'"));
  CHECK(opt->param_steps(1) == 4); // refused: nothing changed
}

TEST_CASE("optimizers refuse an undefined parameter by name") {
  const nn::NamedTensors ps = {{"w", Tensor()}};
  CHECK(test_support::contains(test_support::error_of<std::invalid_argument>([&] { make("sgd", ps); }), "SGD: w"));
  CHECK(test_support::contains(test_support::error_of<std::invalid_argument>([&] { make("adam", ps); }), "Adam: w"));
  CHECK(test_support::contains(
      test_support::error_of<std::invalid_argument>([] { optim::clip_grad_norm({Tensor()}, 1.0); }), "clip_grad_norm"));
}
