"""Time memctl's training step of each model against the PyTorch model its users write.

    python3 scripts/bench_models_vs_torch.py --memctl target/release/memctl --threads 1 --reps 3
    python3 scripts/bench_models_vs_torch.py --model rmc --threads 2

Models (`--model`, default all), each an example experiment of `specs/examples/`:
- `lstm`: `assoc.mem assoc_lstm`, associative retrieval with 7 pairs (17 tokens of a 37-token
  vocabulary, 10 classes scored at the last step), batch 32, an embedding of width 32, an LSTM
  of 128 units and a linear read-out; RMSprop (lr 1e-3, momentum 0.9), gradients clipped by
  value at 10. PyTorch: `nn.Embedding`, `nn.LSTM(batch_first=True)`, `nn.Linear` on the last
  step.
- `rmc`: `nth_farthest.mem nfar_rmc`, Nth-farthest with 4 vectors of 8 dimensions (4 steps of
  20 inputs, 4 classes scored at the last step), batch 128, an RMC of 4 slots, 4 heads of 16,
  one attention block with a 2-layer MLP, unit gates, and a read-out MLP of 4 × 128; Adam
  (lr 1e-3), gradients clipped to norm 0.1. PyTorch: the Sonnet form memctl's `rmc` model
  follows (specs/models/rmc.mem), written with `nn.Linear`, `nn.LayerNorm` and a loop over
  the steps.

Both sides time whole training steps (forward, backward, clipping, optimiser) on one fixed
batch after a warm-up; PyTorch eager and `torch.compile` (default mode) are timed. Prints, per
model, the median wall ms per step of each, the ratio PyTorch / memctl (above 1: memctl is
faster) and the peak resident memory. Needs the torch interpreter (`--python`, default
/tmp/torchbench/bin/python).
"""
import argparse, json, re, statistics

from peak_memory import timed

p = argparse.ArgumentParser()
p.add_argument("--memctl", default="target/release/memctl")
p.add_argument("--python", default="/tmp/torchbench/bin/python")
p.add_argument("--model", choices=["lstm", "rmc", "all"], default="all")
p.add_argument("--threads", type=int, default=1)
p.add_argument("--reps", type=int, default=3)
p.add_argument("--iters", type=int, default=50)
p.add_argument("--no-compile", action="store_true", help="skip torch.compile (it takes a minute)")
a = p.parse_args()

# The training loop both PyTorch models share: `net`, `opt`, `x`, `y` and `clip` are defined
# by the model's code before it.
LOOP = r"""
def step():
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(net(x), y)
    loss.backward()
    clip(net.parameters())
    opt.step()
    return loss

if compiled:
    step = torch.compile(step)
for _ in range(5):
    step()
times = []
for _ in range(iters):
    t = time.perf_counter()
    step()
    times.append((time.perf_counter() - t) * 1e3)
print(f"median_ms={statistics.median(times):.3f}")
"""

HEADER = r"""
import sys, time, statistics, torch
threads, iters, compiled = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
torch.set_num_threads(threads)
torch.manual_seed(0)
"""

LSTM = r"""
B, T, V, E, H, C = 32, 17, 37, 32, 128, 10

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(V, E)
        self.lstm = torch.nn.LSTM(E, H, batch_first=True)
        self.out = torch.nn.Linear(H, C)
    def forward(self, x):
        h, _ = self.lstm(self.embed(x))
        return self.out(h[:, -1])

net = Net()
opt = torch.optim.RMSprop(net.parameters(), lr=1e-3, alpha=0.99, eps=1e-8, momentum=0.9)
clip = lambda ps: torch.nn.utils.clip_grad_value_(ps, 10.0)
x = torch.randint(0, V, (B, T))
y = torch.randint(0, C, (B,))
"""

