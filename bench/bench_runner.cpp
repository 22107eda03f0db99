#include "bench/bench_runner.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <unistd.h>

#include "bench/processes.hpp"

namespace headgrad::bench {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::optional<json> read_json(const fs::path& p) {
  std::ifstream f(p);
  if (!f) return std::nullopt;
  try {
    json j;
    f >> j;
    return j;
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

// {"available": true, "version": ...}, or {"available": false, "reason": ...}
json find_torch(const BenchOptions& o) {
  if (o.no_torch) return {{"available", false}, {"reason", "--no-torch"}};
  if (access(o.python.c_str(), X_OK) != 0) return {{"available", false}, {"reason", o.python + " not found"}};
  int code = 0;
  const std::string v =
      capture_process({o.python, "-c", "import sys, torch; sys.stdout.write(torch.__version__)"}, &code);
  if (code != 0) return {{"available", false}, {"reason", fmt::format("{} -c 'import torch' failed", o.python)}};
  if (access(o.torch_script.c_str(), R_OK) != 0)
    return {{"available", false}, {"reason", o.torch_script + " not found"}};
  return {{"available", true}, {"version", v}};
}

} // namespace

Runner::Runner(const BenchOptions& o) : o_(o), torch_info_(find_torch(o)) {
  torch_ = torch_info_["available"].get<bool>();
  torch_info_["omp_wait_policy"] = torch_omp_wait_policy().value_or("(unset)");
  std::string tmpl = (fs::temp_directory_path() / "headgrad-bench-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) throw std::runtime_error(fmt::format("cannot create {}: {}", tmpl, std::strerror(errno)));
  dir_ = tmpl;
}

Runner::~Runner() {
  std::error_code ec;
  if (!o_.keep_tmp) fs::remove_all(dir_, ec);
  else fmt::print(stderr, "bench: kept {}\n", dir_);
}

std::string Runner::torch_summary() const {
  return torch_ ? torch_info_["version"].get<std::string>() : "off (" + torch_info_["reason"].get<std::string>() + ")";
}

// The OMP_WAIT_POLICY the PyTorch process runs with (nullopt: unset, libgomp's default).
//   PASSIVE (the default) - PyTorch's best here: its gemms run on OpenBLAS's own threads, and
//           libgomp threads spinning after each parallel region starve them (measured: small
//           config at 2 threads 1.4 s/step with libgomp's default vs 62 ms/step with PASSIVE, on
//           a busy machine)
//   same  - what headgrad runs with
//   user  - what the bench was started with
//   other - that value
std::optional<std::string> Runner::torch_omp_wait_policy() const {
  const std::string& policy = o_.torch_omp_wait_policy;
  const char* v = nullptr;
  if (policy == "same") v = std::getenv("OMP_WAIT_POLICY");
  else if (policy == "user") v = std::getenv(kUserOmpPolicyVar);
  else return policy;
  if (v && *v) return std::string(v);
  return std::nullopt;
}

std::pair<json, json> Runner::run(json spec, const std::string& tag, bool with_torch, int threads,
                                  const std::string& inputs) {
  const fs::path dir = dir_, spec_path = dir / (tag + ".spec.json");
  const int n_threads = threads > 0 ? threads : o_.threads;
  const std::string in = inputs.empty() ? tag : inputs;
  spec["threads"] = n_threads;
  spec["weights"] = (dir / (in + ".weights.safetensors")).string();
  spec["data"] = (dir / (in + ".data.safetensors")).string();
  spec["result_headgrad"] = (dir / (tag + ".headgrad.json")).string();
  spec["result_torch"] = (dir / (tag + ".torch.json")).string();
  {
    std::ofstream f(spec_path);
    f << spec.dump(1) << "\n";
  }
  json hg, pt;
  // /proc/self/exe: exactly this binary, even if a rebuild has replaced the file meanwhile
  const int rc = run_process({"/proc/self/exe", "--child", spec_path.string()}, {});
  auto r = read_json(spec["result_headgrad"].get<std::string>());
  if (rc != 0 || !r) hg = {{"error", fmt::format("headgrad child exited with {}", rc)}};
  else hg = *r;
  if (with_torch && torch_) {
    const std::string n = std::to_string(n_threads);
    const int prc = run_process({o_.python, o_.torch_script, spec_path.string()},
                                {{"OMP_NUM_THREADS", n},
                                 {"OPENBLAS_NUM_THREADS", n},
                                 {"MKL_NUM_THREADS", n},
                                 {"OMP_WAIT_POLICY", torch_omp_wait_policy()}});
    auto p = read_json(spec["result_torch"].get<std::string>());
    if (prc != 0 || !p) pt = {{"error", fmt::format("{} {} exited with {}", o_.python, o_.torch_script, prc)}};
    else pt = *p;
  }
  return {hg, pt};
}

} // namespace headgrad::bench
