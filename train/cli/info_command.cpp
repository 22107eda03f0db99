// info_command.cpp - `headgrad info [--check-blas N]`: the BLAS build, its active kernel, threads
// and CPU features, MPI support and ranks, and optionally a check of the kernel's gemm results.
#include <cstdlib>
#include <fmt/format.h>

#include "framework/distributed/communicator.hpp"
#include "framework/engine/blas/bf16_cpu.hpp"
#include "framework/engine/blas/linear_gemm.hpp"
#include "framework/engine/kernels.hpp"
#include "framework/engine/runtime/cpu_isa.hpp"
#include "framework/engine/runtime/startup.hpp"
#include "framework/engine/runtime/threads.hpp"
#include "train/cli/blas_check.hpp"
#include "train/cli/cli_args.hpp"
#include "train/cli/commands.hpp"

namespace headgrad::cli {

int info_command(int argc, char** argv) {
  Args args("info", {{"check-blas", Kind::integer, "0",
                      "also check N random sgemm/dgemm products of the active kernel against a "
                      "long-double reference (exit 1 if any is wrong)"}});
  args.parse(argc, argv, 2);
  if (args.print_help("info [--check-blas N]",
                      "Prints the BLAS build, its active kernel, threads, CPU features, the instruction set of "
                      "headgrad's vector kernels, MPI support and ranks."))
    return 0;
  const std::int64_t check_shapes = args.integer_at_least("check-blas", 0);
  if (distributed::rank() != 0) return 0; // rank 0 speaks for the job
  runtime::set_threads(runtime::available_cores()); // as train/eval set them by default
  const auto b = runtime::blas_info();
  const char* env_core = std::getenv("OPENBLAS_CORETYPE");
  fmt::print("BLAS vendor:     OpenBLAS\n");
  fmt::print("BLAS config:     {}\n", b.config);
  fmt::print("BLAS core:       {}{}\n", b.core,
             env_core ? fmt::format(" (OPENBLAS_CORETYPE={}{})", env_core,
                                    std::getenv("HEADGRAD_BLAS_AUTOCORE_FROM") ? ", chosen by headgrad" : ", set by you")
                      : "");
  if (runtime::user_chose_core())
    if (const std::string wider = runtime::wider_core(b.core, runtime::cpu_features()); !wider.empty())
      fmt::print("BLAS hint:       this CPU also runs OpenBLAS's wider {} kernel; OPENBLAS_CORETYPE={} keeps "
                 "gemms on {} (unset it, or set it to {}, to compare)\n",
                 wider, env_core, b.core, wider);
  fmt::print("BLAS threads:    {} per call (headgrad splits big gemms over its OpenMP threads)\n", b.blas_threads);
  fmt::print("OpenMP threads:  {}\n", b.omp_threads);
  const char* wait = std::getenv("OMP_WAIT_POLICY");
  fmt::print("OpenMP waiting:  {}\n", wait ? wait : "(libgomp default: spin, then sleep)");
  fmt::print("OpenMP binding:  {}\n", runtime::openmp_binding()); // OMP_PROC_BIND, OMP_PLACES
  fmt::print("CPU cores:       {}\n", b.cores);
  fmt::print("CPU model:       {}\n", runtime::cpu_model().empty() ? "(unknown)" : runtime::cpu_model());
  fmt::print("CPU features:    {}\n", runtime::cpu_features().str());
  std::string isas;
  for (runtime::Isa isa : runtime::supported_isas()) isas += std::string(isas.empty() ? "" : ", ") + runtime::isa_name(isa);
  const char* env_isa = std::getenv("HEADGRAD_ISA");
  fmt::print("Vector kernels:  {} ({}; this CPU runs {})\n", runtime::isa_name(runtime::active_isa()),
             env_isa && runtime::isa_notice().empty() ? fmt::format("HEADGRAD_ISA={}", env_isa)
                                                      : "the widest this CPU runs; HEADGRAD_ISA chooses",
             isas);
  if (!runtime::isa_notice().empty()) fmt::print("{}\n", runtime::isa_notice());
  // the linear layers' gemms (framework/engine/blas/linear_gemm.hpp); attention's and double's run OpenBLAS
  fmt::print("Linear gemms:    float32 on {}\n", runtime::float32_gemm_summary());
  if (!runtime::gemm_notice().empty()) fmt::print("{}\n", runtime::gemm_notice());
  fmt::print("oneDNN:          {}\n", blas::onednn_summary());
  fmt::print("bf16 gemms:      {}\n", blas::bf16_summary());
  fmt::print("Reference mode:  {}\n", runtime::reference()
                                         ? "on (HEADGRAD_REFERENCE=1): every kernel runs its plain loop, on one thread"
                                         : "off (HEADGRAD_REFERENCE=1 or train/gradcheck --reference turn it on)");
  if (distributed::built_with_mpi())
    fmt::print("MPI:             {} (built with MPI support)\n", distributed::mpi_library_version());
  else
    fmt::print("MPI:             not built in (CMake found no MPI; install libopenmpi-dev and rebuild)\n");
  if (distributed::size() > 1)
    fmt::print("MPI ranks:       {} ({} on this machine)\n", distributed::size(), distributed::local_size());
  else
    fmt::print("MPI ranks:       1 ({})\n", distributed::started_by_launcher() ? "started by an MPI launcher"
                                                                                : "not started by mpirun or srun");
  const std::string notice = runtime::startup_notice();
  if (!notice.empty()) fmt::print("{}\n", notice);
  if (check_shapes > 0) {
    const BlasCheckResult r = check_blas(static_cast<int>(check_shapes), 2024);
    fmt::print("BLAS check:      {} random gemms x (float, double) x (one call, split over threads): {} "
               "(worst error {:.3f} of the rounding bound, {})\n",
               r.gemms, r.ok() ? "ok" : "WRONG RESULTS", r.worst_ratio, r.worst_case);
    return r.ok() ? 0 : 1;
  }
  return 0;
}

} // namespace headgrad::cli
