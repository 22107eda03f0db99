"""The PyTorch reference model the C++ side is compared with: d2l's attention code (d2l.ai,
"Attention Mechanisms and Transformers": masked_softmax with its -1e6 fill, DotProductAttention,
transpose_qkv / transpose_output, MultiHeadAttention, and the Transformer encoder pieces), the plain
PyTorch self-attention module MultiHeadAttention(embed_dim, num_heads), the reference sequence model
(encoder + output layer, parameter names = headgrad's) and its masked mean cross-entropy.

Shared by tests/reference/make_fixtures.py (the golden fixtures) and bench/torch_reference.py (the
benchmark's PyTorch side), so both run the same model.
"""
import math

import torch
from torch import nn
import torch.nn.functional as F


def sequence_mask(X, valid_len, value=0):
    """Set X[i, j] = value for every j >= valid_len[i]. X: (rows, cols), valid_len: (rows,)."""
    maxlen = X.size(1)
    mask = torch.arange((maxlen), dtype=torch.float32, device=X.device)[None, :] < valid_len[:, None]
    X[~mask] = value
    return X


def masked_softmax(X, valid_lens):
    """d2l: softmax over the last axis after filling positions >= valid_len with -1e6.
    X: 3-D (B, Q, K); valid_lens: None, (B,) (one length per batch row, shared by all Q), or (B, Q)."""
    if valid_lens is None:
        return nn.functional.softmax(X, dim=-1)
    else:
        shape = X.shape
        if valid_lens.dim() == 1:
            valid_lens = torch.repeat_interleave(valid_lens, shape[1])
        else:
            valid_lens = valid_lens.reshape(-1)
        X = sequence_mask(X.reshape(-1, shape[-1]), valid_lens, value=-1e6)
        return nn.functional.softmax(X.reshape(shape), dim=-1)


class DotProductAttention(nn.Module):
    def __init__(self, dropout, **kwargs):
        super(DotProductAttention, self).__init__(**kwargs)
        self.dropout = nn.Dropout(dropout)

    # queries: (B, Q, d), keys: (B, K, d), values: (B, K, v), valid_lens: (B,) or (B, Q)
    def forward(self, queries, keys, values, valid_lens=None):
        d = queries.shape[-1]
        scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
        self.attention_weights = masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(self.attention_weights), values)


def transpose_qkv(X, num_heads):
    # (B, T, H*dh) -> (B, T, H, dh) -> (B, H, T, dh) -> (B*H, T, dh)
    X = X.reshape(X.shape[0], X.shape[1], num_heads, -1)
    X = X.permute(0, 2, 1, 3)
    return X.reshape(-1, X.shape[2], X.shape[3])


def transpose_output(X, num_heads):
    # (B*H, T, dh) -> (B, H, T, dh) -> (B, T, H, dh) -> (B, T, H*dh)
    X = X.reshape(-1, num_heads, X.shape[1], X.shape[2])
    X = X.permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)


class MultiHeadAttention(nn.Module):  # d2l.ai, "Multi-Head Attention"
    def __init__(self, key_size, query_size, value_size, num_hiddens, num_heads, dropout, bias=False, **kwargs):
        super(MultiHeadAttention, self).__init__(**kwargs)
        self.num_heads = num_heads
        self.attention = DotProductAttention(dropout)
        self.W_q = nn.Linear(query_size, num_hiddens, bias=bias)
        self.W_k = nn.Linear(key_size, num_hiddens, bias=bias)
        self.W_v = nn.Linear(value_size, num_hiddens, bias=bias)
        self.W_o = nn.Linear(num_hiddens, num_hiddens, bias=bias)

    def forward(self, queries, keys, values, valid_lens):
        queries = transpose_qkv(self.W_q(queries), self.num_heads)
        keys = transpose_qkv(self.W_k(keys), self.num_heads)
        values = transpose_qkv(self.W_v(values), self.num_heads)
        if valid_lens is not None:
            # Copy item 0 num_heads times, then item 1, ...: row b*H + h belongs to batch b, head h,
            # which is exactly the row order transpose_qkv produces.
            valid_lens = torch.repeat_interleave(valid_lens, repeats=self.num_heads, dim=0)
        output = self.attention(queries, keys, values, valid_lens)
        output_concat = transpose_output(output, self.num_heads)
        return self.W_o(output_concat)


