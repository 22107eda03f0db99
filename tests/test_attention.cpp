// Attention: masked softmax semantics, head reshapes, the attention modules, and the examples of
// d2l's chapter and of the plain PyTorch self-attention module.
#include <doctest/doctest.h>
#include <cmath>
#include <string>

#include "framework/core/autograd.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"
#include "framework/core/random.hpp"
#include "models/attention.hpp"
#include "tests/test_support.hpp"

using namespace headgrad;

// Every error here is std::invalid_argument.
static std::string error_of(const std::function<void()>& f) { return test_support::error_of<std::invalid_argument>(f); }


TEST_CASE("masked_softmax: d2l semantics for 1-D and 2-D valid_lens") {
  Generator g(1);
  Tensor X = Tensor::normal({2, 2, 4}, 0, 1, g);
  const auto y1 = ops::masked_softmax(X, Tensor::from_ints({2, 3}, {2})).to_vector();
  // batch 0 keeps 2 keys, batch 1 keeps 3, for every query; kept weights sum to 1
  for (int q = 0; q < 2; ++q) {
    CHECK(y1[q * 4 + 2] == 0.0);
    CHECK(y1[q * 4 + 3] == 0.0);
    CHECK(y1[q * 4 + 0] + y1[q * 4 + 1] == doctest::Approx(1.0));
    CHECK(y1[8 + q * 4 + 3] == 0.0);
    CHECK(y1[8 + q * 4 + 0] + y1[8 + q * 4 + 1] + y1[8 + q * 4 + 2] == doctest::Approx(1.0));
  }
  const auto y2 = ops::masked_softmax(X, Tensor::from_ints({1, 4, 2, 0}, {2, 2})).to_vector();
  CHECK(y2[0] == doctest::Approx(1.0)); // one key kept
  CHECK(y2[1] == 0.0);
  CHECK(y2[4] + y2[5] + y2[6] + y2[7] == doctest::Approx(1.0));
  for (int j = 0; j < 4; ++j) CHECK(y2[12 + j] == 0.0); // length 0: all zeros, not uniform
}

TEST_CASE("masked_softmax: a zero-length row gives zero weights and zero gradient, no NaN") {
  Tensor X = Tensor::from({1000, -1000, 3, 4, 5, 6}, {1, 2, 3});
  X.set_requires_grad();
  Tensor y = ops::masked_softmax(X, Tensor::from_ints({0, 2}, {1, 2}));
  const auto v = y.to_vector();
  CHECK(v[0] == 0.0);
  CHECK(v[1] == 0.0);
  CHECK(v[2] == 0.0);
  CHECK(v[3] == doctest::Approx(0.26894142));
  CHECK(v[4] == doctest::Approx(0.73105858));
  CHECK(v[5] == 0.0);
  ops::sum(y * Tensor::from({1, 2, 3, 4, 5, 6}, {1, 2, 3})).backward();
  const auto gx = X.grad().to_vector();
  for (int j = 0; j < 3; ++j) CHECK(gx[j] == 0.0);
  CHECK(gx[5] == 0.0); // masked key of the second row
  for (double d : gx) CHECK(std::isfinite(d));
}

TEST_CASE("masked_softmax: stable with huge inputs, max taken over kept keys only") {
  // A huge value at a masked position must not underflow the kept ones.
  Tensor X = Tensor::from({1.0, 2.0, 1e30}, {1, 1, 3});
  const auto v = ops::masked_softmax(X, Tensor::from_ints({2}, {1})).to_vector();
  CHECK(v[0] == doctest::Approx(0.26894142));
  CHECK(v[1] == doctest::Approx(0.73105858));
  CHECK(v[2] == 0.0);
}

TEST_CASE("masked_softmax: causal and boolean forms") {
  Tensor X = Tensor::zeros({1, 3, 3});
  const auto c = ops::causal_softmax(X).to_vector();
  const std::vector<double> want{1, 0, 0, 0.5, 0.5, 0, 1.0 / 3, 1.0 / 3, 1.0 / 3};
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(c[i] == doctest::Approx(want[i]));
  // keep: true = attend
  Tensor keep = Tensor::from({1, 0, 1}, {1, 3}, DType::bool8);
  const auto k = ops::masked_softmax_keep(X, keep).to_vector();
  for (int q = 0; q < 3; ++q) {
    CHECK(k[q * 3 + 0] == 0.5);
    CHECK(k[q * 3 + 1] == 0.0);
    CHECK(k[q * 3 + 2] == 0.5);
  }
}

