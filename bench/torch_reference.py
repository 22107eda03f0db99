#!/usr/bin/python3
"""The PyTorch side of `headgrad_bench`: the same model, initial weights, batches and optimiser.

    /usr/bin/python3 bench/torch_reference.py SPEC.json

headgrad_bench writes SPEC.json (configuration, hyper-parameters, timing parameters, thread
count, paths) and the files it names: TAG.weights.safetensors (the initial parameters, named as
this module's state_dict) and TAG.data.safetensors ("pos_encoding" (T, d), training batches
"tokens"/"targets" (S, B, T) and "valid_lens" (S, B), optionally the held-out set "eval_*").
Nothing here has defaults of its own: every number comes from the spec, so both sides always run
the same thing. The result is written as JSON to spec["result_torch"].

The model (tests/reference/d2l_model.py, shared with the golden fixtures) is d2l's Transformer
encoder (embedding * sqrt(d) + sinusoidal P -> blocks of [MultiHeadAttention without bias,
AddNorm(LayerNorm eps 1e-5), FFN dense1-relu-dense2]) and an output Linear, written as d2l writes
it (including its masked_softmax with the -1e6 fill). The P
table is read from the data file instead of recomputed, so the first-step loss can be compared
with headgrad's to ~1e-6 (d2l computes it in float32, headgrad in float64).
Only torch and the standard library are used (the safetensors reader is below).
"""
import ctypes
import json
import math
import mmap
import os
import re
import statistics
import struct
import sys
import time

import torch


# ---- safetensors ---------------------------------------------------------------------------------
_DTYPES = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64, "BOOL": torch.bool}


def read_safetensors(path, lazy=False):
    """{name: tensor}. lazy=True maps the file (copy-on-write) so batches are paged in as used
    instead of being read up front, which keeps them out of the peak RSS until they are needed."""
    with open(path, "rb") as f:
        if lazy:
            buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
        else:
            buf = bytearray(f.read())
    (n,) = struct.unpack("<Q", buf[:8])
    header = json.loads(bytes(buf[8:8 + n]).decode("utf-8"))
    header.pop("__metadata__", None)
    out = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        dtype = _DTYPES[info["dtype"]]
        count = math.prod(info["shape"])
        t = torch.frombuffer(buf, dtype=dtype, count=count, offset=8 + n + b) if count else torch.empty(0, dtype=dtype)
        out[name] = t.reshape(info["shape"])
    return out


# ---- the model: d2l's encoder + output layer, shared with the golden fixtures ------------------------
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
from d2l_model import ReferenceModel, masked_mean_ce  # noqa: E402


# ---- training -----------------------------------------------------------------------------------
def lr_at(t, step):
    """framework/optim/optimizer.cpp LrSchedule::at: linear warmup, then constant or cosine."""
    base, warmup, total = t["lr"], t["warmup"], t["steps"]
    if warmup > 0 and step <= warmup:
        return base * step / warmup
    if t["schedule"] != "cosine":
        return base
    progress = min(1.0, (step - warmup) / max(total - warmup, 1))
    low = t.get("min_lr", 0.0)
    return low + (base - low) * 0.5 * (1.0 + math.cos(math.pi * progress))


def make_optimizer(model, t):
    if t["optimizer"] == "adam":
        return torch.optim.Adam(model.parameters(), lr=t["lr"], betas=(t["beta1"], t["beta2"]), eps=t["eps"],
                                weight_decay=t["weight_decay"])
    if t["optimizer"] == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=t["lr"], betas=(t["beta1"], t["beta2"]), eps=t["eps"],
                                 weight_decay=t["weight_decay"])
    if t["optimizer"] == "sgd":
        return torch.optim.SGD(model.parameters(), lr=t["lr"], momentum=t["momentum"], weight_decay=t["weight_decay"])
    raise ValueError(f"unknown optimizer {t['optimizer']}")


