#!/usr/bin/python3
"""headgrad against PyTorch on nanoGPT's shakespeare_char CPU recipe (4 layers, 4 heads, width 128,
context 64, batch 12, 2000 steps, dropout 0) on the default corpus: `./dev.sh bench text`.

    /usr/bin/python3 bench/text_lm.py [--steps N] [--threads 1,2] [--eval-every N] [--eval-count N]
                                      [--headgrad build/headgrad] [--headgrad-bench build/headgrad_bench]
                                      [--out DIR] [--no-torch]

One run measures, each side in fresh processes one after the other:
  1. throughput probes: --probe-steps steps at every thread count of --threads; each side then
     trains at its best count (tokens/s = batch x context per second of training time; the
     median and spread of the per-step rates say how noisy the machine was). PyTorch is also
     probed, at more than one thread, with its OpenMP threads spinning a little before they sleep
     (GOMP_SPINCOUNT=10000 besides OMP_WAIT_POLICY=PASSIVE: TORCH_SPINS), and trains with the
     faster; headgrad runs with its own start-up settings, as a user runs it;
  2. the limit: cblas_sgemm timed on the step's own gemm mix at every thread count
     (`headgrad_bench --text-limit`, the model's shapes and vocabulary read from the probe's
     checkpoint), so achieved GFLOP/s (matmul FLOPs per step x steps per second) can be set
     against what the gemms alone would allow; and headgrad's `--profile` at its best thread count
     (the op shares of its step);
  3. the full training run of each side at its best thread count: the validation loss every
     --eval-every steps (--eval-count windows of the validation split, the same on both sides),
     training seconds (evaluation excluded), peak RSS (the child's ru_maxrss), and the first
     step's loss (same initial weights and batch: must agree to ~1e-5);
  4. sampling speed of the trained model, 256 tokens with and without the key/value cache (best of 3).
Both sides run the same OpenBLAS kernel: PyTorch gets OPENBLAS_CORETYPE set to the core headgrad
reports (`headgrad info`), unless you set OPENBLAS_CORETYPE yourself. The table's header names the
CPU, its vector extensions and each side's kernels; its last column compares the figures with
their targets (ok or MISS). It writes both runs' metrics.csv and result.json under --out
(runs/bench-text by default) and overlays their curves with `headgrad plot` in OUT/curves.svg.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))

# What the text bench checks (the last column of the table).
TARGETS = dict(speedup=2.5, mix_fraction=0.70, scaling=1.7, gelu_share=0.05, first_loss_diff=1e-5)

RECIPE = dict(task="text", context=64, batch=12, layers=4, heads=4, d_model=128, ffn=512, dropout=0.0, lr=1e-3,
              min_lr=1e-4, beta2=0.99, warmup=100, weight_decay=0.1, clip=1.0, seed=0, tokenizer="chars",
              tie_weights="on", text="")


def run_child(argv, env=None):
    """Runs argv to completion; returns (stdout, stderr, peak RSS in KiB of that process alone)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(argv, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        o, e = out.read().decode(), err.read().decode()
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({p.returncode}):\n{e[-2000:]}")
    return o, e, usage.ru_maxrss


def headgrad_train(args, out, steps, threads, eval_every, spin=None, precision="float32"):
    argv = [args.headgrad, "train", "--task", "text", "--steps", str(steps), "--threads", str(threads),
            "--eval-every", str(eval_every), "--eval-count", str(args.eval_count), "--seed", "0", "--json",
            "--out", out, "--overwrite", "--precision", precision]
    o, _, rss = run_child(argv)
    summary = json.loads(o.strip().splitlines()[-1])
    return summary, rss


def headgrad_profile(args, out, steps, threads):
    """({op: (forward ms, backward ms, share of op time)}, workers) from `headgrad train --profile`;
    workers (at 2+ threads, else None): each thread's ms per step in its shards of the batch, the ms
    the fastest waited for the slowest, the step's ms and its ms besides the shards."""
    argv = [args.headgrad, "train", "--task", "text", "--steps", str(steps), "--threads", str(threads),
            "--eval-every", "0", "--eval-count", "10", "--seed", "0", "--profile", "--quiet", "--out", out,
            "--overwrite"]
    o, _, _ = run_child(argv)
    ops, inside, workers = {}, False, None
    for line in o.splitlines():
        if line.startswith("op ") and "share" in line:
            inside = True
        elif line.startswith("total (op time)"):
            inside = False
        elif inside and line.strip():
            c = line.split()  # name, fwd calls, fwd ms, bwd calls, bwd ms, total ms, share%
            ops[c[0]] = (float(c[2]) / steps, float(c[4]) / steps, float(c[6].rstrip("%")) / 100)
        elif line.startswith("workers: "):  # "... shards 23.02 (worker 0), 22.96 (worker 1); the fastest waited 0.33"
            workers = dict(shard_ms=[float(x) for x in re.findall(r"([0-9.]+) \(worker \d+\)", line)],
                           wait_ms=float(re.search(r"waited ([0-9.]+) ms", line).group(1)))
        elif workers and line.strip().startswith("a step took "):  # "a step took 23.87 ms: ... and 0.71 ms besides"
            took = re.search(r"took ([0-9.]+) ms: .* and ([0-9.]+) ms besides", line)
            workers.update(step_ms=float(took.group(1)), besides_ms=float(took.group(2)))
    return ops, workers


def headgrad_info(args):
    """The lines of `headgrad info` as {"BLAS core": ..., ...}."""
    o, _, _ = run_child([args.headgrad, "info"])
    return {k.strip(): v.strip() for k, v in (ln.split(":", 1) for ln in o.splitlines() if ":" in ln)}


def sgemm_limit(args, checkpoint, threads):
    """headgrad_bench --text-limit: the step's FLOPs and the sgemm limit over its gemm mix."""
    o, _, _ = run_child([args.headgrad_bench, "--text-limit", checkpoint, "--threads", str(threads),
                         "--sgemm-seconds", str(args.sgemm_seconds)])
    return json.loads(o.strip().splitlines()[-1])


def cpu_description():
    """(model name, the vector extensions among the CPU's flags) from /proc/cpuinfo."""
    model, flags = "?", set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key.strip() == "model name" and model == "?":
                model = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    wanted = ["sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512_bf16",
              "amx_tile"]
    return model, [f for f in wanted if f in flags]


# PyTorch's OpenMP wait settings, tried at every thread count above 1 (its intra-op threads sleep
# between parallel regions, OMP_WAIT_POLICY=PASSIVE, or spin a little first, GOMP_SPINCOUNT): its
# 2-thread step measured ~18% faster with a spin of 3,000-10,000 here, 40% slower with 100,000 or
# libgomp's default (300,000: its spinning threads starve OpenBLAS's). None: PASSIVE alone. A
# GOMP_SPINCOUNT you set is used as it is, and no other is tried.
TORCH_SPINS = [None, "10000"]


def torch_spins(threads):
    return [None] if threads == 1 or os.environ.get("GOMP_SPINCOUNT") else TORCH_SPINS


def headgrad_spins(threads):
    return [None]  # headgrad runs as a user runs it: its own start-up settings (startup.hpp)


def torch_train(args, out, steps, threads, eval_every, spin=None, precision="float32"):
    spec = dict(RECIPE, steps=steps, threads=threads, eval_every=eval_every, eval_count=args.eval_count, out=out,
                autocast=precision == "bf16")
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "spec.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OMP_WAIT_POLICY="PASSIVE")
    if spin:
        env["GOMP_SPINCOUNT"] = spin
    if args.torch_coretype:  # the OpenBLAS kernel headgrad runs (a value the user set stays)
        env["OPENBLAS_CORETYPE"] = args.torch_coretype
    _, _, rss = run_child(["/usr/bin/python3", os.path.join(HERE, "torch_text_lm.py"), path], env)
    with open(os.path.join(out, "result.json")) as f:
        return json.load(f), rss


def read_metrics(path):
    """(per-step (step, loss, tokens/s), evals (step, val loss)) from a metrics.csv."""
    steps, evals = [], []
    with open(path) as f:
        next(f)
        for line in f:
            c = line.rstrip("\n").split(",")
            if c[1]:
                steps.append((int(c[0]), float(c[1]), float(c[3])))
            elif c[4]:
                evals.append((int(c[0]), float(c[4])))
    return steps, evals


def timeline(metrics_path, tokens_per_step):
    """[(step, training seconds so far, val loss)] at each evaluation, from the per-step rates."""
    steps, evals = read_metrics(metrics_path)
    elapsed, at = 0.0, {}
    for s, _, tps in steps:
        elapsed += tokens_per_step / tps
        at[s] = elapsed
    return [(s, at[s], loss) for s, loss in evals]


def spread(metrics_path):
    rates = [tps for _, _, tps in read_metrics(metrics_path)[0][5:]]  # the first steps warm caches up
    q = statistics.quantiles(rates, n=4)
    return statistics.median(rates), q[0], q[2]


def sample_speed(args, checkpoint, cache, runs=3):
    """tokens/s of `headgrad sample --tokens 256`: the best of `runs` (a busy machine only slows a run down)."""
    argv = [args.headgrad, "sample", "--checkpoint", checkpoint, "--tokens", "256", "--seed", "1", "--threads", "1",
            "--timing"] + ([] if cache else ["--no-cache"])
    best = 0.0
    for _ in range(runs):
        _, e, _ = run_child(argv)
        line = [ln for ln in e.splitlines() if ln.startswith("sample:")][-1]
        best = max(best, float(line.split("(")[1].split()[0]))  # "sample: 256 tokens in 0.12 s (2100 tokens/s, ...)"
    return best


def bf16_rows(results, limits, info, row):
    """headgrad bf16 against its own float32 and against PyTorch's bf16 autocast, each at its best."""
    hb, h, tb = results["headgrad-bf16"], results["headgrad"], results.get("torch-bf16")
    print(f"\nbf16 mixed precision: headgrad --precision bf16 (linear layers' gemms on oneDNN, bf16 inputs, float32 "
          f"sums) against its float32 and PyTorch's torch.autocast('cpu', dtype=torch.bfloat16)")
    print(f"oneDNN: {info.get('oneDNN', '?')}; bf16 gemms: {info.get('bf16 gemms', '?')}")
    print(f"{'':<46} {'headgrad bf16':>12} {'PyTorch bf16':>12} {'ratio':>8}")
    row("best threads", hb["threads"], tb and tb["threads"], "{}")
    row("tokens/s per step: median, each at its best", hb["spread"][0], tb and tb["spread"][0], "{:.0f}",
        lambda a, b: a / b, target=">= 1.5x PyTorch bf16", ok=None if not tb else hb["spread"][0] / tb["spread"][0] >= 1.5)
    row("headgrad bf16 / headgrad float32 (medians)", hb["spread"][0] / h["spread"][0], None, "{:.2f}x",
        target=">= 1.6x", ok=hb["spread"][0] / h["spread"][0] >= 1.6)
    if tb and "torch" in results:
        row("PyTorch bf16 / PyTorch float32 (medians)", tb["spread"][0] / results["torch"]["spread"][0], None,
            "{:.2f}x")
    row("val loss after the last step (bf16)", hb["timeline"][-1][2], tb and tb["timeline"][-1][2], "{:.4f}")
    dl = abs(hb["timeline"][-1][2] / h["timeline"][-1][2] - 1)
    row("headgrad val loss, bf16 vs float32", dl * 100, None, "{:.2f}%", target="<= 1%", ok=dl <= 0.01)
    for th, lim in limits.items():
        if "bf16_mix_gflops" in lim:
            row(f"gemm GFLOP/s over the step's mix, {th} thread(s): bf16 / f32", lim["bf16_mix_gflops"], None,
                "{:.1f}", target=f"float32 {lim['mix_gflops']:.1f} ({lim['bf16_mix_gflops'] / lim['mix_gflops']:.2f}x)")
    row("achieved / bf16 mix limit", hb["mix_fraction"] * 100, tb and tb["mix_fraction"] * 100, "{:.0f}%")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--probe-steps", type=int, default=60)
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--eval-count", type=int, default=500)
    ap.add_argument("--sgemm-seconds", type=float, default=0.2, help="seconds of timing per gemm shape")
    ap.add_argument("--headgrad", default=os.path.join(ROOT, "build", "headgrad"))
    ap.add_argument("--headgrad-bench", default=os.path.join(ROOT, "build", "headgrad_bench"))
    ap.add_argument("--out", default=os.path.join(ROOT, "runs", "bench-text"))
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--no-bf16", action="store_true",
                    help="skip the bf16 rows (headgrad --precision bf16, PyTorch's bf16 autocast)")
    args = ap.parse_args()
    tokens_per_step = RECIPE["batch"] * RECIPE["context"]
    thread_counts = [int(t) for t in args.threads.split(",")]
    os.makedirs(args.out, exist_ok=True)
    load0 = os.getloadavg()[0]

    info = headgrad_info(args)
    # bf16 sides where this CPU runs them: headgrad --precision bf16, PyTorch under torch.autocast
    bf16 = not args.no_bf16 and info.get("bf16 gemms", "").startswith("available")
    sides = ["headgrad"] + ([] if args.no_torch else ["torch"])
    sides += [s + "-bf16" for s in sides] if bf16 else []
    train = {"headgrad": headgrad_train, "torch": torch_train,
             "headgrad-bf16": lambda *a: headgrad_train(*a, precision="bf16"),
             "torch-bf16": lambda *a: torch_train(*a, precision="bf16")}
    headgrad_core = info.get("BLAS core", "?").split()[0]
    user_core = os.environ.get("OPENBLAS_CORETYPE")
    args.torch_coretype = user_core or (headgrad_core if headgrad_core != "?" else None)

    best, probe_rates, best_spin = {}, {}, {}
    spins = {"headgrad": headgrad_spins, "torch": torch_spins, "headgrad-bf16": headgrad_spins,
             "torch-bf16": torch_spins}
    for side in sides:
        rates, spin_at = {}, {}
        for threads in thread_counts:
            for spin in spins[side](threads):  # the best wait setting at each thread count
                out = os.path.join(args.out, f"probe-{side}-{threads}" + (f"-spin{spin}" if spin else ""))
                train[side](args, out, args.probe_steps, threads, 0, spin)
                rate = spread(os.path.join(out, "metrics.csv"))[0]
                print(f"bench text: {side} at {threads} thread(s){f', GOMP_SPINCOUNT={spin}' if spin else ''}: "
                      f"{rate:.0f} tokens/s (median of steps)", file=sys.stderr, flush=True)
                if rate > rates.get(threads, 0):
                    rates[threads], spin_at[threads] = rate, spin
        best[side] = max(rates, key=rates.get)
        probe_rates[side] = rates
        best_spin[side] = spin_at[best[side]]

    # the limit over the step's gemm mix, at every thread count; headgrad's op shares at its best
    probe_ckpt = os.path.join(args.out, f"probe-headgrad-{thread_counts[0]}", "model.safetensors")
    limits = {t: sgemm_limit(args, probe_ckpt, t) for t in thread_counts}
    for t, lim in limits.items():
        print(f"bench text: sgemm over the step's mix at {t} thread(s): {lim['mix_gflops']:.1f} GFLOP/s "
              f"({lim['matmul_ms_per_step']:.2f} ms/step)", file=sys.stderr, flush=True)
    profile, workers = headgrad_profile(args, os.path.join(args.out, "profile-headgrad"), args.probe_steps,
                                        best["headgrad"])
    flops = limits[thread_counts[0]]["flops_per_step"]

    results = {}
    for side in sides:
        out = os.path.join(args.out, side)
        t0 = time.time()
        summary, rss = train[side](args, out, args.steps, best[side], args.eval_every, best_spin[side])
        metrics = os.path.join(out, "metrics.csv")
        steps, _ = read_metrics(metrics)
        sp = spread(metrics)
        lim = dict(limits[best[side]])
        if side.endswith("-bf16"):  # the bf16 step's limit: its linear gemms bf16, attention's float32
            lim["mix_gflops"] = lim["bf16_mix_gflops"]
        results[side] = dict(threads=best[side], spin=best_spin[side], rss_mib=rss / 1024, wall=time.time() - t0,
                             timeline=timeline(metrics, tokens_per_step), first_loss=steps[0][1], spread=sp,
                             tokens_per_s=summary["tokens_per_s"], probe_tokens_per_s=probe_rates[side],
                             gflops=flops * sp[0] / tokens_per_step * 1e-9, mix_gflops=lim["mix_gflops"],
                             blas=summary.get("blas"))
        results[side]["mix_fraction"] = results[side]["gflops"] / lim["mix_gflops"]
        print(f"bench text: {side} trained {args.steps} steps at {best[side]} thread(s) in {time.time() - t0:.0f} s",
              file=sys.stderr, flush=True)

    ckpt = os.path.join(args.out, "headgrad", "model.safetensors")
    cached, uncached = sample_speed(args, ckpt, True), sample_speed(args, ckpt, False)
    subprocess.run([args.headgrad, "plot"] + [os.path.join(args.out, s) for s in sides] +
                   ["--out", os.path.join(args.out, "curves.svg")], check=True, stdout=subprocess.DEVNULL)

    h, t = results["headgrad"], results.get("torch")
    model, vector_ext = cpu_description()
    load1 = os.getloadavg()[0]
    print(f"\nheadgrad vs PyTorch: nanoGPT shakespeare_char CPU recipe on {RECIPE['text'] or 'the fortunes corpus'}, "
          f"{args.steps} steps; load average {load0:.1f} at the start, {load1:.1f} at the end "
          f"({os.cpu_count()} cores){': the machine was busy, timings are inflated' if max(load0, load1) > os.cpu_count() else ''}")
    print(f"CPU: {model}; vector extensions: {' '.join(vector_ext) or 'none of avx/avx2/avx512'}")
    print(f"headgrad kernels: OpenBLAS {info.get('BLAS core', '?')}, own vector kernels {info.get('Vector kernels', '?')}")
    if t:
        tb = t.get("blas") or {}
        print(f"PyTorch {tb.get('torch_version', '?')} kernels: CPU capability {tb.get('cpu_capability', '?')}, "
              f"BLAS_INFO={tb.get('torch_blas_info', '?')} -> {tb.get('library', '?')} (OpenBLAS core "
              f"{tb.get('openblas_core', '?')}; OPENBLAS_CORETYPE={args.torch_coretype or '(unset)'}"
              f"{', set by you' if user_core else ', as headgrad'})")
    print(f"FLOPs: {flops * 1e-9:.3f} GFLOP/step ({limits[thread_counts[0]]['flop_formula']})")
    print(f"{'':<46} {'headgrad':>12} {'PyTorch':>12} {'ratio':>8}   {'target':<26} status")

    def row(name, a, b, fmt, ratio=None, target="", ok=None):
        r = "" if b is None or ratio is None else f"{ratio(a, b):.2f}x"
        status = "" if ok is None else ("ok" if ok else "MISS")
        print(f"{name:<46} {fmt.format(a):>12} {'-' if b is None else fmt.format(b):>12} {r:>8}   {target:<26} {status}")

    row("val loss after the last step", h["timeline"][-1][2], t and t["timeline"][-1][2], "{:.4f}")
    row("first step's loss (same weights and batch)", h["first_loss"], t and t["first_loss"], "{:.6f}",
        target=f"|diff| <= {TARGETS['first_loss_diff']:g}",
        ok=None if not t else abs(h["first_loss"] - t["first_loss"]) <= TARGETS["first_loss_diff"])
    row("best threads", h["threads"], t and t["threads"], "{}")
    row("OpenMP wait at the best threads", "PASSIVE",
        t and ("PASSIVE" if not t["spin"] else f"spin {t['spin']}"), "{}")
    for side_threads in thread_counts:
        row(f"tokens/s, probe at {side_threads} thread(s) (median)", probe_rates["headgrad"][side_threads],
            t and probe_rates["torch"][side_threads], "{:.0f}", lambda a, b: a / b)
    if len(thread_counts) > 1:
        lo, hi = min(thread_counts), max(thread_counts)
        hs = probe_rates["headgrad"][hi] / probe_rates["headgrad"][lo]
        row(f"{hi} threads vs {lo} (probe medians)", hs, t and probe_rates["torch"][hi] / probe_rates["torch"][lo],
            "{:.2f}x", target=f"headgrad >= {TARGETS['scaling']}x", ok=hs >= TARGETS["scaling"])
    row("tokens/s (whole run)", h["tokens_per_s"], t and t["tokens_per_s"], "{:.0f}", lambda a, b: a / b)
    speedup = t and h["spread"][0] / t["spread"][0]
    row("tokens/s per step: median, each at its best", h["spread"][0], t and t["spread"][0], "{:.0f}",
        lambda a, b: a / b, target=f">= {TARGETS['speedup']}x PyTorch", ok=None if not t else speedup >= TARGETS["speedup"])
    row("tokens/s per step: quartiles", f"{h['spread'][1]:.0f}-{h['spread'][2]:.0f}",
        t and f"{t['spread'][1]:.0f}-{t['spread'][2]:.0f}", "{}")
    row("achieved GFLOP/s (median step)", h["gflops"], t and t["gflops"], "{:.1f}", lambda a, b: a / b)
    row("sgemm GFLOP/s over the step's mix, same threads", h["mix_gflops"], t and t["mix_gflops"], "{:.1f}")
    row("achieved / sgemm mix limit", h["mix_fraction"] * 100, t and t["mix_fraction"] * 100, "{:.0f}%",
        target=f"headgrad >= {TARGETS['mix_fraction'] * 100:.0f}%", ok=h["mix_fraction"] >= TARGETS["mix_fraction"])
    if t:  # how much of the limit the speed target asks for: past 100% no step of headgrad's can meet it
        need = TARGETS["speedup"] * t["gflops"] / h["mix_gflops"]
        row(f"{TARGETS['speedup']}x PyTorch needs, of headgrad's mix limit", need * 100, None, "{:.0f}%",
            target=f"(at 100%: {h['mix_gflops'] / t['gflops']:.2f}x)", ok=None)
        if need > 1:
            print(f"{'':<46} the speed target is out of reach with this BLAS kernel: it asks for more than the "
                  "gemms alone allow")
    row("training seconds", h["timeline"][-1][1], t and t["timeline"][-1][1], "{:.1f}", lambda a, b: a / b)
    if t:
        target = t["timeline"][-1][2]
        reach = next(((s, sec) for s, sec, loss in h["timeline"] if loss <= target), None)
        row(f"seconds to val loss <= {target:.4f} (PyTorch's final)",
            reach[1] if reach else float("nan"), t["timeline"][-1][1], "{:.1f}", lambda a, b: a / b)
    row("peak RSS, MiB", h["rss_mib"], t and t["rss_mib"], "{:.0f}", lambda a, b: a / b)
    gelu = profile.get("gelu", (0, 0, 0))[2]
    row("GELU's share of headgrad's op time", gelu * 100, None, "{:.1f}%", target=f"<= {TARGETS['gelu_share'] * 100:.0f}%",
        ok=gelu <= TARGETS["gelu_share"])
    shares = sorted(profile.items(), key=lambda kv: -kv[1][2])
    print(f"headgrad's profile at {best['headgrad']} thread(s) ({args.probe_steps} steps; op share, fwd+bwd ms/step): " +
          "; ".join(f"{op} {v[2] * 100:.1f}% ({v[0]:.2f}+{v[1]:.2f})" for op, v in shares if v[2] >= 0.001))
    if workers:  # the threads train their shards at once: the step waits for the slowest
        print(f"headgrad's workers at {best['headgrad']} threads (same profile run): ms per step in their shards "
              + " / ".join(f"{x:.2f}" for x in workers["shard_ms"]) + f"; the fastest waited {workers['wait_ms']:.2f}"
              + (f"; a step {workers['step_ms']:.2f}, of it {workers['besides_ms']:.2f} besides the shards (the batch, "
                 "adding the shards' gradients, clipping, the update)" if "step_ms" in workers else ""))
    print(f"sgemm limit: " + "; ".join(f"{th} thread(s) {lim['mix_gflops']:.1f} GFLOP/s over the mix "
                                        f"({lim['matmul_ms_per_step']:.2f} ms/step), best shape {lim['best_shape']} "
                                        f"{lim['best_gflops']:.1f}" for th, lim in limits.items()))
    print(f"sampling 256 tokens (1 thread, best of 3): {cached:.0f} tokens/s with the key/value cache, {uncached:.0f} without "
          f"({cached / uncached:.1f}x)")
    print(f"curves: {os.path.join(args.out, 'curves.svg')} (both runs), "
          + ", ".join(os.path.join(args.out, s, "metrics.csv") for s in sides))
    if bf16:
        bf16_rows(results, limits, info, row)
    with open(os.path.join(args.out, "result.json"), "w") as f:
        json.dump(dict(results=results, sample_tokens_per_s=dict(cache=cached, no_cache=uncached),
                       sgemm_limit={str(k): v for k, v in limits.items()}, profile=profile, workers=workers,
                       targets=TARGETS,
                       cpu=dict(model=model, vector_extensions=vector_ext), headgrad_info=info,
                       torch_openblas_coretype=args.torch_coretype, load_average=[load0, load1]), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
