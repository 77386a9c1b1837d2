#!/usr/bin/env python3
"""Regenerates tests/fixtures/nn/: PyTorch's own state_dicts and outputs for solder's sd::nn
modules and sd::models models.

Run with PyTorch, torchvision, transformers and safetensors installed (tools/torch-venv.sh sets
up .venv-torch; then `.venv-torch/bin/pip install torchvision transformers safetensors`):
    LD_LIBRARY_PATH=$(ls -d .venv-torch/lib/python3.11/site-packages/nvidia/*/lib | tr '\\n' ':') \\
        .venv-torch/bin/python tools/make_model_fixtures.py
CPU only, no downloads, a few seconds. CI needs no Python: the generated files are committed.
Every case is seeded from its own name, so adding a case leaves the others' files unchanged.
The script ends by reloading every file, rebuilding each module, loading the state with
load_state_dict(strict=True), rerunning it and asserting the outputs are bit-identical.

Files:
  keys.txt  The state_dict layout of full-size reference models (built on the meta device, so
            no weights exist; random init, nothing downloaded), in state_dict order:
                model <name>
                <key> <dtype> <d0>,<d1>,...     (dtype float32 / int64; a 0-d shape is "-")
                end
            names: mlp (torchvision.ops.MLP(784, [256, 10])), alexnet, resnet18, resnet34,
            resnet50, mobilenet_v2, vit_b_16 (torchvision, weights=None) and bert
            (transformers BertModel(BertConfig()), bert-base, add_pooling_layer=True).

  <case>.state.safetensors  The module's state_dict exactly as PyTorch names it (parameters and
            persistent buffers, e.g. BatchNorm's int64 num_batches_tracked). Not written when
            the state_dict is empty (pooling, activations, flatten).
  <case>.io.safetensors     Tensors "input" (or "input0", "input1", ... when the module takes
            several inputs) and "output" (bert_small also "pooled" = pooler_output); float32
            except the int64 embedding / BERT inputs. Metadata (safetensors header
            __metadata__): "module" = the Python class (e.g. "torch.nn.Linear"), plus the
            constructor arguments / model configuration, one key per argument. Values are
            strings: strings as they are (e.g. activation "gelu"), everything else compact
            JSON: 5, 1e-05, true, null, [2,3], [[1,8,1,1],[6,12,2,2]]. Metadata keys are
            written sorted, so a rerun reproduces every file byte for byte.

Module cases (batch 2, eval mode): linear, linear_nobias, conv2d, conv2d_groups,
conv2d_depthwise, batchnorm2d, layernorm, rmsnorm, embedding, maxpool2d, avgpool2d,
adaptiveavgpool2d, relu, gelu, gelu_tanh, silu, tanh, sigmoid, flatten, mha (input0/1/2 =
query/key/value, need_weights=False, output = attention output), mha_self (input = query = key =
value), encoder_layer, encoder_layer_normfirst_gelu, sequential.
Training cases (Conv2d -> BatchNorm2d -> ReLU, input [4, C, 9, 9]): conv_bn_relu_train,
conv_bn_relu_train_groups (stride 2, groups 2, no bias; eps 1e-3, momentum 0.3). Two
training-mode forwards of a copy of the saved module: "output" of the input, "output2" of
input / 2 + 1/4 after the first update, then the BatchNorm's "running_mean", "running_var"
and "num_batches_tracked".
Model cases (eval mode): mlp, alexnet_small, resnet18_small, resnet50_small,
mobilenet_v2_small, vit_small, bert_small (input0/1/2 = input_ids / token_type_ids /
attention_mask, int64; output = last_hidden_state, pooled = pooler_output).
alexnet_small / resnet*_small are small mirrors of torchvision's classes with the same
state_dict keys (checked against torchvision here); mobilenet_v2_small, vit_small, mlp and
bert_small are the genuine classes. Note mobilenet_v2_small's width_mult 0.25 rounds every
channel count of its setting to 8 (_make_divisible) and keeps last_channel 1280.

Weights come from each module's own init, then two changes so no weight is an identity:
every BatchNorm gets random running_mean (N(0, 0.5)), running_var (U[0.5, 2]), weight
(U[0.5, 1.5]), bias (N(0, 0.5)) and num_batches_tracked = 7; every other floating-point
parameter that its init leaves constant (zero biases, LayerNorm/RMSNorm ones, ViT's zero
class token and head) is redrawn: ones -> U[0.5, 1.5], anything else -> N(0, 0.2).
PyTorch's fused "fast path" for MultiheadAttention / TransformerEncoderLayer is switched off,
so outputs come from the documented composition of ops.
"""
import copy
import json
import pathlib
import struct
import zlib

