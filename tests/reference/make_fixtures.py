#!/usr/bin/python3
"""Generate the PyTorch golden fixtures that headgrad's C++ tests compare against.

Run by hand from the repository root with the Debian PyTorch (1.13):

    /usr/bin/python3 tests/reference/make_fixtures.py

It writes tests/reference/fixtures/*.safetensors. CI has no torch: the generated files are
committed and the C++ tests only read them. Everything is seeded, so running it again produces
byte-identical files (same torch build, CPU). See tests/reference/README.md for the contents.

The safetensors format is written by hand (torch 1.13 has no safetensors package):
  8-byte little-endian u64 N | N bytes of JSON header (space padded to a multiple of 8) | data
  header = {"__metadata__": {str: str}, name: {"dtype": "F32"|"F64"|"I64", "shape": [...],
            "data_offsets": [begin, end]}, ...}
  offsets are relative to the start of the data section; tensors are packed back to back with
  no gaps, in header order (the order the tensors are listed below).
"""
import copy
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = os.path.join(HERE, "fixtures")
MAX_FILE_BYTES = 100 * 1024

torch.set_num_threads(1)  # deterministic reduction order on CPU

# --------------------------------------------------------------------------------------------
# safetensors writer / reader
# --------------------------------------------------------------------------------------------
_DTYPES = {torch.float32: ("F32", "<f4"), torch.float64: ("F64", "<f8"), torch.int64: ("I64", "<i8")}
_NP_OF = {"F32": "<f4", "F64": "<f8", "I64": "<i8"}


