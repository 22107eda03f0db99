#!/usr/bin/python3
"""Generate the differential-test fixture: thousands of seeded random cases of headgrad's op API
computed by PyTorch, which tests/test_differential.cpp replays without torch.

Run by hand from the repository root with the Debian PyTorch (1.13):

    /usr/bin/python3 tests/reference/make_op_cases.py

It writes tests/reference/fixtures/op_cases.safetensors (committed; CI has no torch). Everything is
seeded: a rerun on the same torch build and CPU gives a byte-identical file (matmul and linear
results follow the BLAS kernel chosen for the CPU in their last bits).

A family is a generator of cases registered with @family: its name, its number of cases, and the
PyTorch twins of the ops it brings (each computes the op's outputs from its inputs, read through
their views, and its parameters; tests/test_differential.cpp replays the case through the call
headgrad registers under the op's name, framework/checks/registry.hpp). The generators draw from
one random stream in the order they are registered, so a new op's generator, registered after the
last one, leaves every earlier case (and its offsets) as it was.

Every case is one call of one op: its inputs (float32 or float64, int64 indices, bool masks),
optionally read through a chain of views (transpose, permute, a stepped slice, expand, unsqueeze -
the gradient then belongs to the tensor under the view), the op's parameters, its outputs, and
for each float input the gradient of L = sum over the float outputs of sum(out * R), with R a
random tensor stored alongside. Shapes include size-0 and size-1 axes; many float inputs carry
NaN, +-inf, signed zeros and huge or tiny values.

Where headgrad documents a difference from PyTorch (framework/ops/DERIVATIVES.md), the generator
avoids that input rather than encoding the difference: a softmax row of nothing but -inf (or a
masked row keeping only -inf keys), a mean, var or std over an empty axis, a cross-entropy mean
with nothing counted, a masked softmax with a zero length, float32 mixed with float64 in
arithmetic (both dimensioned or both 0-d), integer-only arithmetic, float32 gradients of 1e19 and
more for clip_grad_norm. One is encoded instead, because headgrad's answer is the exact one:
layer norm rows whose squared deviations overflow, whose reference is PyTorch's layer_norm of the
row scaled by a power of two (t_layer_norm's ref_exp).

So the families of the second round (softmax_special, large_logits, layer_norm_overflow, clip,
correction, accepted), then masks (every form of AttentionMask), and the third round (linear_gelu,
linear_residual, sum_to, linear_relu, self_attention, in families of the first) come after all
the others.

File layout (safetensors, written with make_fixtures.write_safetensors):
  data.f32, data.f64, data.i64   every tensor's elements, back to back, in one flat tensor per
                                 storage type (bool tensors are stored as 0/1 in data.i64)
  __metadata__["cases"]          JSON list, one object per case:
      {"f": family, "op": op name, "p": {parameters}, "in": [ref], "v": [view chain or null],
       "out": [ref], "R": [ref or null], "g": [ref or null]}
    ref = [dtype, offset, shape]; dtype is f32, f64, i64 or bool, offset counts elements of the
    storage type's tensor. "g"[i] is null when input i is not float or L does not depend on it.
    A view chain is a list of steps applied in order to the stored input: ["t", a, b] transpose,
    ["p", order] permute, ["s", axis, start, stop, step] slice (Python bounds), ["e", shape]
    expand, ["u", axis] unsqueeze.
    Float32 cases (float inputs all float32) also have "out64" and "g64": PyTorch's results for
    the same inputs and R computed in float64 (null where not float).
  __metadata__["families"]       JSON object: family -> number of cases
"""
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from d2l_model import masked_softmax as d2l_masked_softmax  # noqa: E402
from make_fixtures import read_safetensors, write_safetensors  # noqa: E402

OUT = os.path.join(HERE, "fixtures", "op_cases.safetensors")
SEED = 15
# The fixture is committed and each regeneration rewrites it in the history: kept small (4.5 MiB).
MAX_FILE_BYTES = 9 * 512 * 1024

torch.set_num_threads(1)
rng = np.random.default_rng(SEED)

NP = {"f32": np.float32, "f64": np.float64, "i64": np.int64, "bool": np.bool_}
TORCH = {"f32": torch.float32, "f64": torch.float64, "i64": torch.int64, "bool": torch.bool}
SPECIALS = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1e30, -1e30, 1e-30, 3.5, -2.0]


# --------------------------------------------------------------------------------------------
# random inputs
# --------------------------------------------------------------------------------------------
def chance(p):
    return rng.random() < p


def pick(seq):
    return seq[int(rng.integers(len(seq)))]


def rand_size(zero=0.06, one=0.25, high=5):
    r = rng.random()
    if r < zero:
        return 0
    if r < zero + one:
        return 1
    return int(rng.integers(2, high + 1))


def rand_shape(lo=0, hi=3, zero=0.06, one=0.25, high=5):
    return tuple(rand_size(zero, one, high) for _ in range(int(rng.integers(lo, hi + 1))))


def values(shape, kind="normal", special=0.0):
    """float64 array of `shape`: normal, positive (U(0.5, 2)), ints (small integers: ties),
    distinct (a permuted grid, no ties), wide (N(0, 10)); `special` is the chance that an element
    is replaced by NaN, an infinity, a signed zero or a huge or tiny value."""
    n = int(np.prod(shape)) if shape else 1
    if kind == "normal":
        a = rng.standard_normal(n)
    elif kind == "positive":
        a = rng.uniform(0.5, 2.0, n)
    elif kind == "ints":
        a = rng.integers(-3, 4, n).astype(np.float64)
    elif kind == "distinct":
        a = (rng.permutation(n) - n / 2) * 0.37
    elif kind == "wide":
        a = rng.standard_normal(n) * 10
    else:
        raise ValueError(kind)
    if special:
        for i in range(n):
            if rng.random() < special:
                a[i] = pick(SPECIALS)
    return a.reshape(shape)


def broadcast_operand(out_shape):
    """A shape that broadcasts to out_shape: leading axes dropped, some axes set to 1."""
    s = list(out_shape[int(rng.integers(0, len(out_shape) + 1)):]) if chance(0.3) else list(out_shape)
    return tuple(1 if chance(0.25) else d for d in s)


# --------------------------------------------------------------------------------------------
# views as inputs: a stored base and a chain of view ops that reads it as the wanted shape
# --------------------------------------------------------------------------------------------
def view_chain(shape):
    """(base shape, chain) with apply_chain(base, chain).shape == shape, or (shape, None)."""
    kinds = ["t", "p", "s", "e", "u"]
    kind = pick(kinds)
    r = len(shape)
    if kind == "t" and r >= 2:
        a, b = sorted(rng.choice(r, 2, replace=False).tolist())
        base = list(shape)
        base[a], base[b] = base[b], base[a]
        return tuple(base), [["t", a, b]]
    if kind == "p" and r >= 2:
        order = rng.permutation(r).tolist()
        base = [0] * r
        for i, o in enumerate(order):
            base[o] = shape[i]
        return tuple(base), [["p", order]]
    if kind == "s" and r >= 1:
        # x[start:stop:step] of a longer axis reads exactly n elements
        axis = int(rng.integers(r))
        n, step, start = shape[axis], int(rng.integers(1, 4)), int(rng.integers(0, 3))
        stop = start + (n - 1) * step + 1 if n else start
        length = stop + int(rng.integers(0, 3))
        base = list(shape)
        base[axis] = length
        if chance(0.5):  # the same bounds counted from the end (a stop at the end: beyond it, clamped)
            start, stop = start - length, (stop - length if stop < length else length + 5)
        return tuple(base), [["s", axis, start, stop, step]]
    if kind == "e" and r >= 1 and any(d != 1 for d in shape):
        base = [1 if (d != 1 and chance(0.5)) else d for d in shape]
        if r >= 2 and base[0] == 1 and chance(0.3):
            base = base[1:]  # a leading axis the expand adds
        if tuple(base) == tuple(shape):
            return shape, None
        return tuple(base), [["e", list(shape)]]
    if kind == "u" and 1 in shape:
        axis = shape.index(1)
        return tuple(d for i, d in enumerate(shape) if i != axis), [["u", axis]]
    return shape, None


def apply_chain(t, chain):
    for step in chain or []:
        if step[0] == "t":
            t = t.transpose(step[1], step[2])
        elif step[0] == "p":
            t = t.permute(*step[1])
        elif step[0] == "s":
            idx = [slice(None)] * t.dim()
            idx[step[1]] = slice(step[2], step[3], step[4])
            t = t[tuple(idx)]
        elif step[0] == "e":
            t = t.expand(*step[1])
        elif step[0] == "u":
            t = t.unsqueeze(step[1])
    return t


class Inp:
    """One input: its values (float64 numpy, ints, bools), dtype, an optional view chain, and
    whether it is differentiable (a float mask or weight the op treats as a constant is not)."""

    def __init__(self, arr, dtype, chain=None, grad=True):
        self.arr, self.dtype, self.chain = np.asarray(arr), dtype, chain
        self.grad = grad and dtype in ("f32", "f64")


