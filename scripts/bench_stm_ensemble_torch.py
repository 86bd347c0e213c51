"""PyTorch's ensemble of N STM trials, the yardstick for `memctl bench --pack N`.

PyTorch's own recipe for training many small models at once (the model-ensembling tutorial):
the N models' parameters stacked (`torch.func.stack_module_state`), the loss mapped over them
with `torch.func.vmap` (`functional_call`), one backward of the summed losses, which gives
each model its own gradients, and one optimiser over the stacked parameters (RMSprop and
clipping by value act element by element, so each model is updated as it would be alone).
Each model draws its own batch. The model is the STM of ../shared/bench/stm_torch.py, config
A by default (d 32, nq 4, nr 32, batch 32, 20 time steps, 8 inputs and outputs, RMSprop
lr 1e-4 with momentum 0.9, clipping by value 10), which is memctl's `specs/bench/stm.mem
stm_a`:

    python3 scripts/bench_stm_ensemble_torch.py --trials 16 --threads 1
    memctl bench specs/bench/stm.mem stm_a --pack 16 --threads 1

    python3 scripts/bench_stm_ensemble_torch.py --trials 16 --device cuda --compile reduce-overhead
    memctl bench specs/bench/stm.mem stm_a --pack 16 --device cuda

Every timed step ends with a synchronisation (the losses read back), as a training loop that
logs them does. --compile wraps the mapped loss in torch.compile (reduce-overhead adds CUDA
graphs). --check compares the first step's losses and gradients with each model run alone
(float64) and exits 1 on a mismatch. Prints one line:
    stm_ensemble_torch trials=.. ... median_ms=.. trial_steps_per_s=..
Compare ratios taken in the same session: the machine is noisy.
"""
import argparse, copy, sys, time
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call, stack_module_state, vmap

p = argparse.ArgumentParser()
for name, default in [("trials", 16), ("d", 32), ("nq", 4), ("nr", 32), ("batch", 32), ("steps", 20),
                      ("input", 8), ("output", 8), ("threads", 2), ("iters", 20), ("warmup", 3)]:
    p.add_argument("--" + name, type=int, default=default)
p.add_argument("--device", default="cpu", help="cpu or cuda")
p.add_argument("--compile", default="", help="torch.compile mode: default, reduce-overhead, max-autotune")
p.add_argument("--check", action="store_true", help="check the ensemble against each model alone (float64)")
a = p.parse_args()
torch.set_num_threads(a.threads)
torch.set_flush_denormal(True)  # as the single-model yardstick: STM's decaying memories
d, nq, nr, B, T, N = a.d, a.nq, a.nr, a.batch, a.steps, a.trials


