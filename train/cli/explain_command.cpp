// explain_command.cpp - `headgrad explain`: multi-head attention on a tiny example, every tensor
// and every gradient printed (train/explain/).
#include <cstdint>
#include <fmt/format.h>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "train/cli/cli_args.hpp"
#include "train/cli/commands.hpp"
#include "train/explain/explain.hpp"

namespace headgrad::cli {

namespace {

using explain::ExplainOptions;

// An int member read within bounds (--precision; explain checks them too).
struct BoundedInt {
  int ExplainOptions::*member;
  std::int64_t min, max;
};
// Where a flag's value goes in ExplainOptions; the member's type says how the flag is read.
using Member = std::variant<std::int64_t ExplainOptions::*, std::uint64_t ExplainOptions::*, BoundedInt,
                            double ExplainOptions::*, bool ExplainOptions::*, std::string ExplainOptions::*>;

// What a flag applies to; the command refuses it where it does not.
enum class Applies {
  random_sizes, // the random attention example's sizes: --input FILE gives its own, --layer-norm has fixed ones
  attention,    // the attention example (not --layer-norm)
  every,        // every example
};

// One row per flag. Each flag is named once, for the parser, for ExplainOptions and for the checks
// of what it applies to; its default is the member's initialiser.
struct ExplainFlag {
  std::string name;
  Member member;
  std::string help;
  std::string metavar = "";
};
struct FlagGroup {
  Applies applies;
  std::vector<ExplainFlag> flags;
};

// The flags in --help order, grouped by concern.
const std::vector<FlagGroup> kExplainFlags = {
    {Applies::random_sizes,
     {{"batch", &ExplainOptions::batch, "batch size"},
      {"queries", &ExplainOptions::queries, "number of queries"},
      {"keys", &ExplainOptions::keys, "number of key-value pairs"},
      {"hidden", &ExplainOptions::hidden, "num_hiddens (also query/key/value size)"},
      {"heads", &ExplainOptions::heads, "number of heads (must divide --hidden)"},
      {"valid-len", &ExplainOptions::valid_len, "valid length of every batch row (keys beyond are masked)"}}},
    {Applies::every,
     {{"seed", &ExplainOptions::seed, "seed of the random inputs and weights"},
      {"precision", BoundedInt{&ExplainOptions::precision, 0, 12}, "decimals printed"}}},
    // the attention module and its loss
    {Applies::attention,
     {{"bias", &ExplainOptions::bias, "projections with biases (d2l's bias=True)"},
      {"self-attention", &ExplainOptions::self_attention,
       "one input X (batch, keys, hidden) for queries, keys and values; dX is printed as its three terms and their "
       "sum"},
      {"causal", &ExplainOptions::causal,
       "query i also keeps only keys j <= i (d2l's decoder: a valid length per query)"},
      {"loss", &ExplainOptions::loss,
       "r: L = sum(output * R) for a random R; cross-entropy: the output as logits against random targets, "
       "positions t >= valid-len masked", "NAME"},
      {"dropout", &ExplainOptions::dropout,
       "dropout on the attention weights with a fixed random mask (printed, with its 1/(1-p))", "P"}}},
    // what is shown besides the stages
    {Applies::attention,
     {{"fused", &ExplainOptions::fused,
       "also the fused kernel's backward per head: dP, D = rowsum(dO * O) = rowsum(dP * P), dS, and "
       "ops::attention's gradients"},
      {"svg", &ExplainOptions::svg,
       "also draw every stage and each head's gradients to this SVG (numbers in panels up to 8x8, masked entries "
       "hatched)", "FILE"},
      {"shared-scale", &ExplainOptions::shared_scale,
       "--svg: one colour scale for all signed panels (default: each panel its own)"},
      {"graph", &ExplainOptions::graph,
       "also write the autograd graph (per node what it holds, op, shape, gradient norm; data and grad of tensors "
       "of at most 8 elements) as DOT, and SVG when Graphviz's dot is installed", "FILE"}}},
    // where the example comes from, instead of --seed
    {Applies::attention,
     {{"fixture", &ExplainOptions::fixture,
       "use inputs/weights from a PyTorch fixture (tests/reference); gradients are printed beside PyTorch's", "FILE"},
      {"input", &ExplainOptions::input,
       "your own example from a text file: queries, keys, values, valid_lens, num_heads (and optionally the "
       "weights and grad_output); the format: docs/backprop-through-attention.md", "FILE"}}},
    {Applies::every,
     {{"summary", &ExplainOptions::summary,
       "one line per tensor (shape, all 0 or its largest |entry|) instead of its values"},
      {"layer-norm", &ExplainOptions::layer_norm,
       "instead of attention, layer norm of two rows step by step: forward through mu, var, rstd, xhat; backward "
       "in closed form, checked against autograd"}}}};

// Calls fn(flag, what it applies to) for every flag, in --help order.
template <typename Fn> void for_each_flag(Fn&& fn) {
  for (const FlagGroup& group : kExplainFlags)
    for (const ExplainFlag& flag : group.flags) fn(flag, group.applies);
}

// A bool member is a flag, a string one text, a double real, the rest integers.
Kind kind_of(const Member& member) {
  if (std::holds_alternative<bool ExplainOptions::*>(member)) return Kind::flag;
  if (std::holds_alternative<std::string ExplainOptions::*>(member)) return Kind::text;
  if (std::holds_alternative<double ExplainOptions::*>(member)) return Kind::real;
  return Kind::integer;
}

// ExplainOptions{}'s value of the member, as text for --help and the parser ("false" for a flag).
std::string default_of(const Member& member) {
  const ExplainOptions defaults;
  return std::visit(
      [&](auto m) {
        if constexpr (std::is_same_v<decltype(m), BoundedInt>) return fmt::format("{}", defaults.*m.member);
        else return fmt::format("{}", defaults.*m);
      },
      member);
}

std::vector<FlagSpec> flag_specs() {
  std::vector<FlagSpec> specs;
  for_each_flag([&](const ExplainFlag& f, Applies) {
    specs.push_back({f.name, kind_of(f.member), default_of(f.member), f.help, f.metavar});
  });
  return specs;
}

// Reads the flag into its member with the reader of the member's type.
void read_flag(const Args& args, const ExplainFlag& f, ExplainOptions& o) {
  std::visit(
      [&](auto member) {
        using M = decltype(member);
        if constexpr (std::is_same_v<M, BoundedInt>)
          o.*member.member = static_cast<int>(args.integer_in(f.name, member.min, member.max));
        else if constexpr (std::is_same_v<M, std::int64_t ExplainOptions::*>) o.*member = args.integer(f.name);
        else if constexpr (std::is_same_v<M, std::uint64_t ExplainOptions::*>)
          o.*member = args.unsigned_integer(f.name);
        else if constexpr (std::is_same_v<M, double ExplainOptions::*>) o.*member = args.real(f.name);
        else if constexpr (std::is_same_v<M, bool ExplainOptions::*>) o.*member = args.flag(f.name);
        else o.*member = args.text(f.name);
      },
      f.member);
}

// Throws CliError for the first flag given that does not apply to the example `o` runs.
void refuse_flags_that_do_not_apply(const Args& args, const ExplainOptions& o) {
  if (o.self_attention && args.given("queries"))
    throw CliError("--queries: with --self-attention queries, keys and values are one sequence of --keys "
                   "positions (leave --queries out)");
  // the sizes and lengths come from the file, or are the layer-norm example's
  for_each_flag([&](const ExplainFlag& f, Applies applies) {
    if (applies == Applies::random_sizes && (!o.input.empty() || o.layer_norm) && args.given(f.name))
      throw CliError(fmt::format("--{}: {} (leave it out)", f.name,
                                 o.layer_norm ? "--layer-norm runs its own fixed example"
                                              : "--input FILE gives the sizes and valid_lens"));
  });
  for_each_flag([&](const ExplainFlag& f, Applies applies) {
    if (applies == Applies::attention && o.layer_norm && args.given(f.name))
      throw CliError(fmt::format("--{}: not with --layer-norm (it applies to the attention example)", f.name));
  });
}

} // namespace

int explain_command(int argc, char** argv) {
  Args args("explain", flag_specs());
  args.parse(argc, argv, 2);
  if (args.print_help("explain [flags]",
                      "Runs d2l's multi-head attention on a tiny example and prints, step by step, every named tensor\n"
                      "(Q, K, V, transpose_qkv's Qh, Kh, Vh, the scores S, the weights P = masked_softmax(S), the\n"
                      "per-head outputs O, transpose_output's C, the output Y), then every gradient in reverse (dY, dC,\n"
                      "dO, dP, dS, ...), then the float64 gradient check. The names are those of\n"
                      "docs/backprop-through-attention.md. With --fixture, each gradient is printed beside PyTorch's\n"
                      "and the difference; --input runs your own example from a small text file; --svg draws every\n"
                      "stage with its gradients, --graph the autograd graph. --layer-norm explains layer norm instead."))
    return 0;
  ExplainOptions o;
  for_each_flag([&](const ExplainFlag& f, Applies) { read_flag(args, f, o); });
  refuse_flags_that_do_not_apply(args, o);
  explain::ExplainResult r;
  try {
    r = explain::run(o);
  } catch (const std::invalid_argument& e) {
    throw CliError(e.what());
  }
  fmt::print("{}", r.text);
  return r.gradcheck_ok && r.stages_match_full_graph && r.fused_match ? 0 : 1;
}

} // namespace headgrad::cli
