// char_lm - trains a tiny causal character language model (model.hpp) on a text, saves it as a
// safetensors file that PyTorch loads (load_in_pytorch.py), and samples from it.
//
//   char_lm [--text FILE] [--steps N] [--batch N] [--lr X] [--threads N] [--seed N]
//           [--out FILE] [--sample N] [--temperature X] [--top-k N]
//
// The last 10% of the text is held out; its loss is printed before and during training.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <headgrad/headgrad.hpp> // the umbrella header: everything public

#include "model.hpp"
#include "text_data.hpp"

#ifndef CHAR_LM_DEFAULT_TEXT
#define CHAR_LM_DEFAULT_TEXT "alice.txt"
#endif

namespace {

using namespace headgrad;
using char_lm::Batch;
using char_lm::CharLM;

struct Options {
  std::string text = CHAR_LM_DEFAULT_TEXT, out = "char_lm.safetensors";
  std::int64_t steps = 300, batch = 16, threads = 1, seed = 1, sample = 200, top_k = 10;
  double lr = 3e-3, temperature = 0.8;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument(flag + " needs a value (see the top of char_lm.cpp)");
    const std::string value = argv[++i];
    if (flag == "--text") o.text = value;
    else if (flag == "--out") o.out = value;
    else if (flag == "--steps") o.steps = std::stoll(value);
    else if (flag == "--batch") o.batch = std::stoll(value);
    else if (flag == "--threads") o.threads = std::stoll(value);
    else if (flag == "--seed") o.seed = std::stoll(value);
    else if (flag == "--sample") o.sample = std::stoll(value);
    else if (flag == "--top-k") o.top_k = std::stoll(value);
    else if (flag == "--lr") o.lr = std::stod(value);
    else if (flag == "--temperature") o.temperature = std::stod(value);
    else throw std::invalid_argument("unknown flag " + flag + " (see the top of char_lm.cpp)");
  }
  return o;
}

// Mean cross-entropy of the next character (class axis last, as ops::cross_entropy takes it).
Tensor loss_of(const CharLM& model, const Batch& b) { return ops::cross_entropy(model.forward(b.inputs), b.targets); }

double eval_loss(CharLM& model, const Batch& b) {
  NoGradGuard no_grad; // no graph: evaluation only
  model.eval();
  const double loss = loss_of(model, b).item();
  model.train();
  return loss;
}

// Continues `prompt` by `n` characters, each drawn by ops::sample_logits from the logits of the
// last position (temperature 0: greedy). The input is cropped to the model's context.
std::string generate(CharLM& model, const char_lm::Vocabulary& vocab, const std::string& prompt, std::int64_t n,
                     const ops::SampleOptions& how, Generator& gen) {
  NoGradGuard no_grad;
  model.eval();
  std::vector<std::int64_t> tokens = vocab.encode(prompt);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t t = std::min<std::int64_t>(static_cast<std::int64_t>(tokens.size()), model.config.context);
    const std::vector<std::int64_t> window(tokens.end() - t, tokens.end());
    const Tensor logits = model.forward(Tensor::from_ints(window, {1, t}));            // (1, t, V)
    const Tensor next = ops::sample_logits(ops::slice(logits, 1, t - 1, t), how, gen); // (1, 1)
    tokens.push_back(next.to_int_vector()[0]);
  }
  model.train();
  return vocab.decode(tokens);
}

