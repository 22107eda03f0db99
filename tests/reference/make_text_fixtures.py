#!/usr/bin/python3
"""Golden fixtures for headgrad's causal language model (task text), from the PyTorch reference
in gpt_model.py. Run by hand from the repository root, after building headgrad:

    /usr/bin/python3 tests/reference/make_text_fixtures.py [path/to/headgrad] [--only train-step|checkpoint]

It writes (CI has no torch: the files are committed and the C++ tests only read them):

  fixtures/gpt_train_step.safetensors   one training step of a tiny GPT in float32: the initial
      parameters (param.*), a batch (tokens, targets), the logits, the mean next-token
      cross-entropy, every gradient (grad.*), the gradient norm before clipping to 1.0, and the
      parameters after one AdamW step with nanoGPT's groups (updated.*);
  fixtures/gpt_train_step_f64.safetensors   the same forward and backward in float64 from the same
      parameters (logits, loss, grad.*, all F64): the exact answer to float64 rounding, against
      which the test measures headgrad's float32 error alone. PyTorch's own float32 logits are up
      to 3.7e-6 away from it, more than the golden tolerance (the script prints how far);
  fixtures/text_lm.txt, fixtures/text_lm_model.safetensors, fixtures/text_lm_eval.safetensors
      a tiny text, a checkpoint headgrad trained on it (headgrad train --task text, 200 steps),
      and what PyTorch makes of that checkpoint loaded into the reference model: the validation
      windows' offsets (drawn by the reference's port of headgrad's generator) and their mean
      loss, which headgrad's evaluation must reproduce.
"""
import copy
import os
import shutil
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gpt_model import GPT, TextCorpus  # noqa: E402
from make_fixtures import read_safetensors, save_and_verify  # noqa: E402

OUT_DIR = os.path.join(HERE, "fixtures")
torch.set_num_threads(1)


def train_step_fixture():
    torch.manual_seed(0)
    cfg = dict(vocab=13, block_size=8, n_layer=2, n_head=2, n_embd=16, ffn=64)
    model = GPT(**cfg, dropout=0.0, tie_weights=True)
    with torch.no_grad():  # weights large enough that every gradient is well above rounding
        for name, p in model.named_parameters():
            if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name.endswith("ln_f.weight"):
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            else:
                p.copy_(0.3 * torch.randn_like(p))
    B, T = 3, 8
    tokens = torch.randint(0, cfg["vocab"], (B, T))
    targets = torch.randint(0, cfg["vocab"], (B, T))
    params = [(n, p.detach().clone()) for n, p in model.named_parameters()]  # tied: wte once
    model64 = copy.deepcopy(model).double()  # the same parameters, widened exactly

    logits = model(tokens)
    loss = F.cross_entropy(logits.view(-1, cfg["vocab"]), targets.view(-1))
    loss.backward()
    grads = [(n, p.grad.detach().clone()) for n, p in model.named_parameters()]
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    lr, wd, betas = 1e-3, 0.1, (0.9, 0.99)
    opt = model.optimizer(lr, wd, betas)
    opt.step()
    updated = [(n, p.detach().clone()) for n, p in model.named_parameters()]

    tensors = [("tokens", tokens), ("targets", targets), ("logits", logits.detach()), ("loss", loss.detach()),
               ("grad_norm", norm.detach().reshape(()))]
    tensors += [("param." + n, t) for n, t in params]
    tensors += [("grad." + n, t) for n, t in grads]
    tensors += [("updated." + n, t) for n, t in updated]
    meta = dict(cfg, batch=B, clip=1.0, lr=lr, weight_decay=wd, beta1=betas[0], beta2=betas[1], adam_eps=1e-8,
                param_names=",".join(n for n, _ in params), torch_version=torch.__version__)
    save_and_verify("gpt_train_step.safetensors", tensors, meta)

    logits64 = model64(tokens)
    loss64 = F.cross_entropy(logits64.view(-1, cfg["vocab"]), targets.view(-1))
    loss64.backward()
    grads64 = [(n, p.grad.detach().clone()) for n, p in model64.named_parameters()]
    print("float32 PyTorch vs its float64 run (max abs diff, and the golden tolerance's share of it):")
    for name, t32, t64 in [("logits", logits, logits64), ("loss", loss, loss64)] + \
            [("grad." + n, g, g64) for (n, g), (_, g64) in zip(grads, grads64)]:
        diff = (t32.detach().double() - t64.detach()).abs()
        used = (diff / (1e-6 + 1e-5 * t64.detach().abs())).max().item()
        print(f"   {name:<40s} {diff.max().item():.1e}  (tol used {used:.2f})")
    tensors64 = [("logits", logits64.detach()), ("loss", loss64.detach())]
    tensors64 += [("grad." + n, t) for n, t in grads64]
    meta64 = dict(cfg, batch=B, param_names=meta["param_names"], torch_version=torch.__version__)
    save_and_verify("gpt_train_step_f64.safetensors", tensors64, meta64)