RMC = r"""
B, T, IN, N, H, HS, C, HEAD = 128, 4, 20, 4, 4, 16, 4, 128
D, R = H * HS, N + 1
L = torch.nn.Linear

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = L(IN, D)
        self.qkv, self.qkv_ln = L(D, 3 * D), torch.nn.LayerNorm(3 * D)
        self.attn_ln, self.mlp_ln = torch.nn.LayerNorm(D), torch.nn.LayerNorm(D)
        self.mlp = torch.nn.Sequential(L(D, D), torch.nn.ReLU(), L(D, D))
        self.gate_in, self.gate_mem = L(D, 2 * D), L(D, 2 * D)
        layers = []
        for i in range(4):
            layers += [L(N * D if i == 0 else HEAD, HEAD), torch.nn.ReLU()]
        self.head = torch.nn.Sequential(*layers)
        self.out = L(HEAD, C)
        self.register_buffer("m0", torch.nn.functional.pad(torch.eye(N), (0, D - N)))

    def step(self, m, x):
        y = torch.cat([m, x[:, None]], 1)                                   # [B, R, D]
        qkv = self.qkv_ln(self.qkv(y)).view(-1, R, H, 3 * HS).transpose(1, 2)
        q, k, v = qkv.split(HS, -1)
        a = torch.softmax((q * HS ** -0.5) @ k.transpose(-1, -2), -1) @ v  # [B, H, R, HS]
        y = self.attn_ln(y + a.transpose(1, 2).reshape(-1, R, D))
        y = self.mlp_ln(y + self.mlp(y))
        i, f = (self.gate_mem(torch.tanh(m)) + self.gate_in(x)[:, None]).chunk(2, -1)
        return torch.sigmoid(i) * torch.tanh(y[:, :N]) + torch.sigmoid(f + 1.0) * m

    def forward(self, xs):
        m = self.m0.expand(xs.shape[0], N, D)
        for t in range(T):
            m = self.step(m, self.inp(xs[:, t]))
        return self.out(self.head(m.flatten(1)))

net = Net()
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
clip = lambda ps: torch.nn.utils.clip_grad_norm_(ps, 0.1)
x = torch.randn(B, T, IN)
y = torch.randint(0, C, (B,))
"""

MODELS = {
    "lstm": ("specs/examples/assoc.mem", "assoc_lstm", LSTM, "LSTM (assoc_lstm: batch 32, 17 steps, hidden 128)"),
    "rmc": ("specs/examples/nth_farthest.mem", "nfar_rmc", RMC, "RMC (nfar_rmc: batch 128, 4 steps, 4 slots × 64)"),
}


def memctl(spec, experiment):
    out, rss = timed([a.memctl, "bench", spec, experiment, "--threads", str(a.threads), "--iters", str(a.iters),
                      "--json"])
    return json.loads(out)["report"]["median_ms"], rss


def torch(code, compiled):
    out, rss = timed([a.python, "-W", "ignore", "-c", HEADER + code + LOOP, str(a.threads), str(a.iters),
                      "1" if compiled else "0"])
    return float(re.search(r"median_ms=([\d.]+)", out).group(1)), rss


for name in (MODELS if a.model == "all" else [a.model]):
    spec, experiment, code, title = MODELS[name]
    runs = {"memctl": [], "torch eager": [], "torch.compile": []}
    for _ in range(a.reps):
        runs["memctl"].append(memctl(spec, experiment))
        runs["torch eager"].append(torch(code, False))
        if not a.no_compile:
            runs["torch.compile"].append(torch(code, True))
    ours = statistics.median(ms for ms, _ in runs["memctl"])
    print(f"{title}, {a.threads} thread(s), medians of {a.reps} runs")
    print(f"{'':14} {'ms/step':>9} {'vs memctl':>10} {'peak MB':>8}")
    for who, rs in runs.items():
        if not rs:
            continue
        ms = statistics.median(m for m, _ in rs)
        rss = max(r for _, r in rs)
        print(f"{who:14} {ms:9.2f} {ms / ours:9.2f}x {rss:8.0f}")
    print()
