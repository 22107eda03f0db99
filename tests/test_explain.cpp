// `headgrad explain`: the printed walk through multi-head attention, checked for shapes, masked
// zeros, the gradcheck verdict, and against PyTorch's numbers (golden fixtures); its SVG's panel
// titles and legend.
#include <doctest/doctest.h>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "framework/io/safetensors.hpp"
#include "train/explain/explain.hpp"
#include "train/explain/explain_svg.hpp"
#include "train/explain/stages.hpp"
#include "train/explain/tensor_printer.hpp"
#include "train/pictures/heatmap_svg.hpp"
#include "tests/svg_check.hpp"
#include "tests/test_support.hpp"

using namespace headgrad;
using namespace headgrad::cli;

namespace {

// explain::run(o), whose gradient check must pass.
explain::ExplainResult explained(const explain::ExplainOptions& o) {
  const explain::ExplainResult r = explain::run(o);
  CHECK(r.gradcheck_ok);
  return r;
}

// explained(o), whose staged gradients must also equal those of one graph over the whole example.
explain::ExplainResult explained_in_stages(const explain::ExplainOptions& o) {
  const explain::ExplainResult r = explained(o);
  CHECK(r.stages_match_full_graph);
  return r;
}

} // namespace

TEST_CASE("explain: the default example prints every stage with its shape") {
  const explain::ExplainResult r = explain::run({});
  const std::string& t = r.text;
  for (const char* piece :
       {"queries [1, 3, 4]", "keys [1, 4, 4]", "Q = W_q(queries) [1, 3, 4]", "Qh = transpose_qkv(Q) [2, 3, 2]",
        "Kh = transpose_qkv(K) [2, 4, 2]", "S = s Qh Kh^T (the scores) [2, 3, 4]",
        "P = masked_softmax(S, valid_lens) (the weights) [2, 3, 4]", "O = P Vh (per-head outputs) [2, 3, 2]",
        "C = transpose_output(O) (heads side by side) [1, 3, 4]", "Y = W_o(C) (the output) [1, 3, 4]",
        "head 0 takes columns 0..1", "head 1 takes columns 2..3", "dY = R [1, 3, 4]", "dP = dO Vh^T [2, 3, 4]",
        "dS = P * (dP - rowsum(dP * P)) [2, 3, 4]", "dKh = s dS^T Qh [2, 4, 2]", "d W_q.weight = dQ^T queries [4, 4]",
        "d values = dV W_v [1, 4, 4]", "gradcheck (float64, eps 1e-6, atol 1e-5, rtol 1e-3): PASS"}) {
    INFO(piece);
    CHECK(t.find(piece) != std::string::npos);
  }
  CHECK(r.gradcheck_ok);
  CHECK(r.stages_match_full_graph);
  // valid length 3 of 4 keys: the last key's weight is exactly 0 for every head and query
  const Tensor* w = nullptr;
  for (const auto& [n, v] : r.tensors)
    if (n == "attention_weights") w = &v;
  REQUIRE(w != nullptr);
  CHECK(w->shape() == Dims{1, 2, 3, 4});
  const auto wv = w->to_vector();
  for (int row = 0; row < 6; ++row) {
    CHECK(wv[static_cast<std::size_t>(row * 4 + 3)] == 0.0);
    CHECK(wv[static_cast<std::size_t>(row * 4 + 0)] + wv[static_cast<std::size_t>(row * 4 + 1)] +
              wv[static_cast<std::size_t>(row * 4 + 2)] ==
          doctest::Approx(1.0));
  }
}

TEST_CASE("explain: flags change the example, impossible ones are refused") {
  explain::ExplainOptions o;
  o.batch = 2, o.queries = 2, o.keys = 5, o.hidden = 6, o.heads = 3;
  o.valid_len = 0; // every key masked: weights and their gradients are all zero, no NaN
  const explain::ExplainResult r = explain::run(o);
  CHECK(r.text.find("Qh = transpose_qkv(Q) [6, 2, 2]") != std::string::npos);
  CHECK(r.text.find("nan") == std::string::npos);
  CHECK(r.gradcheck_ok);
  o.hidden = 5;
  CHECK_THROWS_WITH_AS(explain::run(o), "--hidden (5) must be divisible by --heads (3)", std::invalid_argument);
  o.hidden = 6;
  o.valid_len = 6;
  CHECK_THROWS_WITH_AS(explain::run(o), "--valid-len must be in [0, --keys = 5], got 6", std::invalid_argument);
}

