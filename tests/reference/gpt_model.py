"""The PyTorch reference for headgrad's causal language model (models/gpt.hpp) and its text data
(data/text.hpp), shared by the golden fixtures (make_text_fixtures.py) and the benchmark
(bench/torch_text_lm.py).

The model is nanoGPT's model.py (Karpathy, https://github.com/karpathy/nanoGPT) with bias=False,
written out short: its state_dict names are the names of headgrad's parameters. torch 1.13's
nn.LayerNorm cannot drop the bias, so LayerNorm is nanoGPT's own small class.

The data functions reproduce headgrad's exactly: the character vocabulary (sorted characters),
the 90/10 split, and the window offsets of every training batch and of the validation set, drawn
by headgrad::Generator (xoshiro256** seeded by splitmix64, framework/core/random.cpp), so PyTorch
trains on the very batches headgrad does without any file of them.
"""
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

# ---- the model ---------------------------------------------------------------------------------


class LayerNorm(nn.Module):
    """LayerNorm without a bias (nanoGPT's class with bias=False)."""

    def __init__(self, ndim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, None, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, dropout):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=False)  # q | k | v for all heads
        self.c_proj = nn.Linear(n_embd, n_embd, bias=False)
        self.attn_dropout = nn.Dropout(dropout)
        self.resid_dropout = nn.Dropout(dropout)
        self.n_head, self.n_embd = n_head, n_embd

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~causal, float("-inf"))
        att = self.attn_dropout(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, n_embd, ffn, dropout):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, ffn, bias=False)
        self.gelu = nn.GELU()  # exact (erf)
        self.c_proj = nn.Linear(ffn, n_embd, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, ffn, dropout):
        super().__init__()
        self.ln_1 = LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, dropout)
        self.ln_2 = LayerNorm(n_embd)
        self.mlp = MLP(n_embd, ffn, dropout)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab, block_size, n_layer, n_head, n_embd, ffn, dropout=0.0, tie_weights=True):
        super().__init__()
        self.block_size, self.tie_weights = block_size, tie_weights
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, n_embd),
            wpe=nn.Embedding(block_size, n_embd),
            drop=nn.Dropout(dropout),
            h=nn.ModuleList([Block(n_embd, n_head, ffn, dropout) for _ in range(n_layer)]),
            ln_f=LayerNorm(n_embd),
        ))
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        if tie_weights:
            self.transformer.wte.weight = self.lm_head.weight  # weight tying

    def forward(self, idx):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))

    def load_headgrad(self, tensors):
        """Loads headgrad's parameters ({name: tensor}); a tied model's file has no lm_head.weight."""
        state = dict(tensors)
        if self.tie_weights:
            state["lm_head.weight"] = state["transformer.wte.weight"]
        self.load_state_dict(state, strict=True)

    def optimizer(self, lr, weight_decay, betas):
        """nanoGPT's configure_optimizers: weight decay on the parameters of 2+ dimensions only."""
        params = [p for p in self.parameters() if p.requires_grad]
        decay = [p for p in params if p.dim() >= 2]
        nodecay = [p for p in params if p.dim() < 2]
        return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                                  {"params": nodecay, "weight_decay": 0.0}], lr=lr, betas=betas)


def lr_at(step, lr, min_lr, warmup, total):
    """headgrad's schedule (optim::LrSchedule, step from 1): linear warmup, cosine to min_lr."""
    if warmup > 0 and step <= warmup:
        return lr * step / warmup
    progress = min(1.0, (step - warmup) / max(total - warmup, 1))
    return min_lr + (lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))


# ---- headgrad's generator and the text data -----------------------------------------------------
_MASK = (1 << 64) - 1
KEVAL_SEED = 0xE7A15E7D0C0FFEE5  # data/tasks.hpp kEvalSeed