int run(const Options& o) {
  runtime::set_threads(static_cast<int>(o.threads));
  const std::string text = char_lm::read_text(o.text);
  const char_lm::Vocabulary vocab(text);
  const std::vector<std::int64_t> tokens = vocab.encode(text);
  const auto split = static_cast<std::ptrdiff_t>(tokens.size() * 9 / 10);
  const std::vector<std::int64_t> train_tokens(tokens.begin(), tokens.begin() + split);
  const std::vector<std::int64_t> val_tokens(tokens.begin() + split, tokens.end());

  Generator gen(static_cast<std::uint64_t>(o.seed));
  CharLM model({.vocab = vocab.size()}, gen);
  const Batch val = char_lm::all_windows(val_tokens, model.config.context);
  std::printf("text: %zu characters, vocabulary %lld, model: %lld parameters, held out: %lld windows of %lld\n",
              text.size(), static_cast<long long>(vocab.size()), static_cast<long long>(model.num_parameters()),
              static_cast<long long>(val.inputs.size(0)), static_cast<long long>(model.config.context));

  optim::Adam adam(model.named_parameters(), {.lr = o.lr});
  const double val_before = eval_loss(model, val);
  std::printf("step %5d  held-out loss %.4f\n", 0, val_before);
  double train_loss = 0;
  const std::int64_t log_every = std::max<std::int64_t>(o.steps / 6, 1);
  for (std::int64_t step = 1; step <= o.steps; ++step) {
    const Batch b = char_lm::random_windows(train_tokens, o.batch, model.config.context, gen);
    adam.zero_grad();
    const Tensor loss = loss_of(model, b);
    loss.backward();
    optim::clip_grad_norm(model.parameters(), 1.0);
    adam.step();
    train_loss = loss.item();
    if (step % log_every == 0 || step == o.steps)
      std::printf("step %5lld  train loss %.4f  held-out loss %.4f\n", static_cast<long long>(step), train_loss,
                  eval_loss(model, val));
  }
  const double val_after = eval_loss(model, val);
  std::printf("held-out loss: %.4f before training, %.4f after %lld steps\n", val_before, val_after,
              static_cast<long long>(o.steps));

  // The checkpoint: the parameters under PyTorch's names, and in the metadata (strings only) what
  // load_in_pytorch.py needs to rebuild the model and check it computes what we did.
  const std::vector<std::int64_t> check_tokens(val_tokens.begin(), val_tokens.begin() + model.config.context + 1);
  const Batch check = char_lm::all_windows(check_tokens, model.config.context); // one window
  const double check_loss = eval_loss(model, check);
  ops::SampleOptions greedy_choice;
  greedy_choice.temperature = 0; // the argmax: draws nothing
  const std::string greedy = generate(model, vocab, "Alice", 40, greedy_choice, gen);
  const std::map<std::string, std::string> metadata = {
      {"vocab", vocab.chars},
      {"context", std::to_string(model.config.context)},
      {"d_model", std::to_string(model.config.d_model)},
      {"heads", std::to_string(model.config.heads)},
      {"check_text", vocab.decode(check_tokens)},
      {"check_loss", fmt::format("{:.9g}", check_loss)},
      {"greedy", greedy}};
  io::save_safetensors(o.out, model.named_parameters(), metadata);

  // Read it back into a fresh model: the same loss, bit for bit.
  Generator other(static_cast<std::uint64_t>(o.seed) + 1);
  CharLM reloaded(model.config, other);
  io::restore_parameters(reloaded, io::load_safetensors(o.out).tensors, o.out);
  const double reloaded_loss = eval_loss(reloaded, check);
  std::printf("saved %s (%zu tensors); reloaded, its loss on a held-out window: %.9g (%s)\n", o.out.c_str(),
              model.named_parameters().size(), reloaded_loss, reloaded_loss == check_loss ? "same" : "DIFFERENT");

  std::printf("greedy:  %s\n", greedy.c_str());
  ops::SampleOptions sampling;
  sampling.temperature = o.temperature;
  sampling.top_k = o.top_k;
  const std::string sample = generate(model, vocab, "Alice", o.sample, sampling, gen);
  std::printf("sampled (temperature %.2f, top-k %lld): %s\n", o.temperature, static_cast<long long>(o.top_k),
              sample.c_str());
  return reloaded_loss == check_loss ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
  headgrad::runtime::configure(argc, argv); // the BLAS kernel for this CPU and the OpenMP wait policy
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "char_lm: %s\n", e.what());
    return 2;
  }
}