def fin(shape, dt, kind="normal", special=0.0, view=0.25):
    """A float input of `shape`, read through a random view chain with probability `view`."""
    if view and chance(view):
        base, chain = view_chain(tuple(shape))
        if chain is not None:
            # the values the op sees must be generated for the base (expand repeats them)
            return Inp(values(base, kind, special), dt, chain)
    return Inp(values(tuple(shape), kind, special), dt)


def iin(arr):
    return Inp(np.asarray(arr, dtype=np.int64), "i64")


def bin_(arr):
    return Inp(np.asarray(arr, dtype=np.bool_), "bool")


# --------------------------------------------------------------------------------------------
# the ops, as PyTorch computes them (the names and parameters of headgrad's API)
# --------------------------------------------------------------------------------------------
def dims_or_all(x, axes):
    return tuple(axes) if axes else tuple(range(x.dim()))


def t_sum(x, p):
    if not p["axes"] and not p["keepdim"]:
        return [x.sum()]
    return [torch.sum(x, dim=dims_or_all(x, p["axes"]), keepdim=p["keepdim"])]


def t_mean(x, p):
    if not p["axes"] and not p["keepdim"]:
        return [x.mean()]
    return [torch.mean(x, dim=dims_or_all(x, p["axes"]), keepdim=p["keepdim"])]


def t_slice(x, p):
    if p["step"] is None:  # the strict 4-argument form: a plain range
        return [x.narrow(p["axis"], p["start"], p["stop"] - p["start"])]
    idx = [slice(None)] * x.dim()
    idx[p["axis"]] = slice(p["start"], p["stop"], p["step"])
    return [x[tuple(idx)]]


def t_cross_entropy(x, p):
    logits, t = x[0], x[1]
    V = logits.shape[-1]
    if len(x) < 3:
        w = torch.ones(t.shape, dtype=logits.dtype)
    elif x[2].is_floating_point():  # a float mask is the weight itself
        w = x[2].detach()
    else:  # a bool or int64 mask counts its nonzero positions
        w = (x[2] != 0).to(logits.dtype)
    ii = p["ignore_index"]
    l = F.cross_entropy(logits.reshape(-1, V), t.reshape(-1), reduction="none",
                        ignore_index=ii if ii is not None else -100).reshape(t.shape)
    if ii is not None:
        w = w * (t != ii).to(w.dtype)
    l = l * w
    if p["reduction"] == "none":
        return [l]
    if p["reduction"] == "sum":
        return [l.sum()]
    return [l.sum() / w.sum()]


def keep_of(masks, p, B, Tq, Tk):
    """The boolean (B, 1 or H, Tq, Tk) mask of an AttentionMask: the inputs `masks` are valid_lens
    (int64 (B) or (B, Tq)) when p["lens"] (absent: when there is a mask input at all, the first
    cases' form), then keep (bool (B, Tk), (B, Tq, Tk) or per head (B, H, Tq, Tk)) when p["keep"];
    p["causal"] keeps key j for query i when j <= i."""
    keep = torch.ones(B, 1, Tq, Tk, dtype=torch.bool)
    i = 0
    if p.get("lens", len(masks) > 0):
        lens = masks[0] if masks[0].dim() == 2 else masks[0][:, None].expand(B, Tq)
        keep = keep & (torch.arange(Tk)[None, None, None, :] < lens[:, None, :, None])
        i = 1
    if p.get("causal"):
        keep = keep & (torch.arange(Tk)[None, :] <= torch.arange(Tq)[:, None])[None, None]
    if p.get("keep"):
        k = masks[i]
        keep = keep & (k[:, None, None, :] if k.dim() == 2 else k[:, None] if k.dim() == 3 else k)
    return keep


def t_attention(x, p):
    q, k, v = x[0], x[1], x[2]
    H = p["heads"]
    B, Tq, C = q.shape
    Tk, dh = k.shape[1], C // H
    split = lambda t: t.reshape(B, t.shape[1], H, dh).permute(0, 2, 1, 3)  # noqa: E731
    scale = p.get("scale") or 0  # 0 (or absent): d2l's 1 / sqrt(head_dim)
    s = split(q) @ split(k).transpose(-1, -2)
    s = s * scale if scale else s / math.sqrt(dh)
    a = s.masked_fill(~keep_of(x[3:], p, B, Tq, Tk), -math.inf).softmax(-1)
    return [(a @ split(v)).permute(0, 2, 1, 3).reshape(B, Tq, C)]


def t_masked_softmax_mask(x, p):
    """masked_softmax(x, AttentionMask) for x (B, Tq, Tk) or (B, H, Tq, Tk)."""
    s = x[0] if x[0].dim() == 4 else x[0][:, None]
    B, _, Tq, Tk = s.shape
    y = s.masked_fill(~keep_of(x[1:], p, B, Tq, Tk), -math.inf).softmax(-1)
    return [y if x[0].dim() == 4 else y[:, 0]]


def t_layer_norm(x, p):
    """F.layer_norm over the last axis; weight and bias optional (None where p says so). With
    p["ref_exp"] = k it is computed as layer_norm(x 2^-k, eps 2^-2k) - the same function exactly
    (power-of-two scaling is exact, and x-hat does not change) - for rows whose squared deviations
    overflow the dtype, where PyTorch's own layer_norm returns NaN (a documented difference) and
    headgrad gives the exact value."""
    w = x[1] if len(x) > 1 and not p.get("no_weight") else None
    b = x[-1] if len(x) > 1 and not p.get("no_bias") else None
    if len(x) == 2:  # one affine tensor: which one p says
        w, b = (None, x[1]) if p.get("no_weight") else (x[1], None)
    k = p.get("ref_exp")
    if k is None:
        return [F.layer_norm(x[0], (x[0].shape[-1],), w, b, p["eps"])]
    return [F.layer_norm(x[0] * 2.0 ** -k, (x[0].shape[-1],), w, b, p["eps"] * 2.0 ** (-2 * k))]


def t_clip_grad_norm(x, p):
    """torch.nn.utils.clip_grad_norm_ over parameters whose gradients are the inputs: the norm (0-d)
    and the clipped gradients."""
    params = []
    for g in x:
        t = torch.zeros_like(g, requires_grad=True)
        t.grad = g.detach().clone()
        params.append(t)
    norm = torch.nn.utils.clip_grad_norm_(params, p["max_norm"])
    return [norm.to(x[0].dtype)] + [t.grad for t in params]


# --------------------------------------------------------------------------------------------
# the families: each generator yields (op, params, [Inp]); @family registers it with the PyTorch
# twins of the ops it brings, each computing the op's outputs from its inputs (read through their
# views) and its params
# --------------------------------------------------------------------------------------------
OPS = {}  # op name -> its PyTorch twin
FAMILIES = []  # (family, generator, number of cases), in the order they run


def family(name, n, **twins):
    """Registers the decorated generator: `n` cases of family `name`, drawn after those of every
    generator registered before it (so one registered last leaves every earlier case, and its
    random draws, as they were), and the PyTorch twins of the ops it brings."""
    def register(gen):
        for op, twin in twins.items():
            assert op not in OPS, f"{op}: a second twin"
            OPS[op] = twin
        FAMILIES.append((name, gen, n))
        return gen
    return register


def dtypes():
    return pick(["f32", "f64"])


@family("binary", 650,
        add=lambda x, p: [x[0] + x[1]],
        sub=lambda x, p: [x[0] - x[1]],
        mul=lambda x, p: [x[0] * x[1]],
        div=lambda x, p: [x[0] / x[1]],
        pow=lambda x, p: [torch.pow(x[0], x[1])])
def fam_binary(n):
    for _ in range(n):
        op, dt = pick(["add", "sub", "mul", "div", "pow"]), dtypes()
        out = rand_shape(0, 4)
        sa = broadcast_operand(out) if chance(0.5) else out
        sb = broadcast_operand(out) if chance(0.5) else out
        special = 0.1 if chance(0.3) else 0.0
        kind_b = "positive" if op == "div" and not special else ("ints" if op == "pow" and chance(0.4) else "normal")
        kind_a = "positive" if op == "pow" and chance(0.6) else "normal"
        a, b = fin(sa, dt, kind_a, special), fin(sb, dt, kind_b, special)
        if chance(0.1):  # the same tensor twice: a reused input
            yield op, {"twice": True}, [a]
            continue
        if chance(0.12):  # an int64 or bool operand, promoted to the float one's dtype
            arr = values(sb, "ints")
            if op == "div":
                ints = Inp(np.abs(arr).astype(np.int64) + 1, "i64")  # nonzero divisors
            elif op in ("pow", "sub") or chance(0.6):  # PyTorch refuses to subtract a bool
                ints = Inp(arr.astype(np.int64), "i64")
            else:
                ints = Inp(arr > 0, "bool")
            yield op, {}, [a, ints] if op in ("div", "pow") or chance(0.5) else [ints, a]
            continue
        yield op, {}, [a, b]


