// processes.hpp - the benchmark's view of processes: its own memory from /proc, and launching
// the child measurements (and PyTorch) with a changed environment.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace headgrad::bench {

// Peak and current resident set of this process in KiB from /proc/self/status (VmHWM, VmRSS).
// VmHWM belongs to the address space, so it starts afresh at exec; ru_maxrss does not (Linux
// carries the pre-exec maximum over), which is why the benchmark reads VmHWM.
std::int64_t proc_status_kib(const char* key);

// Runs argv[0] (a path) with argv; `env` entries are set in the child's environment (nullopt:
// removed from it); stdout optionally goes to `stdout_path` ("" = inherited), stderr is inherited.
// Returns the exit code (128 + signal if killed, 127 if it could not start).
using EnvChanges = std::map<std::string, std::optional<std::string>>;
int run_process(const std::vector<std::string>& argv, const EnvChanges& env, const std::string& stdout_path = "");
// Runs argv and returns its stdout (exit code in *code).
std::string capture_process(const std::vector<std::string>& argv, int* code);

} // namespace headgrad::bench