TEST_CASE("masked_softmax: bad lengths and shapes are refused") {
  Tensor X = Tensor::zeros({2, 3, 4});
  CHECK(error_of([&] { ops::masked_softmax(X, Tensor::from_ints({1, -1}, {2})); }) ==
        "masked_softmax: valid_lens[1] = -1 is negative (scores of shape [2, 3, 4])");
  CHECK(error_of([&] { ops::masked_softmax(X, Tensor::from_ints({1, 2, 3}, {3})); }) ==
        "masked_softmax: valid_lens shape [3] fits neither (batch) = [2] nor (batch, queries) = [2, 3] for scores "
        "of shape [2, 3, 4]");
  CHECK(error_of([&] { ops::masked_softmax(X, Tensor::from({1, 2}, {2})); }).find("must be int64") != std::string::npos);
  CHECK(error_of([&] { ops::masked_softmax(Tensor::zeros({3, 4}), Tensor::from_ints({1, 2, 3}, {3})); })
            .find("must be (batch, queries, keys)") != std::string::npos);
  CHECK(error_of([&] { ops::masked_softmax_keep(X, Tensor::from_ints({1, 0, 1, 1}, {1, 4})); })
            .find("keep must be bool") != std::string::npos);
}

TEST_CASE("transpose_qkv / transpose_output: d2l's layout, inverse of each other") {
  // X (B=2, T=3, H*d = 2*2): element value encodes (b, t, h, e)
  std::vector<double> v;
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < 3; ++t)
      for (int h = 0; h < 2; ++h)
        for (int e = 0; e < 2; ++e) v.push_back(b * 1000 + t * 100 + h * 10 + e);
  Tensor X = Tensor::from(v, {2, 3, 4});
  Tensor Y = models::transpose_qkv(X, 2);
  CHECK(Y.shape() == Dims{4, 3, 2});
  const auto y = Y.to_vector();
  // row b*H + h holds head h of batch b: Y[b*2+h, t, e] = X[b, t, h*2+e]
  for (int b = 0; b < 2; ++b)
    for (int h = 0; h < 2; ++h)
      for (int t = 0; t < 3; ++t)
        for (int e = 0; e < 2; ++e) CHECK(y[((b * 2 + h) * 3 + t) * 2 + e] == b * 1000 + t * 100 + h * 10 + e);
  CHECK(models::transpose_output(Y, 2).to_vector() == v);
  CHECK(models::transpose_output(Y, 2).shape() == Dims{2, 3, 4});
  CHECK(error_of([&] { models::transpose_qkv(Tensor::zeros({2, 3, 5}), 2); }) ==
        "transpose_qkv: num_hiddens = 5 is not divisible by num_heads = 2 (X [2, 3, 5])");
}

TEST_CASE("repeat_interleave: valid_lens repeated per head in b*H + h order") {
  CHECK(models::repeat_interleave(Tensor::from_ints({3, 2}, {2}), 3).to_int_vector() ==
        std::vector<std::int64_t>{3, 3, 3, 2, 2, 2});
  Tensor two = models::repeat_interleave(Tensor::from_ints({1, 2, 3, 4}, {2, 2}), 2);
  CHECK(two.shape() == Dims{4, 2});
  CHECK(two.to_int_vector() == std::vector<std::int64_t>{1, 2, 1, 2, 3, 4, 3, 4});
}

TEST_CASE("d2l MultiHeadAttention: num_hiddens 100, 5 heads, batch 2, 4 queries, 6 pairs, valid_lens [3, 2]") {
  Generator g(0);
  const std::int64_t num_hiddens = 100, num_heads = 5;
  models::MultiHeadAttention attention(num_hiddens, num_hiddens, num_hiddens, num_hiddens, num_heads, 0.5, false, g);
  attention.eval();
  const std::int64_t batch_size = 2, num_queries = 4, num_kvpairs = 6;
  Tensor valid_lens = Tensor::from_ints({3, 2}, {2});
  Tensor X = Tensor::ones({batch_size, num_queries, num_hiddens});
  Tensor Y = Tensor::ones({batch_size, num_kvpairs, num_hiddens});
  Tensor out = attention.forward(X, Y, Y, valid_lens);
  CHECK(out.shape() == Dims{2, 4, 100});
  // parameters as d2l names them, no biases
  std::vector<std::string> names;
  for (auto& [n, t] : attention.named_parameters()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"W_q.weight", "W_k.weight", "W_v.weight", "W_o.weight"});
  Tensor w = attention.attention_weights();
  CHECK(w.shape() == Dims{2, 5, 4, 6});
  const auto wv = w.to_vector();
  // batch 0 attends to 3 keys, batch 1 to 2: masked keys are exactly 0
  for (int h = 0; h < 5; ++h)
    for (int q = 0; q < 4; ++q) {
      for (int k = 3; k < 6; ++k) CHECK(wv[((0 * 5 + h) * 4 + q) * 6 + k] == 0.0);
      for (int k = 2; k < 6; ++k) CHECK(wv[((1 * 5 + h) * 4 + q) * 6 + k] == 0.0);
    }
}