import torch
import torch.nn as nn
import torchvision
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from torchvision.models.resnet import BasicBlock, Bottleneck, ResNet
from transformers import BertConfig, BertModel

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "nn"
DT = {torch.float32: "float32", torch.int64: "int64"}
torch.backends.mha.set_fastpath_enabled(False)


# ---------------------------------------------------------------- helpers

def seed(name):
    torch.manual_seed(zlib.crc32(name.encode()))


def meta_str(v):
    return v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))


@torch.no_grad()
def randomize(m):
    """BatchNorm statistics and affine random; constant-initialised parameters redrawn."""
    done = set()
    for mod in m.modules():
        if isinstance(mod, nn.modules.batchnorm._BatchNorm):
            mod.running_mean.normal_(0, 0.5)
            mod.running_var.uniform_(0.5, 2.0)
            mod.num_batches_tracked.fill_(7)
            if mod.affine:
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.normal_(0, 0.5)
                done |= {id(mod.weight), id(mod.bias)}
    for p in m.parameters():
        if id(p) in done or not p.is_floating_point() or p.numel() == 0:
            continue
        if bool((p == p.flatten()[0]).all()):
            if float(p.flatten()[0]) == 1.0:
                p.uniform_(0.5, 1.5)
            else:
                p.normal_(0, 0.2)
    return m.eval()


def default_run(m, *xs):
    return {"output": m(*xs)}


class Case:
    """build() -> fresh module (its own init); inputs() -> list of input tensors;
    meta: the io file's metadata; run(module, *inputs) -> {"output": ..., ...}."""

    def __init__(self, name, build, inputs, meta, run=default_run):
        self.name, self.build, self.inputs, self.meta, self.run = name, build, inputs, meta, run


def mod_case(name, cls, inputs, run=default_run, **kwargs):
    """A case whose constructor arguments are exactly its metadata."""
    meta = {"module": f"{cls.__module__.split('.modules')[0]}.{cls.__name__}", **kwargs}
    return Case(name, lambda: cls(**kwargs), inputs, meta, run)


def sort_metadata(path):
    """save_file writes the metadata in hash order; rewrite the header sorted so that reruns
    give byte-identical files. (Format: u64 header length, JSON header padded with spaces to
    a multiple of 8, tensor data; offsets are relative to the data, so they are unchanged.)"""
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header["__metadata__"] = dict(sorted(header["__metadata__"].items()))
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + raw[8 + n:])


def io_names(n):
    return ["input"] if n == 1 else [f"input{i}" for i in range(n)]


def contiguous(d):
    return {k: v.detach().clone().contiguous() for k, v in d.items()}


@torch.no_grad()
def write_case(c):
    seed(c.name)
    m = randomize(c.build())
    inputs = c.inputs() if callable(c.inputs) else c.inputs
    outs = c.run(m, *inputs)
    state = contiguous(m.state_dict())
    if state:
        save_file(state, OUT / f"{c.name}.state.safetensors")
    io = contiguous(dict(zip(io_names(len(inputs)), inputs)) | outs)
    save_file(io, OUT / f"{c.name}.io.safetensors",
              metadata={k: meta_str(v) for k, v in c.meta.items()})
    sort_metadata(OUT / f"{c.name}.io.safetensors")


