// train/checkpoint: save -> load gives bit-identical logits; the run config survives the metadata
// round trip; damaged or mismatched files are refused with a message naming the file; the
// optimizer file must match the model file's step; the model file is a plain safetensors file
// whose names and shapes are a PyTorch state_dict's.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <unistd.h>

#include "framework/io/restore.hpp"
#include "framework/io/safetensors.hpp"
#include "framework/core/autograd.hpp"
#include "train/run/checkpoint.hpp"
#include "train/run/run_model.hpp"
#include "train/run/run_optimizer.hpp"
#include "train/loop/train_step.hpp"
#include "tests/test_support.hpp"
#include "tests/tiny_models.hpp"

using namespace headgrad;
using namespace headgrad::train;
namespace fs = std::filesystem;
using test_support::contains;
using test_support::error_of;
using test_support::read_file;
using test_support::starts_with;
using test_support::write_file;
using test_support::TempDir; // named after this file

namespace {

RunConfig tiny_config() {
  return {.task = data::Task::copy, .steps = 10, .batch = 16, .d_model = 32, .heads = 2, .layers = 1, .ffn = 32,
          .max_len = 8, .min_len = 2, .vocab = 10, .seed = 3};
}

// A model and optimizer that have taken `steps` Adam steps on copy batches (so the parameters are
// no longer their seeded initial values: a loader that re-initialises would be caught).
struct Trained {
  RunConfig cfg = tiny_config();
  std::unique_ptr<models::SequenceModel> model;
  std::unique_ptr<optim::Optimizer> opt;
  explicit Trained(int steps = 2) {
    model = std::make_unique<models::SequenceModel>(cfg.model_config(), cfg.seed);
    opt = make_optimizer(cfg, model->named_parameters());
    for (int s = 0; s < steps; ++s) {
      data::Batch b = data::make_batch(cfg.task_config(), cfg.seed, static_cast<std::uint64_t>(s), cfg.batch);
      (void)train_step(*model, *opt, b, {s + 1, cfg.lr, /*clip=*/0});
    }
  }
};

std::vector<double> logits_of(models::TokenModel& m, const data::Batch& b) {
  NoGradGuard ng;
  m.eval();
  return m.forward(b.tokens, b.valid_lens).to_vector();
}

} // namespace

TEST_CASE("save -> load gives bit-identical logits and parameters") {
  TempDir dir;
  Trained t(3);
  const std::string path = dir / "model.safetensors";
  save_checkpoint(path, *t.model, t.opt.get(), t.cfg, 3);
  CHECK(fs::exists(path));
  CHECK(fs::exists(dir / "optimizer.safetensors"));
  CHECK(optimizer_path_for(path) == dir / "optimizer.safetensors");
  // atomic writes leave no temporary files behind
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir.path)) {
    (void)e;
    ++files;
  }
  CHECK(files == 2);

  LoadedRun run = load_model_checkpoint(path);
  CHECK(run.step == 3);
  const data::Batch b = data::make_eval_set(t.cfg.task_config(), 64);
  const auto want = logits_of(*t.model, b), got = logits_of(*run.model, b);
  REQUIRE(want.size() == got.size());
  CHECK(std::memcmp(want.data(), got.data(), want.size() * sizeof(double)) == 0);
  const auto a = t.model->named_parameters(), c = run.model->named_parameters();
  REQUIRE(a.size() == c.size());
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i].second.to_vector() == c[i].second.to_vector());
  // the seeded init is not what was loaded (the model had trained)
  models::SequenceModel fresh(t.cfg.model_config(), t.cfg.seed);
  CHECK(logits_of(fresh, b) != got);

  // the optimizer state comes back too: the next step of both is identical
  auto opt2 = make_optimizer(run.config, run.model->named_parameters());
  load_optimizer_state(path, run.step, *opt2);
  CHECK(opt2->steps() == 3);
  const auto s1 = t.opt->state(), s2 = opt2->state();
  REQUIRE(s1.size() == s2.size());
  for (std::size_t i = 0; i < s1.size(); ++i) {
    CHECK(s1[i].first == s2[i].first);
    CHECK(s1[i].second.to_vector() == s2[i].second.to_vector());
  }
}