TEST_CASE("explain: on PyTorch's numbers it reproduces the mha_d2l fixture") {
  const std::string fixture = std::string(HEADGRAD_SOURCE_DIR) + "/tests/reference/fixtures/mha_d2l.safetensors";
  explain::ExplainOptions o;
  o.fixture = fixture;
  const explain::ExplainResult r = explained(o);
  CHECK(r.text.find("valid_lens = [3, 2]") != std::string::npos);
  const io::SafetensorsFile f = io::load_safetensors(fixture);
  int compared = 0;
  for (const auto& [name, ours] : r.tensors) {
    const Tensor& ref = f.at(name);
    REQUIRE(ours.shape() == ref.shape());
    const auto a = ours.to_vector(), b = ref.to_vector();
    double worst = 0;
    for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]) - 1e-5 * std::abs(b[i]));
    INFO(name << " worst excess over rtol 1e-5: " << worst);
    // explain computes in float64 from the float32 fixture inputs; PyTorch computed in float32,
    // so the difference is float32 round-off (fixture README: <= 5e-7 here).
    CHECK(worst <= 1e-6);
    ++compared;
  }
  CHECK(compared == 9);
}

TEST_CASE("explain: --svg draws the head split and every head's weights") {
  explain::ExplainOptions o;
  o.svg = "explain_test.svg";
  std::remove(o.svg.c_str());
  (void)explain::run(o);
  std::ifstream in(o.svg);
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string svg = ss.str();
  CHECK(svg.rfind("<svg", 0) == 0);
  CHECK(svg.find("</svg>") != std::string::npos);
  CHECK(svg.find("head 0 (cols 0..1)") != std::string::npos);
  CHECK(svg.find("head 1 (cols 2..3)") != std::string::npos);
  CHECK(svg.find("P (Tq x Tk), the weights") != std::string::npos);
  std::remove(o.svg.c_str());
}

TEST_CASE("explain --svg: every row of panels has its own column titles") {
  const explain::Example e = explain::make_example({});
  explain::TensorPrinter printer(4);
  const explain::Stages stages = explain::forward_stages(e, printer);
  const std::string svg = train::render_heatmaps_svg(explain::explain_grid(e, stages));
  // each panel's group is titled "<row title> <panel title>"
  for (const char* panel : {"projections Q (Tq x num_hiddens)", "projections K (Tk x num_hiddens)",
                            "head 0 (cols 0..1) Qh (Tq x d)", "head 1 (cols 2..3) Kh (Tk x d)",
                            "head 1 (cols 2..3) P (Tq x Tk), the weights",
                            "head 0 (cols 0..1) O (Tq x d), the head's output",
                            "output C (Tq x num_hiddens) = transpose_output(O)",
                            "output Y = W_o(C) (Tq x num_hiddens)"}) {
    INFO(panel);
    CHECK(svg.find(std::string("<g><title>") + panel + "</title>") != std::string::npos);
  }
  // the output row is not titled with the head rows' columns, nor the projections with the heads'
  CHECK(svg.find("<g><title>output Q") == std::string::npos);
  CHECK(svg.find("<g><title>projections Qh") == std::string::npos);
}

TEST_CASE("heatmap SVG legend: signed panels say each has its own colour scale, weights do not") {
  train::HeatmapGrid grid;
  grid.rows.push_back({"row", {{"a", Tensor::from({-2.0, 1.0}, {1, 2})}, {"b", Tensor::from({0.5, 0.25}, {1, 2})}}});
  grid.signed_values = true;
  const std::string signed_svg = train::render_heatmaps_svg(grid);
  CHECK(signed_svg.find("each panel has its own signed colour scale") != std::string::npos);
  CHECK(signed_svg.find("-max") != std::string::npos);
  grid.signed_values = false;
  CHECK(train::render_heatmaps_svg(grid).find("colour scale") == std::string::npos);
}

TEST_CASE("explain prints masked (zero) gradients as 0.0000, never -0.0000") {
  CHECK(explain::format_value(-0.0, 4) == "0.0000");
  CHECK(explain::format_value(-1e-9, 4) == "0.0000");
  CHECK(explain::format_value(-0.3, 0) == "0");
  CHECK(explain::format_value(-1.5, 2) == "-1.50"); // real negatives keep their sign
  CHECK(explain::format_value(0.0, 4) == "0.0000");
  // the default example masks its last key: d scores is 0 there (w = 0), printed unsigned
  const std::string text = explain::run({}).text;
  CHECK(text.find("-0.0000") == std::string::npos);
  const auto at = text.find("dS = P * (dP - rowsum(dP * P)) [2, 3, 4]");
  REQUIRE(at != std::string::npos);
  std::istringstream block(text.substr(at));
  std::string line;
  std::getline(block, line); // the title
  std::getline(block, line); // "  [0]"
  std::getline(block, line); // the first query's row: the masked key is the last column
  CHECK(line.substr(line.size() - 7) == " 0.0000");
}