@torch.no_grad()
def check_case(c):
    """Reload the files, rebuild (different random init), load strictly, rerun, compare bits."""
    torch.manual_seed(999)
    m = c.build().eval()
    sp = OUT / f"{c.name}.state.safetensors"
    m.load_state_dict(load_file(sp) if sp.exists() else {}, strict=True)
    io = load_file(OUT / f"{c.name}.io.safetensors")
    names = [k for k in io if k.startswith("input")]
    names.sort(key=lambda k: (len(k), k))
    outs = c.run(m, *[io[k] for k in names])
    assert set(outs) | set(names) == set(io), c.name
    for k, v in outs.items():
        assert v.dtype == io[k].dtype and torch.equal(v, io[k]), f"{c.name}: {k} differs"
    with safe_open(OUT / f"{c.name}.io.safetensors", "pt") as f:
        assert f.metadata() == {k: meta_str(v) for k, v in c.meta.items()}, c.name


def write_keys(path, models):
    lines = []
    for name, build in models:
        with torch.device("meta"):
            sd = build().state_dict()
        lines.append(f"model {name}")
        for k, v in sd.items():
            shape = ",".join(map(str, v.shape)) if v.dim() else "-"
            lines.append(f"{k} {DT[v.dtype]} {shape}")
        lines.append("end")
    path.write_text("\n".join(lines) + "\n")


# ---------------------------------------------------------------- small model mirrors

