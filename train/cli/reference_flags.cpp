#include "train/cli/reference_flags.hpp"

#include <cstring>
#include <fmt/format.h>

#include "framework/distributed/communicator.hpp"
#include "framework/engine/kernels.hpp"

namespace headgrad::cli {
namespace {

// What turned reference mode on, for messages: the flag, or the environment.
std::string cause(const Args& args) { return args.flag("reference") ? "--reference" : "reference mode (HEADGRAD_REFERENCE=1)"; }

} // namespace

FlagSpec reference_flag(const std::string& what) {
  return {"reference", Kind::flag, "", what};
}

bool reference_in_argv(int argc, char** argv) {
  for (int i = 2; i < argc; ++i)
    if (std::strcmp(argv[i], "--reference") == 0 || std::strcmp(argv[i], "--reference=true") == 0) return true;
  return false;
}

bool switch_reference_mode(const Args& args) {
  if (args.flag("reference")) runtime::set_reference(true);
  return runtime::reference();
}

void train_in_reference_mode(const Args& args, train::TrainOptions& o) {
  const std::string why = cause(args);
  auto refuse = [&](const std::string& rule, const std::string& flag, const std::string& value) {
    throw CliError(fmt::format("{} {}: --{} {} conflicts with it", why, rule, flag, value));
  };
  if (args.given("threads") && o.threads != 1) refuse("trains on one thread", "threads", std::to_string(o.threads));
  if (args.given("attention") && o.run.attention != "composed")
    refuse("trains with d2l's composed attention", "attention", o.run.attention);
  if (args.given("shards") && o.run.shards != 1)
    refuse("trains on every batch as one shard", "shards", std::to_string(o.run.shards));
  if (distributed::size() > 1)
    throw CliError(fmt::format("{} trains in one process: start it without mpirun or srun", why));
  if (!o.resume.empty() && o.run.shards > 1)
    throw CliError(fmt::format("{} trains on every batch as one shard, the checkpoint on {}: add --reshard to continue "
                               "with one (other bits)",
                               why, o.run.shards));
  o.threads = 1;
  o.run.attention = "composed";
  o.run.shards = 1;
}

} // namespace headgrad::cli
