// `headgrad explain`: the printed walk through multi-head attention, checked for shapes, masked
// zeros, the gradcheck verdict, and against PyTorch's numbers (golden fixtures); its SVG's panel
// titles and legend.
#include <doctest/doctest.h>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "framework/io/safetensors.hpp"
#include "train/cli/explain/explain.hpp"
#include "train/cli/explain/explain_svg.hpp"
#include "train/cli/explain/tensor_printer.hpp"
#include "train/heatmap_svg.hpp"
#include "tests/svg_check.hpp"
#include "tests/test_support.hpp"

using namespace headgrad;
using namespace headgrad::cli;

TEST_CASE("explain: the default example prints every stage with its shape") {
  const explain::ExplainResult r = explain::run({});
  const std::string& t = r.text;
  for (const char* piece :
       {"queries [1, 3, 4]", "keys [1, 4, 4]", "Q = W_q(queries) [1, 3, 4]", "Q after transpose_qkv [2, 3, 2]",
        "K after transpose_qkv [2, 4, 2]", "scores = Q K^T / sqrt(d) [2, 3, 4]",
        "weights = masked_softmax(scores, valid_lens) [2, 3, 4]", "per-head outputs = weights V [2, 3, 2]",
        "transpose_output (heads side by side) [1, 3, 4]", "output = W_o(concat) [1, 3, 4]",
        "head 0 takes columns 0..1", "head 1 takes columns 2..3", "dL/d output = R [1, 3, 4]",
        "d scores = w * (dw - rowsum(dw * w)) [2, 3, 4]", "d W_q.weight = dQ^T queries [4, 4]",
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
  o.batch = 2;
  o.queries = 2;
  o.keys = 5;
  o.hidden = 6;
  o.heads = 3;
  o.valid_len = 0; // every key masked: weights and their gradients are all zero, no NaN
  const explain::ExplainResult r = explain::run(o);
  CHECK(r.text.find("Q after transpose_qkv [6, 2, 2]") != std::string::npos);
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
  const explain::ExplainResult r = explain::run(o);
  CHECK(r.gradcheck_ok);
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
  CHECK(svg.find("weights (Tq x Tk)") != std::string::npos);
  std::remove(o.svg.c_str());
}

TEST_CASE("explain --svg: every row of panels has its own column titles") {
  const explain::Example e = explain::make_example({});
  explain::TensorPrinter printer(4);
  const explain::Stages stages = explain::forward_stages(e, printer);
  const std::string svg = train::render_heatmaps_svg(explain::explain_grid(e, stages));
  // each panel's group is titled "<row title> <panel title>"
  for (const char* panel : {"projections Q (Tq x num_hiddens)", "projections K (Tk x num_hiddens)",
                            "head 0 (cols 0..1) Q head (Tq x d)", "head 1 (cols 2..3) K head (Tk x d)",
                            "head 1 (cols 2..3) weights (Tq x Tk)", "head 0 (cols 0..1) head output (Tq x d)",
                            "output concat (Tq x num_hiddens)", "output W_o(concat) (Tq x num_hiddens)"}) {
    INFO(panel);
    CHECK(svg.find(std::string("<g><title>") + panel + "</title>") != std::string::npos);
  }
  // the output row is not titled with the head rows' columns, nor the projections with the heads'
  CHECK(svg.find("<g><title>output Q") == std::string::npos);
  CHECK(svg.find("<g><title>projections Q head") == std::string::npos);
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
  const auto at = text.find("d scores = w * (dw - rowsum(dw * w)) [2, 3, 4]");
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
       {"projections V (Tk x num_hiddens)", "head 1 (cols 2..3) V head (Tk x d)",
        "their gradients dK (Tk x num_hiddens) heads' dK side by side",
        "head 0 gradients dQ head (Tq x d) = d scores K / sqrt(d)",
        "head 1 gradients dK head (Tk x d) = d scores^T Q / sqrt(d)", "head 0 gradients dV head (Tk x d) = weights^T d out",
        "head 1 gradients d weights (Tq x Tk) = d out V^T",
        "head 0 gradients d scores (Tq x Tk) = w * (dw - rowsum(dw * w))"}) {
    INFO(panel);
    CHECK(svg.find(std::string("<g><title>") + panel + "</title>") != std::string::npos);
  }
  // the gradient panels hold the gradients explain printed (head 1's d weights)
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
  const explain::ExplainResult r = explain::run(o);
  CHECK(r.gradcheck_ok);
  CHECK(r.stages_match_full_graph);
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