@family("scalar", 260,
        add_scalar=lambda x, p: [x[0] + p["s"]],
        mul_scalar=lambda x, p: [x[0] * p["s"]],
        rsub_scalar=lambda x, p: [p["s"] - x[0]],
        rdiv_scalar=lambda x, p: [p["s"] / x[0]],
        pow_scalar=lambda x, p: [torch.pow(x[0], p["s"])],
        neg=lambda x, p: [-x[0]])
def fam_scalar(n):
    for _ in range(n):
        op, dt = pick(["add_scalar", "mul_scalar", "rsub_scalar", "rdiv_scalar", "pow_scalar", "neg"]), dtypes()
        special = 0.1 if chance(0.3) else 0.0
        s = pick([2.0, -1.5, 0.0, 0.5, 3.0, -1.0, -2.0, -0.5, 1.0, 1.7]) if op == "pow_scalar" else \
            float(pick([1.5, -2.0, 0.0, 0.25, 1e3]))
        kind = "positive" if op == "pow_scalar" and s not in (2.0, 3.0, 0.0, 1.0, -1.0, -2.0) and chance(0.7) else "normal"
        yield op, ({} if op == "neg" else {"s": s}), [fin(rand_shape(0, 3), dt, kind, special)]


@family("unary", 560,
        exp=lambda x, p: [torch.exp(x[0])],
        log=lambda x, p: [torch.log(x[0])],
        sqrt=lambda x, p: [torch.sqrt(x[0])],
        tanh=lambda x, p: [torch.tanh(x[0])],
        relu=lambda x, p: [torch.relu(x[0])],
        gelu=lambda x, p: [F.gelu(x[0], approximate=p["approximate"])],
        abs=lambda x, p: [torch.abs(x[0])],
        sigmoid=lambda x, p: [torch.sigmoid(x[0])],
        clamp=lambda x, p: [torch.clamp(x[0], p["min"], p["max"])])
def fam_unary(n):
    for _ in range(n):
        op, dt = pick(["exp", "log", "sqrt", "tanh", "relu", "gelu", "abs", "sigmoid", "clamp"]), dtypes()
        special = 0.12 if chance(0.35) else 0.0
        kind = "positive" if op in ("log", "sqrt") and chance(0.7) else ("wide" if chance(0.2) else "normal")
        p = {"approximate": "tanh"} if op == "gelu" else {}  # (the erf form: fam_gelu, below)
        if op == "clamp":
            lo, hi = pick([(-0.5, 0.5), (None, 0.0), (0.25, None), (1.0, -1.0), (-1.0, 2.0)])
            p = {"min": lo, "max": hi}
            kind = "ints" if chance(0.3) else kind  # values on the bounds: gradient 1 there
        yield op, p, [fin(rand_shape(0, 3), dt, kind, special)]


def reduced_axes(shape, allow_empty_axis):
    """Random axes to reduce ([] = all), some negative; None if every try reduced an empty axis."""
    r = len(shape)
    for _ in range(20):
        axes = sorted(rng.choice(r, int(rng.integers(0, r + 1)), replace=False).tolist()) if r else []
        if allow_empty_axis or not any(shape[a] == 0 for a in (axes or range(r))):
            return [a - r if chance(0.3) else a for a in axes]
    return None


@family("reduce", 420,
        sum=lambda x, p: t_sum(x[0], p),
        mean=lambda x, p: t_mean(x[0], p),
        var=lambda x, p: [torch.var(x[0], dim=dims_or_all(x[0], p["axes"]), correction=p["correction"],
                                        keepdim=p["keepdim"])],
        std=lambda x, p: [torch.std(x[0], dim=dims_or_all(x[0], p["axes"]), correction=p["correction"],
                                        keepdim=p["keepdim"])],
        logsumexp=lambda x, p: [torch.logsumexp(x[0], dim=dims_or_all(x[0], p["axes"]), keepdim=p["keepdim"])])
def fam_reduce(n):
    for _ in range(n):
        op, dt = pick(["sum", "sum", "mean", "var", "std", "logsumexp", "sum_int"]), dtypes()
        shape = rand_shape(0, 4)
        axes = reduced_axes(shape, op in ("sum", "sum_int", "logsumexp"))
        if axes is None:
            continue
        keepdim = chance(0.4)
        if op == "logsumexp" and not axes and chance(0.5) and shape:
            axes = [0]
        special = 0.08 if chance(0.3) else 0.0
        if op == "sum_int":
            arr = values(shape, "ints")
            inp = Inp(arr.astype(np.int64), "i64") if chance(0.5) else Inp(arr > 0, "bool")
            yield "sum", {"axes": axes, "keepdim": keepdim}, [inp]
        elif op in ("var", "std"):
            # (not a 0-d tensor with correction 1: PyTorch's gradient there, with N - correction = 0,
            # is inf where a one-element 1-D tensor's is NaN; headgrad gives NaN for both)
            correction = pick([0, 1, 1]) if shape else 0
            yield op, {"axes": axes, "keepdim": keepdim, "correction": correction}, [fin(shape, dt, "normal", special)]
        else:
            yield op, {"axes": axes, "keepdim": keepdim}, [fin(shape, dt, "normal", special)]


@family("extrema", 400,
        max=lambda x, p: [torch.max(x[0], p["axis"], p["keepdim"]).values],
        min=lambda x, p: [torch.min(x[0], p["axis"], p["keepdim"]).values],
        max_with_indices=lambda x, p: list(torch.max(x[0], p["axis"], p["keepdim"])),
        min_with_indices=lambda x, p: list(torch.min(x[0], p["axis"], p["keepdim"])),
        argmax=lambda x, p: [torch.argmax(x[0]) if p["axis"] is None else torch.argmax(x[0], p["axis"], p["keepdim"])],
        argmin=lambda x, p: [torch.argmin(x[0]) if p["axis"] is None else torch.argmin(x[0], p["axis"], p["keepdim"])],
        topk=lambda x, p: list(torch.topk(x[0], p["k"], p["axis"], p["largest"], sorted=True)))
def fam_extrema(n):
    for _ in range(n):
        op, dt = pick(["max", "min", "max_with_indices", "min_with_indices", "argmax", "argmin", "topk"]), dtypes()
        shape = rand_shape(0, 3, zero=0.04)
        if shape and any(d == 0 for d in shape) and op == "topk":
            shape = tuple(max(d, 1) for d in shape)
        r = len(shape)
        axis = int(rng.integers(-max(r, 1), max(r, 1)))
        if r and shape[axis] == 0:
            continue
        keepdim = chance(0.4)
        if op == "topk":
            kind = "distinct"  # PyTorch does not promise an order among ties
            special = 0.0
        else:
            kind = pick(["ints", "normal", "distinct"])
            special = 0.1 if chance(0.3) else 0.0
        x = fin(shape, dt, kind, special)
        if op == "topk":
            length = shape[axis] if r else 1
            yield op, {"k": int(rng.integers(0, length + 1)), "axis": axis, "largest": chance(0.6)}, [x]
        elif op in ("argmax", "argmin") and chance(0.25):
            if int(np.prod(shape)) == 0:
                continue
            yield op, {"axis": None, "keepdim": False}, [x]
        else:
            if op in ("argmax", "argmin") and chance(0.3):  # on integers too
                x = Inp(values(shape, "ints").astype(np.int64), "i64")
            yield op, {"axis": axis, "keepdim": keepdim}, [x]


def no_all_neg_inf(arr, axis):
    """False if any softmax row along axis is entirely -inf (a documented difference)."""
    if arr.size == 0 or arr.ndim == 0:
        return True
    return not np.any(np.all(arr == -np.inf, axis=axis))


@family("softmax", 230,
        softmax=lambda x, p: [torch.softmax(x[0], -1 if p["axis"] is None else p["axis"])],
        log_softmax=lambda x, p: [torch.log_softmax(x[0], -1 if p["axis"] is None else p["axis"])])
def fam_softmax(n):
    for _ in range(n):
        op, dt = pick(["softmax", "log_softmax"]), dtypes()
        shape = rand_shape(1, 4)
        r = len(shape)
        axis = None if chance(0.3) else int(rng.integers(-r, r))
        special = 0.1 if chance(0.3) else 0.0
        kind = pick(["normal", "wide"])
        x = fin(shape, dt, kind, special)
        if op == "softmax":
            seen = apply_chain(torch.from_numpy(x.arr), x.chain).numpy()
            if not no_all_neg_inf(seen, -1 if axis is None else axis):
                continue
        yield op, {"axis": axis}, [x]


@family("matmul", 200,
        matmul=lambda x, p: [torch.matmul(x[0], x[1]) * p["scale"] if p["scale"] != 1 else torch.matmul(x[0], x[1])])