TEST_CASE("the state of two parameter groups (weight decay on matrices only) comes back to each group") {
  RunConfig cfg = tiny_config();
  cfg.decay = "matrices";
  cfg.weight_decay = 0.1;
  models::SequenceModel model(cfg.model_config(), cfg.seed);
  auto opt = make_optimizer(cfg, model.named_parameters());
  for (int s = 0; s < 2; ++s)
    (void)train_step(model, *opt, data::make_batch(cfg.task_config(), cfg.seed, static_cast<std::uint64_t>(s), 8),
                     {s + 1, cfg.lr, /*clip=*/0});
  // the state, with one parameter of each group a step behind (as one a batch did not reach)
  const NamedTensors params = model.named_parameters();
  const std::string matrix = params[0].first, vector = params.back().first;
  REQUIRE(params[0].second.dim() >= 2);
  REQUIRE(params.back().second.dim() == 1);
  NamedTensors state;
  for (const auto& [name, t] : opt->state()) state.emplace_back(name, t.clone());
  state.emplace_back("step." + matrix, Tensor::from_ints({1}, {}));
  state.emplace_back("step." + vector, Tensor::from_ints({1}, {}));
  auto restored = make_optimizer(cfg, model.named_parameters());
  io::restore_optimizer_state(*restored, state, "groups.st");
  CHECK(restored->steps() == 2);
  std::map<std::string, std::vector<double>> got, want;
  for (const auto& [name, t] : restored->state()) got[name] = t.to_vector();
  for (const auto& [name, t] : state) want[name] = t.to_vector();
  CHECK(got == want); // each group's buffers and its own parameters' counts
}