class Trainer:
    def __init__(self, spec):
        self.t = spec["train"]
        data = read_safetensors(spec["data"], lazy=True)
        self.data = data
        c = spec["config"]
        self.model = ReferenceModel(c["vocab"], c["d_model"], c["heads"], c["layers"], c["ffn"], self.t["dropout"],
                                    P=data["pos_encoding"].clone())
        self.model.load_state_dict(read_safetensors(spec["weights"]), strict=True)
        self.model.train()
        self.opt = make_optimizer(self.model, self.t)
        self.params = list(self.model.parameters())
        self.num_batches = data["tokens"].shape[0]

    def step(self, step):
        """Optimizer step `step` (from 1) on batch step - 1, as headgrad's trainer does it."""
        i = step - 1
        if i >= self.num_batches:
            raise IndexError(f"batch {i} was not exported ({self.num_batches} batches)")
        tokens, targets, lens = self.data["tokens"][i], self.data["targets"][i], self.data["valid_lens"][i]
        for g in self.opt.param_groups:
            g["lr"] = lr_at(self.t, step)
        # --precision bf16: PyTorch's mixed precision, its matmuls on bf16 inputs (the loss in float32)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.t.get("precision") == "bf16"):
            logits = self.model(tokens, lens)
        loss = masked_mean_ce(logits.float(), targets, lens)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        if self.t["clip"] > 0:
            torch.nn.utils.clip_grad_norm_(self.params, self.t["clip"])
        self.opt.step()
        return loss.item()

    @torch.no_grad()
    def seq_acc(self):
        self.model.eval()
        toks, tgts, lens = self.data["eval_tokens"], self.data["eval_targets"], self.data["eval_valid_lens"]
        correct = 0
        for s in range(0, toks.shape[0], 250):  # chunks of 250, like headgrad's evaluate()
            tk, tg, ln = toks[s:s + 250], tgts[s:s + 250], lens[s:s + 250]
            pred = self.model(tk, ln).argmax(-1)
            valid = torch.arange(tk.shape[1])[None, :] < ln[:, None]
            correct += int(((pred == tg) | ~valid).all(dim=1).sum())
        self.model.train()
        return correct / toks.shape[0]


def proc_status_kib(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return -1


def blas_info(threads):
    """Which BLAS torch's gemm calls land in. Debian's torch is built with BLAS_INFO=generic,
    i.e. it calls the system libblas.so.3 (often OpenBLAS): find the mapped library that exports
    openblas_get_corename, pin its threads, and name its kernel."""
    m = re.search(r"BLAS_INFO=([^,\s]+)", torch.__config__.show())
    info = {"torch_blas_info": m.group(1) if m else "?", "library": None, "openblas_core": None}
    libs = []
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            if path.startswith("/") and ("blas" in path or "mkl" in path) and path not in libs:
                libs.append(path)
    for path in libs:
        try:
            lib = ctypes.CDLL(path)
            core = lib.openblas_get_corename
        except (OSError, AttributeError):
            continue
        core.restype = ctypes.c_char_p
        info["library"] = os.path.basename(path)
        info["openblas_core"] = core().decode()
        try:
            lib.openblas_set_num_threads(ctypes.c_int(threads))
        except AttributeError:
            pass
        break
    if info["library"] is None and libs:
        info["library"] = os.path.basename(libs[0])
    return info


def throughput(spec, tr):
    s = 0
    s += 1
    first_loss = tr.step(s)
    while s < spec["warmup_steps"]:
        s += 1
        tr.step(s)
    window_ms = []
    for _ in range(spec["windows"]):
        t0 = time.perf_counter()
        for _ in range(spec["window_steps"]):
            s += 1
            tr.step(s)
        window_ms.append((time.perf_counter() - t0) / spec["window_steps"] * 1e3)
    ms = statistics.median(window_ms)
    c = spec["config"]
    return {"first_loss": first_loss, "window_ms": window_ms, "ms_per_step": ms,
            "tokens_per_s": c["batch"] * c["max_len"] / (ms * 1e-3),
            "gflops": spec["step_flops"] / (ms * 1e-3) * 1e-9,
            "peak_rss_kib": proc_status_kib("VmHWM"), "rss_kib": proc_status_kib("VmRSS")}


def time_to_accuracy(spec, tr):
    train_seconds, wall0, curve, reached, s, acc = 0.0, time.perf_counter(), [], False, 0, 0.0
    while s < spec["max_steps"]:
        t0 = time.perf_counter()
        s += 1
        tr.step(s)
        train_seconds += time.perf_counter() - t0
        if s % spec["eval_every"] == 0 or s == spec["max_steps"]:
            acc = tr.seq_acc()
            curve.append([s, acc])
            print(f"bench:   PyTorch  step {s:>5}: held-out seq acc {acc:.4f} ({train_seconds:.1f} s training)",
                  file=sys.stderr, flush=True)
            if acc >= spec["target"]:
                reached = True
                break
    return {"reached": reached, "steps": s, "seconds": train_seconds, "wall_seconds": time.perf_counter() - wall0,
            "seq_acc": acc, "curve": curve}


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    threads = spec["threads"]
    torch.set_num_threads(threads)
    blas = blas_info(threads)
    tr = Trainer(spec)
    if spec["mode"] == "throughput":
        r = throughput(spec, tr)
    elif spec["mode"] == "tta":
        r = time_to_accuracy(spec, tr)
    else:
        raise ValueError(f"mode {spec['mode']} is headgrad-only")
    r.update({"mode": spec["mode"], "threads": torch.get_num_threads(), "torch_version": torch.__version__,
              "blas": blas, "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "(unset)")})
    with open(spec["result_torch"], "w") as f:
        json.dump(r, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
