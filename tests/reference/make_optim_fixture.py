#!/usr/bin/python3
"""Generate tests/reference/fixtures/optim_steps.safetensors: 20 steps of torch.optim's SGD, Adam
and AdamW (torch 1.13, foreach=False, float32) on three parameters, one of which has no gradient in
some steps. tests/test_optim_golden.cpp replays the same gradients through headgrad's optimizers
and compares every parameter after every step.

Run by hand from the repository root with Debian's PyTorch 1.13:

    /usr/bin/python3 tests/reference/make_optim_fixture.py

Seeded and single-threaded: a rerun on the same torch build writes a byte-identical file.

Tensors, in this order (all F32):
  init.<p>                     the starting value of parameter p (a, b, c)
  grad.<s>.<p>                 p's gradient in step s (1..20); absent: p has no gradient in step s
                               (its .grad is None: PyTorch skips it and its step count stays)
  <opt>.<s>.<p>                p after step s of optimizer opt (sgd, adam, adamw)
Metadata: "steps" and, per optimizer, its hyperparameters as torch.optim takes them.
"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_fixtures import read_safetensors, write_safetensors  # noqa: E402

STEPS = 20
SHAPES = {"a": (3, 4), "b": (5,), "c": (2, 3)}
OPTIMIZERS = {
    "sgd": (torch.optim.SGD, dict(lr=0.1, momentum=0.9, weight_decay=0.01)),
    "adam": (torch.optim.Adam, dict(lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)),
    "adamw": (torch.optim.AdamW, dict(lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)),
}


def has_grad(name, step):
    # c has none in steps 1, 4, 7, ... (so its first update is in step 2, when the optimizer has
    # already stepped once); b has none in steps 8 to 10.
    if name == "c":
        return step % 3 != 1
    if name == "b":
        return not 8 <= step <= 10
    return True


def main():
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(2024)
    init = {n: torch.randn(s, generator=gen, dtype=torch.float32) for n, s in SHAPES.items()}
    grads = {}
    for step in range(1, STEPS + 1):
        for n, s in SHAPES.items():
            # gradients of varied size, a few large ones (Adam's v is then far from eps)
            scale = 10.0 if step % 5 == 0 else 0.5
            g = torch.randn(s, generator=gen, dtype=torch.float32) * scale
            if has_grad(n, step):
                grads[(step, n)] = g

    tensors = [(f"init.{n}", t) for n, t in init.items()]
    tensors += [(f"grad.{s}.{n}", g) for (s, n), g in grads.items()]
    for opt_name, (cls, kwargs) in OPTIMIZERS.items():
        params = {n: t.clone().requires_grad_(True) for n, t in init.items()}
        opt = cls(list(params.values()), foreach=False, **kwargs)
        for step in range(1, STEPS + 1):
            for n, p in params.items():
                p.grad = grads[(step, n)].clone() if (step, n) in grads else None
            opt.step()
            tensors += [(f"{opt_name}.{step}.{n}", p.detach().clone()) for n, p in params.items()]
        if opt_name != "sgd":  # the per-parameter step counts the C++ test checks too
            counts = {n: int(opt.state[p]["step"].item()) for n, p in params.items()}
            assert counts == {"a": STEPS, "b": STEPS - 3, "c": STEPS - 7}, counts

    metadata = {"steps": STEPS, "torch": torch.__version__}
    for opt_name, (cls, kwargs) in OPTIMIZERS.items():
        for k, v in kwargs.items():
            metadata[f"{opt_name}.{k}"] = ",".join(map(repr, v)) if isinstance(v, tuple) else repr(v)
    path = os.path.join(HERE, "fixtures", "optim_steps.safetensors")
    write_safetensors(path, tensors, metadata)
    back, _ = read_safetensors(path)
    assert [n for n, _ in back] == [n for n, _ in tensors]
    print(f"wrote {path}: {len(tensors)} tensors, {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
