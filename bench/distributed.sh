#!/usr/bin/env bash
# bench/distributed.sh - data parallelism on this machine, in three parts:
#  1. `headgrad train` as 2 MPI ranks x 1 thread against 1 process x 2 threads, on the benchmark's
#     small and large configurations: tokens/s (training steps only) and, for the 2-rank runs, the
#     gradient all-reduce per step: bytes, time communicating, the part overlapped with backward,
#     and the time rank 0 waited for it as a share of the step (what communication cost the step).
#  2. The all-reduce alone at 2 ranks on the large config's buckets: the shard tree's all-reduce
#     against MPI_Iallreduce (build/headgrad_allreduce_bench, bench/mpi/allreduce_bench.cpp).
#  3. What accumulating shards costs: one process, one thread, --shards 1, 2, 4 and 8 (each shard
#     a forward and backward of its own rows, the gradients added in the shard tree).
#
#   bench/distributed.sh [REPEATS]     (default 3; runs alternate so that load changes hit both)
# Needs a build with MPI (./dev.sh build) and mpirun (openmpi-bin).
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${1:-3}
bin=./build/headgrad
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 # CI and containers run as root
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

small=(--steps 300)
large=(--batch 16 --min-len 64 --max-len 128 --d-model 256 --heads 8 --ffn 1024 --steps 30)

field() { sed -n "s/.*\"$1\": \([0-9.e+-]*\).*/\1/p" <<<"$2"; }

run() { # NAME LAYOUT ARGS...
  local name=$1 layout=$2 json; shift 2
  local common=(--eval-every 0 --quiet --json --overwrite --out "$out/$name-$layout")
  if [ "$layout" = "1x2" ]; then
    json=$("$bin" train "$@" --threads 2 "${common[@]}" | tail -1)
  else
    json=$(mpirun --oversubscribe --bind-to none -np 2 "$bin" train "$@" --threads 1 "${common[@]}" | tail -1)
  fi
  local tps step_ms
  tps=$(field tokens_per_s "$json")
  step_ms=$(awk -v t="$(field train_seconds "$json")" -v s="$(field steps "$json")" 'BEGIN { printf "%.2f", 1e3 * t / s }')
  if [ "$layout" = "1x2" ]; then
    printf '%-6s %-16s %10.0f %9s\n' "$name" "1 rank x 2 thr" "$tps" "$step_ms"
  else
    awk -v n="$name" -v tps="$tps" -v ms="$step_ms" -v b="$(field allreduce_bytes_per_step "$json")" \
      -v c="$(field comm_seconds_per_step "$json")" -v o="$(field comm_overlapped "$json")" \
      -v w="$(field comm_wait_seconds_per_step "$json")" \
      'BEGIN { printf "%-6s %-16s %10.0f %9s %9.2f %9.2f %9.0f%% %9.2f %8.1f%%\n", n, "2 ranks x 1 thr", tps, ms,
               b / 1e6, c * 1e3, 100 * o, w * 1e3, 100 * w * 1e3 / ms }'
  fi
}

printf '%-6s %-16s %10s %9s %9s %9s %10s %9s %9s\n' config layout tokens/s ms/step MB/step comm_ms overlap wait_ms "wait/step"
for ((i = 0; i < repeats; ++i)); do
  run small 1x2 "${small[@]}"
  run small 2x1 "${small[@]}"
  run large 1x2 "${large[@]}"
  run large 2x1 "${large[@]}"
done

echo
echo "the all-reduce alone, 2 ranks, the large config's buckets:"
mpirun --oversubscribe --bind-to none -np 2 ./build/headgrad_allreduce_bench $((10 * repeats))

echo
printf '%-6s %-8s %10s %9s\n' config shards tokens/s ms/step
for ((i = 0; i < repeats; ++i)); do
  for name in small large; do
    for s in 1 2 4 8; do
      if [ "$name" = small ]; then args=("${small[@]}"); else args=("${large[@]}"); fi
      json=$("$bin" train "${args[@]}" --threads 1 --shards "$s" --eval-every 0 --quiet --json --overwrite \
        --out "$out/shards-$name-$s" | tail -1)
      awk -v n="$name" -v s="$s" -v tps="$(field tokens_per_s "$json")" -v t="$(field train_seconds "$json")" \
        -v st="$(field steps "$json")" 'BEGIN { printf "%-6s %-8s %10.0f %9.2f\n", n, s, tps, 1e3 * t / st }'
    done
  done
done