def fam_matmul(n):
    for _ in range(n):
        dt = dtypes()
        M, K, N = rand_size(0.05, 0.2), rand_size(0.08, 0.2), rand_size(0.05, 0.2)
        form = pick(["2d", "2d", "1d@2d", "2d@1d", "1d@1d", "batched", "broadcast"])
        if form == "2d":
            sa, sb = (M, K), (K, N)
        elif form == "1d@2d":
            sa, sb = (K,), (K, N)
        elif form == "2d@1d":
            sa, sb = (M, K), (K,)
        elif form == "1d@1d":
            sa, sb = (K,), (K,)
        elif form == "batched":
            Bt = rand_size(0.05, 0.2, 3)
            sa, sb = (Bt, M, K), (Bt, K, N)
        else:
            sa, sb = (rand_size(0, 0.3, 3), 1, M, K), (rand_size(0, 0.3, 3), K, N)
        special = 0.05 if chance(0.15) else 0.0
        scale = 1.0 if chance(0.7) else pick([0.5, -1.7, 0.35])
        yield "matmul", {"scale": scale}, [fin(sa, dt, "normal", special), fin(sb, dt, "normal", special)]


def linear_inputs(dt, wide=False):
    """A linear layer's inputs: x (..., in), N(0, 1) (wide: or N(0, 10)), W (out, in) and, 7 times
    in 10, a bias (out)."""
    i, o = rand_size(0.1, 0.2), rand_size(0.05, 0.2)
    lead = rand_shape(0, 2)
    ins = [fin(lead + (i,), dt, pick(["normal", "wide"]) if wide else "normal"), fin((o, i), dt)]
    if chance(0.7):
        ins.append(fin((o,), dt, view=0))
    return ins


@family("linear", 110,
        linear=lambda x, p: [F.linear(x[0], x[1], x[2] if len(x) > 2 else None)])
def fam_linear(n):
    for _ in range(n):
        yield "linear", {}, linear_inputs(dtypes())


@family("layer_norm", 110,
        layer_norm=lambda x, p: t_layer_norm(x, p),
        add_layer_norm=lambda x, p: t_layer_norm([x[0] + x[1]] + list(x[2:]), p))
def fam_layer_norm(n):
    for _ in range(n):
        dt = dtypes()
        D = rand_size(0, 0.15, 6)
        x = fin(rand_shape(0, 2) + (D,), dt, pick(["normal", "wide"]))
        ins = [x]
        if chance(0.7):
            ins += [fin((D,), dt, view=0), fin((D,), dt, view=0)]
        yield "layer_norm", {"eps": pick([1e-5, 1e-3])}, ins


@family("cross_entropy", 230,
        cross_entropy=t_cross_entropy)
def fam_cross_entropy(n):
    for _ in range(n):
        dt = dtypes()
        V = rand_size(0, 0.1, 6)
        lead = rand_shape(1, 2, zero=0.05)
        legacy = chance(0.3)  # the (logits, targets, mask) signature: no ignore_index, mean
        ii = pick([None, -100, 1]) if chance(0.5) and not legacy else None
        t = rng.integers(0, V, lead)
        if ii is not None:
            t = np.where(rng.random(lead) < 0.3, ii, t)
        mask_kind = pick([None, "bool", "float", "i64"])
        ins = [fin(lead + (V,), dt, pick(["normal", "wide"])), iin(t)]
        w = np.ones(lead)
        if mask_kind == "bool":
            m = rng.random(lead) < 0.7
            ins.append(bin_(m))
            w = m.astype(float)
        elif mask_kind == "float":
            w = rng.choice([0.0, 0.5, 1.0, 2.5], lead)
            ins.append(Inp(w, dt, grad=False))  # weights are constants
        elif mask_kind == "i64":
            m = rng.integers(0, 3, lead)
            ins.append(iin(m))
            w = (m != 0).astype(float)
        reduction = "mean" if legacy else pick(["mean", "sum", "none"])
        counted = w * (t != ii) if ii is not None else w
        if reduction == "mean" and not np.any(counted != 0):
            continue  # a documented difference: 0 here, NaN in PyTorch
        yield "cross_entropy", {"ignore_index": ii, "reduction": reduction, "legacy": legacy}, ins


@family("index", 150,
        index_select=lambda x, p: [torch.index_select(x[0], p["axis"], x[1])],
        gather=lambda x, p: [torch.gather(x[0], p["axis"], x[1])],
        embedding=lambda x, p: [F.embedding(x[1], x[0])])
def fam_index(n):
    for _ in range(n):
        dt, op = dtypes(), pick(["index_select", "gather", "embedding"])
        if op == "embedding":
            Vv, d = rand_size(0, 0.2), rand_size(0.05, 0.2)
            if Vv == 0:
                Vv = 1
            yield op, {}, [fin((Vv, d), dt), iin(rng.integers(0, Vv, rand_shape(0, 2)))]
            continue
        shape = rand_shape(1, 3)
        r = len(shape)
        axis = int(rng.integers(-r, r))
        n_ax = shape[axis]
        if n_ax == 0:
            continue
        if op == "index_select":
            yield op, {"axis": axis}, [fin(shape, dt), iin(rng.integers(0, n_ax, rand_size(0.1, 0.2, 6)))]
        else:
            ishape = list(shape)
            ishape[axis] = rand_size(0.1, 0.2, 5)
            yield op, {"axis": axis}, [fin(shape, dt), iin(rng.integers(0, n_ax, ishape))]


@family("shape", 560,
        reshape=lambda x, p: [x[0].reshape(p["shape"])],
        view=lambda x, p: [x[0].view(p["shape"])],
        permute=lambda x, p: [x[0].permute(*p["order"])],
        transpose=lambda x, p: [x[0].transpose(p["a"], p["b"])],
        slice=lambda x, p: t_slice(x[0], p),
        concat=lambda x, p: [torch.cat(x, p["axis"])],
        stack=lambda x, p: [torch.stack(x, p["axis"])],
        split=lambda x, p: list(torch.split(x[0], p["size"] if p["size"] is not None else p["sizes"], p["axis"])),
        chunk=lambda x, p: list(torch.chunk(x[0], p["chunks"], p["axis"])),
        expand=lambda x, p: [x[0].expand(*p["shape"])],
        squeeze=lambda x, p: [x[0].squeeze() if p["axis"] is None else x[0].squeeze(p["axis"])],
        unsqueeze=lambda x, p: [x[0].unsqueeze(p["axis"])],
        clone=lambda x, p: [x[0].clone()],
        to_dtype=lambda x, p: [x[0].to(TORCH[p["dtype"]])])
def fam_shape(n):
    for _ in range(n):
        dt = dtypes()
        op = pick(["reshape", "view", "permute", "transpose", "slice", "slice", "concat", "stack", "split", "chunk",
                   "expand", "squeeze", "unsqueeze", "clone", "to_dtype"])
        shape = rand_shape(1, 4, zero=0.05)
        r = len(shape)
        special = 0.05 if chance(0.2) else 0.0
        x = fin(shape, dt, "normal", special, view=0.4)
        if op in ("reshape", "view"):
            total = int(np.prod(shape))
            dims = []
            rest = total
            for _ in range(int(rng.integers(0, 4))):
                cands = [d for d in (1, 2, 3, 4) if rest % d == 0] if rest else [0, 1, 2]
                d = pick(cands)
                dims.append(d)
                rest = rest // d if d else rest
            target = dims + ([rest] if total else [0])
            if chance(0.3) and total:
                target[int(rng.integers(len(target)))] = -1
                if target.count(-1) > 1 or (0 in target):
                    continue
            if op == "view":  # only layouts torch itself can view
                try:
                    apply_chain(torch.from_numpy(x.arr), x.chain).view(target)
                except RuntimeError:
                    continue
            yield op, {"shape": target}, [x]
        elif op == "permute":
            yield op, {"order": [int(v) - (r if chance(0.3) else 0) for v in rng.permutation(r)]}, [x]
        elif op == "transpose":
            yield op, {"a": int(rng.integers(-r, r)), "b": int(rng.integers(-r, r))}, [x]
        elif op == "slice":
            axis = int(rng.integers(-r, r))
            L = shape[axis]
            if chance(0.3):  # the strict form
                a = int(rng.integers(0, L + 1))
                b = int(rng.integers(a, L + 1))
                yield op, {"axis": axis, "start": a, "stop": b, "step": None}, [x]
            else:
                a, b = int(rng.integers(-L - 2, L + 3)), int(rng.integers(-L - 2, L + 3))
                yield op, {"axis": axis, "start": a, "stop": b, "step": int(rng.integers(1, 4))}, [x]
        elif op in ("concat", "stack"):
            k = int(rng.integers(1, 4))
            axis = int(rng.integers(-r, r)) if op == "concat" else int(rng.integers(-r - 1, r + 1))
            xs = [x]
            for _ in range(k - 1):
                s2 = list(shape)
                if op == "concat":
                    s2[axis] = rand_size(0.15, 0.3, 3)
                xs.append(fin(tuple(s2), dt, "normal", special))
            if op == "concat" and chance(0.15):
                xs.append(x)  # the same tensor twice
            yield op, {"axis": axis}, xs
        elif op == "split":
            axis = int(rng.integers(-r, r))
            L = shape[axis]
            if chance(0.5) and L:
                yield op, {"size": int(rng.integers(1, L + 2)), "sizes": None, "axis": axis}, [x]
            else:
                cuts = sorted(rng.integers(0, L + 1, int(rng.integers(0, 3))).tolist())
                sizes = [b - a for a, b in zip([0] + cuts, cuts + [L])]
                yield op, {"size": None, "sizes": sizes, "axis": axis}, [x]
        elif op == "chunk":
            yield op, {"chunks": int(rng.integers(1, 5)), "axis": int(rng.integers(-r, r))}, [x]
        elif op == "expand":
            base = tuple(1 if chance(0.5) else d for d in shape)
            target = ([int(rng.integers(1, 3))] if chance(0.3) else []) + \
                     [(-1 if chance(0.3) else d) if b == d else d for b, d in zip(base, shape)]
            yield op, {"shape": target}, [fin(base, dt, "normal", special, view=0.3)]
        elif op == "squeeze":
            yield op, {"axis": None if chance(0.4) else int(rng.integers(-r, r))}, [x]
        elif op == "unsqueeze":
            yield op, {"axis": int(rng.integers(-r - 1, r + 1))}, [x]
        elif op == "clone":
            yield op, {}, [x]
        else:
            yield op, {"dtype": "f64" if dt == "f32" else "f32"}, [x]