TEST_CASE("explain --svg: V and every gradient under its forward panel, one key per colour scale") {
  const explain::Example e = explain::make_example({});
  explain::TensorPrinter printer(4);
  explain::Stages stages = explain::forward_stages(e, printer);
  explain::backward_stages(e, stages, printer);
  const train::HeatmapGrid grid = explain::explain_grid(e, stages);
  const std::string svg = train::render_heatmaps_svg(grid);
  CHECK(svg_check::well_formed(svg) == "");
  // the forward rows, each followed by the row of its gradients, panel under panel
  std::vector<std::string> rows;
  for (const auto& r : grid.rows) rows.push_back(r.title);
  CHECK(rows == std::vector<std::string>{"projections", "their gradients", "head 0 (cols 0..1)", "head 0 gradients",
                                         "head 1 (cols 2..3)", "head 1 gradients", "output", "its gradients"});
  for (std::size_t r = 0; r < grid.rows.size(); r += 2) CHECK(grid.rows[r].maps.size() == grid.rows[r + 1].maps.size());
  for (const char* panel :
       {"projections V (Tk x num_hiddens)", "head 1 (cols 2..3) Vh (Tk x d)",
        "their gradients dK (Tk x num_hiddens) heads' dKh side by side", "head 0 gradients dQh (Tq x d) = s dS Kh",
        "head 1 gradients dKh (Tk x d) = s dS^T Qh", "head 0 gradients dVh (Tk x d) = P^T dO",
        "head 1 gradients dP (Tq x Tk) = dO Vh^T", "head 0 gradients dS (Tq x Tk) = P * (dP - rowsum(dP * P))"}) {
    INFO(panel);
    CHECK(svg.find(std::string("<g><title>") + panel + "</title>") != std::string::npos);
  }
  // the gradient panels hold the gradients explain printed (head 1's dP)
  const Tensor dw = grid.rows[5].maps[4].values;
  CHECK(dw.shape() == Dims{3, 4});
  test_support::check_close(dw, stages.weights_in.grad().slice(0, 1, 2).reshape({3, 4}).to_vector());
  // one key per colour scale: the attention weights' shared 0..1, and the signed one, whose
  // range every signed panel writes under itself
  std::size_t signed_panels = 0, weight_panels = 0;
  for (const auto& r : grid.rows)
    for (const auto& m : r.maps) (m.scale == train::HeatmapScale::weights ? weight_panels : signed_panels)++;
  CHECK(weight_panels == 2);
  CHECK(signed_panels == 32);
  CHECK(test_support::count_of(svg, "<g class=\"range\">") == signed_panels);
  CHECK(test_support::count_of(svg, "font-weight=\"bold\">weights</text>") == 1);
  CHECK(test_support::count_of(svg, "font-weight=\"bold\">signed</text>") == 1);
  // the output panel's range is its largest |value|
  double max = 0;
  for (double v : stages.output.to_vector()) max = std::max(max, std::abs(v));
  CHECK(svg.find(fmt::format("+{:.2g}</text>", max)) != std::string::npos);
}

TEST_CASE("explain --bias: the bias gradients are printed and gradient-checked; fixtures have none") {
  explain::ExplainOptions o;
  o.bias = true;
  const explain::ExplainResult r = explained_in_stages(o);
  for (const char* piece : {"d W_q.bias = column sums of dQ [4]", "d W_k.bias = column sums of dK [4]",
                            "d W_o.bias = column sums of dY [4]", "gradcheck W_k.bias"}) {
    INFO(piece);
    CHECK(r.text.find(piece) != std::string::npos);
  }
  CHECK(r.tensors.size() == 2 + 3 + 8);
  o.fixture = std::string(HEADGRAD_SOURCE_DIR) + "/tests/reference/fixtures/mha_d2l.safetensors";
  CHECK_THROWS_WITH_AS(explain::run(o), "--bias: the fixtures' modules have no biases (leave --bias out with --fixture)",
                       std::invalid_argument);
}