TEST_CASE("plain self-attention: MultiHeadAttention(64, 4) on (32, 10, 64) -> (32, 10, 64)") {
  Generator g(0);
  const std::int64_t embed_dim = 64, num_heads = 4;
  Tensor input_tensor = Tensor::normal({32, 10, embed_dim}, 0, 1, g);
  models::MultiHeadAttention attention(embed_dim, num_heads, g);
  Tensor output = attention.forward(input_tensor);
  CHECK(output.shape() == Dims{32, 10, 64});
  std::vector<std::string> names;
  for (auto& [n, t] : attention.named_parameters()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"query.weight", "query.bias", "key.weight", "key.bias", "value.weight",
                                          "value.bias", "out.weight", "out.bias"});
  CHECK(error_of([&] { models::MultiHeadAttention bad(30, 4, g); }) ==
        "embed_dim must be divisible by num_heads (embed_dim = 30, num_heads = 4)");
}

TEST_CASE("DotProductAttention: dropout on the weights only in training mode") {
  Generator g(3);
  Tensor q = Tensor::normal({2, 3, 4}, 0, 1, g), k = Tensor::normal({2, 5, 4}, 0, 1, g),
         v = Tensor::normal({2, 5, 4}, 0, 1, g);
  models::DotProductAttention att(0.5, 7);
  att.eval();
  const auto a = att.forward(q, k, v).to_vector();
  const auto b = att.forward(q, k, v).to_vector();
  CHECK(a == b);
  att.train();
  const auto c = att.forward(q, k, v).to_vector();
  CHECK(c != a);
  CHECK(error_of([&] { att.forward(q, Tensor::zeros({2, 5, 3}), v); }).find("shapes do not fit") != std::string::npos);
}

TEST_CASE("MultiHeadAttention: wrong input shapes are refused with the shapes named") {
  Generator g(4);
  models::MultiHeadAttention m(4, 4, 4, 8, 2, 0.0, false, g);
  const std::string e = error_of([&] { m.forward(Tensor::zeros({2, 3, 4}), Tensor::zeros({2, 5, 4}), Tensor::zeros({2, 6, 4})); });
  CHECK(e.find("[2, 5, 4]") != std::string::npos);
  CHECK(e.find("[2, 6, 4]") != std::string::npos);
  const std::string e2 = error_of([&] { m.forward(Tensor::zeros({2, 3, 5}), Tensor::zeros({2, 5, 4}), Tensor::zeros({2, 5, 4})); });
  CHECK(e2.find("linear") != std::string::npos);
}

TEST_CASE("masked_softmax and masked_softmax_keep take 4-D scores (B, H, Tq, Tk)") {
  // each head of 4-D scores is masked like 3-D scores of its batch row: compare head by head
  const Tensor x = test_support::randn({2, 3, 4, 5}, 31);
  const Tensor lens_1d = Tensor::from_ints({2, 5}, {2});
  const Tensor lens_2d = Tensor::from_ints({1, 0, 5, 3, 2, 4, 5, 1}, {2, 4});
  const Tensor keep_bk = Tensor::from({1, 0, 1, 1, 0, 0, 1, 1, 0, 1}, {2, 5}, DType::bool8);
  for (std::int64_t h = 0; h < 3; ++h) {
    CAPTURE(h);
    const Tensor head = ops::squeeze(x.slice(1, h, h + 1), 1); // (B, Tq, Tk)
    auto head_of = [h](const Tensor& y) { return ops::squeeze(y.slice(1, h, h + 1), 1).to_vector(); };
    CHECK(head_of(ops::masked_softmax(x, lens_1d)) == ops::masked_softmax(head, lens_1d).to_vector());
    CHECK(head_of(ops::masked_softmax(x, lens_2d)) == ops::masked_softmax(head, lens_2d).to_vector());
    CHECK(head_of(ops::masked_softmax_keep(x, keep_bk)) == ops::masked_softmax_keep(head, keep_bk).to_vector());
  }
  // a keep mask of x's own shape masks each head by itself
  std::vector<double> k(2 * 3 * 4 * 5);
  for (std::size_t i = 0; i < k.size(); ++i) k[i] = (i * 7) % 3 != 0;
  const Tensor keep_full = Tensor::from(k, {2, 3, 4, 5}, DType::bool8);
  const auto y = ops::masked_softmax_keep(x, keep_full).to_vector();
  for (std::size_t i = 0; i < k.size(); ++i)
    if (k[i] == 0) CHECK(y[i] == 0.0);
  // 4-D lens are not a form d2l has: refused by name
  CHECK(test_support::contains(test_support::error_of<std::invalid_argument>(
                                   [&] { ops::masked_softmax(x, Tensor::from_ints(std::vector<std::int64_t>(24, 1), {2, 3, 4})); }),
                               "masked_softmax: valid_lens shape [2, 3, 4]"));
  CHECK(test_support::contains(test_support::error_of<std::invalid_argument>(
                                   [&] { ops::masked_softmax(test_support::randn({2, 3, 4, 5, 6}, 1), lens_1d); }),
                               "(batch, heads, queries, keys)"));
}
