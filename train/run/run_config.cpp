#include "train/run/run_config.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fmt/format.h>
#include <stdexcept>

namespace headgrad::train {
namespace {

// "a, b or c"
std::string choice_list(const std::vector<std::string>& choices) {
  std::string s;
  for (std::size_t i = 0; i < choices.size(); ++i)
    s += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
  return s;
}

template <typename Int> std::string integer_rule_error(const FieldInfo& f, Int v) {
  if (f.rule.kind != Rule::Kind::at_least || static_cast<double>(v) >= f.rule.min) return "";
  return fmt::format("--{} must be at least {}, got {}", f.flag, static_cast<std::int64_t>(f.rule.min), v);
}

} // namespace

models::StackConfig RunConfig::stack_config() const {
  return {.vocab = vocab,
          .d_model = d_model,
          .heads = heads,
          .layers = layers,
          .ffn = ffn,
          .dropout = dropout,
          .attention = attention == "composed" ? models::AttentionPath::composed : models::AttentionPath::fused};
}

models::ModelConfig RunConfig::model_config() const {
  models::ModelConfig m;
  static_cast<models::StackConfig&>(m) = stack_config();
  m.max_len = max_len;
  return m;
}

RunConfig RunConfig::text_defaults() {
  return {.task = data::Task::text, .steps = 2000, .batch = 12, .d_model = 128, .heads = 4, .layers = 4, .ffn = 4 * 128,
          .lr = 1e-3, .optimizer = "adamw", .weight_decay = 0.1, .warmup = 100, .schedule = "cosine", .clip = 1.0,
          .dropout = 0.0, .beta2 = 0.99, .min_lr = 1e-4, .decay = "matrices", .context = 64};
}

models::GPTConfig RunConfig::gpt_config() const {
  models::GPTConfig g;
  static_cast<models::StackConfig&>(g) = stack_config();
  g.block_size = context;
  g.tie_weights = tie_weights == "on";
  return g;
}

data::TaskConfig RunConfig::task_config() const { return data::TaskConfig{task, vocab, min_len, max_len}; }

void RunConfig::validate() const {
  visit_run_fields([this](const FieldInfo& f, auto member) {
    if (const std::string error = rule_error(f, this->*member); !error.empty()) throw std::invalid_argument(error);
  });
  // the models' own check, naming the flags
  models::validate_stack(stack_config(), {.vocab = "--vocab", .d_model = "--d-model", .heads = "--heads",
                                          .layers = "--layers", .ffn = "--ffn", .dropout = "--dropout"});
  if (task == data::Task::tokens && data.empty())
    throw std::invalid_argument("--task tokens reads the token files of --data DIR: give it");
  if (context > data::kMaxSeqLen)
    throw std::invalid_argument(fmt::format("--context must be at most {}, got {}", data::kMaxSeqLen, context));
  if (min_lr > lr)
    throw std::invalid_argument(fmt::format("--min-lr ({}) must not exceed --lr ({})", min_lr, lr));
  if (shards > batch)
    throw std::invalid_argument(
        fmt::format("--shards {} exceeds --batch {}: every shard needs a sequence of each batch", shards, batch));
  if (min_len > max_len)
    throw std::invalid_argument(fmt::format("--min-len ({}) must not exceed --max-len ({})", min_len, max_len));
  if (max_len > data::kMaxSeqLen)
    throw std::invalid_argument(fmt::format("--max-len must be at most {}, got {}", data::kMaxSeqLen, max_len));
  if (task == data::Task::sort && vocab < 3)
    throw std::invalid_argument(
        fmt::format("--vocab must be at least 3 for sort (two distinct tokens besides padding), got {}", vocab));
  if (!is_text())
    if (const std::int64_t space = data::task_space_size(task_config()); space < data::kMinSplitSpace)
      throw std::invalid_argument(fmt::format(
          "--vocab {} with --min-len {} --max-len {} gives {} distinct sequences, too few to split into training and "
          "held-out sequences (at least {}: raise --vocab or --max-len)",
          vocab, min_len, max_len, space, data::kMinSplitSpace));
}

std::string metadata_key(const FieldInfo& field) {
  std::string key = field.flag;
  std::replace(key.begin(), key.end(), '-', '_');
  return key;
}

std::string to_text(data::Task v) { return data::task_name(v); }
std::string to_text(std::int64_t v) { return std::to_string(v); }
std::string to_text(std::uint64_t v) { return std::to_string(v); }
std::string to_text(double v) { return fmt::format("{}", v); } // shortest round-trip form
std::string to_text(const std::string& v) { return v; }

bool from_text(const std::string& text, data::Task& v) {
  try {
    v = data::parse_task(text);
    return true;
  } catch (const std::invalid_argument&) {
    return false;
  }
}

bool from_text(const std::string& text, std::int64_t& v) {
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end || errno) return false;
  v = x;
  return true;
}

