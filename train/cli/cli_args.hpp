// cli_args.hpp - a small, strict flag parser: --name VALUE or --name=VALUE, typed, with
// defaults and help. Every error is one line naming the flag and the rule (CliError); main()
// prints it and exits 2.
#pragma once
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace headgrad::cli {

struct CliError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Args;
// --threads (or `name`) of a command: at least 1, at most kThreadsPerCore x the cores of this
// machine (more only time-slices the same cores, and each thread costs memory: 100000 of them
// crash a run), as an int.
inline constexpr int kThreadsPerCore = 4;
int thread_count(const Args& args, const std::string& name = "threads");

enum class Kind { integer, real, text, flag };

struct FlagSpec {
  std::string name;   // without dashes: "d-model"
  Kind kind;
  std::string def;    // default as text ("" = none); flags default to "false"
  std::string help;
  std::string metavar = "";
};

class Args {
public:
  Args(std::string command, std::vector<FlagSpec> specs) : command_(std::move(command)), specs_(std::move(specs)) {}
  // Parses argv[first..argc). Throws CliError for unknown flags, missing or malformed values and
  // positional arguments (unless `positional` collects them, in order). --help sets help().
  void parse(int argc, char** argv, int first, std::vector<std::string>* positional = nullptr);
  bool help() const { return help_; }
  std::string usage() const; // the --help text, listing every flag with its default
  // After --help: prints "usage: headgrad <synopsis>", the description, the flags and `after` to
  // stdout and returns true (the command then returns 0); false without --help.
  bool print_help(const std::string& synopsis, const std::string& description, const std::string& after = "") const;

  bool given(const std::string& name) const { return values_.count(name) > 0; } // set on the command line
  std::string text(const std::string& name) const;
  std::int64_t integer(const std::string& name) const;
  double real(const std::string& name) const;
  bool flag(const std::string& name) const;
  // integer() that must be >= min: "--batch must be at least 1, got 0"
  std::int64_t integer_at_least(const std::string& name, std::int64_t min) const;
  // An integer in [min, max], for a flag whose type is narrower than 64 bits or that has an upper
  // bound: "--precision must be at most 12, got 4294967297" (`why` follows the bound: " (4 x the
  // 2 cores of this machine)"). Never truncated: a value past the 64-bit range gets the same line.
  std::int64_t integer_in(const std::string& name, std::int64_t min, std::int64_t max, const std::string& why = "") const;
  // An unsigned 64-bit integer (a seed): every value from 0 to 2^64 - 1.
  std::uint64_t unsigned_integer(const std::string& name) const;

private:
  const FlagSpec& spec(const std::string& name) const;
  std::string raw(const std::string& name) const;
  std::string command_;
  std::vector<FlagSpec> specs_;
  std::map<std::string, std::string> values_;
  bool help_ = false;
};

} // namespace headgrad::cli
