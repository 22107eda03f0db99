#!/usr/bin/python3
"""The numbers of `headgrad explain --fixture tests/reference/fixtures/mha_d2l.safetensors`, from
PyTorch: d2l's multi-head attention in float64 on the fixture's inputs and weights, backward from
its grad_output R, every gradient printed in the order explain prints them, with the names of
docs/backprop-through-attention.md's glossary. Run it from the repository root with Debian's
python3-torch, then change anything and look again:

    /usr/bin/python3 docs/exercises/mha_fixture.py [FIXTURE] [--precision N]
"""
import argparse
import json
import math
import struct

import numpy as np
import torch


def load(path):
    """A safetensors file: an 8-byte header size, a JSON header, the tensors' raw bytes."""
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    kinds, data = {"F32": "<f4", "F64": "<f8", "I64": "<i8"}, raw[8 + n:]
    tensors = {}
    for name, t in header.items():
        begin, end = t["data_offsets"]
        tensors[name] = torch.from_numpy(np.frombuffer(data[begin:end], kinds[t["dtype"]]).reshape(t["shape"]).copy())
    return tensors, meta


cli = argparse.ArgumentParser(description="explain --fixture's numbers, from PyTorch")
cli.add_argument("fixture", nargs="?", default="tests/reference/fixtures/mha_d2l.safetensors")
cli.add_argument("--precision", type=int, default=4, help="decimals printed (explain's --precision)")
args = cli.parse_args()
precision = args.precision
f, meta = load(args.fixture)
H = int(meta["num_heads"])
queries, keys, values = (f[n].double().requires_grad_() for n in ("queries", "keys", "values"))
W_q, W_k, W_v, W_o = (f[n + ".weight"].double().requires_grad_() for n in ("W_q", "W_k", "W_v", "W_o"))
B, Tq, Tk = queries.shape[0], queries.shape[1], keys.shape[1]

# ---- d2l's MultiHeadAttention, op by op (the ~10 lines of torch) ----
Q, K, V = queries @ W_q.T, keys @ W_k.T, values @ W_v.T                           # (B, T, h)
qkv = lambda Z: Z.reshape(B, Z.shape[1], H, -1).permute(0, 2, 1, 3).reshape(B * H, Z.shape[1], -1)
Qh, Kh, Vh = qkv(Q), qkv(K), qkv(V)                                               # transpose_qkv: (B*H, T, d)
S = Qh @ Kh.transpose(1, 2) / math.sqrt(Qh.shape[-1])                             # the scores
lens = f["valid_lens"].repeat_interleave(H, dim=0)                                # (B*H) or (B*H, Tq)
keep = torch.arange(Tk) < (lens[:, None, None] if lens.dim() == 1 else lens[:, :, None])
P = torch.softmax(S.masked_fill(~keep, -1e6), dim=-1)                             # d2l's masked_softmax
O = P @ Vh                                                                        # (B*H, Tq, d)
C = O.reshape(B, H, Tq, -1).permute(0, 2, 1, 3).reshape(B, Tq, -1)                # transpose_output
Y = C @ W_o.T                                                                     # (B, Tq, h)
for t in (Q, K, V, Qh, Kh, Vh, S, P, O, C, Y):
    t.retain_grad()
(Y * f["grad_output"].double()).sum().backward()                                  # L = sum(Y * R)

torch.set_printoptions(precision=precision, sci_mode=False, linewidth=120)
for name, t in [("dY = R", Y), ("dC = dY W_o", C), ("d W_o.weight = dY^T C", W_o), ("dO", O), ("dP = dO Vh^T", P),
                ("dVh = P^T dO", Vh), ("dS = P * (dP - rowsum(dP * P))", S), ("dQh = s dS Kh", Qh),
                ("dKh = s dS^T Qh", Kh), ("dQ", Q), ("dK", K), ("dV", V), ("d W_q.weight = dQ^T queries", W_q),
                ("d W_k.weight = dK^T keys", W_k), ("d W_v.weight = dV^T values", W_v),
                ("d queries = dQ W_q", queries), ("d keys = dK W_k", keys), ("d values = dV W_v", values)]:
    print(name, list(t.grad.shape))
    print(t.grad)