@family("select", 160,
        where=lambda x, p: [torch.where(x[0], x[1], x[2])],
        masked_fill=lambda x, p: [x[0].masked_fill(x[1], p["value"])])
def fam_select(n):
    for _ in range(n):
        dt = dtypes()
        out = rand_shape(0, 3)
        special = 0.08 if chance(0.3) else 0.0
        cond = values(broadcast_operand(out) if chance(0.5) else out, "normal") > 0
        if chance(0.5):
            a = fin(broadcast_operand(out) if chance(0.5) else out, dt, "normal", special)
            b = fin(broadcast_operand(out) if chance(0.5) else out, dt, "normal", special)
            if chance(0.15):
                b = Inp(values(out, "ints").astype(np.int64), "i64")
            yield "where", {}, [bin_(cond), a, b]
        else:
            mshape = broadcast_operand(out)
            yield "masked_fill", {"value": pick([-1e9, 0.0, 2.5, -1e30])}, [fin(out, dt, "normal", special),
                                                                              bin_(values(mshape) > 0)]


@family("compare", 300,
        **{name: (lambda fn: lambda x, p: [fn(x[0], x[1] if p.get("s") is None else p["s"])])(getattr(torch, name))
           for name in ("eq", "ne", "lt", "le", "gt", "ge")},
        logical_and=lambda x, p: [torch.logical_and(x[0], x[1])],
        logical_or=lambda x, p: [torch.logical_or(x[0], x[1])],
        logical_not=lambda x, p: [torch.logical_not(x[0])])
def fam_compare(n):
    for _ in range(n):
        op = pick(["eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_not"])
        out = rand_shape(0, 3)
        special = 0.1 if chance(0.4) else 0.0

        def operand(shape):
            kind = pick(["f32", "f64", "i64", "bool"])
            arr = values(shape, "ints", special) if kind in ("f32", "f64") else values(shape, "ints")
            if kind == "i64":
                return Inp(arr.astype(np.int64), "i64")
            if kind == "bool":
                return Inp(arr > 0, "bool")
            return Inp(arr * pick([1.0, 0.1]), kind)

        a = operand(broadcast_operand(out) if chance(0.4) else out)
        if op == "logical_not":
            yield op, {}, [a]
        elif op.startswith("logical") or chance(0.7):
            yield op, {}, [a, operand(broadcast_operand(out) if chance(0.4) else out)]
        else:
            yield op, {"s": float(pick([0.0, 1.0, -2.0, 0.1, 0.5]))}, [a]


@family("attention", 230,
        masked_softmax=lambda x, p: [d2l_masked_softmax(x[0] * 1.0, x[1] if len(x) > 1 else None)],
        causal_softmax=lambda x, p: [x[0].masked_fill(
            torch.arange(x[0].shape[-1])[None, :] > torch.arange(x[0].shape[-2])[:, None], -math.inf).softmax(-1)],
        masked_softmax_keep=lambda x, p: [x[0].masked_fill(~(x[1] if x[1].dim() == 3 else x[1][:, None, :]),
                                                               -math.inf).softmax(-1)],
        dropout_with_mask=lambda x, p: [x[0] * x[1] / (1 - p["p"])],
        attention=t_attention,
        masked_softmax_mask=t_masked_softmax_mask,
        sequence_mask=lambda x, p: [torch.arange(p["max_len"])[None, :] < x[0][:, None]])
def fam_attention(n):
    for _ in range(n):
        dt = dtypes()
        op = pick(["masked_softmax", "causal_softmax", "masked_softmax_keep", "dropout_with_mask", "attention",
                   "sequence_mask"])
        B, Tq, Tk = rand_size(0.05, 0.2, 3), rand_size(0.05, 0.2, 4), rand_size(0.05, 0.2, 5)
        if Tk == 0 and op in ("masked_softmax", "masked_softmax_keep", "attention"):
            Tk = 1  # these need a key to keep (a row with none is a documented difference)
        if op == "masked_softmax":
            x = fin((B, Tq, Tk), dt, view=0.2)
            if chance(0.2):
                yield op, {}, [x]
            elif chance(0.5):
                yield op, {}, [x, iin(rng.integers(1, Tk + 1, (B,)))]
            else:
                yield op, {}, [x, iin(rng.integers(1, Tk + 1, (B, Tq)))]
        elif op == "causal_softmax":
            yield op, {}, [fin(rand_shape(0, 2, zero=0.0) + (Tq, Tk), dt, view=0.2)]
        elif op == "masked_softmax_keep":
            shape = (B, Tk) if chance(0.5) else (B, Tq, Tk)
            keep = rng.random(shape) < 0.6
            keep[..., 0] = True  # every row keeps a key (a row with none is a documented difference)
            yield op, {}, [fin((B, Tq, Tk), dt, view=0.2), bin_(keep)]
        elif op == "dropout_with_mask":
            shape = rand_shape(0, 3)
            p = pick([0.0, 0.25, 0.5])
            mask = Inp((rng.random(shape) > p).astype(np.float64), dt, grad=False)  # a constant
            yield op, {"p": p}, [fin(shape, dt, view=0.2), mask]
        elif op == "attention":
            H, dh = pick([1, 2]), rand_size(0, 0.2, 3)
            C = H * dh
            causal = chance(0.3)
            ins = [fin((B, Tq, C), dt, view=0.2), fin((B, Tk, C), dt, view=0.2), fin((B, Tk, C), dt, view=0.2)]
            if chance(0.5):
                ins.append(iin(rng.integers(1, Tk + 1, (B,) if chance(0.5) else (B, Tq))))
            yield op, {"heads": H, "causal": causal}, ins
        else:
            yield op, {"max_len": Tk}, [iin(rng.integers(0, Tk + 2, (B,)))]


@family("graph", 80,
        graph_tanh_reuse=lambda x, p: [(lambda e: e * e + e)(torch.tanh(x[0]))],
        graph_softmax_gram=lambda x, p: [(lambda s: s @ s.transpose(-1, -2))(torch.softmax(x[0], -1))],
        graph_norm=lambda x, p: [(lambda c: c / torch.sqrt((c * c).mean(-1, keepdim=True) + 1e-5))(
            x[0] - x[0].mean(-1, keepdim=True))],
        graph_ffn_lse=lambda x, p: [(lambda h: (h * h).sum(-1) + torch.logsumexp(h, (-1,)))(
            torch.relu(F.linear(x[0], x[1], x[2])))])
def fam_graph(n):
    for _ in range(n):
        dt = dtypes()
        op = pick(["graph_tanh_reuse", "graph_softmax_gram", "graph_norm", "graph_ffn_lse"])
        shape = rand_shape(1, 3, zero=0.0)
        if op == "graph_ffn_lse":
            i, o = rand_size(0, 0.2, 4), rand_size(0, 0.2, 4)
            yield op, {}, [fin(shape[:-1] + (i,), dt), fin((o, i), dt), fin((o,), dt, view=0)]
        elif op == "graph_softmax_gram":
            yield op, {}, [fin(shape if len(shape) >= 2 else (2,) + shape, dt)]
        else:
            yield op, {}, [fin(shape, dt)]


@family("unary", 150)
def fam_gelu(n):
    """gelu in both forms (erf: PyTorch's default). Its own generator, run after the families above,
    so that adding it left the earlier cases' random stream as it was."""
    for _ in range(n):
        dt = dtypes()
        special = 0.12 if chance(0.35) else 0.0
        kind = "wide" if chance(0.2) else "normal"
        yield "gelu", {"approximate": pick(["none", "none", "tanh"])}, [fin(rand_shape(0, 3), dt, kind, special)]


# ---- the second round (each family its own generator, run after all the others, so that the
# ---- earlier cases' random stream stays as it was) ---------------------------------------------
NONFINITE = [math.nan, math.inf, -math.inf, -math.inf]


def with_nonfinite(shape, rate):
    """normal values with NaN, +inf and (twice as often) -inf at `rate`."""
    a = values(shape, "normal")
    flat = a.reshape(-1)
    for i in range(flat.size):
        if rng.random() < rate:
            flat[i] = pick(NONFINITE)
    return a


