#!/usr/bin/env python3
"""Loads the model char_lm saved into PyTorch and checks it computes what headgrad computed.

    python3 load_in_pytorch.py [char_lm.safetensors]

The file holds the parameters under this module's state_dict names, and in its metadata the
model's sizes, its vocabulary, a held-out window with headgrad's loss on it, and headgrad's greedy
continuation of "Alice". This script rebuilds the model with torch.nn modules
(nn.MultiheadAttention takes the packed in_proj_weight as it is), loads the state_dict strictly,
and compares. It reads the file with the `safetensors` package when installed, else by hand (the
format is 8 bytes of header length, a JSON header, then the raw little-endian data).
"""
import json
import math
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

DTYPES = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64, "BOOL": torch.bool}


def read_safetensors(path):
    """(tensors by name, metadata) of a safetensors file."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    metadata = header.pop("__metadata__", {})
    try:
        from safetensors.torch import load_file
        return load_file(path), metadata
    except ImportError:
        pass
    body = data[8 + n:]
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        flat = torch.frombuffer(bytearray(body[begin:end]), dtype=DTYPES[info["dtype"]])
        tensors[name] = flat.reshape(info["shape"])
    return tensors, metadata


class Block(nn.Module):
    def __init__(self, d_model, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = nn.MultiheadAttention(d_model, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc = nn.Linear(d_model, 4 * d_model)
        self.proj = nn.Linear(4 * d_model, d_model)

    def forward(self, x):
        T = x.shape[1]
        future = torch.ones(T, T, dtype=torch.bool).triu(1)  # True: query i may not see key j > i
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=future, need_weights=False)[0]
        return x + self.proj(F.gelu(self.fc(self.ln2(x))))


class CharLM(nn.Module):
    def __init__(self, vocab, context, d_model, heads):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab, d_model)
        self.pos_emb = nn.Embedding(context, d_model)
        self.block = Block(d_model, heads)
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, tokens):  # (B, T) -> (B, T, vocab)
        x = self.tok_emb(tokens) + self.pos_emb(torch.arange(tokens.shape[1]))
        return self.head(self.ln_f(self.block(x)))


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "char_lm.safetensors"
    tensors, meta = read_safetensors(path)
    vocab = meta["vocab"]
    context, d_model, heads = int(meta["context"]), int(meta["d_model"]), int(meta["heads"])
    model = CharLM(len(vocab), context, d_model, heads)
    model.load_state_dict(tensors, strict=True)  # every name and shape must match
    model.eval()
    print(f"torch {torch.__version__}: loaded {len(tensors)} tensors from {path} "
          f"({sum(t.numel() for t in tensors.values())} parameters) with strict=True")

    encode = lambda s: torch.tensor([[vocab.index(c) for c in s]])
    window = encode(meta["check_text"])
    with torch.no_grad():
        logits = model(window[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, len(vocab)), window[0, 1:]).item()
        text = "Alice"
        for _ in range(len(meta["greedy"]) - len(text)):
            nxt = model(encode(text[-context:]))[0, -1].argmax().item()
            text += vocab[nxt]
    theirs = float(meta["check_loss"])
    print(f"held-out window loss: PyTorch {loss:.7f}, headgrad {theirs:.7f}, |difference| {abs(loss - theirs):.2e}")
    print(f"greedy, PyTorch:  {text!r}")
    print(f"greedy, headgrad: {meta['greedy']!r}  ({'same' if text == meta['greedy'] else 'DIFFERENT'})")
    ok = math.isclose(loss, theirs, rel_tol=1e-5, abs_tol=1e-6)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