class PlainMultiHeadAttention(nn.Module):  # the plain PyTorch self-attention module
    def __init__(self, embed_dim, num_heads):
        super(PlainMultiHeadAttention, self).__init__()
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        assert self.head_dim * num_heads == embed_dim, "embed_dim must be divisible by num_heads"
        self.query = nn.Linear(embed_dim, embed_dim)
        self.key = nn.Linear(embed_dim, embed_dim)
        self.value = nn.Linear(embed_dim, embed_dim)
        self.out = nn.Linear(embed_dim, embed_dim)

    def forward(self, x):
        batch_size = x.size(0)
        Q = self.query(x).view(batch_size, -1, self.num_heads, self.head_dim).transpose(1, 2)
        K = self.key(x).view(batch_size, -1, self.num_heads, self.head_dim).transpose(1, 2)
        V = self.value(x).view(batch_size, -1, self.num_heads, self.head_dim).transpose(1, 2)
        attention_scores = torch.matmul(Q, K.transpose(-2, -1)) / (self.head_dim ** 0.5)
        attention_scores = F.softmax(attention_scores, dim=-1)
        attention_output = torch.matmul(attention_scores, V).transpose(1, 2).contiguous().view(batch_size, -1, self.embed_dim)
        output = self.out(attention_output)
        return output


class PositionalEncoding(nn.Module):  # d2l
    """d2l's sinusoidal table, or the given table P (T, d) (the benchmark passes headgrad's, so the
    first-step losses of both sides can be compared to ~1e-6)."""

    def __init__(self, num_hiddens, dropout, max_len=1000, P=None):
        super(PositionalEncoding, self).__init__()
        self.dropout = nn.Dropout(dropout)
        if P is not None:
            self.P = P[None]  # (1, T, d), a plain attribute as in d2l: not in the state_dict
            return
        self.P = torch.zeros((1, max_len, num_hiddens))  # plain attribute: not in the state_dict
        X = torch.arange(max_len, dtype=torch.float32).reshape(-1, 1) / torch.pow(
            10000, torch.arange(0, num_hiddens, 2, dtype=torch.float32) / num_hiddens)
        self.P[:, :, 0::2] = torch.sin(X)
        self.P[:, :, 1::2] = torch.cos(X)

    def forward(self, X):
        X = X + self.P[:, :X.shape[1], :].to(X.device, X.dtype)
        return self.dropout(X)


class PositionWiseFFN(nn.Module):  # d2l
    def __init__(self, ffn_num_input, ffn_num_hiddens, ffn_num_outputs, **kwargs):
        super(PositionWiseFFN, self).__init__(**kwargs)
        self.dense1 = nn.Linear(ffn_num_input, ffn_num_hiddens)
        self.relu = nn.ReLU()
        self.dense2 = nn.Linear(ffn_num_hiddens, ffn_num_outputs)

    def forward(self, X):
        return self.dense2(self.relu(self.dense1(X)))


class AddNorm(nn.Module):  # d2l
    def __init__(self, normalized_shape, dropout, **kwargs):
        super(AddNorm, self).__init__(**kwargs)
        self.dropout = nn.Dropout(dropout)
        self.ln = nn.LayerNorm(normalized_shape)  # eps 1e-5

    def forward(self, X, Y):
        return self.ln(self.dropout(Y) + X)


class EncoderBlock(nn.Module):  # d2l
    def __init__(self, key_size, query_size, value_size, num_hiddens, norm_shape, ffn_num_input,
                 ffn_num_hiddens, num_heads, dropout, use_bias=False, **kwargs):
        super(EncoderBlock, self).__init__(**kwargs)
        self.attention = MultiHeadAttention(key_size, query_size, value_size, num_hiddens, num_heads, dropout, use_bias)
        self.addnorm1 = AddNorm(norm_shape, dropout)
        self.ffn = PositionWiseFFN(ffn_num_input, ffn_num_hiddens, num_hiddens)
        self.addnorm2 = AddNorm(norm_shape, dropout)

    def forward(self, X, valid_lens):
        Y = self.addnorm1(X, self.attention(X, X, X, valid_lens))
        return self.addnorm2(Y, self.ffn(Y))


class ReferenceModel(nn.Module):
    """d2l TransformerEncoder + an output Linear. Blocks are named blks.0, blks.1, ... (d2l itself
    names them blks.block0; integer names are what nn.Sequential gives and what the C++ side uses)."""

    def __init__(self, vocab, d, heads, layers, ffn, dropout, P=None):
        super().__init__()
        self.num_hiddens = d
        self.embedding = nn.Embedding(vocab, d)
        self.pos_encoding = PositionalEncoding(d, dropout, P=P)
        self.blks = nn.Sequential(*[EncoderBlock(d, d, d, d, [d], d, ffn, heads, dropout, False) for _ in range(layers)])
        self.dense = nn.Linear(d, vocab)

    def forward(self, tokens, valid_lens):
        X = self.pos_encoding(self.embedding(tokens) * math.sqrt(self.num_hiddens))
        for blk in self.blks:
            X = blk(X, valid_lens)
        return self.dense(X)


def masked_mean_ce(logits, targets, valid_lens):
    """sum over b, j < valid_lens[b] of -log softmax(logits[b, j])[targets[b, j]] / #valid positions."""
    B, T, V = logits.shape
    nll = F.cross_entropy(logits.reshape(B * T, V), targets.reshape(B * T), reduction="none").reshape(B, T)
    mask = (torch.arange(T)[None, :] < valid_lens[:, None]).to(logits.dtype)
    return (nll * mask).sum() / mask.sum()