def kept_rows_ok(x, keep):
    """False if some row (last axis) keeps no key, or keeps only -inf ones with no NaN or +inf:
    documented differences (headgrad: zeros; PyTorch: NaN, or d2l's fill taking the weight)."""
    x, keep = np.broadcast_arrays(x, keep)
    for r in range(int(np.prod(x.shape[:-1]))):
        row, k = x.reshape(-1, x.shape[-1])[r], keep.reshape(-1, x.shape[-1])[r]
        kept = row[k]
        if kept.size == 0 or not (np.any(np.isnan(kept)) or np.any(kept > -1e5)):
            return False
    return True


@family("softmax_special", 330)
def fam_softmax_special(n):
    """NaN and +-inf inside softmax rows: along the last axis and any other, log_softmax, the
    masked forms (a NaN among the kept keys makes the whole row NaN; masked keys keep gradient 0)
    and fused attention (NaN in queries, keys or values; any scale, negative ones too)."""
    for _ in range(n):
        dt = dtypes()
        op = pick(["softmax", "softmax", "log_softmax", "masked_softmax", "masked_softmax_keep", "causal_softmax",
                   "attention"])
        rate = pick([0.1, 0.25, 0.5])
        if op in ("softmax", "log_softmax"):
            shape = rand_shape(1, 4, zero=0.03)
            r = len(shape)
            axis = None if chance(0.3) else int(rng.integers(-r, r))
            x = with_nonfinite(shape, rate)
            if op == "softmax" and not no_all_neg_inf(x, -1 if axis is None else axis):
                continue
            yield op, {"axis": axis}, [Inp(x, dt)]
            continue
        B, Tq, Tk = rand_size(0, 0.2, 3), rand_size(0, 0.2, 4), rand_size(0, 0.2, 6)
        if op == "attention":
            H, dh = pick([1, 2]), rand_size(0, 0.2, 3)
            C = H * dh
            causal = chance(0.4)
            ins = [Inp(with_nonfinite((B, Tq, C), rate / 4), dt), Inp(with_nonfinite((B, Tk, C), rate / 4), dt),
                   Inp(with_nonfinite((B, Tk, C), rate / 4), dt)]
            lens = None
            if chance(0.5):
                lens = rng.integers(1, Tk + 3, (B,) if chance(0.5) else (B, Tq))  # above Tk: every key
                ins.append(iin(lens))
            p = {"heads": H, "causal": causal, "scale": pick([0, 0, -0.7, 1.3])}
            # the scores' rows must keep a key that is not -inf (else a documented difference)
            with torch.no_grad():
                q, k = (torch.from_numpy(i.arr) for i in ins[:2])
                split = lambda t: t.reshape(B, t.shape[1], H, dh).permute(0, 2, 1, 3)  # noqa: E731
                sc = (split(q) @ split(k).transpose(-1, -2)).numpy()
            if p["scale"] < 0:
                sc = -sc
            keep = np.ones((B, 1, Tq, Tk), dtype=bool)
            if lens is not None:
                ln = lens if lens.ndim == 2 else np.repeat(lens[:, None], Tq, 1)
                keep = keep & (np.arange(Tk)[None, None, None, :] < ln[:, None, :, None])
            if causal:
                keep = keep & (np.arange(Tk)[None, :] <= np.arange(Tq)[:, None])[None, None]
            if not kept_rows_ok(sc, keep):
                continue
            yield op, p, ins
            continue
        x = with_nonfinite((B, Tq, Tk), rate)
        if op == "masked_softmax":
            lens = rng.integers(1, Tk + 3, (B,) if chance(0.5) else (B, Tq))  # above Tk: every key
            ln = lens if lens.ndim == 2 else np.repeat(lens[:, None], Tq, 1)
            if not kept_rows_ok(x, np.arange(Tk)[None, None, :] < ln[:, :, None]):
                continue
            yield op, {}, [Inp(x, dt), iin(lens)]
        elif op == "masked_softmax_keep":
            kshape = (B, Tk) if chance(0.5) else (B, Tq, Tk)
            keep = rng.random(kshape) < 0.6
            if not kept_rows_ok(x, keep if len(kshape) == 3 else keep[:, None, :]):
                continue
            yield op, {}, [Inp(x, dt), bin_(keep)]
        else:
            if not kept_rows_ok(x, np.arange(Tk)[None, :] <= np.arange(Tq)[:, None]):
                continue
            yield op, {}, [Inp(x, dt)]


@family("large_logits", 120)
def fam_large_logits(n):
    """log_softmax, softmax and cross_entropy of logits around +-1e3 to 1e5: (x - max) - log s
    keeps the precision that x - (max + log s) loses to the spacing of max."""
    for _ in range(n):
        dt = dtypes()
        offset = pick([1e3, 3e3, 1e4, 1e5, -1e5, -3e3]) * (1 if chance(0.5) else 1.0 + rng.random())
        op = pick(["log_softmax", "log_softmax", "softmax", "cross_entropy"])
        if op == "cross_entropy":
            V = int(rng.integers(2, 7))
            lead = rand_shape(1, 2, zero=0.0)
            x = values(lead + (V,), pick(["normal", "ints"])) + offset
            yield op, {"ignore_index": None, "reduction": pick(["mean", "sum", "none"]), "legacy": False}, \
                [Inp(x, dt), iin(rng.integers(0, V, lead))]
            continue
        shape = rand_shape(1, 3, zero=0.0)
        r = len(shape)
        axis = None if chance(0.5) else int(rng.integers(-r, r))
        yield op, {"axis": axis}, [Inp(values(shape, pick(["normal", "ints"])) + offset, dt)]


@family("layer_norm_overflow", 100)
def fam_layer_norm_overflow(n):
    """layer_norm and add_layer_norm of rows whose sum or squared deviations overflow the dtype
    (float32 from |x| ~ 1e19, float64 from 1e154): exact here, NaN in PyTorch's own layer_norm,
    so the reference is PyTorch's layer_norm of x 2^-k (t_layer_norm's ref_exp)."""
    for _ in range(n):
        dt = dtypes()
        D = int(rng.integers(2, 7))
        lead = rand_shape(0, 2, zero=0.0)
        lo, hi = (19, 37) if dt == "f32" else (155, 300)
        x = values(lead + (D,), "normal")
        rows = x.reshape(-1, D)
        for row in rows:  # one or two huge entries, or the whole row scaled up
            mag = 10.0 ** rng.uniform(lo, hi)
            if chance(0.3):
                row *= mag
            else:
                for j in rng.choice(D, int(rng.integers(1, 3)), replace=False):
                    row[j] = mag * pick([1.0, -1.0]) * rng.uniform(0.5, 1.0)
        k = int(np.floor(np.log2(np.max(np.abs(x)))))
        op = pick(["layer_norm", "add_layer_norm"])
        p = {"eps": 1e-5, "ref_exp": k}
        ins = [Inp(x, dt)] if op == "layer_norm" else [Inp(x / 2, dt), Inp(x / 2, dt)]
        affine = pick(["both", "none", "weight", "bias"])
        if affine in ("both", "weight"):
            ins.append(fin((D,), dt, view=0))
        if affine in ("both", "bias"):
            ins.append(fin((D,), dt, view=0))
        p["no_weight"], p["no_bias"] = affine in ("none", "bias"), affine in ("none", "weight")
        yield op, p, ins


@family("clip", 150,
        clip_grad_norm=lambda x, p: t_clip_grad_norm(x, p))
def fam_clip(n):
    """clip_grad_norm: tiny, ordinary and non-finite norms, max_norm 0, and norms just below max_norm
    (PyTorch scales by max_norm / (norm + 1e-6) there too). Gradients stay below 1e18 in float32
    (PyTorch's float32 norm overflows from about 1e19, headgrad's double one does not: documented)."""
    for _ in range(n):
        dt = dtypes()
        grads = [values(rand_shape(0, 2, zero=0.1), "normal") for _ in range(int(rng.integers(1, 4)))]
        kind = pick(["tiny", "plain", "plain", "big", "nonfinite", "edge"])
        scale = {"tiny": 1e-9, "plain": 1.0, "big": 1e15 if dt == "f32" else 1e100}.get(kind, 1.0)
        grads = [g * scale for g in grads]
        if kind == "nonfinite":
            g = grads[int(rng.integers(len(grads)))].reshape(-1)
            if g.size:
                g[int(rng.integers(g.size))] = pick([math.nan, math.inf, -math.inf])
        norm = math.sqrt(sum(float(np.sum(g.astype(NP[dt]).astype(np.float64) ** 2)) for g in grads))
        if kind == "edge":
            max_norm = norm * (1 + pick([3e-7, -3e-7, 2e-6]))  # within, or not, of PyTorch's 1e-6
        else:
            max_norm = pick([1.0, 0.5, 1e-3, 0.0, 10.0])
        yield "clip_grad_norm", {"max_norm": max_norm}, [Inp(g, dt, grad=False) for g in grads]


