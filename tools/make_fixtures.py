#!/usr/bin/env python3
"""Regenerates tests/fixtures/torch_ops.txt: PyTorch's own outputs for solder's ops.

Run with PyTorch installed (tools/torch-venv.sh sets up a virtual environment):
    .venv-torch/bin/python tools/make_fixtures.py
CI needs no Python: the generated file is committed, and tests/test_torch_fixtures.cpp
checks solder against it.

Format, one record per case, all numbers as repr() so float32 values round-trip exactly:
    case <name> <dtype>
    input <name> <dtype> <shape dims...> : <values...>
    output <dtype> <shape dims...> : <values...>
    end
"""
import math
import pathlib
import torch
import torch.nn.functional as F

torch.manual_seed(1234)
OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "torch_ops.txt"
DT = {torch.float32: "float32", torch.float64: "float64", torch.int32: "int32",
      torch.int64: "int64", torch.bool: "bool"}

# Inputs with the values that break naive formulas: zeros of both signs, large magnitudes,
# tiny (denormal) values, infinities and NaN, next to ordinary random values.
SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 20.0, -20.0, 88.0, -88.0, 100.0, -100.0,
           1e-30, -1e-30, 1e-40, -1e-40, float("inf"), float("-inf"), float("nan"), 3.0]


def special(n_random=44):
    x = torch.cat([torch.tensor(SPECIAL), torch.randn(n_random) * 4])
    return x.to(torch.float32).reshape(8, 8)


def fmt(t):
    vals = t.flatten().tolist()
    if t.dtype == torch.bool:
        return " ".join("1" if v else "0" for v in vals)
    if t.dtype in (torch.int32, torch.int64):
        return " ".join(str(v) for v in vals)
    return " ".join(repr(float(v)) for v in vals)


def record(lines, name, inputs, out):
    lines.append(f"case {name}")
    for iname, t in inputs:
        lines.append(f"input {iname} {DT[t.dtype]} {t.dim()} {' '.join(map(str, t.shape))} : {fmt(t)}")
    lines.append(f"output {DT[out.dtype]} {out.dim()} {' '.join(map(str, out.shape))} : {fmt(out)}")
    lines.append("end")