TEST_CASE("run metadata round trip") {
  RunConfig c = tiny_config();
  c.task = data::Task::reverse;
  c.dropout = 0.125;
  c.optimizer = "adamw";
  c.lr = 0.1 + 0.2; // 0.30000000000000004: needs the shortest round-trip formatting
  c.weight_decay = 0.01;
  c.momentum = 0.8;
  c.clip = 0.5;
  c.warmup = 7;
  c.schedule = "cosine";
  c.steps = 123;
  c.batch = 17;
  c.seed = 0xFFFF'FFFFull;
  const auto meta = run_metadata(c, 42);
  CHECK(meta.at("format") == "headgrad-checkpoint-1");
  CHECK(meta.at("task") == "reverse");
  CHECK(meta.at("d_model") == "32");
  std::int64_t step = -1;
  const RunConfig r = run_config_from_metadata(meta, "m.st", step);
  CHECK(step == 42);
  CHECK(r.task == data::Task::reverse);
  CHECK(r.model_config().vocab == 10);
  CHECK(r.task_config().vocab == 10);
  CHECK(r.d_model == 32);
  CHECK(r.heads == 2);
  CHECK(r.layers == 1);
  CHECK(r.ffn == 32);
  CHECK(r.model_config().max_len == 8);
  CHECK(r.task_config().max_len == 8);
  CHECK(r.min_len == 2);
  CHECK(r.dropout == 0.125);
  CHECK(r.optimizer == "adamw");
  CHECK(r.lr == c.lr); // exact
  CHECK(r.weight_decay == 0.01);
  CHECK(r.momentum == 0.8);
  CHECK(r.clip == 0.5);
  CHECK(r.warmup == 7);
  CHECK(r.schedule == "cosine");
  CHECK(r.steps == 123);
  CHECK(r.batch == 17);
  CHECK(r.seed == 0xFFFF'FFFFull);

  SUBCASE("refusals name the source and the key") {
    auto refused = [&](std::map<std::string, std::string> m) {
      std::int64_t s = 0;
      const std::string msg = error_of<std::invalid_argument>([&] { (void)run_config_from_metadata(m, "m.st", s); });
      CHECK(starts_with(msg, "m.st: "));
      return msg;
    };
    auto m = meta;
    m.erase("heads");
    CHECK(contains(refused(m), "'heads'"));
    m = meta;
    m["d_model"] = "3x";
    CHECK(contains(refused(m), "'d_model'"));
    m = meta;
    m["lr"] = "fast";
    CHECK(contains(refused(m), "'lr'"));
    m = meta;
    m["format"] = "something-else";
    CHECK(contains(refused(m), "format"));
    m = meta;
    m["heads"] = "3"; // 32 % 3 != 0
    CHECK(contains(refused(m), "invalid"));
    m = meta;
    m["step"] = "-1";
    CHECK(contains(refused(m), "step"));
    CHECK(contains(refused({}), "'format'"));
  }
}

TEST_CASE("damaged or mismatched checkpoints are refused with a message naming the file") {
  TempDir dir;
  Trained t(1);
  const std::string good = dir / "model.safetensors";
  save_checkpoint(good, *t.model, t.opt.get(), t.cfg, 1);
  const std::string bytes = read_file(good);
  // its metadata without the header checksum: the cases below are the checks behind it, which a
  // file written by another tool (or before the checksum) meets alone
  io::SafetensorsFile file = io::load_safetensors(good);
  file.metadata.erase("header_crc32c");

  // load_model_checkpoint(path) must throw E whose message begins with "<path>: " and contains `part`.
  auto refused = [&](const std::string& path, const std::string& part) {
    const std::string msg = error_of<std::exception>([&] { (void)load_model_checkpoint(path); });
    INFO("message: ", msg);
    CHECK(starts_with(msg, path + ": "));
    CHECK(contains(msg, part));
    CHECK(msg.find('\n') == std::string::npos); // one line
    return msg;
  };

  SUBCASE("truncated model file") {
    for (std::size_t keep : {std::size_t{0}, std::size_t{5}, std::size_t{100}, bytes.size() / 2, bytes.size() - 1}) {
      CAPTURE(keep);
      const std::string p = dir / "trunc.safetensors";
      write_file(p, bytes.substr(0, keep));
      CHECK_THROWS_AS((void)load_model_checkpoint(p), std::invalid_argument);
      refused(p, "");
    }
  }
  SUBCASE("garbage bytes") {
    std::mt19937 rng(1);
    std::string junk(4096, '\0');
    for (auto& ch : junk) ch = static_cast<char>(rng());
    const std::string p = dir / "junk.safetensors";
    write_file(p, junk);
    refused(p, "");
    // a plausible header length followed by non-JSON
    std::string fake(8, '\0');
    fake[0] = 16;
    write_file(p, fake + "this is not json" + std::string(32, 'x'));
    refused(p, "");
  }
  SUBCASE("non-existent file") {
    const std::string p = dir / "nope.safetensors";
    const std::string msg = error_of<std::runtime_error>([&] { (void)load_model_checkpoint(p); });
    CHECK(starts_with(msg, p));
  }
  SUBCASE("a safetensors file without headgrad metadata") {
    const std::string p = dir / "plain.safetensors";
    io::save_safetensors(p, file.tensors);
    refused(p, "'format'");
  }
  SUBCASE("wrong tensor shapes for the model: a d 32 checkpoint whose metadata says d 16") {
    auto meta = file.metadata;
    meta["d_model"] = "16";
    const std::string p = dir / "d16.safetensors";
    io::save_safetensors(p, file.tensors, meta);
    const std::string msg = refused(p, "'embedding.weight'");
    CHECK(contains(msg, "[10, 32]"));
    CHECK(contains(msg, "[10, 16]"));
  }
  SUBCASE("missing tensor") {
    io::NamedTensors ts;
    for (const auto& [n, v] : file.tensors)
      if (n != "blks.0.ffn.dense2.bias") ts.emplace_back(n, v);
    const std::string p = dir / "missing.safetensors";
    io::save_safetensors(p, ts, file.metadata);
    refused(p, "'blks.0.ffn.dense2.bias'");
  }
  SUBCASE("extra tensor") {
    io::NamedTensors ts = file.tensors;
    ts.emplace_back("blks.1.ffn.dense1.weight", Tensor::zeros({32, 32}));
    const std::string p = dir / "extra.safetensors";
    io::save_safetensors(p, ts, file.metadata);
    refused(p, "'blks.1.ffn.dense1.weight'");
  }
  SUBCASE("a tensor of the wrong shape, same metadata") {
    io::NamedTensors ts = file.tensors;
    for (auto& [n, v] : ts)
      if (n == "dense.bias") v = Tensor::zeros({11});
    const std::string p = dir / "shape.safetensors";
    io::save_safetensors(p, ts, file.metadata);
    refused(p, "'dense.bias'");
  }
  // The good file is still good after all that.
  CHECK(load_model_checkpoint(good).step == 1);
}

TEST_CASE("the optimizer file must belong to the model file") {
  TempDir a, b;
  Trained t(2);
  const std::string pa = a / "model.safetensors", pb = b / "model.safetensors";
  save_checkpoint(pa, *t.model, t.opt.get(), t.cfg, 5);
  save_checkpoint(pb, *t.model, t.opt.get(), t.cfg, 6);
  auto opt = make_optimizer(t.cfg, t.model->named_parameters());

  SUBCASE("step mismatch is refused") {
    fs::copy_file(b / "optimizer.safetensors", a / "optimizer.safetensors", fs::copy_options::overwrite_existing);
    const std::string msg = error_of<std::invalid_argument>([&] { load_optimizer_state(pa, 5, *opt); });
    CHECK(starts_with(msg, a / "optimizer.safetensors: "));
    CHECK(contains(msg, "step 6"));
    CHECK(contains(msg, "step 5"));
    CHECK(opt->steps() == 0); // nothing was loaded
  }
  SUBCASE("missing optimizer file") {
    fs::remove(a / "optimizer.safetensors");
    const std::string msg = error_of<std::exception>([&] { load_optimizer_state(pa, 5, *opt); });
    CHECK(contains(msg, a / "optimizer.safetensors"));
  }
  SUBCASE("the state of another optimizer kind") {
    RunConfig sgd = t.cfg;
    sgd.optimizer = "sgd";
    auto s = make_optimizer(sgd, t.model->named_parameters());
    const std::string msg = error_of<std::invalid_argument>([&] { load_optimizer_state(pa, 5, *s); });
    CHECK(starts_with(msg, a / "optimizer.safetensors: "));
    CHECK(contains(msg, "momentum_buffer."));
  }
  SUBCASE("matching files load") {
    load_optimizer_state(pa, 5, *opt);
    CHECK(opt->steps() == 2); // the optimizer's own count; the file's step label is the run's
  }
  SUBCASE("make_optimizer refuses an unknown name") {
    RunConfig bad = t.cfg;
    bad.optimizer = "rmsprop";
    CHECK(contains(error_of<std::invalid_argument>([&] { (void)make_optimizer(bad, t.model->named_parameters()); }),
                   "rmsprop"));
  }
}

TEST_CASE("the model file is a valid safetensors file shaped like a PyTorch state_dict") {
  TempDir dir;
  RunConfig c = tiny_config();
  c.layers = 2;
  models::SequenceModel model(c.model_config(), 1);
  auto opt = make_optimizer(c, model.named_parameters());
  const std::string path = dir / "model.safetensors";
  save_checkpoint(path, model, opt.get(), c, 0);
  const std::string bytes = read_file(path);

  // layout: u64 LE header length N, N bytes of JSON (8-byte aligned, space padded), the data
  REQUIRE(bytes.size() > 8);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  REQUIRE(8 + n <= bytes.size());
  CHECK(n % 8 == 0);
  const std::string header = bytes.substr(8, n);
  CHECK(header.front() == '{');
  CHECK(header.find_last_not_of(' ') == header.rfind('}'));
  CHECK(contains(header, "\"__metadata__\""));

  // 2 layers, d 32, ffn 32, vocab 10
  const std::vector<std::pair<std::string, Dims>> want = tiny::encoder_state_dict(c.model_config());

  const io::SafetensorsFile file = io::parse_safetensors(bytes.data(), bytes.size(), path);
  REQUIRE(file.tensors.size() == want.size());
  std::int64_t elems = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    CHECK(file.tensors[i].first == want[i].first);
    CHECK(file.tensors[i].second.shape() == want[i].second);
    CHECK(file.tensors[i].second.dtype() == DType::f32);
    CHECK(contains(header, "\"" + want[i].first + "\":{\"dtype\":\"F32\""));
    elems += want[i].second.numel();
  }
  CHECK(bytes.size() == 8 + n + static_cast<std::size_t>(elems) * 4); // no holes, no trailing bytes
  CHECK(file.metadata.at("format") == "headgrad-checkpoint-1");
  CHECK(file.metadata.at("step") == "0");

  // the optimizer file: "step" plus exp_avg./exp_avg_sq. + every parameter name
  const io::SafetensorsFile o = io::load_safetensors(dir / "optimizer.safetensors");
  REQUIRE(o.tensors.size() == 1 + 2 * want.size());
  CHECK(o.find("step") != nullptr);
  for (const auto& [name, shape] : want) {
    REQUIRE(o.find("exp_avg." + name) != nullptr);
    CHECK(o.at("exp_avg." + name).shape() == shape);
    CHECK(o.at("exp_avg_sq." + name).shape() == shape);
  }
}