@family("correction", 150)
def fam_correction(n):
    """var and std with every correction up to above N (PyTorch: inf forward, a finite gradient
    2 (x - mean) / (N - correction) for var)."""
    for _ in range(n):
        dt = dtypes()
        op = pick(["var", "std"])
        shape = rand_shape(1, 3, zero=0.0)
        axes = reduced_axes(shape, False)
        N = int(np.prod([shape[a] for a in (axes or range(len(shape)))]))
        correction = pick([0, 1, 2, max(N - 1, 0), N, N + 1, N + 2, N + 5])
        special = 0.05 if chance(0.2) else 0.0
        yield op, {"axes": axes, "keepdim": chance(0.4), "correction": correction}, \
            [fin(shape, dt, "normal", special)]


@family("accepted", 200)
def fam_accepted(n):
    """Inputs PyTorch accepts that headgrad used to refuse: softmax of a 0-d tensor, gather with an
    index smaller than x off the axis, index_select of a 0-d tensor or with a 0-d index, layer_norm
    over an empty axis, add_layer_norm without weight or bias, float32 with a 0-d float64 operand,
    valid lengths above Tk."""
    for _ in range(n):
        dt = dtypes()
        op = pick(["softmax0d", "gather", "index_select", "layer_norm_empty", "add_layer_norm", "mixed",
                   "masked_softmax", "attention"])
        if op == "softmax0d":
            yield pick(["softmax", "log_softmax"]), {"axis": pick([None, 0, -1])}, [fin((), dt, special=0.1)]
        elif op == "gather":
            shape = tuple(max(d, 1) for d in rand_shape(1, 3, zero=0.0))
            r = len(shape)
            axis = int(rng.integers(-r, r))
            ishape = [int(rng.integers(0, d + 1)) for d in shape]
            ishape[axis] = rand_size(0.1, 0.2, 4)
            yield "gather", {"axis": axis}, [fin(shape, dt), iin(rng.integers(0, shape[axis], ishape))]
        elif op == "index_select":
            if chance(0.5):  # a 0-d x: one index, 0
                yield "index_select", {"axis": pick([0, -1])}, [fin((), dt), iin(np.zeros(pick([(), (1,)]), np.int64))]
            else:  # a 0-d index
                shape = tuple(max(d, 1) for d in rand_shape(1, 3, zero=0.0))
                axis = int(rng.integers(0, len(shape)))
                yield "index_select", {"axis": axis}, [fin(shape, dt), iin(np.int64(rng.integers(0, shape[axis])))]
        elif op == "layer_norm_empty":
            ins = [fin(rand_shape(0, 2) + (0,), dt)]
            if chance(0.5):
                ins += [fin((0,), dt, view=0), fin((0,), dt, view=0)]
            yield "layer_norm", {"eps": 1e-5}, ins
        elif op == "add_layer_norm":
            D = rand_size(0, 0.1, 6)
            shape = rand_shape(0, 2) + (D,)
            ins = [fin(shape, dt), fin(shape, dt)]
            affine = pick(["both", "none", "weight", "bias"])
            if affine in ("both", "weight"):
                ins.append(fin((D,), dt, view=0))
            if affine in ("both", "bias"):
                ins.append(fin((D,), dt, view=0))
            yield "add_layer_norm", {"eps": pick([1e-5, 1e-3]), "no_weight": affine in ("none", "bias"),
                                     "no_bias": affine in ("none", "weight")}, ins
        elif op == "mixed":  # float32 tensor, 0-d float64 (either side): float32, as torch.result_type
            sop = pick(["add", "sub", "mul", "div", "pow", "where"])
            shape = tuple(max(d, 1) for d in rand_shape(1, 3, zero=0.0))
            a = fin(shape, "f32", "positive" if sop == "pow" else "normal")
            sc = Inp(values((), "positive" if sop in ("div", "pow") else "normal"), "f64")
            tol = {"float32_tolerance": True}  # the float64 scalar's gradient is a float32 sum
            if sop == "where":
                yield "where", tol, [bin_(values(shape) > 0), a, sc] if chance(0.5) else [bin_(values(shape) > 0), sc, a]
            else:
                yield sop, tol, [a, sc] if sop in ("div", "pow") or chance(0.5) else [sc, a]
        elif op == "masked_softmax":
            B, Tq, Tk = rand_size(0, 0.2, 3), rand_size(0, 0.2, 4), rand_size(0, 0.2, 5)
            yield "masked_softmax", {}, [fin((B, Tq, Tk), dt), iin(rng.integers(Tk, Tk + 4, (B,) if chance(0.5) else (B, Tq)))]
        else:
            B, Tq, Tk, H, dh = rand_size(0, 0.2, 3), rand_size(0, 0.2, 4), rand_size(0, 0.2, 5), pick([1, 2]), 2
            C = H * dh
            yield "attention", {"heads": H, "causal": False}, [fin((B, Tq, C), dt), fin((B, Tk, C), dt),
                                                                fin((B, Tk, C), dt), iin(rng.integers(1, Tk + 4, (B,)))]


