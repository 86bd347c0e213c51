"""Check that memctl's STM step computes what the PyTorch reference computes.

    memctl bench specs/bench/stm.mem stm_a --dump /tmp/stm_a.json
    python3 scripts/compare_stm_torch.py /tmp/stm_a.json

Loads memctl's initial parameters and batch into the reference STM cell of
../shared/bench/stm_torch.py (same equations, same parameter roles), computes the loss and
the gradients in float64, and compares them with memctl's (float32) loss and gradient norms.
Needs torch (see ../shared/bench/README.md).
"""
import json, sys
import torch
import torch.nn.functional as F

from compare_report import report

dump = json.load(open(sys.argv[1]))
P = {k: torch.tensor(v[1], dtype=torch.float64).reshape(v[0]).requires_grad_() for k, v in dump["params"].items()}
xs = torch.tensor(dump["inputs"][1], dtype=torch.float64).reshape(dump["inputs"][0])
ys = torch.tensor(dump["targets"][1], dtype=torch.float64).reshape(dump["targets"][0])
T, B, _ = xs.shape
d = P["Mi.init"].shape[0]
nq = P["Mr.init"].shape[0]

def lin(x, name):
    return x @ P[name + ".weight"].T + P[name + ".bias"]

def step(x, mi, mr):
    a1, a2, a3 = P["a1.scalar.value"], P["a2.scalar.value"], P["a3.scalar.value"]
    f1, f2, f3 = lin(x, "a.linear"), lin(x, "b.linear"), lin(x, "c.linear")
    write = f1.unsqueeze(2) * f1.unsqueeze(1)
    prob = torch.softmax(f3, -1)
    vr = torch.einsum("bn,be,bnef->bf", prob, f2, mr)
    assoc = vr.unsqueeze(2) * f2.unsqueeze(1)
    g = lin(torch.tanh(mi), "Mi.itemWrite.gate_mem") + lin(f1, "Mi.itemWrite.gate_in").unsqueeze(1)
    ig = torch.sigmoid(g[..., :d] + P["Mi.itemWrite.b_in"])
    fg = torch.sigmoid(g[..., d:] + P["Mi.itemWrite.b_forget"])
    item = ig * torch.tanh(write) + fg * mi
    proj = lin(item + a2 * assoc, "R.samRead.qkv").reshape(B, -1)
    proj = F.layer_norm(proj, proj.shape[1:]) * P["R.samRead.ln.weight"] + P["R.samRead.ln.bias"]
    proj = proj.reshape(B, d, 3 * nq).transpose(1, 2)
    q, k, v = proj[:, :nq], proj[:, nq:2 * nq], proj[:, 2 * nq:]
    att = torch.tanh(q.unsqueeze(2) * k.unsqueeze(1))
    sam = att.transpose(2, 3) @ v.unsqueeze(1)
    item = item + a3 * lin(sam.reshape(B, nq * d, d).transpose(1, 2), "Mi.transfer")
    mr = a1 * mr + sam
    o = lin(lin(mr.reshape(B, nq, d * d), "o.distill.g2").reshape(B, -1), "o.distill.g3")
    h = torch.relu(lin(torch.relu(lin(o, "h.mlp.layer0")), "h.mlp.layer1"))
    return lin(h, "out.linear"), item, mr

mi = P["Mi.init"].expand(B, d, d)
mr = P["Mr.init"].expand(B, nq, d, d)
total = 0.0
for t in range(T):
    logits, mi, mr = step(xs[t], mi, mr)
    total = total + F.binary_cross_entropy_with_logits(logits, ys[t])
loss = total / T
loss.backward()
report(dump, loss, P)
