#!/usr/bin/env bash
# dev.sh - the project's front door.
#   ./dev.sh deps            install missing Debian packages (apt-get update only if needed)
#   ./dev.sh build           CMake Release build into build/ (-j2)
#   ./dev.sh test [--sanitize]  deps + build + the whole suite through ctest
#   ./dev.sh train [ARGS]    deps + build + the default training run (extra ARGS go to headgrad train)
#   ./dev.sh bench [ARGS]    deps + build + the benchmark
set -euo pipefail
cd "$(dirname "$0")"

PACKAGES=(libopenblas-dev libfmt-dev doctest-dev nlohmann-json3-dev cmake g++)
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

build() { # build DIR [cmake args...]
  local dir=$1; shift
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
  cmake --build "$dir" -j"$JOBS"
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
      build build-sanitize -DHEADGRAD_SANITIZE=ON
      # leak checking on; OpenBLAS/OpenMP thread pools are not leaks but keep their memory
      ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        ctest --test-dir build-sanitize --output-on-failure -j"$JOBS" -LE "install|slow" "$@"
    else
      deps
      build build
      ctest --test-dir build --output-on-failure -j"$JOBS" "$@"
    fi
    ;;
  train)
    deps
    build build
    exec ./build/headgrad train "$@"
    ;;
  bench)
    deps
    build build
    if [ -x ./build/headgrad_bench ]; then
      exec ./build/headgrad_bench "$@"
    fi
    log "the benchmark is not built yet"
    exit 1
    ;;
  help|-h|--help)
    sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'
    ;;
  *)
    log "unknown command '$cmd' (try ./dev.sh help)"
    exit 2
    ;;
esac