def main():
    lines = []
    x = special()
    unary = {
        "exp": torch.exp, "expm1": torch.expm1, "log": torch.log, "log1p": torch.log1p,
        "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "tanh": torch.tanh, "sigmoid": torch.sigmoid,
        "erf": torch.erf, "sin": torch.sin, "cos": torch.cos, "relu": torch.relu,
        "abs": torch.abs, "neg": torch.neg, "silu": F.silu, "gelu": F.gelu,
        "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
        "leaky_relu": lambda t: F.leaky_relu(t, 0.1),
        "softplus": F.softplus, "softplus_beta2": lambda t: F.softplus(t, beta=2.0, threshold=10.0),
        "clamp": lambda t: torch.clamp(t, -1.5, 2.5),
    }
    for name, f in unary.items():
        record(lines, name, [("x", x)], f(x))

    a = torch.randn(6, 5) * 3
    b = torch.randn(5) * 3
    record(lines, "add_broadcast", [("a", a), ("b", b)], a + b)
    record(lines, "div", [("a", a), ("b", b)], a / b)
    record(lines, "pow", [("a", a.abs()), ("b", b)], torch.pow(a.abs(), b))
    record(lines, "maximum_nan", [("x", x), ("y", x.flip(0))], torch.maximum(x, x.flip(0)))
    record(lines, "where_gt", [("a", a), ("b", b)], torch.where(a > b, a, b * 2))
    i = torch.randint(-50, 50, (6, 5), dtype=torch.int32)
    record(lines, "int_times_half", [("i", i)], i * 0.5)
    record(lines, "int_div_int", [("i", i), ("j", i.flip(1) + 100)], i / (i.flip(1) + 100))
    record(lines, "int_plus_float", [("i", i), ("a", a)], i + a)

    r = torch.randn(7, 33) * 2
    for name, f in {
        "sum_dim1": lambda t: t.sum(1), "sum_dim0_keep": lambda t: t.sum(0, keepdim=True),
        "sum_all": lambda t: t.sum(), "mean_dim1": lambda t: t.mean(1),
        "prod_dim1": lambda t: (t * 0.5).prod(1), "amax_dim0": lambda t: t.amax(0),
        "amin_dim1": lambda t: t.amin(1), "argmax_dim1": lambda t: t.argmax(1),
        "argmin_dim0": lambda t: t.argmin(0), "argmax_all": lambda t: t.argmax(),
        "var_dim1": lambda t: t.var(1), "var_dim0_c0": lambda t: t.var(0, correction=0),
        "softmax_last": lambda t: torch.softmax(t, -1), "softmax_dim0": lambda t: torch.softmax(t, 0),
        "log_softmax_last": lambda t: torch.log_softmax(t, -1),
    }.items():
        record(lines, name, [("x", r)], f(r))
    big = torch.tensor([[1000.0, 1001.0, -float("inf"), 999.0], [-5.0, 0.0, 5.0, 10.0]])
    record(lines, "softmax_extreme", [("x", big)], torch.softmax(big, -1))
    g = torch.randn(33)
    bta = torch.randn(33)
    record(lines, "layer_norm", [("x", r), ("g", g), ("b", bta)], F.layer_norm(r, (33,), g, bta, 1e-5))
    record(lines, "rms_norm", [("x", r), ("g", g)], F.rms_norm(r, (33,), g))
    x3 = torch.randn(3, 4, 5)
    g2 = torch.randn(4, 5)
    b2 = torch.randn(4, 5)
    record(lines, "layer_norm_2d", [("x", x3), ("g", g2), ("b", b2)], F.layer_norm(x3, (4, 5), g2, b2, 1e-5))
    record(lines, "sum_dims02", [("x", x3)], x3.sum((0, 2)))
    chain = torch.rand(1000) * 2 - 1
    record(lines, "design_chain", [("x", chain)],
           torch.tanh(chain * 0.5 + 0.25) * torch.sigmoid(chain) + chain * chain * 0.1 - 0.3)

    # Contractions, with and without their epilogues (appended: the cases above keep their data).
    ma, mb = torch.randn(13, 37), torch.randn(37, 11)
    record(lines, "matmul_2d", [("a", ma), ("b", mb)], ma @ mb)
    record(lines, "mm_transposed", [("a", ma.t().contiguous()), ("b", mb)], ma.t().contiguous().t() @ mb)
    ba, bb = torch.randn(2, 1, 5, 7), torch.randn(3, 7, 4)
    record(lines, "matmul_batch_broadcast", [("a", ba), ("b", bb)], torch.matmul(ba, bb))
    mv = torch.randn(7)
    record(lines, "matmul_matrix_vector", [("a", ba[0, 0]), ("v", mv)], torch.matmul(ba[0, 0], mv))
    lx, lw, lb = torch.randn(6, 20), torch.randn(9, 20), torch.randn(9)
    record(lines, "linear_relu", [("x", lx), ("w", lw), ("b", lb)], torch.relu(F.linear(lx, lw, lb)))
    lx3 = torch.randn(2, 3, 20)
    record(lines, "linear_3d", [("x", lx3), ("w", lw), ("b", lb)], F.linear(lx3, lw, lb))
    record(lines, "gelu_matmul", [("x", lx), ("w", lw)], F.gelu(lx) @ lw.t())

    # scaled_dot_product_attention (appended: the cases above keep their data). Batch dims that
    # broadcast, causal with L > S and L < S, bool and float masks (a row masked out entirely
    # gives 0 in PyTorch 2.5 and later), a custom scale, float64.
    sdpa = F.scaled_dot_product_attention
    aq, ak, av = torch.randn(2, 3, 7, 32), torch.randn(1, 3, 19, 32), torch.randn(1, 3, 19, 24)
    record(lines, "sdpa_broadcast", [("q", aq), ("k", ak), ("v", av)], sdpa(aq, ak, av))
    cq, ck, cv = torch.randn(2, 10, 16), torch.randn(2, 6, 16), torch.randn(2, 6, 8)
    record(lines, "sdpa_causal_long_q", [("q", cq), ("k", ck), ("v", cv)], sdpa(cq, ck, cv, is_causal=True))
    record(lines, "sdpa_causal_short_q", [("q", ck), ("k", cq), ("v", torch.cat([cv, cv[:, :4]], 1))],
           sdpa(ck, cq, torch.cat([cv, cv[:, :4]], 1), is_causal=True))
    keep = torch.rand(7, 19) > 0.3
    keep[2] = False
    record(lines, "sdpa_bool_mask", [("q", aq), ("k", ak), ("v", av), ("mask", keep)],
           sdpa(aq, ak, av, attn_mask=keep))
    bias = torch.randn(2, 1, 7, 19)
    bias[:, :, :, 15:] = float("-inf")
    bias[1, 0, 4] = float("-inf")
    record(lines, "sdpa_float_mask_scale", [("q", aq), ("k", ak), ("v", av), ("mask", bias)],
           sdpa(aq, ak, av, attn_mask=bias, scale=0.3))
    dq, dk, dv = torch.randn(3, 5, 80, dtype=torch.float64), torch.randn(3, 70, 80, dtype=torch.float64), \
        torch.randn(3, 70, 80, dtype=torch.float64)
    record(lines, "sdpa_float64_causal", [("q", dq), ("k", dk), ("v", dv)], sdpa(dq, dk, dv, is_causal=True))

    # Convolution and pooling (appended: the cases above keep their data).
    cx, cw, cb = torch.randn(2, 3, 7, 9), torch.randn(5, 3, 3, 3), torch.randn(5)
    record(lines, "conv2d_bias_relu", [("x", cx), ("w", cw), ("b", cb)], torch.relu(F.conv2d(cx, cw, cb, padding=1)))
    record(lines, "conv2d_stride_dilation", [("x", cx), ("w", cw)],
           F.conv2d(cx, cw, stride=(2, 1), padding=(2, 1), dilation=(2, 1)))
    gx, gw = torch.randn(2, 4, 8, 8), torch.randn(6, 2, 3, 3)
    record(lines, "conv2d_groups2", [("x", gx), ("w", gw)], F.conv2d(gx, gw, padding=1, groups=2))
    dw = torch.randn(8, 1, 3, 3)
    record(lines, "conv2d_depthwise_mult2", [("x", gx), ("w", dw)], F.conv2d(gx, dw, stride=2, padding=1, groups=4))
    sx, sw = torch.randn(1, 3, 20, 20), torch.randn(4, 3, 7, 7)
    record(lines, "conv2d_stem", [("x", sx), ("w", sw)], F.conv2d(sx, sw, stride=2, padding=3))
    px, pw = torch.randn(2, 8, 5, 6), torch.randn(4, 8, 1, 1)
    record(lines, "conv2d_1x1", [("x", px), ("w", pw)], F.conv2d(px, pw))
    scale, shift, res = torch.rand(1, 5, 1, 1) + 0.5, torch.randn(1, 5, 1, 1), torch.randn(2, 5, 7, 9)
    record(lines, "conv2d_bn_residual_relu",
           [("x", cx), ("w", cw), ("scale", scale), ("shift", shift), ("res", res)],
           torch.relu(F.conv2d(cx, cw, padding=1) * scale + shift + res))
    qx = torch.randn(2, 3, 7, 9)
    qx[0, 1, 2, 3] = float("nan")
    record(lines, "max_pool2d_stem", [("x", qx)], F.max_pool2d(qx, 3, stride=2, padding=1))
    record(lines, "avg_pool2d_ceil_pad", [("x", cx)], F.avg_pool2d(cx, 3, stride=2, padding=1, ceil_mode=True))
    record(lines, "avg_pool2d_exclude_pad", [("x", cx)],
           F.avg_pool2d(cx, (3, 2), stride=(2, 1), padding=1, ceil_mode=True, count_include_pad=False))
    record(lines, "adaptive_avg_pool2d_3x4", [("x", cx)], F.adaptive_avg_pool2d(cx, (3, 4)))

    header = ["# PyTorch " + torch.__version__ + " outputs for solder's ops; regenerate with",
              "# tools/make_fixtures.py (do not edit by hand)."]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(header + lines) + "\n")
    print(f"wrote {OUT} ({len([l for l in lines if l.startswith('case')])} cases)")


if __name__ == "__main__":
    main()