class STM(nn.Module):
    """../shared/bench/stm_torch.py's STM with gates and transfer (config A's)."""

    def __init__(self):
        super().__init__()
        self.f1, self.f2, self.f3 = nn.Linear(a.input, d), nn.Linear(a.input, d), nn.Linear(a.input, nq)
        self.gate_in, self.gate_mem = nn.Linear(d, 2 * d), nn.Linear(d, 2 * d)
        self.b_in, self.b_forget = nn.Parameter(torch.zeros(1)), nn.Parameter(torch.ones(1))
        self.qkv = nn.Linear(d, 3 * nq)
        self.ln = nn.LayerNorm([d, 3 * nq])
        self.g1 = nn.Linear(nq * d, d)
        self.g2 = nn.Linear(d * d, nr)
        self.g3 = nn.Linear(nq * nr, 64)
        self.head = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU())
        self.out = nn.Linear(128, a.output)
        self.alpha = nn.Parameter(torch.zeros(3))
        self.mi0 = nn.Parameter(torch.empty(d, d).uniform_(-(2 * d) ** -0.5, (2 * d) ** -0.5))
        self.mr0 = nn.Parameter(torch.empty(nq, d, d).uniform_(-(2 * d + nq) ** -0.5, (2 * d + nq) ** -0.5))

    def step(self, x, mi, mr):
        a1, a2, a3 = self.alpha
        f1, f2, f3 = self.f1(x), self.f2(x), self.f3(x)
        write = f1.unsqueeze(2) * f1.unsqueeze(1)
        prob = torch.softmax(f3, -1)
        vr = torch.einsum("bn,be,bnef->bf", prob, f2, mr)
        assoc = vr.unsqueeze(2) * f2.unsqueeze(1)
        g = self.gate_mem(torch.tanh(mi)) + self.gate_in(f1).unsqueeze(1)
        ig, fg = torch.sigmoid(g[..., :d] + self.b_in), torch.sigmoid(g[..., d:] + self.b_forget)
        item = ig * torch.tanh(write) + fg * mi
        proj = self.ln(self.qkv(item + a2 * assoc)).transpose(1, 2)
        q, k, v = proj[:, :nq], proj[:, nq:2 * nq], proj[:, 2 * nq:]
        att = torch.tanh(q.unsqueeze(2) * k.unsqueeze(1))
        sam = att.transpose(2, 3) @ v.unsqueeze(1)
        item = item + a3 * self.g1(sam.reshape(B, nq * d, d).transpose(1, 2))
        mr = a1 * mr + sam
        o = self.g3(self.g2(mr.reshape(B, nq, d * d)).reshape(B, nq * nr))
        return self.out(self.head(o)), item, mr

    def forward(self, xs, ys):
        mi = self.mi0.expand(B, d, d)
        mr = self.mr0.expand(B, nq, d, d)
        total = 0.0
        for t in range(T):
            logits, mi, mr = self.step(xs[t], mi, mr)
            total = total + F.binary_cross_entropy_with_logits(logits, ys[t])
        return total / T


def ensemble(dtype):
    torch.manual_seed(0)
    models = [STM().to(device=dev, dtype=dtype) for _ in range(N)]
    params, buffers = stack_module_state(models)
    base = copy.deepcopy(models[0]).to("meta")
    xs = torch.randn(N, T, B, a.input, device=dev, dtype=dtype)
    ys = torch.randint(0, 2, (N, T, B, a.output), device=dev).to(dtype)
    return models, params, buffers, base, xs, ys


def losses_of(base):
    def one(p, b, x, y):
        return functional_call(base, (p, b), (x, y))
    return vmap(one)


dev = torch.device(a.device)
if a.check:
    models, params, buffers, base, xs, ys = ensemble(torch.float64)
    losses = losses_of(base)(params, buffers, xs, ys)
    losses.sum().backward()
    worst = 0.0
    for i, m in enumerate(models):
        alone = m(xs[i], ys[i])
        alone.backward()
        worst = max(worst, abs(alone.item() - losses[i].item()))
        for name, w in m.named_parameters():
            worst = max(worst, (w.grad - params[name].grad[i]).abs().max().item())
    print(f"stm_ensemble_torch check trials={N} max_abs_difference={worst:.3e}")
    sys.exit(0 if worst < 1e-12 else 1)

_, params, buffers, base, xs, ys = ensemble(torch.float32)
loss_fn = losses_of(base)
if a.compile:
    loss_fn = torch.compile(loss_fn, mode=a.compile)
opt = torch.optim.RMSprop(params.values(), lr=1e-4, momentum=0.9)
times = []
for i in range(a.warmup + a.iters):
    t0 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    losses = loss_fn(params, buffers, xs, ys)
    losses.sum().backward()
    torch.nn.utils.clip_grad_value_(params.values(), 10.0)
    opt.step()
    losses.tolist()
    if i >= a.warmup:
        times.append((time.perf_counter() - t0) * 1e3)
times.sort()
median = times[len(times) // 2]
per_trial = sum(t[0].numel() for t in params.values())
print(f"stm_ensemble_torch trials={N} d={d} nq={nq} nr={nr} batch={B} steps={T} input={a.input} "
      f"output={a.output} threads={torch.get_num_threads()} device={a.device} compile={a.compile or 'no'} "
      f"median_ms={median:.2f} min_ms={times[0]:.2f} trial_steps_per_s={N * 1e3 / median:.1f} "
      f"params_per_trial={per_trial} torch={torch.__version__}")