bool from_text(const std::string& text, std::uint64_t& v) {
  // strtoull would take "-1" as 2^64 - 1: only digits are a non-negative integer
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return false;
  errno = 0;
  const unsigned long long x = std::strtoull(text.c_str(), nullptr, 10);
  if (errno) return false;
  v = x;
  return true;
}

bool from_text(const std::string& text, double& v) {
  char* end = nullptr;
  const double x = std::strtod(text.c_str(), &end);
  if (text.empty() || *end) return false;
  v = x;
  return true;
}

bool from_text(const std::string& text, std::string& v) {
  v = text;
  return true;
}

const char* value_kind(const data::Task&) { return "a task (copy, reverse, sort, text or tokens)"; }
const char* value_kind(const std::int64_t&) { return "an integer"; }
const char* value_kind(const std::uint64_t&) { return "a non-negative integer"; }
const char* value_kind(const double&) { return "a number"; }
const char* value_kind(const std::string&) { return "text"; }

std::string rule_error(const FieldInfo&, data::Task) { return ""; } // every Task value is a task
std::string rule_error(const FieldInfo& f, std::int64_t v) { return integer_rule_error(f, v); }
std::string rule_error(const FieldInfo& f, std::uint64_t v) { return integer_rule_error(f, v); }

std::string rule_error(const FieldInfo& f, double v) {
  // written so that NaN fails every rule
  switch (f.rule.kind) {
  case Rule::Kind::at_least:
    return v >= f.rule.min ? "" : fmt::format("--{} must be >= {}{}, got {}", f.flag, f.rule.min, f.rule.note, v);
  case Rule::Kind::positive: return v > 0 ? "" : fmt::format("--{} must be positive, got {}", f.flag, v);
  case Rule::Kind::fraction:
    return v >= 0 && v < 1 ? "" : fmt::format("--{} must be in [0, 1), got {}", f.flag, v);
  default: return "";
  }
}

std::string rule_error(const FieldInfo& f, const std::string& v) {
  const auto& c = f.rule.choices;
  if (f.rule.kind != Rule::Kind::one_of || std::find(c.begin(), c.end(), v) != c.end()) return "";
  return fmt::format("--{} must be {}, got '{}'", f.flag, choice_list(c), v);
}

std::vector<ResumeConflict> resume_conflicts(const RunConfig& run, const RunConfig& checkpoint, bool reshard) {
  std::vector<ResumeConflict> out;
  visit_run_fields([&](const FieldInfo& f, auto member) {
    // (the text is compared by its contents' fingerprint, not its path: TaskData::check_same_text)
    if (must_match_on_resume(f.role) && !(reshard && f.role == Role::layout) && f.flag != std::string("text") &&
        run.*member != checkpoint.*member)
      out.push_back({f, to_text(run.*member), to_text(checkpoint.*member)});
  });
  return out;
}

} // namespace headgrad::train