def write_safetensors(path, tensors, metadata):
    """tensors: list of (name, torch.Tensor) in the order they are stored."""
    header = {"__metadata__": {str(k): str(v) for k, v in metadata.items()}}
    blobs = []
    offset = 0
    seen = set()
    for name, t in tensors:
        assert name not in seen, f"duplicate tensor name {name}"
        seen.add(name)
        t = t.detach().cpu().contiguous()
        dt, npdt = _DTYPES[t.dtype]
        raw = t.numpy().astype(npdt, copy=False).tobytes(order="C")
        header[name] = {"dtype": dt, "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * ((8 - len(hjson) % 8) % 8)  # pad so the data section starts 8-aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    """Independent little reader: returns (ordered list of (name, np.ndarray), metadata)."""
    with open(path, "rb") as f:
        buf = f.read()
    (n,) = struct.unpack("<Q", buf[:8])
    header = json.loads(buf[8:8 + n].decode("utf-8"))
    data = buf[8 + n:]
    meta = header.pop("__metadata__", {})
    out = []
    expect = 0
    for name, info in header.items():  # json.loads keeps file order
        b, e = info["data_offsets"]
        assert b == expect, f"{path}: {name} starts at {b}, expected {expect} (gap/overlap)"
        npdt = np.dtype(_NP_OF[info["dtype"]])
        count = int(np.prod(info["shape"])) if info["shape"] else 1
        assert e - b == count * npdt.itemsize, f"{path}: {name} byte size mismatch"
        arr = np.frombuffer(data[b:e], dtype=npdt).reshape(info["shape"])
        out.append((name, arr))
        expect = e
    assert expect == len(data), f"{path}: trailing bytes after last tensor"
    return out, meta


def save_and_verify(filename, tensors, metadata):
    path = os.path.join(OUT_DIR, filename)
    write_safetensors(path, tensors, metadata)
    size = os.path.getsize(path)
    assert size < MAX_FILE_BYTES, f"{filename} is {size} bytes (limit {MAX_FILE_BYTES})"
    back, meta = read_safetensors(path)
    assert [n for n, _ in back] == [n for n, _ in tensors], "name/order mismatch after reload"
    assert meta == {str(k): str(v) for k, v in metadata.items()}
    print(f"\n== {filename}  ({size} bytes, {len(back)} tensors)")
    for (name, arr), (_, t) in zip(back, tensors):
        ref = t.detach().cpu().contiguous().numpy()
        assert arr.dtype == ref.dtype.newbyteorder("<") or arr.dtype == ref.dtype, (name, arr.dtype, ref.dtype)
        assert tuple(arr.shape) == tuple(ref.shape), (name, arr.shape, ref.shape)
        assert arr.tobytes() == ref.astype(arr.dtype).tobytes(), f"{name}: bytes differ after reload"
        assert np.all(np.isfinite(arr)) if arr.dtype.kind == "f" else True, f"{name} not finite"
        print(f"   {name:<40s} {_NP_OF_INV[arr.dtype.str]:<4s} {str(list(arr.shape)):<14s}")
    for k, v in meta.items():
        print(f"   meta {k} = {v}")


_NP_OF_INV = {"<f4": "F32", "<f8": "F64", "<i8": "I64"}


def common_meta(**kw):
    m = {"generator": "tests/reference/make_fixtures.py", "torch_version": torch.__version__}
    m.update(kw)
    return m


# --------------------------------------------------------------------------------------------
# the reference model (tests/reference/d2l_model.py)
# --------------------------------------------------------------------------------------------
sys.path.insert(0, HERE)
from d2l_model import (MultiHeadAttention, PlainMultiHeadAttention, ReferenceModel,  # noqa: E402
                       masked_mean_ce, masked_softmax)


# --------------------------------------------------------------------------------------------
# fixtures
# --------------------------------------------------------------------------------------------
def fixture_masked_softmax():
    g = torch.Generator().manual_seed(1001)
    X = torch.randn(2, 3, 5, generator=g)
    grad_output = torch.randn(2, 3, 5, generator=g)
    vl1 = torch.tensor([2, 4], dtype=torch.int64)
    vl2 = torch.tensor([[1, 3, 5], [2, 4, 1]], dtype=torch.int64)
    outs, grads = {}, {}
    for tag, vl in (("nomask", None), ("1d", vl1), ("2d", vl2)):
        x = X.clone().requires_grad_(True)
        # d2l's sequence_mask writes in place into a reshape (a view); do it on a non-leaf copy.
        y = masked_softmax(x * 1.0, vl)
        (y * grad_output).sum().backward()
        outs[tag], grads[tag] = y.detach(), x.grad.detach()
    # sanity: masked entries are exactly 0 in y and in the gradient (exp(-1e6 - max) underflows)
    lens_1d = vl1[:, None, None].expand(2, 3, 5)
    lens_2d = vl2[:, :, None].expand(2, 3, 5)
    col = torch.arange(5)[None, None, :]
    for tag, lens in (("1d", lens_1d), ("2d", lens_2d)):
        assert torch.all(outs[tag][col >= lens] == 0) and torch.all(grads[tag][col >= lens] == 0)
    tensors = [("X", X), ("valid_lens_1d", vl1), ("valid_lens_2d", vl2), ("grad_output", grad_output),
               ("y_nomask", outs["nomask"]), ("y_1d", outs["1d"]), ("y_2d", outs["2d"]),
               ("grad.X_nomask", grads["nomask"]), ("grad.X_1d", grads["1d"]), ("grad.X_2d", grads["2d"])]
    save_and_verify("masked_softmax.safetensors", tensors,
                    common_meta(seed="1001", op="d2l masked_softmax over the last axis, mask fill -1e6",
                                grad="grad.X_* = d/dX sum(y_* * grad_output)"))


def keep_stage_tensors(net):
    """Forward hooks on d2l's MultiHeadAttention that keep, with their gradients, the tensors between
    its stages: the projections Q, K, V; DotProductAttention's per-head inputs and output; W_o's
    input (transpose_output's result). The attention weights are the module's attention_weights."""
    stage = {}

    def keep(name, t):
        if not t.requires_grad:  # the sanity checks' no_grad forward
            return
        t.retain_grad()
        stage[name] = t

    for name, layer in (("Q", net.W_q), ("K", net.W_k), ("V", net.W_v)):
        layer.register_forward_hook(lambda m, inp, out, name=name: keep(name, out))

    def attention_hook(m, inp, out):
        for name, t in zip(("Q_heads", "K_heads", "V_heads"), inp[:3]):
            keep(name, t)
        keep("heads_out", out)

    net.attention.register_forward_hook(attention_hook)
    net.W_o.register_forward_pre_hook(lambda m, inp: keep("concat", inp[0]))
    return stage


def stage_gradients(stage, valid_lens, H):
    """grad.<stage> tensors for `headgrad explain --fixture`, in the order explain prints them. The scores
    are not kept by d2l's code (masked_softmax writes into them in place), so their gradient is
    torch's VJP of d2l's masked_softmax at the recomputed scores, from the weights' gradient."""
    Qh, Kh = stage["Q_heads"].detach(), stage["K_heads"].detach()
    scores = (torch.bmm(Qh, Kh.transpose(1, 2)) / math.sqrt(Qh.shape[-1])).requires_grad_(True)
    weights = masked_softmax(scores * 1.0, torch.repeat_interleave(valid_lens, H, dim=0))
    assert torch.equal(weights.detach(), stage["weights"].detach()), "recomputed weights differ"
    (d_scores,) = torch.autograd.grad(weights, scores, stage["weights"].grad)
    names = ["concat", "heads_out", "weights", "V_heads"]
    out = [("grad." + n, stage[n].grad) for n in names] + [("grad.scores", d_scores)]
    return out + [("grad." + n, stage[n].grad) for n in ("Q_heads", "K_heads", "Q", "K", "V")]


def fixture_mha_d2l(filename, lens2d, seed):
    B, Tq, Tk, H = 2, 4, 6, 2
    key_size, query_size, value_size, num_hiddens = 5, 6, 7, 8
    torch.manual_seed(seed)
    net = MultiHeadAttention(key_size, query_size, value_size, num_hiddens, H, 0.0, bias=False)
    net.eval()
    g = torch.Generator().manual_seed(seed + 1)
    queries = torch.randn(B, Tq, query_size, generator=g).requires_grad_(True)
    keys = torch.randn(B, Tk, key_size, generator=g).requires_grad_(True)
    values = torch.randn(B, Tk, value_size, generator=g).requires_grad_(True)
    grad_output = torch.randn(B, Tq, num_hiddens, generator=g)
    if lens2d:
        valid_lens = torch.randint(1, Tk + 1, (B, Tq), generator=g, dtype=torch.int64)
    else:
        valid_lens = torch.tensor([3, 2], dtype=torch.int64)
    params = [(n, p.detach().clone()) for n, p in net.named_parameters()]
    stage = keep_stage_tensors(net)
    output = net(queries, keys, values, valid_lens)
    stage["weights"] = net.attention.attention_weights
    stage["weights"].retain_grad()
    attw = net.attention.attention_weights.detach().reshape(B, H, Tq, Tk)  # row b*H+h -> [b, h]
    (output * grad_output).sum().backward()
    stage_grads = stage_gradients(stage, valid_lens, H)

    # sanity: weights are 0 beyond each row's length, and reproduce the output
    lens_bq = valid_lens[:, None].expand(B, Tq) if not lens2d else valid_lens
    col = torch.arange(Tk)[None, None, None, :]
    assert torch.all(attw[(col >= lens_bq[:, None, :, None]).expand(B, H, Tq, Tk)] == 0)
    with torch.no_grad():
        V = net.W_v(values).reshape(B, Tk, H, -1).permute(0, 2, 1, 3)  # (B, H, Tk, dh)
        o = (attw @ V).permute(0, 2, 1, 3).reshape(B, Tq, num_hiddens)
        assert torch.allclose(net.W_o(o), output, atol=1e-6)

    tensors = [("queries", queries.detach()), ("keys", keys.detach()), ("values", values.detach()),
               ("valid_lens", valid_lens)]
    tensors += params
    tensors += [("grad_output", grad_output), ("output", output.detach()), ("attention_weights", attw),
                ("grad.queries", queries.grad), ("grad.keys", keys.grad), ("grad.values", values.grad)]
    tensors += [("grad." + n, p.grad.detach()) for n, p in net.named_parameters()]
    tensors += stage_grads
    save_and_verify(filename, tensors,
                    common_meta(seed=str(seed), module="d2l MultiHeadAttention",
                                key_size=key_size, query_size=query_size, value_size=value_size,
                                num_hiddens=num_hiddens, num_heads=H, dropout=0, bias="False",
                                valid_lens="(B,)" if not lens2d else "(B,Tq)",
                                attention_weights="d2l (B*H,Tq,Tk) reshaped to (B,H,Tq,Tk)",
                                grad="grad.* = d/d* sum(output * grad_output)",
                                stage_grads="grad.concat (W_o input), grad.heads_out, grad.weights, grad.V_heads, "
                                            "grad.scores, grad.Q_heads, grad.K_heads (B*H, T, *), grad.Q/K/V "
                                            "(projections, B, T, num_hiddens)"))


def fixture_mha_self():
    B, T, E, H = 2, 5, 8, 2
    seed = 3001
    torch.manual_seed(seed)
    net = PlainMultiHeadAttention(E, H)
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(B, T, E, generator=g).requires_grad_(True)
    grad_output = torch.randn(B, T, E, generator=g)
    params = [(n, p.detach().clone()) for n, p in net.named_parameters()]
    output = net(x)
    (output * grad_output).sum().backward()
    # Attention weights: recomputed from the same module and input, exactly as forward() does.
    with torch.no_grad():
        hd = net.head_dim
        Q = net.query(x).view(B, -1, H, hd).transpose(1, 2)
        K = net.key(x).view(B, -1, H, hd).transpose(1, 2)
        V = net.value(x).view(B, -1, H, hd).transpose(1, 2)
        attw = F.softmax(torch.matmul(Q, K.transpose(-2, -1)) / (hd ** 0.5), dim=-1)
        o = net.out(torch.matmul(attw, V).transpose(1, 2).contiguous().view(B, -1, E))
        assert torch.equal(o, output.detach()), "recomputed attention does not reproduce the output"
    tensors = [("x", x.detach())] + params
    tensors += [("grad_output", grad_output), ("output", output.detach()), ("attention_weights", attw),
                ("grad.x", x.grad)]
    tensors += [("grad." + n, p.grad.detach()) for n, p in net.named_parameters()]
    save_and_verify("mha_self.safetensors", tensors,
                    common_meta(seed=str(seed), module="plain MultiHeadAttention(embed_dim, num_heads)",
                                embed_dim=E, num_heads=H, head_dim=E // H, bias="True", mask="none",
                                attention_weights="softmax(Q K^T / sqrt(head_dim)), (B,H,T,T), recomputed",
                                grad="grad.* = d/d* sum(output * grad_output)"))


def fixture_train_step():
    V, d, heads, layers, ffn, B, T = 11, 16, 2, 2, 32, 3, 7
    lr, betas, eps = 1e-2, (0.9, 0.999), 1e-8
    seed = 4001
    torch.manual_seed(seed)
    model = ReferenceModel(V, d, heads, layers, ffn, 0.0)
    with torch.no_grad():  # non-trivial LayerNorm affine parameters
        for name, p in model.named_parameters():
            if ".ln.weight" in name:
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            elif ".ln.bias" in name:
                p.copy_(0.1 * torch.randn_like(p))
    model.eval()  # dropout is 0 anyway

    g = torch.Generator().manual_seed(seed + 1)
    valid_lens = torch.tensor([7, 4, 5], dtype=torch.int64)
    tokens = torch.randint(1, V, (B, T), generator=g, dtype=torch.int64)
    targets = torch.zeros(B, T, dtype=torch.int64)
    for b in range(B):
        L = int(valid_lens[b])
        tokens[b, L:] = 0
        targets[b, :L] = torch.sort(tokens[b, :L]).values

    names = [n for n, _ in model.named_parameters()]
    params0 = [(n, p.detach().clone()) for n, p in model.named_parameters()]

    # float64 shadow (not stored): reports float32 round-off so tolerances can be chosen
    model64 = copy.deepcopy(model).double()

    logits = model(tokens, valid_lens)
    loss = masked_mean_ce(logits, targets, valid_lens)
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=betas, eps=eps, weight_decay=0.0,
                           amsgrad=False, foreach=False)
    opt.zero_grad()
    loss.backward()
    grads = [(n, p.grad.detach().clone()) for n, p in model.named_parameters()]
    opt.step()
    updated = [(n, p.detach().clone()) for n, p in model.named_parameters()]

    # hand-written Adam step 1 must match torch's
    for (n, p0), (_, gr), (_, p1) in zip(params0, grads, updated):
        m = (1 - betas[0]) * gr
        v = (1 - betas[1]) * gr * gr
        denom = v.sqrt() / math.sqrt(1 - betas[1]) + eps
        mine = p0 - (lr / (1 - betas[0])) * m / denom
        assert torch.allclose(mine, p1, atol=1e-7, rtol=0), n

    logits64 = model64(tokens, valid_lens)
    loss64 = masked_mean_ce(logits64, targets, valid_lens)
    loss64.backward()
    print("\n-- train_step float32 vs float64 (max |diff|), for choosing tolerances:")
    print(f"   logits {(logits.detach().double() - logits64.detach()).abs().max().item():.3e}"
          f"   loss {abs(loss.item() - loss64.item()):.3e}")
    worst = max(((gr.double() - p.grad).abs().max().item(), n)
                for (n, gr), p in zip(grads, model64.parameters()))
    print(f"   worst grad {worst[0]:.3e} ({worst[1]})")
    upd_diff = 0.0
    for (n, p0), (_, p1), p64 in zip(params0, updated, model64.parameters()):
        g64 = p64.grad
        u64 = p0.double() - (lr / (1 - betas[0])) * ((1 - betas[0]) * g64) / (
            ((1 - betas[1]) * g64 * g64).sqrt() / math.sqrt(1 - betas[1]) + eps)
        upd_diff = max(upd_diff, (p1.double() - u64).abs().max().item())
    print(f"   updated (float32 step vs Adam on float64 grads) {upd_diff:.3e}")
    nz = min(gr[gr != 0].abs().min().item() for _, gr in grads)
    print(f"   smallest nonzero |grad| {nz:.3e}")
    tiny = [(n, int(((gr != 0) & (gr.abs() < 1e-6)).sum())) for n, gr in grads]
    tiny = [t for t in tiny if t[1]]
    print(f"   elements with 0 < |grad| < 1e-6 (Adam update ill-conditioned there): {tiny or 'none'}")
    zero = [(n, int((gr == 0).sum())) for n, gr in grads if int((gr == 0).sum())]
    print(f"   exactly-zero gradient elements: {zero}")

    pe = model.pos_encoding.P[0, :T, :].clone()
    tensors = [("tokens", tokens), ("valid_lens", valid_lens), ("targets", targets), ("pos_encoding", pe),
               ("logits", logits.detach()), ("loss", loss.detach())]
    tensors += [("param." + n, p) for n, p in params0]
    tensors += [("grad." + n, gr) for n, gr in grads]
    tensors += [("updated." + n, p) for n, p in updated]
    save_and_verify("train_step.safetensors", tensors,
                    common_meta(seed=str(seed), vocab=V, d_model=d, heads=heads, layers=layers, ffn=ffn,
                                batch=B, seq_len=T, dropout=0, max_len=1000, layernorm_eps=1e-5,
                                optimizer="torch.optim.Adam single step (step=1)", lr=lr,
                                beta1=betas[0], beta2=betas[1], adam_eps=eps, weight_decay=0,
                                loss="cross-entropy summed over positions j < valid_lens[b], divided by sum(valid_lens)",
                                loss_shape="()", param_names=",".join(names),
                                task="sort: targets = valid prefix of tokens sorted ascending, 0 at padding"))


def main():
    if sys.version_info < (3, 7):
        raise SystemExit("needs python >= 3.7 (ordered dicts)")
    os.makedirs(OUT_DIR, exist_ok=True)
    fixture_masked_softmax()
    fixture_mha_d2l("mha_d2l.safetensors", lens2d=False, seed=2001)
    fixture_mha_d2l("mha_d2l_lens2d.safetensors", lens2d=True, seed=2101)
    fixture_mha_self()
    fixture_train_step()
    print("\nall fixtures written to", os.path.relpath(OUT_DIR))


if __name__ == "__main__":
    main()