TEST_CASE("a save interrupted at each point leaves an optimizer state of the model's step (optimizer.prev)") {
  // The kill points of save_checkpoint, recreated file by file: the model file on disk is from
  // step 3; the interrupted save was for step 4.
  Trained t3(3);
  Trained t4(4);
  auto fresh_dir_with_step3 = [&](TempDir& dir) {
    const std::string path = dir / "model.safetensors";
    save_checkpoint(path, *t3.model, t3.opt.get(), t3.cfg, 3);
    return path;
  };
  // as a run resuming in the checkpoint's own directory does: load (which writes nothing), then
  // settle the interrupted save
  auto resumed_step = [&](const std::string& path) {
    LoadedRun run = load_model_checkpoint(path);
    auto opt = make_optimizer(run.config, run.model->named_parameters());
    const bool had_prev = fs::exists(previous_optimizer_path_for(path));
    load_optimizer_state(path, run.step, *opt);
    CHECK(fs::exists(previous_optimizer_path_for(path)) == had_prev);
    settle_interrupted_save(path, run.step);
    return opt->steps();
  };
  const auto step_meta = [](const std::string& p) { return io::load_safetensors(p).metadata.at("step"); };
  SUBCASE("killed after optimizer -> optimizer.prev, before the new optimizer file") {
    TempDir dir;
    const std::string path = fresh_dir_with_step3(dir);
    fs::rename(optimizer_path_for(path), previous_optimizer_path_for(path));
    CHECK(resumed_step(path) == 3);
    CHECK(step_meta(optimizer_path_for(path)) == "3"); // prev became the current file again
    CHECK_FALSE(fs::exists(previous_optimizer_path_for(path)));
  }
  SUBCASE("killed after the new optimizer file, before the new model file") {
    TempDir dir;
    const std::string path = fresh_dir_with_step3(dir);
    fs::rename(optimizer_path_for(path), previous_optimizer_path_for(path));
    io::save_safetensors(optimizer_path_for(path), t4.opt->state(), run_metadata(t4.cfg, 4));
    CHECK(resumed_step(path) == 3);
    CHECK(step_meta(optimizer_path_for(path)) == "3");
  }
  SUBCASE("a complete save leaves no optimizer.prev, and the next save works from there") {
    TempDir dir;
    const std::string path = fresh_dir_with_step3(dir);
    save_checkpoint(path, *t4.model, t4.opt.get(), t4.cfg, 4);
    CHECK_FALSE(fs::exists(previous_optimizer_path_for(path)));
    CHECK(resumed_step(path) == 4);
  }
  SUBCASE("neither file matches: refused, naming the steps") {
    TempDir dir;
    const std::string path = fresh_dir_with_step3(dir);
    io::save_safetensors(optimizer_path_for(path), t4.opt->state(), run_metadata(t4.cfg, 4));
    LoadedRun run = load_model_checkpoint(path);
    auto opt = make_optimizer(run.config, run.model->named_parameters());
    try {
      load_optimizer_state(path, run.step, *opt);
      FAIL("a mismatched optimizer state was accepted");
    } catch (const std::invalid_argument& e) {
      CHECK(std::string(e.what()).find("optimizer state is from step 4 but the model is from step 3") != std::string::npos);
    }
  }
}

