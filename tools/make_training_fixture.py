#!/usr/bin/env python3
"""Regenerates tests/fixtures/training.txt: a two-layer perceptron trained by PyTorch for a few
steps (torch.autograd and torch.optim), which tests/test_optim.cpp repeats with
sd::value_and_grad and sd::optim and compares step by step.

Run with PyTorch installed (tools/torch-venv.sh sets up a virtual environment):
    .venv-torch/bin/python tools/make_training_fixture.py
CI needs no Python: the generated file is committed.

Format, one tensor per line, float32 values as repr() (they round-trip exactly):
    <name> <dims...> : <values...>
Names: x, labels (as float), w1, b1, w2, b2 (the initial parameters); per optimizer <opt>
(adamw, adam, sgd, adamw_amsgrad, sgd_clipped: gradients clipped to a norm of 0.5 first, with
clip.<opt>.norm<k> the norm before) and step k: <opt>.loss<k> (the loss before step k), and after the last
step <opt>.w1, <opt>.b1, <opt>.w2, <opt>.b2. The losses of torch.nn.functional on z [6, 4],
loss.labels (one of them -100, ignored) and loss.target: loss.<name> and, for some, the
gradient in z, loss.<name>.grad. The rates of lr_scheduler's StepLR, CosineAnnealingLR and
LinearLR over 12 epochs from 0.1: sched.<name>.
"""
import pathlib
import torch
import torch.nn.functional as F

torch.manual_seed(7)
OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "training.txt"
STEPS = 5


def line(name, t):
    t = t.detach().to(torch.float32)
    dims = " ".join(str(d) for d in t.shape)
    return f"{name} {dims} : " + " ".join(repr(v) for v in t.flatten().tolist())


x = torch.randn(8, 4)
labels = torch.arange(8) % 3
init = {"w1": torch.randn(16, 4) * 0.5, "b1": torch.randn(16) * 0.1,
        "w2": torch.randn(3, 16) * 0.5, "b2": torch.randn(3) * 0.1}
lines = [f"# PyTorch {torch.__version__}: a 4-16-3 perceptron, relu, cross-entropy, {STEPS} steps; "
         "regenerate with tools/make_training_fixture.py (do not edit by hand)",
         line("x", x), line("labels", labels.float())]
lines += [line(k, v) for k, v in init.items()]
optimizers = {
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=1e-2),
    "adam": lambda ps: torch.optim.Adam(ps, lr=1e-2, weight_decay=1e-3),
    "sgd": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3),
    "adamw_amsgrad": lambda ps: torch.optim.AdamW(ps, lr=1e-2, amsgrad=True),
    "sgd_clipped": lambda ps: torch.optim.SGD(ps, lr=0.5, momentum=0.9),
}
for name, make in optimizers.items():
    ps = {k: v.clone().requires_grad_(True) for k, v in init.items()}
    opt = make(list(ps.values()))
    for k in range(STEPS):
        opt.zero_grad()
        h = F.relu(F.linear(x, ps["w1"], ps["b1"]))
        loss = F.cross_entropy(F.linear(h, ps["w2"], ps["b2"]), labels)
        loss.backward()
        lines.append(line(f"{name}.loss{k}", loss))
        if name == "sgd_clipped":
            norm = torch.nn.utils.clip_grad_norm_(list(ps.values()), 0.5)
            lines.append(line(f"clip.{name}.norm{k}", norm))
        opt.step()
    lines += [line(f"{name}.{k}", v) for k, v in ps.items()]
z = torch.randn(6, 4) * 2
y = torch.tensor([0, 3, -100, 1, 2, 3])
t = torch.rand(6, 4)
lines += [line("loss.z", z), line("loss.labels", y.float()), line("loss.target", t)]
losses = {
    "ce": lambda z: F.cross_entropy(z, y),
    "ce_sum": lambda z: F.cross_entropy(z, y, reduction="sum"),
    "ce_none": lambda z: F.cross_entropy(z, y, reduction="none"),
    "ce_smooth": lambda z: F.cross_entropy(z, y, label_smoothing=0.1),
    "nll": lambda z: F.nll_loss(F.log_softmax(z, -1), y),
    "mse": lambda z: F.mse_loss(z, t),
    "l1": lambda z: F.l1_loss(z, t, reduction="sum"),
    "bce": lambda z: F.binary_cross_entropy_with_logits(z, t),
}
for name, f in losses.items():
    zz = z.clone().requires_grad_(True)
    out = f(zz)
    lines.append(line(f"loss.{name}", out))
    if out.dim() == 0:
        out.backward()
        lines.append(line(f"loss.{name}.grad", zz.grad))
schedules = {
    "step": lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=3, gamma=0.5),
    "cosine": lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=10, eta_min=0.01),
    "linear": lambda o: torch.optim.lr_scheduler.LinearLR(o, start_factor=0.25, total_iters=4),
}
for name, make in schedules.items():
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    sched = make(opt)
    rates = [opt.param_groups[0]["lr"]]
    for _ in range(12):
        opt.step()
        sched.step()
        rates.append(sched.get_last_lr()[0])
    lines.append(f"sched.{name} {len(rates)} : " + " ".join(repr(r) for r in rates))
OUT.write_text("\n".join(lines) + "\n")
print(f"wrote {OUT}")
