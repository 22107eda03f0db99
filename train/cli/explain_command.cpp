// explain_command.cpp - `headgrad explain`: multi-head attention on a tiny example, every tensor
// and every gradient printed (train/explain/).
#include <fmt/format.h>

#include "train/cli/cli_args.hpp"
#include "train/cli/commands.hpp"
#include "train/explain/explain.hpp"

namespace headgrad::cli {

int explain_command(int argc, char** argv) {
  Args args("explain", {{"batch", Kind::integer, "1", "batch size"},
                        {"queries", Kind::integer, "3", "number of queries"},
                        {"keys", Kind::integer, "4", "number of key-value pairs"},
                        {"hidden", Kind::integer, "4", "num_hiddens (also query/key/value size)"},
                        {"heads", Kind::integer, "2", "number of heads (must divide --hidden)"},
                        {"valid-len", Kind::integer, "3", "valid length of every batch row (keys beyond are masked)"},
                        {"seed", Kind::integer, "0", "seed of the random inputs and weights"},
                        {"precision", Kind::integer, "4", "decimals printed"},
                        {"bias", Kind::flag, "false", "projections with biases (d2l's bias=True)"},
                        {"self-attention", Kind::flag, "false",
                         "one input X (batch, keys, hidden) for queries, keys and values; dX is printed as its "
                         "three terms and their sum"},
                        {"causal", Kind::flag, "false",
                         "query i also keeps only keys j <= i (d2l's decoder: a valid length per query)"},
                        {"loss", Kind::text, "r",
                         "r: L = sum(output * R) for a random R; cross-entropy: the output as logits against "
                         "random targets, positions t >= valid-len masked",
                         "NAME"},
                        {"dropout", Kind::real, "0",
                         "dropout on the attention weights with a fixed random mask (printed, with its 1/(1-p))", "P"},
                        {"fused", Kind::flag, "false",
                         "also the fused kernel's backward per head: dP, D = rowsum(dO * O) = rowsum(dP * P), dS, "
                         "and ops::attention's gradients"},
                        {"svg", Kind::text, "",
                         "also draw every stage and each head's gradients to this SVG (numbers in panels up to 8x8, "
                         "masked entries hatched)",
                         "FILE"},
                        {"shared-scale", Kind::flag, "false",
                         "--svg: one colour scale for all signed panels (default: each panel its own)"},
                        {"graph", Kind::text, "",
                         "also write the autograd graph (per node what it holds, op, shape, gradient norm; data and "
                         "grad of tensors of at most 8 elements) as DOT, and SVG when Graphviz's dot is installed",
                         "FILE"},
                        {"fixture", Kind::text, "",
                         "use inputs/weights from a PyTorch fixture (tests/reference); gradients are printed "
                         "beside PyTorch's",
                         "FILE"},
                        {"input", Kind::text, "",
                         "your own example from a text file: queries, keys, values, valid_lens, num_heads (and "
                         "optionally the weights and grad_output); the format: docs/backprop-through-attention.md",
                         "FILE"},
                        {"summary", Kind::flag, "false",
                         "one line per tensor (shape, all 0 or its largest |entry|) instead of its values"},
                        {"layer-norm", Kind::flag, "false",
                         "instead of attention, layer norm of two rows step by step: forward through mu, var, rstd, "
                         "xhat; backward in closed form, checked against autograd"}});
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
  explain::ExplainOptions o;
  o.batch = args.integer("batch");
  o.queries = args.integer("queries");
  o.keys = args.integer("keys");
  o.hidden = args.integer("hidden");
  o.heads = args.integer("heads");
  o.valid_len = args.integer("valid-len");
  o.seed = args.unsigned_integer("seed");
  o.precision = static_cast<int>(args.integer_in("precision", 0, 12)); // (explain checks it too)
  o.bias = args.flag("bias");
  o.self_attention = args.flag("self-attention");
  if (o.self_attention && args.given("queries"))
    throw CliError("--queries: with --self-attention queries, keys and values are one sequence of --keys "
                   "positions (leave --queries out)");
  o.causal = args.flag("causal");
  o.loss = args.text("loss");
  o.dropout = args.real("dropout");
  o.fused = args.flag("fused");
  o.shared_scale = args.flag("shared-scale");
  o.svg = args.text("svg");
  o.graph = args.text("graph");
  o.fixture = args.text("fixture");
  o.input = args.text("input");
  o.summary = args.flag("summary");
  o.layer_norm = args.flag("layer-norm");
  // the sizes and lengths come from the file, or are the layer-norm example's
  for (const char* flag : {"batch", "queries", "keys", "hidden", "heads", "valid-len"})
    if ((!o.input.empty() || o.layer_norm) && args.given(flag))
      throw CliError(fmt::format("--{}: {} (leave it out)", flag,
                                 o.layer_norm ? "--layer-norm runs its own fixed example"
                                              : "--input FILE gives the sizes and valid_lens"));
  if (o.layer_norm)
    for (const char* flag : {"bias", "self-attention", "causal", "fused", "fixture", "input", "svg", "graph", "loss",
                             "dropout", "shared-scale"})
      if (args.given(flag))
        throw CliError(fmt::format("--{}: not with --layer-norm (it applies to the attention example)", flag));
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