namespace {
// Converts to any member type: RunConfig{Any{}, ...} compiles with as many as it has members.
struct AnyMember {
  template <typename T> operator T() const { return T{}; }
};
template <typename Aggregate, typename... Members> constexpr std::size_t member_count() {
  if constexpr (requires { Aggregate{Members{}..., AnyMember{}}; })
    return member_count<Aggregate, Members..., AnyMember>();
  else
    return sizeof...(Members);
}
} // namespace

TEST_CASE("the run config's field table lists every RunConfig member once, with its own flag and key") {
  std::set<std::string> flags, keys, stored;
  std::size_t fields = 0;
  visit_run_fields([&](const FieldInfo& f, auto) {
    ++fields;
    flags.insert(f.flag);
    keys.insert(metadata_key(f));
    if (stored_in_checkpoint(f.role)) stored.insert(metadata_key(f));
  });
  CHECK(fields == member_count<RunConfig>());
  CHECK(flags.size() == fields);
  CHECK(keys.size() == fields);
  // every stored field is in the metadata, under its key; a compute setting (the attention path)
  // is not: it does not change what the checkpoint holds
  const auto meta = run_metadata(RunConfig{}, 0);
  for (const auto& k : keys) CHECK(meta.count(k) == (stored.count(k) ? 1u : 0u));
}