class AlexNetSmall(nn.Module):
    """torchvision.models.AlexNet with narrower layers; same Sequential indices and names."""

    def __init__(self, conv_channels, kernel_sizes, strides, paddings, classifier_hidden,
                 num_classes, avgpool, dropout):
        super().__init__()
        c, k, s, p = [3, *conv_channels], kernel_sizes, strides, paddings
        hidden, pool = classifier_hidden, tuple(avgpool)
        conv = [nn.Conv2d(c[i], c[i + 1], k[i], stride=s[i], padding=p[i]) for i in range(5)]
        relu, mp = (lambda: nn.ReLU(inplace=True)), (lambda: nn.MaxPool2d(3, stride=2))
        self.features = nn.Sequential(conv[0], relu(), mp(), conv[1], relu(), mp(),
                                      conv[2], relu(), conv[3], relu(), conv[4], relu(), mp())
        self.avgpool = nn.AdaptiveAvgPool2d(pool)
        self.classifier = nn.Sequential(
            nn.Dropout(dropout), nn.Linear(c[-1] * pool[0] * pool[1], hidden), nn.ReLU(True),
            nn.Dropout(dropout), nn.Linear(hidden, hidden), nn.ReLU(True),
            nn.Linear(hidden, num_classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


class ResNetSmall(ResNet):
    """torchvision's ResNet with stage widths as a parameter. Only __init__ is ours (a copy of
    torchvision's with 64/128/256/512 replaced); _make_layer and forward are torchvision's."""

    def __init__(self, block, layers, widths, num_classes):
        nn.Module.__init__(self)
        self._norm_layer = nn.BatchNorm2d
        self.inplanes, self.dilation, self.groups, self.base_width = widths[0], 1, 1, 64
        self.conv1 = nn.Conv2d(3, widths[0], kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, widths[0], layers[0])
        self.layer2 = self._make_layer(block, widths[1], layers[1], stride=2)
        self.layer3 = self._make_layer(block, widths[2], layers[2], stride=2)
        self.layer4 = self._make_layer(block, widths[3], layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(widths[3] * block.expansion, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")


ALEX = dict(conv_channels=[8, 16, 16, 16, 16], kernel_sizes=[11, 5, 3, 3, 3],
            strides=[4, 1, 1, 1, 1], paddings=[2, 2, 1, 1, 1], classifier_hidden=32,
            num_classes=10, avgpool=[6, 6], dropout=0.5)
MBV2 = dict(num_classes=10, width_mult=0.25, round_nearest=8, dropout=0.2,
            inverted_residual_setting=[[1, 8, 1, 1], [6, 12, 2, 2], [6, 16, 2, 2], [6, 24, 1, 1]])
VIT = dict(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=16, mlp_dim=32,
           num_classes=10, dropout=0.0, attention_dropout=0.0)
BERT = dict(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=32, max_position_embeddings=32, type_vocab_size=2,
            hidden_act="gelu", layer_norm_eps=1e-12, hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0, pad_token_id=0)


def resnet_case(name, block, layers):
    meta = dict(module="torchvision.models.resnet.ResNet", block=block.__name__,
                expansion=block.expansion, layers=layers, widths=[8, 16, 32, 64], num_classes=10,
                stem_kernel=7, stem_stride=2, stem_padding=3, maxpool=[3, 2, 1])
    return Case(name, lambda: ResNetSmall(block, layers, [8, 16, 32, 64], 10),
                lambda: [torch.randn(2, 3, 32, 32)], meta)


def mbv2_build():
    return torchvision.models.MobileNetV2(**MBV2)


def bert_build():
    return BertModel(BertConfig(**BERT, attn_implementation="eager"), add_pooling_layer=True)


def bert_inputs():
    ids = torch.randint(0, BERT["vocab_size"], (2, 7))
    types = torch.tensor([[0, 0, 0, 1, 1, 1, 1], [0, 0, 1, 1, 1, 0, 0]])
    mask = torch.tensor([[1] * 7, [1] * 5 + [0] * 2])
    return [ids, types, mask]


def bert_run(m, ids, types, mask):
    o = m(input_ids=ids, token_type_ids=types, attention_mask=mask)
    return {"output": o.last_hidden_state, "pooled": o.pooler_output}


def mha_run(m, q, k=None, v=None):
    k, v = (q, q) if k is None else (k, v)
    return {"output": m(q, k, v, need_weights=False)[0]}


def x(*shape):
    return lambda: [torch.randn(*shape)]


def train_run(m, x):
    """Two training-mode forwards of a copy (the module's own state stays as saved): the second
    on another batch (x / 2 + 1/4), after the running statistics' first update."""
    t = copy.deepcopy(m).train()
    out = {"output": t(x), "output2": t(x * 0.5 + 0.25)}
    bn = t[1]
    return out | {"running_mean": bn.running_mean, "running_var": bn.running_var,
                  "num_batches_tracked": bn.num_batches_tracked}


def train_case(name, conv, bn):
    """Conv2d -> BatchNorm2d -> ReLU in training mode (train_run)."""
    meta = {"module": "torch.nn.Sequential", "mode": "train",
            "layers": f"Conv2d({','.join(map(str, conv['args']))});BatchNorm2d({bn['n']});ReLU()",
            **{f"conv_{k}": v for k, v in conv.items() if k != "args"},
            **{f"bn_{k}": v for k, v in bn.items() if k != "n"}}
    build = lambda: nn.Sequential(
        nn.Conv2d(*conv["args"], **{k: v for k, v in conv.items() if k != "args"}),
        nn.BatchNorm2d(bn["n"], **{k: v for k, v in bn.items() if k != "n"}), nn.ReLU())
    return Case(name, build, x(4, conv["args"][0], 9, 9), meta, run=train_run)


# ---------------------------------------------------------------- cases

def module_cases():
    act_in = lambda: [torch.linspace(-5, 5, 14).reshape(2, 7)]
    enc = dict(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0, layer_norm_eps=1e-5,
               batch_first=True, bias=True)
    mha = dict(embed_dim=8, num_heads=2, dropout=0.0, bias=True, batch_first=True)
    seq_meta = {"module": "torch.nn.Sequential",
                "layers": "Conv2d(3,8,3);BatchNorm2d(8);ReLU();MaxPool2d(2);Flatten();Linear(72,4)"}
    seq = lambda: nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                                nn.Flatten(), nn.Linear(8 * 3 * 3, 4))
    return [
        mod_case("linear", nn.Linear, x(2, 4, 5), in_features=5, out_features=3, bias=True),
        mod_case("linear_nobias", nn.Linear, x(2, 5), in_features=5, out_features=3, bias=False),
        mod_case("conv2d", nn.Conv2d, x(2, 3, 9, 9), in_channels=3, out_channels=4, kernel_size=3,
                 stride=2, padding=1, dilation=1, groups=1, bias=True),
        mod_case("conv2d_groups", nn.Conv2d, x(2, 4, 7, 7), in_channels=4, out_channels=6,
                 kernel_size=3, stride=1, padding=1, dilation=1, groups=2, bias=False),
        mod_case("conv2d_depthwise", nn.Conv2d, x(2, 4, 6, 6), in_channels=4, out_channels=4,
                 kernel_size=3, stride=1, padding=1, dilation=1, groups=4, bias=True),
        mod_case("batchnorm2d", nn.BatchNorm2d, x(2, 4, 5, 5), num_features=4, eps=1e-5,
                 momentum=0.1, affine=True, track_running_stats=True),
        mod_case("layernorm", nn.LayerNorm, x(2, 3, 6), normalized_shape=[6], eps=1e-5,
                 elementwise_affine=True, bias=True),
        mod_case("rmsnorm", nn.RMSNorm, x(2, 3, 6), normalized_shape=[6], eps=1e-6,
                 elementwise_affine=True),
        mod_case("embedding", nn.Embedding, lambda: [torch.randint(0, 10, (2, 3))],
                 num_embeddings=10, embedding_dim=4),
        mod_case("maxpool2d", nn.MaxPool2d, x(2, 3, 8, 8), kernel_size=3, stride=2, padding=1,
                 dilation=1, ceil_mode=False),
        mod_case("avgpool2d", nn.AvgPool2d, x(2, 3, 8, 8), kernel_size=2, stride=2, padding=0,
                 ceil_mode=False, count_include_pad=True),
        mod_case("adaptiveavgpool2d", nn.AdaptiveAvgPool2d, x(2, 3, 8, 8), output_size=[2, 3]),
        mod_case("relu", nn.ReLU, act_in),
        mod_case("gelu", nn.GELU, act_in, approximate="none"),
        mod_case("gelu_tanh", nn.GELU, act_in, approximate="tanh"),
        mod_case("silu", nn.SiLU, act_in),
        mod_case("tanh", nn.Tanh, act_in),
        mod_case("sigmoid", nn.Sigmoid, act_in),
        mod_case("flatten", nn.Flatten, x(2, 3, 4, 5), start_dim=1, end_dim=-1),
        mod_case("mha", nn.MultiheadAttention,
                 lambda: [torch.randn(2, 5, 8), torch.randn(2, 6, 8), torch.randn(2, 6, 8)],
                 run=mha_run, **mha),
        mod_case("mha_self", nn.MultiheadAttention, x(2, 5, 8), run=mha_run, **mha),
        mod_case("encoder_layer", nn.TransformerEncoderLayer, x(2, 5, 8), **enc,
                 activation="relu", norm_first=False),
        mod_case("encoder_layer_normfirst_gelu", nn.TransformerEncoderLayer, x(2, 5, 8), **enc,
                 activation="gelu", norm_first=True),
        Case("sequential", seq, x(2, 3, 8, 8), seq_meta),
        train_case("conv_bn_relu_train", dict(args=[3, 8, 3], padding=1, bias=True),
                   dict(n=8, eps=1e-5, momentum=0.1)),
        train_case("conv_bn_relu_train_groups",
                   dict(args=[4, 6, 3], stride=2, padding=1, groups=2, bias=False),
                   dict(n=6, eps=1e-3, momentum=0.3)),
    ]


def model_cases():
    mlp = dict(in_channels=12, hidden_channels=[16, 8, 5], activation="relu", norm="none",
               dropout=0.0, bias=True)
    last = torchvision.models._utils._make_divisible(1280 * max(1.0, MBV2["width_mult"]),
                                                     MBV2["round_nearest"])
    return [
        Case("mlp", lambda: torchvision.ops.MLP(12, [16, 8, 5]), x(3, 12),
             {"module": "torchvision.ops.MLP", **mlp}),
        Case("alexnet_small", lambda: AlexNetSmall(**ALEX), x(2, 3, 64, 64),
             {"module": "torchvision.models.AlexNet", **ALEX, "maxpool": [3, 2, 0]}),
        resnet_case("resnet18_small", BasicBlock, [2, 2, 2, 2]),
        resnet_case("resnet50_small", Bottleneck, [1, 2, 1, 1]),
        Case("mobilenet_v2_small", mbv2_build, x(2, 3, 32, 32),
             {"module": "torchvision.models.MobileNetV2", **MBV2, "last_channel": last}),
        Case("vit_small", lambda: torchvision.models.vision_transformer.VisionTransformer(**VIT),
             x(2, 3, 32, 32), {"module": "torchvision.models.vision_transformer.VisionTransformer",
                               **VIT, "layer_norm_eps": 1e-6, "representation_size": None}),
        Case("bert_small", bert_build, bert_inputs,
             {"module": "transformers.BertModel", **BERT, "add_pooling_layer": True,
              "attn_implementation": "eager"}, run=bert_run),
    ]


FULL = [
    ("mlp", lambda: torchvision.ops.MLP(784, [256, 10])),
    ("alexnet", lambda: torchvision.models.alexnet(weights=None)),
    ("resnet18", lambda: torchvision.models.resnet18(weights=None)),
    ("resnet34", lambda: torchvision.models.resnet34(weights=None)),
    ("resnet50", lambda: torchvision.models.resnet50(weights=None)),
    ("mobilenet_v2", lambda: torchvision.models.mobilenet_v2(weights=None)),
    ("vit_b_16", lambda: torchvision.models.vit_b_16(weights=None)),
    ("bert", lambda: BertModel(BertConfig(), add_pooling_layer=True)),
]


def check_mirrors():
    """The small mirrors keep torchvision's state_dict keys (modulo sizes)."""
    def keys(m):
        return list(m.state_dict())
    with torch.device("meta"):
        assert keys(AlexNetSmall(**ALEX)) == keys(torchvision.models.alexnet())
        for block, layers, ref in [(BasicBlock, [2, 2, 2, 2], torchvision.models.resnet18),
                                   (Bottleneck, [3, 4, 6, 3], torchvision.models.resnet50)]:
            small = ResNetSmall(block, layers, [8, 16, 32, 64], 10)
            assert keys(small) == keys(ref()), block.__name__
            assert keys(ResNetSmall(block, layers, [64, 128, 256, 512], 1000)) == keys(ref())
        big = ResNetSmall(Bottleneck, [3, 4, 6, 3], [64, 128, 256, 512], 1000).state_dict()
        ref = torchvision.models.resnet50().state_dict()
        assert all(big[k].shape == ref[k].shape for k in ref)


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for f in OUT.glob("*"):
        f.unlink()
    check_mirrors()
    write_keys(OUT / "keys.txt", FULL)
    cases = module_cases() + model_cases()
    for c in cases:
        write_case(c)
    for c in cases:
        check_case(c)
    total = 0
    for f in sorted(OUT.iterdir()):
        total += f.stat().st_size
        print(f"{f.stat().st_size:>9}  {f.name}")
    print(f"{total:>9}  total ({len(cases)} cases)")
    assert total <= 6 * 1024 * 1024


if __name__ == "__main__":
    main()