@family("masks", 32)
def fam_masks(n):
    """Every form of AttentionMask, in the fused attention and in masked_softmax: valid lengths (B)
    or (B, Tq), causal, a boolean keep (B, Tk), (B, Tq, Tk) or per head (B, H, Tq, Tk), and their
    combinations. Float64 only and small (the fixture has a size limit); every row keeps key 0 (a
    row with none is a documented difference)."""
    for i in range(n):  # every op x keep form x causal in turn, lengths at random
        op, keep, causal = ["attention", "masked_softmax_mask"][i % 2], [None, "b", "q", "h"][i // 2 % 4], i // 8 % 2 == 1
        B, Tq, Tk = rand_size(0, 0.2, 2), rand_size(0, 0.2, 3), max(rand_size(0, 0.2, 4), 1)
        H = 2 if keep == "h" else pick([1, 2])
        lens = chance(0.5)
        p = {"lens": lens, "causal": causal, "keep": keep is not None}
        masks = []
        if lens:
            masks.append(iin(rng.integers(1, Tk + 2, (B,) if chance(0.5) else (B, Tq))))
        if keep is not None:
            shape = {"b": (B, Tk), "q": (B, Tq, Tk), "h": (B, H, Tq, Tk)}[keep]
            k = rng.random(shape) < 0.6
            k[..., 0] = True
            masks.append(bin_(k))
        if op == "attention":
            dh = rand_size(0, 0.2, 2)
            C = H * dh
            p["heads"] = H
            yield op, p, [fin((B, Tq, C), "f64", view=0.2), fin((B, Tk, C), "f64", view=0.2),
                          fin((B, Tk, C), "f64", view=0.2)] + masks
        else:
            x = fin((B, H, Tq, Tk) if keep == "h" or chance(0.5) else (B, Tq, Tk), "f64", view=0.2)
            if not lens and not causal and keep is None:
                p["causal"] = True  # an empty mask is plain softmax: the softmax family has it
            yield op, p, [x] + masks


# ---- the third round: each generator registered after the last one, so that adding it left every
# ---- earlier case (and its random draws) as it was. A new op's generator goes at the end of it.
@family("linear", 60,
        linear_gelu=lambda x, p: [F.gelu(F.linear(x[0], x[1], x[2] if len(x) > 2 else None),
                                             approximate=p["approximate"])])
def fam_linear_gelu(n):
    """linear followed by gelu, the fused op GPT's MLP runs. Run last, as fam_gelu, so that adding it
    left the earlier cases' random stream as it was."""
    for _ in range(n):
        ins = linear_inputs(dtypes(), wide=True)
        yield "linear_gelu", {"approximate": pick(["none", "none", "tanh"])}, ins


@family("linear", 40,
        linear_residual=lambda x, p: [x[2] + F.linear(x[0], x[1], x[3] if len(x) > 3 else None)])
def fam_linear_residual(n):
    """residual + linear, the fused op of a GPT block's output projections; inputs x, W, the
    residual, then the bias if any. Run last, as fam_linear_gelu."""
    for _ in range(n):
        dt = dtypes()
        i, o = rand_size(0.1, 0.2), rand_size(0.05, 0.2)
        lead = rand_shape(0, 2)
        ins = [fin(lead + (i,), dt), fin((o, i), dt), fin(lead + (o,), dt, view=0.2)]
        if chance(0.5):
            ins.append(fin((o,), dt, view=0))
        yield "linear_residual", {}, ins


def t_self_attention(x, p):
    """self_attention(qkv): attention of qkv's column blocks q, k, v = [0, C), [C, 2C), [2C, 3C)."""
    C = x[0].shape[-1] // 3
    return t_attention([x[0][..., :C], x[0][..., C:2 * C], x[0][..., 2 * C:]] + list(x[1:]), p)


@family("reduce", 100, sum_to=lambda x, p: [x[0].sum_to_size(p["shape"])])
def fam_sum_to(n):
    """sum_to: x summed onto a shape that broadcasts to x's (leading axes left out, axes of size 1),
    as the gradient of a broadcast operand is."""
    for _ in range(n):
        dt = dtypes()
        shape = rand_shape(0, 4)
        special = 0.08 if chance(0.3) else 0.0
        yield "sum_to", {"shape": list(broadcast_operand(shape))}, [fin(shape, dt, "normal", special)]


@family("linear", 60, linear_relu=lambda x, p: [torch.relu(F.linear(x[0], x[1], x[2] if len(x) > 2 else None))])
def fam_linear_relu(n):
    """relu of linear, the fused op of the position-wise FFN's first layer."""
    for _ in range(n):
        ins = linear_inputs(dtypes(), wide=True)
        yield "linear_relu", {}, ins


@family("attention", 60, self_attention=t_self_attention)
def fam_self_attention(n):
    """self_attention of one packed projection qkv (B, T, 3C), with lengths (B) or (B, T) or none,
    causal or not; every row keeps key 0."""
    for _ in range(n):
        dt = dtypes()
        B, T, H, dh = rand_size(0.05, 0.2, 3), rand_size(0.05, 0.2, 4), pick([1, 2]), rand_size(0, 0.2, 3)
        ins = [fin((B, T, 3 * H * dh), dt, view=0.2)]
        if T and chance(0.5):
            ins.append(iin(rng.integers(1, T + 1, (B,) if chance(0.5) else (B, T))))
        yield "self_attention", {"heads": H, "causal": chance(0.3)}, ins


@family("unary", 60,
        hardtanh=lambda x, p: [F.hardtanh(x[0], p["min_val"], p["max_val"])])
def fam_hardtanh(n):
    """hardtanh, clamp with gradient 0 on the bounds; integer inputs put values on them."""
    for _ in range(n):
        lo, hi = pick([(-1.0, 1.0), (-0.5, 2.0), (0.0, 0.0), (-2.0, -1.0)])
        kind = "ints" if chance(0.3) else pick(["normal", "wide"])
        yield "hardtanh", {"min_val": lo, "max_val": hi}, [fin(rand_shape(0, 3), dtypes(), kind, 0.12 if chance(0.3) else 0.0)]


def t_nll_loss(x, p):
    """headgrad's classes are on the last axis, PyTorch's on axis 1 (a 1-D input is one row)."""
    logp = x[0] if x[0].dim() <= 2 else x[0].movedim(-1, 1)
    return [F.nll_loss(logp, x[1], reduction=p["reduction"], ignore_index=p["ignore_index"])]


@family("losses", 200,
        mse_loss=lambda x, p: [F.mse_loss(x[0], x[1], reduction=p["reduction"])],
        l1_loss=lambda x, p: [F.l1_loss(x[0], x[1], reduction=p["reduction"])],
        smooth_l1_loss=lambda x, p: [F.smooth_l1_loss(x[0], x[1], reduction=p["reduction"], beta=p["beta"])],
        binary_cross_entropy_with_logits=lambda x, p: [
            F.binary_cross_entropy_with_logits(x[0], x[1], reduction=p["reduction"])],
        nll_loss=t_nll_loss)
def fam_losses(n):
    """The losses under each reduction; no mean over nothing (headgrad throws, PyTorch gives NaN);
    the differences of L1 and smooth L1 away from their kinks (0, +-beta)."""
    for _ in range(n):
        dt, reduction = dtypes(), pick(["mean", "sum", "none"])
        op = pick(["mse_loss", "l1_loss", "smooth_l1_loss", "binary_cross_entropy_with_logits", "nll_loss"])
        if op == "nll_loss":
            C, lead = rand_size(0, 0.1, 6), rand_shape(1, 2, zero=0.0)
            ii = pick([-100, 0])
            t = rng.integers(0, C, lead)
            t = np.where(rng.random(lead) < 0.25, ii, t)
            if reduction == "mean" and not np.any(t != ii):
                continue
            ins = [fin(lead + (C,), dt), iin(t)]
            yield op, {"reduction": reduction, "ignore_index": ii}, ins
            continue
        shape = rand_shape(0, 3, zero=0.0 if reduction == "mean" else 0.06)
        y = values(shape)
        d = values(shape)
        beta = pick([1.0, 0.5, 0.0])
        d = np.where(np.abs(np.abs(d) - beta) < 0.05, d + 0.1, d)  # off smooth L1's kinks
        d = np.where(np.abs(d) < 0.05, 0.1, d)                      # off |d|'s kink at 0
        if op == "binary_cross_entropy_with_logits":
            y = rng.random(shape)
        ins = [Inp(y + d, dt), Inp(y, dt)]
        yield op, {"reduction": reduction, "beta": beta}, ins


# --------------------------------------------------------------------------------------------
# running a case in torch and storing it
# --------------------------------------------------------------------------------------------
class Storage:
    """Every tensor's elements appended to one flat array per storage type."""

    def __init__(self):
        self.parts = {"f32": [], "f64": [], "i64": []}
        self.size = {"f32": 0, "f64": 0, "i64": 0}

    def add(self, arr, dtype):
        store = "i64" if dtype in ("i64", "bool") else dtype
        flat = np.ascontiguousarray(arr).reshape(-1).astype(NP[store])
        ref = [dtype, self.size[store], [int(d) for d in arr.shape]]
        self.parts[store].append(flat)
        self.size[store] += flat.size
        return ref

    def tensors(self):
        return [("data." + k, torch.from_numpy(np.concatenate(v) if v else np.zeros(0, NP[k])))
                for k, v in self.parts.items()]


def dtype_of(t):
    return {torch.float32: "f32", torch.float64: "f64", torch.int64: "i64", torch.bool: "bool"}[t.dtype]


def evaluate(op, p, inputs, as_f64=False, Rs=None):
    """Runs the op in torch: outputs, the R of each float output (drawn unless given) and the
    gradient of each input (None where there is none). as_f64: float32 inputs and R in float64."""
    leaves = []
    for inp in inputs:
        dtype = "f64" if as_f64 and inp.dtype == "f32" else inp.dtype
        t = torch.from_numpy(inp.arr.astype(NP[inp.dtype]).astype(NP[dtype]))
        if inp.grad:
            t.requires_grad_(True)
        leaves.append(t)
    xs = [apply_chain(t, inp.chain) for t, inp in zip(leaves, inputs)]
    if p.get("twice"):
        xs = [xs[0], xs[0]]
    outs = OPS[op](xs, p)
    if Rs is None:
        Rs = [torch.from_numpy(rng.standard_normal(tuple(o.shape)).astype(NP[dtype_of(o)]))
              if o.is_floating_point() else None for o in outs]
    loss = None
    for o, R in zip(outs, Rs):
        if R is not None:
            term = (o * R.to(o.dtype)).sum()
            loss = term if loss is None else loss + term
    if loss is not None and loss.requires_grad:
        loss.backward()
    return outs, Rs, [t.grad if t.requires_grad else None for t in leaves]


def run_case(family, op, p, inputs, store):
    outs, Rs, grads = evaluate(op, p, inputs)
    case = {"f": family, "op": op, "p": p,
            "in": [store.add(inp.arr.astype(NP[inp.dtype]), inp.dtype) for inp in inputs],
            "ng": [i for i, inp in enumerate(inputs) if inp.dtype in ("f32", "f64") and not inp.grad],
            "v": [inp.chain for inp in inputs],
            "out": [store.add(o.detach().numpy(), dtype_of(o)) for o in outs],
            "R": [store.add(R.numpy(), dtype_of(R)) if R is not None else None for R in Rs],
            "g": [store.add(g.numpy(), dtype_of(g)) if g is not None else None for g in grads]}
    # A float32 case also carries PyTorch's float64 result for the same inputs and R: where
    # PyTorch's float32 value is itself far from exact (cancellation), the replay may be as far.
    dtypes_in = {inp.dtype for inp in inputs}
    if "f32" in dtypes_in and "f64" not in dtypes_in:
        outs64, _, grads64 = evaluate(op, p, inputs, as_f64=True, Rs=Rs)
        case["out64"] = [store.add(o.detach().numpy(), "f64") if o.is_floating_point() else None for o in outs64]
        case["g64"] = [store.add(g.numpy(), "f64") if g is not None else None for g in grads64]
    return case


def main():
    store = Storage()
    cases, counts = [], {}
    for family, gen, n in FAMILIES:
        for op, p, inputs in gen(n):
            cases.append(run_case(family, op, p, inputs, store))
            counts[family] = counts.get(family, 0) + 1
    meta = {"generator": "tests/reference/make_op_cases.py", "torch_version": torch.__version__, "seed": str(SEED),
            "cases": json.dumps(cases, separators=(",", ":"), allow_nan=False), "families": json.dumps(counts)}
    write_safetensors(OUT, store.tensors(), meta)
    size = os.path.getsize(OUT)
    assert size < MAX_FILE_BYTES, f"{OUT} is {size} bytes (limit {MAX_FILE_BYTES})"
    back, back_meta = read_safetensors(OUT)
    assert [n for n, _ in back] == [n for n, _ in store.tensors()]
    assert json.loads(back_meta["cases"]) == json.loads(meta["cases"])
    print(f"{os.path.relpath(OUT)}: {size} bytes, {len(cases)} cases")
    for family, n in counts.items():
        print(f"   {family:<14s} {n}")


if __name__ == "__main__":
    main()