TEST_CASE("explain --fixture: every printed gradient beside PyTorch's, with the difference") {
  for (const std::string file : {"mha_d2l", "mha_d2l_lens2d"}) {
    CAPTURE(file);
    explain::ExplainOptions o;
    o.fixture = fmt::format("{}/tests/reference/fixtures/{}.safetensors", HEADGRAD_SOURCE_DIR, file);
    const std::string text = explain::run(o).text;
    const auto at = text.find("== backward");
    const auto end = text.find("== checks");
    REQUIRE(at != std::string::npos);
    REQUIRE(end != std::string::npos);
    const auto lines = test_support::lines_of(text.substr(at, end - at));
    // a gradient's heading is the line naming its shape ("d scores = ... [4, 4, 6]  ..."); the
    // next line must name its PyTorch column
    std::size_t gradients = 0, compared = 0;
    for (std::size_t i = 0; i + 1 < lines.size(); ++i) {
      if (lines[i].empty() || lines[i][0] == ' ' || lines[i].find(" [") == std::string::npos) continue;
      ++gradients;
      INFO(lines[i]);
      CHECK(test_support::starts_with(lines[i + 1], "  columns: ours | PyTorch (grad"));
    }
    for (const auto& l : lines)
      if (test_support::starts_with(l, "  max |ours - PyTorch| = ")) {
        ++compared;
        INFO(l);
        // float64 from float32 inputs against PyTorch's float32: float32 round-off, 1e-7 relative
        // (1.1e-6 at most, on gradients of size 10), well inside PyTorch's atol of 1e-5
        CHECK(std::stod(l.substr(25)) <= 1e-5);
      }
    CHECK(gradients == 18); // R, then every stage, weight and input gradient
    CHECK(compared == gradients);
  }
  // random values: no PyTorch to compare with
  CHECK(explain::run({}).text.find("PyTorch") == std::string::npos);
}

namespace {

// The numbers of the tensor printed under `title` (its first line starting with title), up to the
// next line that does not start with a space; block headers ("  [0]") skipped.
std::vector<double> printed_values(const std::string& text, const std::string& title) {
  const auto at = text.find("\n" + title);
  REQUIRE(at != std::string::npos);
  std::vector<double> v;
  std::istringstream block(text.substr(at + 1));
  std::string line;
  std::getline(block, line); // the title
  while (std::getline(block, line) && !line.empty() && line[0] == ' ') {
    if (line.find('[') != std::string::npos) continue;
    std::istringstream nums(line);
    for (double x; nums >> x;) v.push_back(x);
  }
  return v;
}

double max_abs(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

} // namespace

TEST_CASE("explain --self-attention: one X, and dX printed as its three terms and their sum") {
  const explain::ExplainResult r = explained_in_stages({.precision = 12, .self_attention = true});
  const std::string& t = r.text;
  CHECK(test_support::contains(t, "X [1, 4, 4]  (B, T, num_hiddens): queries, keys and values at once"));
  CHECK(test_support::contains(t, "Q = W_q(X) [1, 4, 4]"));
  CHECK(test_support::contains(t, "gradcheck X "));
  CHECK_FALSE(test_support::contains(t, "gradcheck queries"));
  const auto q = printed_values(t, "dX via Q = dQ W_q"), k = printed_values(t, "dX via K = dK W_k"),
             v = printed_values(t, "dX via V = dV W_v"), dx = printed_values(t, "dX = dQ W_q + dK W_k + dV W_v");
  REQUIRE(dx.size() == 16);
  std::vector<double> sum(16);
  for (std::size_t i = 0; i < 16; ++i) sum[i] = q[i] + k[i] + v[i];
  CHECK(max_abs(sum, dx) <= 3e-12); // 12 printed decimals
  // and the printed dX is the gradient autograd left in X
  for (const auto& [name, g] : r.tensors)
    if (name == "grad.X") CHECK(max_abs(g.to_vector(), dx) <= 1e-12);
  CHECK(test_support::contains(t, "the three terms added up vs dX: max abs diff"));
  // queries of their own are refused by the command line; the library takes T from --keys
  test_support::TempDir dir("test_explain");
  const test_support::CliRun bad = test_support::run_cli({"explain", "--self-attention", "--queries", "3"}, dir.path);
  CHECK(bad.rc == 2);
  CHECK(test_support::contains(bad.err, "--queries: with --self-attention"));
}

TEST_CASE("explain --causal: a valid length per query, min(i + 1, valid_len), and zero weights above it") {
  explain::ExplainOptions o;
  o.causal = true;
  o.queries = 4;
  const explain::ExplainResult r = explained(o);
  CHECK(test_support::contains(r.text, "valid_lens = [1, 2, 3, 3] (per query, causal)"));
  const Tensor* w = nullptr;
  for (const auto& [n, v] : r.tensors)
    if (n == "attention_weights") w = &v;
  REQUIRE(w != nullptr);
  const auto wv = w->to_vector(); // (1, 2, 4, 4)
  for (int hh = 0; hh < 2; ++hh)
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) {
        INFO("head ", hh, " query ", i, " key ", j);
        const double x = wv[static_cast<std::size_t>((hh * 4 + i) * 4 + j)];
        if (j > i || j >= 3) CHECK(x == 0.0);
        else CHECK(x > 0.0);
      }
}