TEST_CASE("parameter_count and visit_parameter_shapes describe the built model exactly, without building it") {
  std::vector<RunConfig> configs;
  RunConfig toy = tiny_config();
  configs.push_back(toy);
  toy.layers = 3, toy.d_model = 24, toy.heads = 3, toy.ffn = 40, toy.vocab = 7;
  configs.push_back(toy);
  RunConfig text = RunConfig::text_defaults();
  text.vocab = 65, text.layers = 2, text.d_model = 16, text.heads = 2, text.ffn = 48, text.context = 12;
  configs.push_back(text);
  text.tie_weights = "off";
  configs.push_back(text);
  for (const RunConfig& c : configs) {
    CAPTURE(to_text(c.task));
    CAPTURE(c.layers);
    CAPTURE(c.tie_weights);
    const auto model = make_model(c, 1);
    std::vector<std::pair<std::string, Dims>> want, got;
    for (const auto& [name, p] : model->named_parameters()) want.emplace_back(name, p.shape());
    visit_parameter_shapes(c, [&](const std::string& name, const Dims& shape) {
      got.emplace_back(name, shape);
      return true;
    });
    CHECK(got == want);
    CHECK(parameter_count(c) == model->num_parameters());
  }
  // the walk stops where the visitor says, and a count too large for 64 bits saturates
  int seen = 0;
  RunConfig huge = tiny_config();
  huge.layers = 1'000'000'000;
  visit_parameter_shapes(huge, [&](const std::string&, const Dims&) { return ++seen < 3; });
  CHECK(seen == 3);
  huge.vocab = std::int64_t{1} << 40, huge.d_model = std::int64_t{1} << 40;
  CHECK(parameter_count(huge) == INT64_MAX);
}

TEST_CASE("checkpoints carry a checksum of every tensor: a flipped bit in either file is refused by name") {
  TempDir dir;
  Trained t(1);
  const std::string model = dir / "model.safetensors";
  save_checkpoint(model, *t.model, t.opt.get(), t.cfg, 1);
  const std::string opt_path = dir / "optimizer.safetensors";
  for (const std::string& path : {model, opt_path}) {
    CAPTURE(path);
    const std::string good = read_file(path);
    std::string bad = good;
    bad[bad.size() - 5] ^= 0x01; // the last tensor's data
    write_file(path, bad);
    const std::string m = error_of<std::invalid_argument>([&] {
      if (path == model) (void)load_model_checkpoint(model);
      else {
        auto o = make_optimizer(t.cfg, t.model->named_parameters());
        (void)load_optimizer_state(model, 1, *o);
      }
    });
    CHECK(starts_with(m, path + ": tensor \""));
    CHECK(contains(m, "fails its checksum"));
    write_file(path, good);
  }
  CHECK(load_model_checkpoint(model).step == 1);
}
