// run_config.hpp - everything that defines a training run, and the one table of its fields.
//
// RunConfig is flat: every setting is stored once (the model's vocab and max_len are the task's
// too), and model_config() / task_config() give the structs models/ and data/ take.
// visit_run_fields() is the one list of the fields. From it come the command line's flags and
// their --help defaults (the initialisers below), validate(), what a resumed run keeps and what
// it may change (Role), the checkpoint metadata and the benchmark's JSON.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/tasks.hpp"
#include "models/gpt.hpp"
#include "models/transformer.hpp"

namespace headgrad::train {

struct RunConfig {
  // Defaults as `headgrad train`. lr 0.01 with 100 warmup steps and a cosine decay over 2000 steps
  // took seeds 0, 1 and 2 of the sort task to >= 0.99 held-out sequence accuracy at step 1700
  // (evaluated every 100 steps); the earlier lr 0.003 / 300 / 6000 needed ~4700 steps.
  data::Task task = data::Task::sort;
  std::int64_t steps = 2000, batch = 64;
  std::int64_t d_model = 64, heads = 4, layers = 2, ffn = 128, max_len = 16, min_len = 4, vocab = 16;
  double lr = 0.01;
  std::string optimizer = "adam"; // adam | adamw | sgd
  double weight_decay = 0.0, momentum = 0.9;
  std::int64_t warmup = 100;
  std::string schedule = "cosine"; // constant | cosine
  double clip = 1.0, dropout = 0.0;
  std::uint64_t seed = 0;
  std::string attention = "fused"; // fused | composed (models::AttentionPath)
  // Adam's second-moment decay; the cosine decay's floor; which parameters weight decay applies to
  double beta2 = 0.999, min_lr = 0.0;
  std::string decay = "all";       // all | matrices (Linear and Embedding weights: nanoGPT's groups)
  // task text: the corpus ("": data::kDefaultCorpusDir), its tokenizer, the context length T and
  // weight tying (the model's vocab is the tokenizer's, set when the corpus is read)
  std::string text = "";
  std::string data = ""; // task tokens: the directory of train.bin, val.bin and meta.json
  std::string tokenizer = "chars"; // chars | bytes
  std::int64_t context = 64;
  std::string tie_weights = "on";  // on | off
  // S, the shards each batch is cut into and whose gradients are added in the shard tree
  // (framework/distributed/shard_tree.hpp); 0: ranks x threads (the trainer sets the value the
  // run uses, which checkpoints keep). The bits of a run depend on S, not on the layout.
  std::int64_t shards = 0;
  // what linear layers' gemms multiply in: float32, or bf16 (runtime::Autocast around each step's
  // forward and backward: bf16 inputs, float32 accumulation; weights, optimizer, checkpoints float32)
  std::string precision = "float32"; // float32 | bf16

  // The defaults of `headgrad train --task text`: nanoGPT's shakespeare_char recipe at its CPU
  // size (README: n_layer 4, n_head 4, n_embd 128, block_size 64, batch 12, max_iters and
  // lr_decay_iters 2000, dropout 0; config/train_shakespeare_char.py: learning_rate 1e-3, min_lr
  // 1e-4, beta2 0.99, warmup_iters 100; train.py: AdamW, weight_decay 0.1 on the matrices only,
  // grad_clip 1.0), 4 x n_embd MLP width.
  static RunConfig text_defaults();