TEST_CASE("explain --loss cross-entropy: dY = (softmax(Y) - onehot) * mask / N, masked positions zero") {
  explain::ExplainOptions o;
  o.loss = "cross-entropy";
  o.queries = 4; // valid length 3: position 3 does not count
  o.precision = 12;
  const explain::ExplainResult r = explained_in_stages(o);
  const std::string& t = r.text;
  CHECK(test_support::contains(t, "N = 3 counted positions"));
  const auto p = printed_values(t, "softmax(Y)"), dy = printed_values(t, "dY = (softmax(Y) - onehot(targets))");
  const auto targets = printed_values(t, "targets"), mask = printed_values(t, "mask");
  REQUIRE(dy.size() == 16);
  REQUIRE(targets.size() == 4);
  CHECK(mask == std::vector<double>{1, 1, 1, 0});
  for (int i = 0; i < 4; ++i) {
    CAPTURE(i);
    double row = 0;
    for (int c = 0; c < 4; ++c) {
      const double want = mask[i] * (p[i * 4 + c] - (c == targets[i] ? 1.0 : 0.0)) / 3.0;
      CHECK(std::abs(dy[i * 4 + c] - want) <= 3e-12);
      row += dy[i * 4 + c];
    }
    CHECK(std::abs(row) <= 5e-12); // softmax minus a one-hot sums to 0
  }
  for (int c = 0; c < 4; ++c) CHECK(dy[12 + c] == 0.0); // the masked position
  o.loss = "mse";
  CHECK_THROWS_WITH_AS(explain::run(o), "--loss must be r or cross-entropy, got 'mse'", std::invalid_argument);
}

TEST_CASE("explain --dropout: the mask, the 1/(1-p) scale, and dP = dA * m / (1 - p)") {
  explain::ExplainOptions o;
  o.dropout = 0.25;
  o.precision = 12;
  const explain::ExplainResult r = explained_in_stages(o); // a fixed mask: a loss the gradient check can difference
  const std::string& t = r.text;
  CHECK(test_support::contains(t, "1/(1 - p) = 1.333333333333"));
  CHECK(test_support::contains(t, "one backward through d2l's ops with the same dropout mask"));
  const auto m = printed_values(t, "dropout mask m"), P = printed_values(t, "P = masked_softmax"),
             A = printed_values(t, "A = dropout(P) = P * m / (1 - p)"), dA = printed_values(t, "dA = dO Vh^T"),
             dP = printed_values(t, "dP = dA * m / (1 - p)");
  REQUIRE(m.size() == 24);
  int dropped = 0;
  for (std::size_t i = 0; i < 24; ++i) {
    CHECK((m[i] == 0 || m[i] == 1));
    dropped += m[i] == 0;
    CHECK(std::abs(A[i] - P[i] * m[i] / 0.75) <= 3e-12);
    CHECK(std::abs(dP[i] - dA[i] * m[i] / 0.75) <= 3e-12);
  }
  CHECK(dropped > 0);
  CHECK(dropped < 24);
  o.dropout = 1.0;
  CHECK_THROWS_WITH_AS(explain::run(o), "--dropout must be in [0, 1), got 1", std::invalid_argument);
}

TEST_CASE("explain --fused: per head dP, dS and D = rowsum(dO * O), equal to rowsum(dP * P)") {
  explain::ExplainOptions o;
  o.fused = true;
  o.precision = 12;
  const explain::ExplainResult r = explain::run(o);
  CHECK(r.fused_match);
  const std::string& t = r.text;
  CHECK(test_support::count_of(t, "\nD = rowsum(dO * O) [3]") == 2); // one per head
  const auto D = printed_values(t, "D = rowsum(dO * O)"), DP = printed_values(t, "rowsum(dP * P)");
  CHECK(max_abs(D, DP) <= 1e-12);
  CHECK(test_support::contains(t, "ops::attention (one op, one kernel pair) on the same Q, K, V"));
  // the per-head dS is the stages' dS (head 0)
  const auto dS = printed_values(t, "dS = P * (dP - D)"), staged = printed_values(t, "dS = P * (dP - rowsum(dP * P))");
  REQUIRE(dS.size() == 12);
  CHECK(max_abs(dS, std::vector<double>(staged.begin(), staged.begin() + 12)) <= 1e-12);
  o.dropout = 0.5;
  CHECK_THROWS_WITH_AS(explain::run(o),
                       "--fused: the fused attention op has no dropout (leave out --dropout or --fused)",
                       std::invalid_argument);
}