def _splitmix64(x):
    """(new state, output) of splitmix64 (framework/core/random.cpp)."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    z = x
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return x, z ^ (z >> 31)


def _rotl(x, k):
    return ((x << k) | (x >> (64 - k))) & _MASK


class Generator:
    """headgrad::Generator: xoshiro256** seeded by splitmix64; below() by rejection."""

    def __init__(self, seed):
        self.s = []
        x = seed
        for _ in range(4):
            x, z = _splitmix64(x)
            self.s.append(z)

    def next_u64(self):
        s = self.s
        result = (_rotl((s[1] * 5) & _MASK, 7) * 9) & _MASK
        t = (s[1] << 17) & _MASK
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = _rotl(s[3], 45)
        return result

    def below(self, n):
        limit = _MASK - _MASK % n
        while True:
            x = self.next_u64()
            if x < limit:
                return x % n


def mix_seed(seed, index):
    _, h = _splitmix64(seed)
    x = h ^ ((index * 0xD1B54A32D192ED03) & _MASK)
    _, out = _splitmix64(x)
    return out


DEFAULT_CORPUS_DIR = "/usr/share/games/fortunes"  # data/text.hpp kDefaultCorpusDir


def read_corpus(path=""):
    """The text headgrad reads for --text path ("" = the default corpus), as bytes."""
    if path:
        with open(path, "rb") as f:
            return f.read()
    names = sorted(n for n in os.listdir(DEFAULT_CORPUS_DIR)
                   if not n.endswith(".dat") and os.path.isfile(os.path.join(DEFAULT_CORPUS_DIR, n))
                   and not os.path.islink(os.path.join(DEFAULT_CORPUS_DIR, n)))
    return b"".join(open(os.path.join(DEFAULT_CORPUS_DIR, n), "rb").read() for n in names)


class TextCorpus:
    """Tokens of the text (chars: the sorted characters, or bytes), and the 90/10 split."""

    def __init__(self, raw, tokenizer="chars"):
        if tokenizer == "bytes":
            self.vocab = [bytes([b]) for b in range(256)]
            self.tokens = torch.tensor(list(raw), dtype=torch.long)
        else:
            text = raw.decode("utf-8")
            chars = sorted(set(text))
            stoi = {c: i for i, c in enumerate(chars)}
            self.vocab = chars
            self.tokens = torch.tensor([stoi[c] for c in text], dtype=torch.long)
        self.train_tokens = len(self.tokens) * 9 // 10

    def batch_offsets(self, context, seed, index, batch):
        g = Generator(mix_seed(seed, index))
        return [g.below(self.train_tokens - context) for _ in range(batch)]

    def eval_offsets(self, context, count):
        g = Generator(KEVAL_SEED)
        span = len(self.tokens) - self.train_tokens
        return [self.train_tokens + g.below(span - context) for _ in range(count)]

    def windows(self, offsets, context):
        """x (B, T) and y (B, T): data[o : o + T] and data[o + 1 : o + T + 1]."""
        x = torch.stack([self.tokens[o:o + context] for o in offsets])
        y = torch.stack([self.tokens[o + 1:o + context + 1] for o in offsets])
        return x, y


# ---- headgrad's initialisation (models/gpt.cpp), reproduced ---------------------------------------
def _normal_stream(gen):
    """headgrad::Generator::normal: Box-Muller, the second value kept for the next call."""
    while True:
        u1 = (gen.next_u64() >> 11) * 2.0 ** -53
        while u1 <= 0.0:
            u1 = (gen.next_u64() >> 11) * 2.0 ** -53
        u2 = (gen.next_u64() >> 11) * 2.0 ** -53
        r = math.sqrt(-2.0 * math.log(u1))
        a = 2.0 * math.pi * u2
        yield r * math.cos(a)
        yield r * math.sin(a)


def headgrad_init(model, seed, n_layer):
    """The weights headgrad's GPT(config, seed) starts from: N(0, 0.02) for every Linear and
    Embedding weight, N(0, 0.02 / sqrt(2 n_layer)) for the c_proj weights, LayerNorm gains 1,
    drawn in parameter order from Generator(mix_seed(seed, "INIT"))."""
    normal = _normal_stream(Generator(mix_seed(seed, 0x494E4954)))
    proj_std = 0.02 / math.sqrt(2.0 * n_layer)
    with torch.no_grad():
        for name, p in model.named_parameters():  # a tied lm_head is wte, listed once
            if name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
                p.fill_(1.0)
                continue
            std = proj_std if name.endswith("c_proj.weight") else 0.02
            values = [next(normal) * std for _ in range(p.numel())]
            p.copy_(torch.tensor(values, dtype=torch.float64).reshape(p.shape))


# ---- scoring a headgrad checkpoint in PyTorch ---------------------------------------------------
def load_checkpoint(path):
    """(model in eval mode, metadata) from a model.safetensors of `headgrad train --task text`."""
    from make_fixtures import read_safetensors  # numpy only; imported here so the model needs none
    tensors, meta = read_safetensors(path)
    model = GPT(int(meta["vocab"]), int(meta["context"]), int(meta["layers"]), int(meta["heads"]),
                int(meta["d_model"]), int(meta["ffn"]), tie_weights=meta["tie_weights"] == "on")
    model.load_headgrad({n: torch.from_numpy(a.copy()) for n, a in tensors})
    model.eval()
    return model, meta


def main(argv):
    """gpt_model.py CHECKPOINT [COUNT]: the validation loss of a headgrad checkpoint in PyTorch, on
    the validation windows `headgrad eval --checkpoint CHECKPOINT --eval-count COUNT` scores."""
    path, count = argv[1], int(argv[2]) if len(argv) > 2 else 1000
    model, meta = load_checkpoint(path)
    corpus = TextCorpus(read_corpus(meta["text"]), meta["tokenizer"])
    vocab, T = len(corpus.vocab), int(meta["context"])
    assert vocab == int(meta["vocab"]), f"the text has {vocab} tokens, the checkpoint {meta['vocab']}"
    offsets = corpus.eval_offsets(T, count)
    total, n = 0.0, 0
    with torch.no_grad():
        for s in range(0, count, 256):
            x, y = corpus.windows(offsets[s:s + 256], T)
            total += F.cross_entropy(model(x).view(-1, vocab), y.view(-1), reduction="sum").item()
            n += y.numel()
    loss = total / n
    print(f"PyTorch {torch.__version__}: {path} (step {meta['step']}): {count} validation windows of {T} tokens: "
          f"loss {loss:.4f} ({loss / math.log(2):.3f} bits per token)")
    return 0


if __name__ == "__main__":
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.exit(main(sys.argv))
