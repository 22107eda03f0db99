// sample_command.cpp - `headgrad sample`: text from a checkpoint of `headgrad train --task text`,
// streamed character by character as it is generated (nanoGPT's sample.py). The checkpoint holds
// everything it needs: the model and the vocabulary.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <cstdio>
#include <fmt/format.h>

#include "framework/engine/runtime/threads.hpp"
#include "train/sample/generate.hpp"
#include "train/run/checkpoint.hpp"
#include "train/cli/cli_args.hpp"
#include "train/cli/commands.hpp"
#include "train/run/task_data.hpp"

namespace headgrad::cli {
namespace {

// The prompt's tokens; an empty prompt starts from a newline (nanoGPT's default start "\n") when
// the vocabulary has one, else from token 0.
std::vector<std::int64_t> prompt_tokens(const data::Tokenizer& tokenizer, const std::string& prompt) {
  if (!prompt.empty()) {
    try {
      return tokenizer.encode(prompt);
    } catch (const std::invalid_argument& e) {
      throw CliError(fmt::format("--prompt: {}", e.what()));
    }
  }
  try {
    return tokenizer.encode("\n");
  } catch (const std::invalid_argument&) {
    return {0};
  }
}

// Prints text as it comes: a byte tokenizer's bytes only once they make whole UTF-8 characters.
class Printer {
public:
  explicit Printer(bool bytes) : bytes_(bytes) {}
  void operator()(const std::string& piece) { write(bytes_ ? utf8_.push(piece) : piece); }
  void finish() { write(utf8_.flush() + "\n"); }

private:
  static void write(const std::string& s) {
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);
  }
  bool bytes_;
  data::Utf8Stream utf8_;
};

// --temperature: 0 (greedy) or a positive double up to 1e6. Any positive value is well defined:
// the sampler divides differences to the largest logit (<= 0) by it, so a tiny temperature gives
// 0 or -inf, i.e. the argmax. strtod reports a subnormal such as 1e-320 with ERANGE although it
// is exact enough, so the range is checked here, not by Args::real; only a value that underflows
// to 0 (1e-400) or overflows is refused, with the real bounds.
double temperature_of(const std::string& text) {
  const std::string bounds = fmt::format("--temperature must be 0 (greedy) or between {:.2g} and 1e6, got '{}'",
                                         std::numeric_limits<double>::denorm_min(), text);
  errno = 0;
  char* end = nullptr;
  const double t = std::strtod(text.c_str(), &end);
  const bool underflow = errno == ERANGE && t == 0.0 && text.find_first_of("123456789") != std::string::npos;
  if (text.empty() || *end != '\0' || underflow || !(t >= 0.0) || t > 1e6) throw CliError(bounds);
  return t;
}

} // namespace

int sample_command(int argc, char** argv) {
  Args args("sample",
            {{"checkpoint", Kind::text, "", "model.safetensors written by headgrad train --task text", "FILE"},
             {"prompt", Kind::text, "", "text to continue (default: a newline, as nanoGPT's sample.py)", "TEXT"},
             {"tokens", Kind::integer, "500", "tokens (characters) to generate (streamed: memory does not grow with it)"},
             {"temperature", Kind::text, "0.8",
              "divides the logits: < 1 safer, > 1 wilder; 0 = greedy (argmax); at most 1e6", "T"},
             {"top-k", Kind::integer, "200", "draw only among the k likeliest tokens (0 = all; above the vocabulary "
                                             "size: all)"},
             {"seed", Kind::integer, "1337", "the draws' seed: the same seed gives the same text"},
             {"no-cache", Kind::flag, "false", "recompute the whole context for every token (no key/value cache)"},
             {"timing", Kind::flag, "false", "print the generation speed to stderr at the end"},
             {"threads", Kind::integer, "1", "threads"}});
  args.parse(argc, argv, 2);
  if (args.print_help("sample --checkpoint FILE [flags]",
                      "Generates text from a checkpoint of headgrad train --task text, printing each character as it\n"
                      "is drawn. Every new token costs one position of the model (a key/value cache)."))
    return 0;
  const std::string path = args.text("checkpoint");
  if (path.empty()) throw CliError("--checkpoint FILE is required");
  models::GenerateOptions o;
  o.tokens = args.integer_at_least("tokens", 0);
  o.sample.temperature = temperature_of(args.text("temperature"));
  const std::int64_t top_k = args.integer_at_least("top-k", 0);
  const std::uint64_t seed = args.unsigned_integer("seed");
  o.kv_cache = !args.flag("no-cache");
  runtime::set_threads(thread_count(args));

  train::LoadedRun run = train::load_model_checkpoint(path);
  const data::Tokenizer tokenizer = train::checkpoint_tokenizer(run.config, run.metadata, path);
  auto* gpt = dynamic_cast<models::GPT*>(run.model.get());
  if (!gpt) throw CliError(fmt::format("{}: not a language model's checkpoint", path));
  // nanoGPT's min(top_k, vocabulary): a k past the vocabulary keeps every token
  if (top_k > 0 && top_k < tokenizer.size()) o.sample.top_k = top_k;
  const std::vector<std::int64_t> prompt = prompt_tokens(tokenizer, args.text("prompt"));

  Printer print(tokenizer.kind() == data::TokenizerKind::bytes);
  if (!args.text("prompt").empty()) print(args.text("prompt"));
  Generator gen(seed);
  const auto t0 = std::chrono::steady_clock::now();
  // streamed: nothing of the text is kept but the model's window (constant memory whatever --tokens)
  models::generate_streaming(*gpt, prompt, o, gen, [&](std::int64_t token) { print(tokenizer.decode(token)); });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  print.finish();
  if (args.flag("timing"))
    fmt::print(stderr, "sample: {} tokens in {:.3f} s ({:.0f} tokens/s, {} the key/value cache)\n", o.tokens, seconds,
               static_cast<double>(o.tokens) / std::max(seconds, 1e-9), o.kv_cache ? "with" : "without");
  return 0;
}

} // namespace headgrad::cli
