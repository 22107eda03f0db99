#include "train/cli/cli_args.hpp"

#include <cstdio>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fmt/format.h>
#include <limits>
#include <unistd.h>

namespace headgrad::cli {
namespace {

// An optional sign and decimal digits: an integer, whatever its size.
bool is_integer_text(const std::string& v) {
  const std::size_t digits = !v.empty() && (v[0] == '-' || v[0] == '+') ? 1 : 0;
  return v.size() > digits && v.find_first_not_of("0123456789", digits) == std::string::npos;
}

} // namespace

const FlagSpec& Args::spec(const std::string& name) const {
  for (const auto& s : specs_)
    if (s.name == name) return s;
  throw std::logic_error("cli: flag --" + name + " was never declared"); // a programming error
}

void Args::parse(int argc, char** argv, int first, std::vector<std::string>* positional) {
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      help_ = true;
      continue;
    }
    if (a.rfind("--", 0) != 0 && positional) {
      positional->push_back(a);
      continue;
    }
    if (a.rfind("--", 0) != 0)
      throw CliError(fmt::format("unexpected argument '{}' (flags start with --; see headgrad {} --help)", a,
                                 command_)); // main() prefixes "headgrad <command>: "
    std::string name = a.substr(2), value;
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    const FlagSpec* s = nullptr;
    for (const auto& sp : specs_)
      if (sp.name == name) s = &sp;
    if (!s) throw CliError(fmt::format("unknown flag --{} (see headgrad {} --help)", name, command_));
    if (s->kind == Kind::flag) {
      if (has_value && value != "true" && value != "false")
        throw CliError(fmt::format("--{} takes no value (or =true/=false), got '{}'", name, value));
      values_[name] = has_value ? value : "true";
      continue;
    }
    if (!has_value) {
      if (i + 1 >= argc) throw CliError(fmt::format("--{} needs a value ({})", name, s->help));
      value = argv[++i];
    }
    // Validate the syntax now, so the error names the flag even if the value is read later (the
    // range is the reader's: integer(), integer_in(), unsigned_integer()).
    values_[name] = value;
    if (s->kind == Kind::integer && !is_integer_text(value))
      throw CliError(fmt::format("--{} must be an integer, got '{}'", name, value));
    if (s->kind == Kind::real) (void)real(name);
  }
}

std::string Args::raw(const std::string& name) const {
  auto it = values_.find(name);
  return it != values_.end() ? it->second : spec(name).def;
}

std::string Args::text(const std::string& name) const { return raw(name); }

std::int64_t Args::integer(const std::string& name) const {
  return integer_in(name, std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max());
}

std::int64_t Args::integer_in(const std::string& name, std::int64_t min, std::int64_t max, const std::string& why) const {
  const std::string v = raw(name);
  if (!is_integer_text(v)) throw CliError(fmt::format("--{} must be an integer, got '{}'", name, v));
  errno = 0;
  const long long x = std::strtoll(v.c_str(), nullptr, 10); // saturates at the 64-bit range (ERANGE)
  const bool beyond = errno == ERANGE;                       // past the 64-bit range, on x's side
  if (x < min || (beyond && x < 0)) throw CliError(fmt::format("--{} must be at least {}{}, got {}", name, min, why, v));
  if (x > max || beyond) throw CliError(fmt::format("--{} must be at most {}{}, got {}", name, max, why, v));
  return x;
}

std::uint64_t Args::unsigned_integer(const std::string& name) const {
  const std::string v = raw(name);
  if (!is_integer_text(v)) throw CliError(fmt::format("--{} must be an integer, got '{}'", name, v));
  if (v[0] == '-' && v.find_first_not_of('0', 1) != std::string::npos)
    throw CliError(fmt::format("--{} must be at least 0, got {}", name, v));
  errno = 0;
  const unsigned long long x = std::strtoull(v[0] == '-' ? "0" : v.c_str(), nullptr, 10);
  if (errno == ERANGE)
    throw CliError(fmt::format("--{} must be at most {}, got {}", name, std::numeric_limits<std::uint64_t>::max(), v));
  return x;
}

int thread_count(const Args& args, const std::string& name) {
  const long cores = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  return static_cast<int>(args.integer_in(name, 1, kThreadsPerCore * cores,
                                          fmt::format(" ({} x the {} cores of this machine)", kThreadsPerCore, cores)));
}

double Args::real(const std::string& name) const {
  const std::string v = raw(name);
  errno = 0;
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(x))
    throw CliError(fmt::format("--{} must be a finite number, got '{}'", name, v));
  return x;
}

bool Args::flag(const std::string& name) const { return raw(name) == "true"; }

std::int64_t Args::integer_at_least(const std::string& name, std::int64_t min) const {
  return integer_in(name, min, std::numeric_limits<std::int64_t>::max());
}

bool Args::print_help(const std::string& synopsis, const std::string& description, const std::string& after) const {
  if (!help_) return false;
  std::fputs(("usage: headgrad " + synopsis + "\n\n" + description + "\n\nflags:\n" + usage() + after).c_str(), stdout);
  return true;
}

std::string Args::usage() const {
  std::string out;
  for (const auto& s : specs_) {
    std::string left = "--" + s.name;
    if (s.kind != Kind::flag) left += " " + (s.metavar.empty() ? std::string(s.kind == Kind::text ? "TEXT" : "N") : s.metavar);
    std::string def = s.kind == Kind::flag || s.def.empty() ? "" : fmt::format(" (default: {})", s.def);
    out += fmt::format("  {:<22} {}{}\n", left, s.help, def);
  }
  return out;
}

} // namespace headgrad::cli
