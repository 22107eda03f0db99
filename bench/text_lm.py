#!/usr/bin/python3
"""headgrad against PyTorch on nanoGPT's shakespeare_char CPU recipe (4 layers, 4 heads, width 128,
context 64, batch 12, 2000 steps, dropout 0) on the default corpus: `./dev.sh bench text`.

    /usr/bin/python3 bench/text_lm.py [--steps N] [--threads 1,2] [--eval-every N] [--eval-count N]
                                      [--headgrad build/headgrad] [--out DIR] [--no-torch]

One run measures, each side in fresh processes one after the other:
  1. throughput probes: --probe-steps steps at every thread count of --threads; each side then
     trains at its best count (tokens/s = batch x context per second of training time; the
     median and spread of the per-step rates say how noisy the machine was);
  2. the full training run of each side at its best thread count: the validation loss every
     --eval-every steps (--eval-count windows of the validation split, the same on both sides),
     training seconds (evaluation excluded), peak RSS (the child's ru_maxrss), and the first
     step's loss (same initial weights and batch: must agree to ~1e-5);
  3. sampling speed of the trained model, 256 tokens with and without the key/value cache (best of 3).
It prints a table, writes both runs' metrics.csv under --out (runs/bench-text by default) and
overlays their curves with `headgrad plot` in OUT/curves.svg.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))

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


def headgrad_train(args, out, steps, threads, eval_every):
    argv = [args.headgrad, "train", "--task", "text", "--steps", str(steps), "--threads", str(threads),
            "--eval-every", str(eval_every), "--eval-count", str(args.eval_count), "--seed", "0", "--json",
            "--out", out, "--overwrite"]
    o, _, rss = run_child(argv)
    summary = json.loads(o.strip().splitlines()[-1])
    return summary, rss


def torch_train(args, out, steps, threads, eval_every):
    spec = dict(RECIPE, steps=steps, threads=threads, eval_every=eval_every, eval_count=args.eval_count, out=out)
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "spec.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OMP_WAIT_POLICY="PASSIVE")
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--probe-steps", type=int, default=60)
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--eval-count", type=int, default=500)
    ap.add_argument("--headgrad", default=os.path.join(ROOT, "build", "headgrad"))
    ap.add_argument("--out", default=os.path.join(ROOT, "runs", "bench-text"))
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args()
    tokens_per_step = RECIPE["batch"] * RECIPE["context"]
    sides = ["headgrad"] + ([] if args.no_torch else ["torch"])
    train = {"headgrad": headgrad_train, "torch": torch_train}
    os.makedirs(args.out, exist_ok=True)
    load0 = os.getloadavg()[0]

    best = {}
    for side in sides:
        rates = {}
        for threads in [int(t) for t in args.threads.split(",")]:
            out = os.path.join(args.out, f"probe-{side}-{threads}")
            train[side](args, out, args.probe_steps, threads, 0)
            rates[threads] = spread(os.path.join(out, "metrics.csv"))[0]
            print(f"bench text: {side} at {threads} thread(s): {rates[threads]:.0f} tokens/s (median of steps)",
                  file=sys.stderr, flush=True)
        best[side] = max(rates, key=rates.get)

    results = {}
    for side in sides:
        out = os.path.join(args.out, side)
        t0 = time.time()
        summary, rss = train[side](args, out, args.steps, best[side], args.eval_every)
        metrics = os.path.join(out, "metrics.csv")
        steps, _ = read_metrics(metrics)
        results[side] = dict(threads=best[side], rss_mib=rss / 1024, wall=time.time() - t0,
                             timeline=timeline(metrics, tokens_per_step), first_loss=steps[0][1],
                             spread=spread(metrics),
                             tokens_per_s=summary["tokens_per_s"])
        print(f"bench text: {side} trained {args.steps} steps at {best[side]} thread(s) in {time.time() - t0:.0f} s",
              file=sys.stderr, flush=True)

    ckpt = os.path.join(args.out, "headgrad", "model.safetensors")
    cached, uncached = sample_speed(args, ckpt, True), sample_speed(args, ckpt, False)
    subprocess.run([args.headgrad, "plot"] + [os.path.join(args.out, s) for s in sides] +
                   ["--out", os.path.join(args.out, "curves.svg")], check=True, stdout=subprocess.DEVNULL)

    h = results["headgrad"]
    print(f"\nheadgrad vs PyTorch: nanoGPT shakespeare_char CPU recipe on {RECIPE['text'] or 'the fortunes corpus'}, "
          f"{args.steps} steps; load average {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end "
          f"({os.cpu_count()} cores)")
    print(f"{'':<44} {'headgrad':>12} {'PyTorch':>12} {'ratio':>8}")

    def row(name, a, b, fmt, ratio=None):
        r = "" if b is None or ratio is None else f"{ratio(a, b):.2f}x"
        print(f"{name:<44} {fmt.format(a):>12} {'-' if b is None else fmt.format(b):>12} {r:>8}")

    t = results.get("torch")
    row("val loss after the last step", h["timeline"][-1][2], t and t["timeline"][-1][2], "{:.4f}")
    row("first step's loss (same weights and batch)", h["first_loss"], t and t["first_loss"], "{:.6f}")
    row("best threads", h["threads"], t and t["threads"], "{}")
    row("tokens/s (whole run)", h["tokens_per_s"], t and t["tokens_per_s"], "{:.0f}", lambda a, b: a / b)
    row("tokens/s per step: median", h["spread"][0], t and t["spread"][0], "{:.0f}", lambda a, b: a / b)
    row("tokens/s per step: quartiles", f"{h['spread'][1]:.0f}-{h['spread'][2]:.0f}",
        t and f"{t['spread'][1]:.0f}-{t['spread'][2]:.0f}", "{}")
    row("training seconds", h["timeline"][-1][1], t and t["timeline"][-1][1], "{:.1f}", lambda a, b: a / b)
    if t:
        target = t["timeline"][-1][2]
        reach = next(((s, sec) for s, sec, loss in h["timeline"] if loss <= target), None)
        row(f"seconds to val loss <= {target:.4f} (PyTorch's final)",
            reach[1] if reach else float("nan"), t["timeline"][-1][1], "{:.1f}", lambda a, b: a / b)
    row("peak RSS, MiB", h["rss_mib"], t and t["rss_mib"], "{:.0f}", lambda a, b: a / b)
    print(f"sampling 256 tokens (1 thread, best of 3): {cached:.0f} tokens/s with the key/value cache, {uncached:.0f} without "
          f"({cached / uncached:.1f}x)")
    print(f"curves: {os.path.join(args.out, 'curves.svg')} (both runs), "
          + ", ".join(os.path.join(args.out, s, "metrics.csv") for s in sides))
    with open(os.path.join(args.out, "result.json"), "w") as f:
        json.dump(dict(results=results, sample_tokens_per_s=dict(cache=cached, no_cache=uncached),
                       load_average=[load0, os.getloadavg()[0]]), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