TEST_CASE("explain --precision: every number, sqrt(d) too") {
  explain::ExplainOptions o;
  o.precision = 12;
  CHECK(test_support::contains(explain::run(o).text, "s = 1/sqrt(d) = 1/1.414213562373 = 0.707106781187"));
  CHECK(test_support::contains(explain::run({}).text, "s = 1/sqrt(d) = 1/1.4142 = 0.7071"));
}

TEST_CASE("explain --svg: numbers in panels up to 8 x 8, masked entries hatched, one shared scale on request") {
  const explain::Example e = explain::make_example({});
  explain::TensorPrinter printer(4);
  explain::Stages stages = explain::forward_stages(e, printer);
  explain::backward_stages(e, stages, printer);
  const std::string svg = train::render_heatmaps_svg(explain::explain_grid(e, stages));
  CHECK(svg_check::well_formed(svg) == "");
  // every cell of every panel prints its number, except masked entries that are 0 (P and dS of key 3)
  std::size_t cells = 0;
  for (const auto& row : explain::explain_grid(e, stages).rows)
    for (const auto& m : row.maps) cells += static_cast<std::size_t>(m.values.numel());
  // hatched cells (20 high), not the legend's swatch
  const std::size_t masked = test_support::count_of(svg, "height=\"20\" fill=\"url(#masked)\"/>");
  CHECK(masked == 2 * 3 * 3); // 2 heads x 3 panels (S, P, dS) x 3 queries at key 3
  CHECK(test_support::count_of(svg, "font-size=\"8\" text-anchor=\"middle\"") == cells - 2 * 2 * 3);
  CHECK(test_support::contains(svg, "hatched: masked"));
  CHECK_FALSE(test_support::contains(svg, "-0.0000"));
  CHECK_FALSE(test_support::contains(svg, ">-0.00<"));
  // masked entries of P say so when hovered; a computed value of P never does
  CHECK(test_support::contains(svg, "[0, 3] = 0.0000 (masked)</title>"));
  // one scale for every signed panel: every range bar names the same max
  const std::string shared = train::render_heatmaps_svg(explain::explain_grid(e, stages, true));
  CHECK(test_support::contains(shared, "one signed colour scale for every panel"));
  double max = 0;
  for (const auto& row : explain::explain_grid(e, stages).rows)
    for (const auto& m : row.maps)
      if (m.scale != train::HeatmapScale::weights)
        for (double v : m.values.to_vector()) max = std::max(max, std::abs(v));
  CHECK(test_support::count_of(shared, fmt::format("+{:.2g}</text>", max)) == 32);
  // a panel larger than 8 x 8 prints no numbers
  train::HeatmapGrid big;
  big.numbers = true;
  big.signed_values = true;
  big.rows.push_back({"r", {{"big", test_support::randn({9, 3}, 1)}, {"small", test_support::randn({2, 2}, 2)}}});
  CHECK(test_support::count_of(train::render_heatmaps_svg(big), "font-size=\"8\" text-anchor=\"middle\"") == 4);
}

// ---- your own example (--input FILE), --summary, --layer-norm ------------------------------------

namespace {

// `text` written to a file of the temporary directory; returns its path.
std::string write_input(const test_support::TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = (dir.path / name).string();
  std::ofstream(path) << text;
  return path;
}

} // namespace

TEST_CASE("explain --input: the fixture's tensors written as text give the fixture's results") {
  // The same numbers through the text file as through the safetensors file: every output and
  // gradient equal (each float32 value written with 17 significant digits reads back exactly).
  const std::string fixture = std::string(HEADGRAD_SOURCE_DIR) + "/tests/reference/fixtures/mha_d2l.safetensors";
  const io::SafetensorsFile f = io::load_safetensors(fixture);
  // (num_hiddens comes from the weights' shapes)
  std::string text = "# tests/reference/fixtures/mha_d2l.safetensors as text\nnum_heads " +
                     f.metadata.at("num_heads") + "\n";
  for (const char* name : {"queries", "keys", "values", "valid_lens", "W_q.weight", "W_k.weight", "W_v.weight",
                           "W_o.weight", "grad_output"}) {
    const Tensor& t = f.at(name);
    text += fmt::format("{} {} =", name, t.shape());
    int n = 0;
    for (double v : t.to_vector()) text += fmt::format("{}{:.17g}", n++ % 8 == 0 ? "\n  " : " ", v);
    text += "\n";
  }
  test_support::TempDir dir("test_explain");
  explain::ExplainOptions from_file;
  from_file.input = write_input(dir, "mha_d2l.txt", text);
  explain::ExplainOptions from_fixture;
  from_fixture.fixture = fixture;
  const explain::ExplainResult a = explained(from_file), b = explained(from_fixture);
  CHECK(a.text.find("values from " + from_file.input) != std::string::npos);
  REQUIRE(a.tensors.size() == b.tensors.size());
  for (std::size_t i = 0; i < a.tensors.size(); ++i) {
    CAPTURE(a.tensors[i].first);
    CHECK(a.tensors[i].first == b.tensors[i].first);
    CHECK(explain::max_abs_diff(a.tensors[i].second, b.tensors[i].second) == 0.0);
  }
}

