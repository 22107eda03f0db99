#include "train/cli/run_config_flags.hpp"

#include <filesystem>
#include <fmt/format.h>
#include <stdexcept>

namespace headgrad::cli {
namespace {

// The flag kind of each member type (text ones show as NAME in --help).
Kind kind_of(const data::Task&) { return Kind::text; }
Kind kind_of(const std::string&) { return Kind::text; }
Kind kind_of(std::int64_t) { return Kind::integer; }
Kind kind_of(std::uint64_t) { return Kind::integer; }
Kind kind_of(double) { return Kind::real; }

template <typename T> FlagSpec spec_of(const train::FieldInfo& f, const T& default_value) {
  const Kind kind = kind_of(default_value);
  return {f.flag, kind, train::to_text(default_value), f.help, kind == Kind::text ? "NAME" : ""};
}
template <typename T> FlagSpec spec_of(const train::OptionInfo& o, const T& default_value) {
  if constexpr (std::is_same_v<T, bool>) return {o.flag, Kind::flag, default_value ? "true" : "false", o.help, o.metavar};
  else return {o.flag, kind_of(default_value), train::to_text(default_value), o.help, o.metavar};
}
void read_option(const Args& a, const train::OptionInfo& o, bool& v) { v = a.flag(o.flag); }
void read_option(const Args& a, const train::OptionInfo& o, std::string& v) { v = a.text(o.flag); }
void read_option(const Args& a, const train::OptionInfo& o, std::int64_t& v) { v = a.integer(o.flag); }
void read_option(const Args& a, const train::OptionInfo& o, double& v) { v = a.real(o.flag); }

// Args has checked the syntax of integer and real flags; what is left is the type's own range.
void read_flag(const Args& a, const train::FieldInfo& f, data::Task& v) {
  try {
    v = data::parse_task(a.text(f.flag));
  } catch (const std::invalid_argument& e) {
    throw CliError(fmt::format("--{}: {}", f.flag, e.what()));
  }
}
void read_flag(const Args& a, const train::FieldInfo& f, std::string& v) { v = a.text(f.flag); }
void read_flag(const Args& a, const train::FieldInfo& f, std::int64_t& v) { v = a.integer(f.flag); }
void read_flag(const Args& a, const train::FieldInfo& f, double& v) { v = a.real(f.flag); }
void read_flag(const Args& a, const train::FieldInfo& f, std::uint64_t& v) {
  v = a.unsigned_integer(f.flag); // the whole unsigned range; a negative value is refused
  if (const std::string error = train::rule_error(f, v); !error.empty()) throw CliError(error);
}

} // namespace

std::vector<FlagSpec> train_option_flags() {
  const train::TrainOptions defaults;
  std::vector<FlagSpec> specs;
  train::visit_train_options([&](const train::OptionInfo& o, auto member) {
    if (o.flag) specs.push_back(spec_of(o, defaults.*member));
  });
  return specs;
}

void read_train_options(const Args& args, train::TrainOptions& options) {
  train::visit_train_options([&](const train::OptionInfo& o, auto member) {
    if (!o.flag) return;
    read_option(args, o, options.*member);
    if (const std::string error = train::option_rule_error(o, options.*member); !error.empty()) throw CliError(error);
  });
}

bool selected(RunFields which, const train::FieldInfo& field) {
  return which == RunFields::all || field.role != train::Role::shape;
}

std::string text_defaults_help() {
  const train::RunConfig toy, text = train::RunConfig::text_defaults();
  std::string out;
  train::visit_run_fields([&](const train::FieldInfo& f, auto member) {
    if (f.flag != std::string("task") && !(toy.*member == text.*member))
      out += fmt::format("{}--{} {}", out.empty() ? "" : ", ", f.flag, train::to_text(text.*member));
  });
  return out;
}

std::vector<FlagSpec> run_config_flags(RunFields which) {
  const train::RunConfig defaults;
  std::vector<FlagSpec> specs;
  train::visit_run_fields([&](const train::FieldInfo& f, auto member) {
    if (selected(which, f)) specs.push_back(spec_of(f, defaults.*member));
  });
  return specs;
}

train::RunConfig run_config_from_flags(const Args& args, RunFields which) {
  // --task text starts from its own defaults; a flag given replaces the default either way
  const bool text = selected(which, train::FieldInfo{"task", "", train::Role::shape}) && args.given("task") &&
                    (args.text("task") == data::task_name(data::Task::text) ||
                     args.text("task") == data::task_name(data::Task::tokens));
  train::RunConfig c = text ? train::RunConfig::text_defaults() : train::RunConfig{};
  train::visit_run_fields([&](const train::FieldInfo& f, auto member) {
    if (selected(which, f) && (args.given(f.flag) || !text)) read_flag(args, f, c.*member);
  });
  // The corpus by its absolute path: the checkpoint stores it, and a run resumed from another
  // working directory still finds it (any path to the same contents is accepted on resume: the
  // text's fingerprint is what must match, TaskData::check_same_text).
  if (c.is_text() && !c.text.empty()) c.text = std::filesystem::absolute(c.text).lexically_normal().string();
  try {
    c.validate();
  } catch (const std::invalid_argument& e) {
    throw CliError(e.what()); // a usage error: one line, exit code 2
  }
  return c;
}

void refuse_flags_for_other_tasks(const Args& args, data::Task task) {
  train::visit_run_fields([&](const train::FieldInfo& f, auto) {
    if (!args.given(f.flag) || train::applies_to(f, task)) return;
    if (f.applies == train::Applies::text_task || f.applies == train::Applies::text_corpus)
      throw CliError(fmt::format("--{} applies to --task text{} only; this run's task is {}", f.flag,
                                 f.applies == train::Applies::text_task ? " and --task tokens" : "",
                                 data::task_name(task)));
    if (f.applies == train::Applies::token_files)
      throw CliError(fmt::format("--{} applies to --task tokens only; this run's task is {}", f.flag,
                                 data::task_name(task)));
    const bool tokens = task == data::Task::tokens;
    throw CliError(fmt::format("--{} does not apply to --task {} ({})", f.flag, data::task_name(task),
                               f.flag != std::string("vocab") ? "its sequence length is --context"
                               : tokens                       ? "its vocabulary is the token files': see --data"
                                                              : "its vocabulary is the text's: see --tokenizer"));
  });
}

train::RunConfig resumed_run_config(const Args& args, const train::RunConfig& from_flags,
                                    const train::LoadedRun& checkpoint, const std::string& path, bool reshard) {
  for (const train::ResumeConflict& c : train::resume_conflicts(from_flags, checkpoint.config, reshard)) {
    if (!args.given(c.field.flag)) continue;
    if (c.field.role == train::Role::layout && c.checkpoint_value != "0") // "0": a checkpoint from before the field
      throw CliError(fmt::format("--{} {} differs from the checkpoint's {} ({}): the run would continue with other "
                                 "bits; drop the flag to continue bit for bit, or add --reshard",
                                 c.field.flag, c.run_value, c.checkpoint_value, path));
    if (c.field.role != train::Role::layout)
      throw CliError(fmt::format("--{} {} differs from the checkpoint's {} ({}); drop the flag to resume", c.field.flag,
                                 c.run_value, c.checkpoint_value, path));
  }
  train::RunConfig c = checkpoint.config;
  train::visit_run_fields([&](const train::FieldInfo& f, auto member) {
    if ((f.role == train::Role::tunable && args.given(f.flag)) || f.role == train::Role::compute ||
        (f.role == train::Role::layout && (reshard || args.given(f.flag))))
      c.*member = from_flags.*member;
  });
  if (args.given("text")) c.text = from_flags.text; // the same contents by another path (checked by fingerprint)
  if (c.steps <= checkpoint.step)
    throw CliError(fmt::format("--steps {} is not beyond the checkpoint's step {}; ask for more steps to resume",
                               c.steps, checkpoint.step));
  return c;
}

} // namespace headgrad::cli
