#!/usr/bin/env bash
# dev.sh - the project's front door.
#   ./dev.sh deps            install missing Debian packages (apt-get update only if needed)
#   ./dev.sh build           CMake Release build into build/ (-j2)
#   ./dev.sh test [--fast]   deps + build + the whole suite through ctest (--fast: without the
#                            tests labelled slow, e.g. the ten-kill SIGKILL test)
#   ./dev.sh test --sanitize the suite under ASan + UBSan (without the slow and install tests)
#   ./dev.sh train [ARGS]    deps + build + the default training run (extra ARGS go to headgrad train)
#   ./dev.sh bench [ARGS]    deps + build + the benchmark
#   ./dev.sh bench text [ARGS]  the causal language model against PyTorch (bench/text_lm.py)
#   ./dev.sh exercise NAME [--solution] [--train]  build one exercise's program alone and run it
#                            (attention-backward [--train], layernorm-cross-entropy, softplus: docs/exercises/)
#   ./dev.sh fuzz [SECONDS]  clang + libFuzzer: fuzz the safetensors and checkpoint metadata readers for SECONDS (default 60)
set -euo pipefail
cd "$(dirname "$0")"

# libsleef-dev: vectorised exp, log, tanh, erf for the per-instruction-set kernels (framework/engine/kernels/isa/)
# pkgconf: the install test builds a consumer through headgrad.pc too
# fortunes: the default corpus of `headgrad train --task text` (/usr/share/games/fortunes)
# patch: the test suite builds exercises 8 and 9 with their solutions applied (docs/exercises/)
# libdnnl-dev: oneDNN's matmul, the bf16 gemm with float32 accumulation (framework/engine/blas/)
PACKAGES=(libopenblas-dev libfmt-dev libsleef-dev doctest-dev nlohmann-json3-dev libopenmpi-dev openmpi-bin cmake g++
  pkgconf fortunes patch libdnnl-dev)
JOBS=${JOBS:-2}

log() { printf 'dev.sh: %s\n' "$*" >&2; }