TEST_CASE("explain --input: d2l's example of ones; the file's weights are used, the rest drawn from --seed") {
  test_support::TempDir dir("test_explain");
  // d2l's test of MultiHeadAttention in small: keys and values one tensor of ones. Every key is the
  // same, so every score of a query is the same and no gradient reaches Q or K: dS is exactly 0.
  const std::string ones = write_input(dir, "ones.txt", R"(# queries by hand, keys of ones
num_heads 2
queries [2, 1, 4] = 0.5 -1 0 2
  1, 2, 3, 4
keys[2, 3, 4]=ones
values = keys   # the same numbers
valid_lens [2] = 1 3
W_q.weight [4, 4] = 1 0 0 0  0 1 0 0  0 0 1 0  0 0 0 1
)");
  explain::ExplainOptions o;
  o.input = ones;
  o.summary = true;
  const explain::ExplainResult r = explained_in_stages(o);
  for (const char* line :
       {"valid_lens = [1, 3]", "dS = P * (dP - rowsum(dP * P)) [4, 1, 3]: all 0",
        "dQ = transpose_output(dQh) (transpose_qkv backward) [2, 1, 4]: all 0",
        "d W_v.weight = dV^T values [4, 4]: not 0", "queries [2, 1, 4]: not 0 (largest |entry| 4.0000)"}) {
    CAPTURE(line);
    CHECK(r.text.find(line) != std::string::npos);
  }
  CHECK(r.text.find("\n      ") == std::string::npos); // --summary: no rows of values
  // W_q is the identity: Q = queries
  o.summary = false;
  const std::string full = explained(o).text;
  CHECK(full.find("Q = W_q(queries) [2, 1, 4]  (B, Tq, num_hiddens)\n  [0]\n      0.5000  -1.0000   0.0000   2.0000\n"
                  "  [1]\n      1.0000   2.0000   3.0000   4.0000\n") != std::string::npos);
  // `normal` is drawn from --seed: the same seed, the same numbers; another seed, others
  const std::string drawn = write_input(dir, "normal.txt", "num_heads 1\nqueries [1, 2, 2] = normal\nkeys [1, 2, 2] = "
                                                           "normal\nvalues = queries\n");
  explain::ExplainOptions n;
  n.input = drawn;
  const std::string seed0 = explained(n).text, again = explained(n).text;
  n.seed = 1;
  CHECK(seed0 == again);
  CHECK(explained(n).text != seed0);
}