  // a causal language model (GPT): on a text (task text) or on token files (task tokens, --data)
  bool is_text() const { return task == data::Task::text || task == data::Task::tokens; }
  std::int64_t sequence_length() const { return is_text() ? context : max_len; } // T of every batch
  models::StackConfig stack_config() const; // what both models' configs take from the run
  models::ModelConfig model_config() const;
  models::GPTConfig gpt_config() const;
  data::TaskConfig task_config() const;
  // Every field's rule (in table order), then the rules between fields. Throws
  // std::invalid_argument with one line naming the flag: "--lr must be positive, got 0".
  void validate() const;
};

// What a field is to a run, and so what a resumed run (--resume) does with it.
enum class Role {
  shape,   // the task and the sizes of the model and its batches: must match the checkpoint's
  fixed,   // a training setting the checkpoint fixes (seed, optimizer kind, dropout): must match
  tunable, // an optimiser setting: a value given on resume replaces the checkpoint's
  compute, // how a step is computed (same parameters, same results up to rounding): not stored in
           // checkpoints; a run, resumed or not, takes it from its flags
  layout,  // how a step's sums are cut up (the shard count): the objective does not depend on it,
           // the bits do. Stored; must match on resume, unless the run asks to reshard
};
inline bool must_match_on_resume(Role role) {
  return role == Role::shape || role == Role::fixed || role == Role::layout;
}
inline bool stored_in_checkpoint(Role role) { return role != Role::compute; }

// The valid values of a field; `note` follows the rule in its error message.
struct Rule {
  enum class Kind {
    any,      // every value of the type
    at_least, // integers: "at least min"; reals: ">= min"
    positive, // reals > 0
    fraction, // reals in [0, 1)
    one_of,   // text: one of `choices`
  } kind = Kind::any;
  double min = 0;
  std::vector<std::string> choices = {};
  const char* note = "";
};
inline Rule at_least(double min, const char* note = "") { return {Rule::Kind::at_least, min, {}, note}; }
inline Rule positive() { return {Rule::Kind::positive}; }
inline Rule fraction() { return {Rule::Kind::fraction}; }
inline Rule one_of(std::vector<std::string> choices) { return {Rule::Kind::one_of, 0, std::move(choices)}; }

// Which tasks a field means something to: a flag given for another task is refused, not ignored.
// Which tasks a field is for: text_task is both tasks of token streams (text, tokens); text_corpus
// and token_files one of them (the text file and its tokenizer; the token files' directory).
enum class Applies { every_task, toy_tasks, text_task, text_corpus, token_files };

struct FieldInfo {
  const char* flag; // command-line flag without dashes; the metadata and JSON key is metadata_key()
  const char* help;
  Role role;
  Rule rule = {};
  Applies applies = Applies::every_task;
};
inline bool applies_to(const FieldInfo& f, data::Task task) {
  const bool stream = task == data::Task::text || task == data::Task::tokens;
  switch (f.applies) {
  case Applies::every_task: return true;
  case Applies::toy_tasks: return !stream;
  case Applies::text_task: return stream;
  case Applies::text_corpus: return task == data::Task::text;
  case Applies::token_files: return task == data::Task::tokens;
  }
  return false;
}
// "d-model" -> "d_model"
std::string metadata_key(const FieldInfo& field);

// The field table: calls visit(FieldInfo, &RunConfig::member) once per field, in the order of
// `headgrad train --help`. The member pointer reads or writes that field of any RunConfig.
template <typename Visit> void visit_run_fields(Visit&& visit) {
  using R = RunConfig;
  visit(FieldInfo{"task", "toy task (copy, reverse or sort), or text: a causal language model on --text (other defaults: "
                  "see below), or tokens: the same on the token files in --data",
                  Role::shape},
        &R::task);
  visit(FieldInfo{"steps", "total optimizer steps (a resumed run continues up to this)", Role::tunable, at_least(1)},
        &R::steps);
  visit(FieldInfo{"batch", "sequences per batch", Role::shape, at_least(1)}, &R::batch);
  visit(FieldInfo{"d-model", "model width d", Role::shape, at_least(1)}, &R::d_model);
  visit(FieldInfo{"heads", "attention heads (must divide d-model)", Role::shape, at_least(1)}, &R::heads);
  visit(FieldInfo{"layers", "encoder blocks", Role::shape, at_least(1)}, &R::layers);
  visit(FieldInfo{"ffn", "hidden width of the position-wise FFN", Role::shape, at_least(1)}, &R::ffn);
  visit(FieldInfo{"max-len", "longest sequence = padded length T", Role::shape, at_least(1), Applies::toy_tasks},
        &R::max_len);
  visit(FieldInfo{"min-len", "shortest sequence", Role::shape, at_least(1), Applies::toy_tasks}, &R::min_len);
  visit(FieldInfo{"vocab", "vocabulary size V (token 0 is padding)", Role::shape, at_least(2), Applies::toy_tasks},
        &R::vocab);
  visit(FieldInfo{"lr", "peak learning rate", Role::tunable, positive()}, &R::lr);
  visit(FieldInfo{"optimizer", "adam, adamw or sgd", Role::fixed, one_of({"adam", "adamw", "sgd"})}, &R::optimizer);
  visit(FieldInfo{"weight-decay", "weight decay (L2 for adam/sgd, decoupled for adamw)", Role::tunable, at_least(0)},
        &R::weight_decay);
  visit(FieldInfo{"momentum", "SGD momentum", Role::tunable, fraction()}, &R::momentum);
  visit(FieldInfo{"warmup", "linear warmup steps", Role::tunable, at_least(0)}, &R::warmup);
  visit(FieldInfo{"schedule", "after warmup: constant or cosine decay to 0", Role::tunable,
                  one_of({"constant", "cosine"})},
        &R::schedule);
  visit(FieldInfo{"clip", "clip the global gradient norm to this (0: off)", Role::tunable,
                  at_least(0, " (0 turns clipping off)")},
        &R::clip);
  visit(FieldInfo{"dropout", "dropout probability", Role::fixed, fraction()}, &R::dropout);
  visit(FieldInfo{"seed", "seed for initialisation and batches", Role::fixed, at_least(0)}, &R::seed);
  visit(FieldInfo{"attention", "fused (one op per layer) or composed (d2l's ops one by one; same results up to rounding)",
                  Role::compute, one_of({"fused", "composed"})},
        &R::attention);
  visit(FieldInfo{"beta2", "Adam's second-moment decay (beta1 is 0.9)", Role::tunable, fraction()}, &R::beta2);
  visit(FieldInfo{"min-lr", "the learning rate the cosine decay ends at", Role::tunable, at_least(0)}, &R::min_lr);
  visit(FieldInfo{"decay", "weight decay on all parameters, or on matrices only (Linear and Embedding weights, not "
                  "biases or norms)",
                  Role::tunable, one_of({"all", "matrices"})},
        &R::decay);
  visit(FieldInfo{"text", "task text: the text file to learn (default: Debian's fortunes, /usr/share/games/fortunes)",
                  Role::fixed, {}, Applies::text_corpus},
        &R::text);
  visit(FieldInfo{"data", "task tokens: a directory of nanoGPT's prepared train.bin and val.bin (uint16 token ids) "
                  "and meta.json ({\"vocab_size\": N})",
                  Role::fixed, {}, Applies::token_files},
        &R::data);
  visit(FieldInfo{"tokenizer", "task text: chars (one token per character of the text) or bytes (256, any text)",
                  Role::shape, one_of({"chars", "bytes"}), Applies::text_corpus},
        &R::tokenizer);
  visit(FieldInfo{"context", "task text: tokens of context, the sequence length T", Role::shape, at_least(1),
                  Applies::text_task},
        &R::context);
  visit(FieldInfo{"tie-weights", "task text: the output layer shares the token embedding's weight, on or off",
                  Role::shape, one_of({"on", "off"}), Applies::text_task},
        &R::tie_weights);
  visit(FieldInfo{"shards", "cut each batch into S shards whose gradients add up in one fixed tree: the bits depend "
                  "on S, not on how ranks and threads share the shards (0: ranks x threads; each shard runs on one "
                  "thread; S between the ranks and --batch)",
                  Role::layout, at_least(0)},
        &R::shards);
  visit(FieldInfo{"precision", "float32, or bf16: linear layers' gemms take bf16 inputs and add in float32 (needs "
                  "avx512_bf16 or amx_bf16; weights, optimizer state and checkpoints stay float32; a resumed run keeps "
                  "the checkpoint's)",
                  Role::fixed, one_of({"float32", "bf16"})},
        &R::precision);
}

// A field's value as text (the checkpoint metadata, --help defaults, messages) and back. Reals
// use the shortest text that reads back to the same double. from_text returns false when the
// text is not a value of the type; value_kind names the type for that message ("an integer").
std::string to_text(data::Task v);
std::string to_text(std::int64_t v);
std::string to_text(std::uint64_t v);
std::string to_text(double v);
std::string to_text(const std::string& v);
bool from_text(const std::string& text, data::Task& v);
bool from_text(const std::string& text, std::int64_t& v);
bool from_text(const std::string& text, std::uint64_t& v);
bool from_text(const std::string& text, double& v);
bool from_text(const std::string& text, std::string& v);
const char* value_kind(const data::Task&);
const char* value_kind(const std::int64_t&);
const char* value_kind(const std::uint64_t&);
const char* value_kind(const double&);
const char* value_kind(const std::string&);

// "" if `value` keeps the field's rule, else the message: "--lr must be positive, got 0".
std::string rule_error(const FieldInfo& field, data::Task value);
std::string rule_error(const FieldInfo& field, std::int64_t value); // also a seed read as signed text
std::string rule_error(const FieldInfo& field, std::uint64_t value);
std::string rule_error(const FieldInfo& field, double value);
std::string rule_error(const FieldInfo& field, const std::string& value);

// A field that must match on resume and differs between a run and its checkpoint.
struct ResumeConflict {
  FieldInfo field;
  std::string run_value, checkpoint_value;
};
// With `reshard`, a layout field may differ (the run continues with other bits).
std::vector<ResumeConflict> resume_conflicts(const RunConfig& run, const RunConfig& checkpoint, bool reshard = false);

} // namespace headgrad::train