deps() {
  local missing=()
  for p in "${PACKAGES[@]}" "$@"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
  if [ ${#missing[@]} -eq 0 ]; then
    return 0
  fi
  log "installing missing packages: ${missing[*]}"
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then sudo=(sudo); fi
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

build() { # build DIR [cmake args...]: everything, tests included
  local dir=$1; shift
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DHEADGRAD_BUILD_TESTS=ON "$@" >/dev/null
  cmake --build "$dir" -j"$JOBS"
}

build_target() { # build_target TARGET: one target (and what it needs) in build/
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build -j"$JOBS" --target "$1"
}

cmd=${1:-help}
shift || true
case "$cmd" in
  deps) deps ;;
  build) deps; build build ;;
  test)
    if [ "${1:-}" = "--sanitize" ]; then
      shift
      deps
      # GCC 12's -Wmaybe-uninitialized gives false positives under -fsanitize=address (e.g. inside
      # <regex>), which -Werror turns into build failures: off for this build only.
      build build-sanitize -DHEADGRAD_SANITIZE=ON -DCMAKE_CXX_FLAGS=-Wno-maybe-uninitialized
      # leak checking on; OpenBLAS/OpenMP thread pools are not leaks but keep their memory
      ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        ctest --test-dir build-sanitize --output-on-failure -j"$JOBS" -LE "install|slow" "$@"
    else
      skip=()
      if [ "${1:-}" = "--fast" ]; then
        shift
        skip=(-LE slow)
      fi
      deps
      build build
      ctest --test-dir build --output-on-failure -j"$JOBS" "${skip[@]}" "$@"
    fi
    ;;
  train)
    deps
    build_target headgrad_cli # only the headgrad command: the tests build under ./dev.sh test
    exec ./build/headgrad train "$@"
    ;;
  bench)
    deps
    if [ "${1:-}" = "text" ]; then
      shift
      build_target headgrad_cli # the headgrad command; PyTorch runs bench/torch_text_lm.py
      build_target headgrad_bench # its --text-limit mode: the sgemm limit of the text step
      exec /usr/bin/python3 bench/text_lm.py "$@"
    fi
    build_target headgrad_bench # only the benchmark and what it needs
    exec ./build/headgrad_bench "$@"
    ;;
  exercise)
    # An exercise's program (docs/exercises/): the skeleton docs/exercises/NAME.cpp (--solution: its
    # solution in docs/exercises/solutions/), or softplus, exercise 9's check of the op you add. The
    # first run builds the libraries it links (minutes on two cores: the build's progress is shown);
    # after that a run compiles the one file and links (seconds). Warnings in your file are shown
    # and do not stop the build. The program prints one line per tensor (or input), PASS or FAIL,
    # and exits 0 only when every one passes; attention-backward --train then trains the model with
    # your backward (exercise 12).
    name=${1:-}
    shift || true
    case "$name" in
      attention-backward | layernorm-cross-entropy | softplus) ;;
      *) log "exercise: NAME is attention-backward, layernorm-cross-entropy or softplus, got '$name'"; exit 2 ;;
    esac
    target=exercise_${name//-/_}
    run_args=()
    while [ $# -gt 0 ]; do
      case "$1" in
        --solution)
          if [ "$name" = softplus ]; then log "exercise: softplus has no --solution (docs/exercises/solutions/09-softplus.patch)"; exit 2; fi
          target=${target%_solution}_solution ;;
        --train)
          if [ "$name" != attention-backward ]; then log "exercise: --train is for attention-backward"; exit 2; fi
          run_args=(--train) ;;
        *) log "exercise: unexpected argument '$1' (--solution, or --train for attention-backward)"; exit 2 ;;
      esac
      shift
    done
    deps
    if [ ! -f build/CMakeCache.txt ]; then cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null; fi
    if [ ! -f build/libheadgrad.a ]; then
      log "first run: building the libraries the exercise links (several minutes on two cores); later runs compile your file alone"
    fi
    cmake --build build -j"$JOBS" --target "$target"
    exec "./build/docs/exercises/$target" "${run_args[@]}"
    ;;
  fuzz)
    # The safetensors reader and the checkpoint metadata reader under libFuzzer + ASan + UBSan (tests/fuzz/). clang is installed here
    # only, not for test/train. Exit 0: no finding; 75: the fuzzing toolchain cannot be installed
    # (.ci/run skips then); any other non-zero: a build failure or a finding (libFuzzer prints it
    # and saves the input in build-fuzz/findings/).
    secs=${1:-60}
    case "$secs" in '' | *[!0-9]*) log "fuzz: SECONDS must be a whole number, got '$secs'"; exit 2 ;; esac
    FUZZ_CXX=clang++-14
    if ! deps clang-14 libclang-rt-14-dev libomp-14-dev ||
      ! echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' |
        "$FUZZ_CXX" -fsanitize=fuzzer,address,undefined -x c++ - -o /dev/null 2>/dev/null; then
      log "fuzz: cannot install or use clang-14 with libFuzzer"
      exit 75
    fi
    cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$FUZZ_CXX" -DHEADGRAD_BUILD_TESTS=ON -DHEADGRAD_FUZZ=ON >/dev/null
    cmake --build build-fuzz -j"$JOBS" --target fuzz_safetensors fuzz_checkpoint_metadata
    # Fuzz copies: the committed seeds stay as they are; what the run adds stays in build-fuzz/.
    rm -rf build-fuzz/corpus build-fuzz/corpus_metadata
    mkdir -p build-fuzz/findings
    cp -r tests/fuzz/corpus build-fuzz/corpus
    cp -r tests/fuzz/corpus_metadata build-fuzz/corpus_metadata
    # The time is split: two thirds for the safetensors reader, the rest (at least 1 s) for the
    # checkpoint metadata reader, whose input is smaller.
    meta_secs=$((secs / 3 > 0 ? secs / 3 : 1))
    st_secs=$((secs - meta_secs > 0 ? secs - meta_secs : 1))
    # detect_leaks: a leak is a finding too. -timeout: an input taking 25 s (a hang) is a finding.
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    log "fuzzing the safetensors reader for ${st_secs}s"
    ./build-fuzz/tests/fuzz/fuzz_safetensors -max_total_time="$st_secs" -timeout=25 -rss_limit_mb=2048 \
      -dict=tests/fuzz/safetensors.dict -artifact_prefix=build-fuzz/findings/ -print_final_stats=1 \
      build-fuzz/corpus
    log "fuzzing the checkpoint metadata reader for ${meta_secs}s"
    ./build-fuzz/tests/fuzz/fuzz_checkpoint_metadata -max_total_time="$meta_secs" -timeout=25 -rss_limit_mb=2048 \
      -artifact_prefix=build-fuzz/findings/ -print_final_stats=1 build-fuzz/corpus_metadata
    ;;
  help|-h|--help)
    sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
    ;;
  *)
    log "unknown command '$cmd' (try ./dev.sh help)"
    exit 2
    ;;
esac