TEST_CASE("explain --input: a bad file is refused in one line naming the file and the line") {
  test_support::TempDir dir("test_explain");
  const std::string good = "num_heads 2\nqueries [2, 1, 4] = ones\nkeys [2, 3, 4] = ones\nvalues = keys\n";
  struct Bad {
    std::string text, message; // message after "PATH"
  };
  for (const Bad& b : std::vector<Bad>{
           {"num_heads 2\nqueries [2, 1, 4] = 1 2 3\n", ":2: queries: 3 values for shape [2, 1, 4] (8)"},
           {good + "valid_lens [2] = 1 x\n", ":5: 'x' is not a finite number"},
           {good + "valid_lens [2] = 1 2.5\n", ":5: valid_lens must be whole numbers >= 0, got 2.5"},
           {good + "valid_lens [2] = 1 4\n", ": a valid length (4) above the number of keys (3)"},
           {good + "valid_lens [1, 3] = 1 2 3\n",
            ": valid_lens must be (batch) = [2] or (batch, queries) = [2, 1], got [1, 3]"},
           {"num_heads 3\nqueries [2, 1, 4] = ones\nkeys [2, 3, 4] = ones\nvalues = keys\n",
            ": num_hiddens (4) must be divisible by num_heads (3)"},
           {"num_heads 2\nquery [2, 1, 4] = ones\n",
            ":2: unknown name 'query' (tensors: queries, keys, values, valid_lens, W_q.weight, W_k.weight, W_v.weight, "
            "W_o.weight, grad_output; settings: num_heads, num_hiddens)"},
           {"num_heads 2\nqueries [2, 1, 4] = ones\nkeys [2, 3, 4] = ones\n", ": values is missing"},
           {"queries [2, 1, 4] = ones\nkeys [2, 3, 4] = ones\nvalues = keys\n", ": num_heads is missing"},
           {"num_heads 2\nqueries [2, 1, 4] = ones\n 1 2\n",
            ":3: numbers outside a tensor (a tensor is 'name [shape] = values')"},
           {"num_heads 2\nqueries [2, 1, 4] = ones\nqueries [2, 1, 4] = ones\n", ":3: queries is given twice"},
           {"num_heads 2\nnum_heads 1\n", ":2: num_heads is given twice"},
           {"num_heads 2\n[2, 1, 4] = ones\n", ":2: expected a name, got '[2, 1, 4] = ones'"},
           {"num_heads 2\nqueries [2, 1, 4] ones\n", ":2: expected 'queries [shape] = values' (values: numbers, ones, "
                                                     "zeros or normal) or 'queries = other'"},
           {"num_heads 2\nvalues = keys\n", ":2: values = keys: keys is not a tensor given above"},
           {"num_heads 2\nqueries [2000, 1000, 4] = ones\n", ":2: a tensor of at most 10^6 values, got 8000000"},
           {good + "W_o.weight [4, 3] = zeros\n", ": W_o.weight must be [4, 4] here, got [4, 3]"},
       }) {
    CAPTURE(b.text);
    explain::ExplainOptions o;
    o.input = write_input(dir, "bad.txt", b.text);
    CHECK_THROWS_WITH_AS(explain::run(o), (o.input + b.message).c_str(), std::invalid_argument);
  }
  // the command: exit 2 and one line, for a bad file and for flags the file replaces
  const std::string bad = write_input(dir, "bad.txt", "num_heads 2\nqueries [2, 1, 4] = 1 2 3\n");
  CHECK(test_support::refusal_line(test_support::run_cli({"explain", "--input", bad}, dir.path)) ==
        "headgrad explain: " + bad + ":2: queries: 3 values for shape [2, 1, 4] (8)");
  const std::string fine = write_input(dir, "fine.txt", good);
  CHECK(test_support::refusal_line(test_support::run_cli({"explain", "--input", fine, "--heads", "2"}, dir.path)) ==
        "headgrad explain: --heads: --input FILE gives the sizes and valid_lens (leave it out)");
  CHECK(test_support::refusal_line(test_support::run_cli({"explain", "--input", fine, "--causal"}, dir.path)) ==
        "headgrad explain: --causal: --input FILE gives the inputs and valid_lens (leave it out, or write the "
        "per-query lengths into the file)");
}

TEST_CASE("explain: every row of dS sums to 0, and the line says so") {
  const std::string t = explained({}).text;
  CHECK(t.find("row sums of dS: all 0 up to rounding (largest |row sum| ") != std::string::npos);
  // the line can say otherwise: a gradient whose rows do not sum to 0
  explain::TensorPrinter p(4);
  explain::print_row_sums("g", Tensor::from({1, -1, 0.5, 0}, {2, 2}, DType::f64), p);
  CHECK(p.take() == "row sums of g: NOT all 0 (largest |row sum| 5.0e-01)\n");
}

TEST_CASE("explain --layer-norm: every step of two rows; the closed form equals autograd's and the fused op's") {
  const explain::ExplainResult r = explained_in_stages({.precision = 6, .layer_norm = true});
  for (const char* piece : {"mu = mean(x) [2, 1]", "var = mean(xc * xc) [2, 1]", "rstd = 1 / sqrt(var + eps) [2, 1]",
                            "g = dy * gamma [2, 4]", "dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) [2, 4]",
                            // row 0, x = [1, 3, 5, 7], dy = [1, 0, 0, 0]: (1/sqrt(5)) [0.3, -0.4, -0.1, 0.2]
                            "      0.134164  -0.178885  -0.044721   0.089442",
                            "row sums of dx: all 0 up to rounding",
                            "vs autograd through mu, xc, var, rstd, xhat: max abs diff",
                            "gradcheck of ops::layer_norm (float64, eps 1e-6, atol 1e-5, rtol 1e-3): PASS"}) {
    CAPTURE(piece);
    CHECK(r.text.find(piece) != std::string::npos);
  }
  CHECK(r.text.find("(DIFFERENT)") == std::string::npos);
  test_support::TempDir dir("test_explain");
  CHECK(test_support::refusal_line(test_support::run_cli({"explain", "--layer-norm", "--heads", "2"}, dir.path)) ==
        "headgrad explain: --heads: --layer-norm runs its own fixed example (leave it out)");
  CHECK(test_support::refusal_line(test_support::run_cli({"explain", "--layer-norm", "--svg", "x.svg"}, dir.path)) ==
        "headgrad explain: --svg: not with --layer-norm (it applies to the attention example)");
}