def checkpoint_fixture(headgrad):
    text_path = os.path.join(OUT_DIR, "text_lm.txt")
    if not os.path.exists(text_path):  # the repository's own prose: the first 8000 bytes of the README
        with open(os.path.join(HERE, "..", "..", "README.md"), "rb") as f:
            raw = f.read()[:8000]
        with open(text_path, "wb") as f:
            f.write(raw[:raw.rfind(b"\n") + 1])
    with tempfile.TemporaryDirectory() as tmp:
        # the path relative to the repository root (run from there): the checkpoint's metadata names it
        subprocess.run([os.path.abspath(headgrad), "train", "--task", "text", "--text",
                        os.path.relpath(text_path, os.path.join(HERE, "..", "..")), "--context", "16", "--batch", "8",
                        "--d-model", "32", "--heads", "2", "--layers", "2", "--ffn", "64", "--steps", "200", "--warmup", "20",
                        "--eval-every", "0", "--threads", "1", "--quiet", "--out", tmp], check=True,
                       cwd=os.path.join(HERE, "..", ".."))
        shutil.copy(os.path.join(tmp, "model.safetensors"), os.path.join(OUT_DIR, "text_lm_model.safetensors"))
    with open(text_path, "rb") as f:
        corpus = TextCorpus(f.read())
    params = dict(read_safetensors(os.path.join(OUT_DIR, "text_lm_model.safetensors"))[0])
    model = GPT(len(corpus.vocab), 16, 2, 2, 32, 64, tie_weights=True)
    model.load_headgrad({n: torch.from_numpy(a.copy()) for n, a in params.items()})
    model.eval()
    offsets = corpus.eval_offsets(16, 64)
    x, y = corpus.windows(offsets, 16)
    with torch.no_grad():
        loss = F.cross_entropy(model(x).view(-1, len(corpus.vocab)), y.view(-1))
    save_and_verify("text_lm_eval.safetensors",
                    [("offsets", torch.tensor(offsets, dtype=torch.long)), ("loss", loss.reshape(()))],
                    dict(context=16, count=64, vocab=len(corpus.vocab), torch_version=torch.__version__))


def main():
    args = sys.argv[1:]
    only = None
    if "--only" in args:
        i = args.index("--only")
        only = args[i + 1] if i + 1 < len(args) else ""
        if only not in ("train-step", "checkpoint"):
            sys.exit("make_text_fixtures.py: --only takes train-step or checkpoint")
        del args[i:i + 2]
    headgrad = args[0] if args else os.path.join(HERE, "..", "..", "build", "headgrad")
    if only in (None, "train-step"):
        train_step_fixture()
    if only in (None, "checkpoint"):
        checkpoint_fixture(headgrad)
    return 0


if __name__ == "__main__":
    sys.exit(main())
