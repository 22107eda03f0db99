#!/usr/bin/python3
"""The PyTorch side of the text benchmark (bench/text_lm.py): nanoGPT's model and training loop on
the batches and from the initial weights `headgrad train --task text` uses.

    /usr/bin/python3 bench/torch_text_lm.py SPEC.json

The BLAS it runs (the system libblas.so.3 that Debian's torch calls, usually OpenBLAS) is found
and named in result.json's "blas", with its threads pinned to the run's; `bench/text_lm.py` sets
OPENBLAS_CORETYPE so that its kernel is the one headgrad runs.

SPEC.json holds the run (the text, tokenizer, sizes, seed, optimiser settings, steps, evaluation
and threads) and "out", a directory that receives metrics.csv in headgrad's format (so
`headgrad plot` overlays both runs) and result.json. Both sides compute the same things: the
initial weights are headgrad's (tests/reference/gpt_model.py reproduces its generator and
init), batch `step - 1` holds the windows headgrad draws, AdamW with nanoGPT's groups, the
warmup + cosine schedule to min_lr, clipping at `clip`, and the validation loss on the same
windows. Training time excludes evaluation, as headgrad's tokens/s does.
"""
import json
import math
import os
import re
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
from gpt_model import GPT, TextCorpus, headgrad_init, lr_at, read_corpus  # noqa: E402
from torch_reference import blas_info  # noqa: E402  (bench/: the BLAS torch's gemms land in)


def peak_rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return -1


@torch.no_grad()
def evaluate(model, corpus, offsets, context, vocab):
    model.eval()
    total, correct, n = 0.0, 0, 0
    for s in range(0, len(offsets), 256):
        x, y = corpus.windows(offsets[s:s + 256], context)
        logits = model(x)
        total += F.cross_entropy(logits.view(-1, vocab), y.view(-1), reduction="sum").item()
        correct += int((logits.argmax(-1) == y).sum())
        n += y.numel()
    model.train()
    return total / n, correct / n


def main():
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    torch.set_num_threads(spec["threads"])
    blas = blas_info(spec["threads"])  # also pins that OpenBLAS's own threads to the same count
    m = re.search(r"CPU capability usage: (\S+)", torch.__config__.show())
    blas.update(cpu_capability=m.group(1) if m else "?", torch_version=torch.__version__,
                openblas_coretype=os.environ.get("OPENBLAS_CORETYPE"))
    corpus = TextCorpus(read_corpus(spec["text"]), spec["tokenizer"])
    V, T, B = len(corpus.vocab), spec["context"], spec["batch"]
    model = GPT(V, T, spec["layers"], spec["heads"], spec["d_model"], spec["ffn"], spec["dropout"],
                spec["tie_weights"] == "on")
    headgrad_init(model, spec["seed"], spec["layers"])
    model.train()
    opt = model.optimizer(spec["lr"], spec["weight_decay"], (0.9, spec["beta2"]))
    params = list(model.parameters())
    eval_offsets = corpus.eval_offsets(T, spec["eval_count"])
    os.makedirs(spec["out"], exist_ok=True)
    csv = open(os.path.join(spec["out"], "metrics.csv"), "w")
    csv.write("step,loss,lr,tokens_per_s,eval_loss,token_acc,seq_acc\n")
    train_seconds, curve, losses = 0.0, [], []
    for step in range(1, spec["steps"] + 1):
        x, y = corpus.windows(corpus.batch_offsets(T, spec["seed"], step - 1, B), T)
        t0 = time.perf_counter()
        lr = lr_at(step, spec["lr"], spec["min_lr"], spec["warmup"], spec["steps"])
        for g in opt.param_groups:
            g["lr"] = lr
        # "autocast": PyTorch's bf16 mixed precision (torch.autocast), as `headgrad train --precision bf16`
        # runs its linear layers; the loss in float32. Evaluation runs in float32 on both sides.
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=spec.get("autocast", False)):
            logits = model(x)
        loss = F.cross_entropy(logits.float().view(-1, V), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if spec["clip"] > 0:
            torch.nn.utils.clip_grad_norm_(params, spec["clip"])
        opt.step()
        value = loss.item()
        dt = time.perf_counter() - t0
        train_seconds += dt
        losses.append(value)
        csv.write(f"{step},{value:.6f},{lr:.6g},{B * T / dt:.1f},,,\n")
        if spec["eval_every"] > 0 and (step % spec["eval_every"] == 0 or step == spec["steps"]):
            eval_loss, acc = evaluate(model, corpus, eval_offsets, T, V)
            csv.write(f"{step},,,,{eval_loss:.6f},{acc:.6f},0.000000\n")
            csv.flush()
            curve.append([step, train_seconds, eval_loss])
            print(f"torch: step {step}: val loss {eval_loss:.4f} ({train_seconds:.1f} s training)", file=sys.stderr,
                  flush=True)
    csv.close()
    result = {"first_loss": losses[0], "train_seconds": train_seconds, "steps": spec["steps"],
              "tokens_per_s": B * T * spec["steps"] / train_seconds, "curve": curve,
              "final_eval_loss": curve[-1][2] if curve else None, "peak_rss_kib": peak_rss_kib(),
              "threads": torch.get_num_threads(), "torch_version": torch.__version__, "blas": blas}
    with open(os.path.join(spec["out"], "result.json"), "w") as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
