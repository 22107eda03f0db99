#!/usr/bin/python3
"""Generate tests/reference/fixtures/optim_steps.safetensors: 20 steps of torch.optim's SGD, Adam,
AdamW, RMSprop and Adagrad (torch 1.13, foreach=False, float32) on three parameters, one of which
has no gradient in some steps, with each option headgrad implements (SGD momentum, dampening,
nesterov, maximize; Adam/AdamW amsgrad, maximize; RMSprop centered, momentum, maximize; Adagrad
lr_decay, initial_accumulator_value, maximize) and both of torch's zero_grad modes. tests/test_optim_golden.cpp
replays the same gradients through headgrad's optimizers and compares every parameter after every
step, bit for bit.

Run by hand from the repository root with Debian's PyTorch 1.13:

    /usr/bin/python3 tests/reference/make_optim_fixture.py

Seeded and single-threaded: a rerun on the same torch build writes a byte-identical file.

Tensors, in this order (all F32):
  init.<p>                     the starting value of parameter p (a, b, c)
  grad.<s>.<p>                 p's gradient in step s (1..20); absent: p has no gradient in step s
                               (its .grad is None: PyTorch skips it and its step count stays)
  <opt>.<s>.<p>                p after step s of optimizer configuration opt (the keys of
                               OPTIMIZERS below, in that order)
Metadata: "steps" and, per configuration, its hyperparameters as torch.optim takes them (and
"<opt>.zero_grad": "none" or "zeros").

zero_grad modes: "none" - a parameter without a gradient in a step has .grad None (torch 2.x's
zero_grad(set_to_none=True)), so the optimizer skips it; "zeros" - torch 1.13's default
zero_grad(set_to_none=False): a gradient once made is zeroed, not dropped, so in a step where no
gradient reaches it the parameter steps with a zero gradient (one never given a gradient stays
None). The gradients are the same in both.
"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_fixtures import read_safetensors, write_safetensors  # noqa: E402

STEPS = 20
SHAPES = {"a": (3, 4), "b": (5,), "c": (2, 3)}
# name: (class, keyword arguments, zero_grad mode). New configurations go at the end: the tensors
# of the earlier ones then stay where they were.
OPTIMIZERS = {
    "sgd": (torch.optim.SGD, dict(lr=0.1, momentum=0.9, weight_decay=0.01), "none"),
    "adam": (torch.optim.Adam, dict(lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01), "none"),
    "adamw": (torch.optim.AdamW, dict(lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1), "none"),
    "sgd_nesterov": (torch.optim.SGD, dict(lr=0.1, momentum=0.9, weight_decay=0.01, nesterov=True), "none"),
    "sgd_dampening_maximize": (torch.optim.SGD, dict(lr=0.1, momentum=0.9, dampening=0.3, weight_decay=0.01,
                                                     maximize=True), "none"),
    "sgd_plain": (torch.optim.SGD, dict(lr=0.1), "none"),
    "adam_amsgrad": (torch.optim.Adam, dict(lr=0.01, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.01, amsgrad=True),
                     "none"),
    "adam_maximize": (torch.optim.Adam, dict(lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01,
                                             maximize=True), "none"),
    "adamw_amsgrad_maximize": (torch.optim.AdamW, dict(lr=0.01, betas=(0.8, 0.99), eps=1e-8, weight_decay=0.1,
                                                       amsgrad=True, maximize=True), "none"),
    "sgd_zeros": (torch.optim.SGD, dict(lr=0.1, momentum=0.9, weight_decay=0.01), "zeros"),
    "adam_zeros": (torch.optim.Adam, dict(lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01), "zeros"),
    "rmsprop": (torch.optim.RMSprop, dict(lr=0.01), "none"),
    "rmsprop_centered_momentum": (torch.optim.RMSprop, dict(lr=0.01, alpha=0.9, eps=1e-6, weight_decay=0.01,
                                                            momentum=0.8, centered=True), "none"),
    "rmsprop_momentum_maximize": (torch.optim.RMSprop, dict(lr=0.005, momentum=0.9, maximize=True), "none"),
    "adagrad": (torch.optim.Adagrad, dict(lr=0.1), "none"),
    "adagrad_decay_maximize": (torch.optim.Adagrad, dict(lr=0.1, lr_decay=0.05, weight_decay=0.01,
                                                         initial_accumulator_value=0.1, eps=1e-8, maximize=True),
                               "none"),
    "rmsprop_zeros": (torch.optim.RMSprop, dict(lr=0.01, momentum=0.5), "zeros"),
    "adagrad_zeros": (torch.optim.Adagrad, dict(lr=0.1, weight_decay=0.01), "zeros"),
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
    for opt_name, (cls, kwargs, mode) in OPTIMIZERS.items():
        params = {n: t.clone().requires_grad_(True) for n, t in init.items()}
        opt = cls(list(params.values()), foreach=False, **kwargs)
        for step in range(1, STEPS + 1):
            if mode == "zeros":
                opt.zero_grad(set_to_none=False)
            for n, p in params.items():
                if (step, n) in grads:
                    p.grad = grads[(step, n)].clone()
                elif mode == "none":
                    p.grad = None
            opt.step()
            tensors += [(f"{opt_name}.{step}.{n}", p.detach().clone()) for n, p in params.items()]
        if cls is not torch.optim.SGD:  # the per-parameter step counts the C++ test checks too
            counts = {n: int(opt.state[p]["step"]) for n, p in params.items()}
            # zeros: c has no gradient only in step 1 (never had one), after that a zero one
            want = {"a": STEPS, "b": STEPS - 3, "c": STEPS - 7} if mode == "none" else {"a": STEPS, "b": STEPS,
                                                                                       "c": STEPS - 1}
            assert counts == want, (opt_name, counts)

    metadata = {"steps": STEPS, "torch": torch.__version__}
    for opt_name, (cls, kwargs, mode) in OPTIMIZERS.items():
        for k, v in kwargs.items():
            metadata[f"{opt_name}.{k}"] = ",".join(map(repr, v)) if isinstance(v, tuple) else repr(v)
        metadata[f"{opt_name}.zero_grad"] = mode
    path = os.path.join(HERE, "fixtures", "optim_steps.safetensors")
    write_safetensors(path, tensors, metadata)
    back, _ = read_safetensors(path)
    assert [n for n, _ in back] == [n for n, _ in tensors]
    print(f"wrote {path}: {len(tensors)} tensors, {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
