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
- `lsam`, `namtm`: `nam_algorithmic.mem add_lsam` / `add_namtm`, NAM's addition task (35 tokens
  of a 16-token vocabulary, 16 classes scored at every step), batch 64, width 64 in 2 heads;
  Adam (lr 1e-3), gradients clipped to norm 0.5. LSAM: one layer, an FFN of 128, a residual
  from the embedding. NAM-TM: a tape of 32 positions, JUMP on, a GRU controller. PyTorch: the
  step each spec in specs/models/ writes (`namWR`/`namRD`, `tapeWrite`/`tapeRead`, `keyJump`,
  `headMove` as their tensor formulas), a loop over the steps.
- `pkm`, `pkm4`: `pattern_completion.mem pc_pkm` with `k=1 assign=false` (its first trial: one
  machine, equal weights) and `k=4 assign=true` (four machines and the assignment network):
  8 patterns of 32 bits written, 4 queries scored (12 steps), batch 24, memory of 32 columns,
  code 32, encoder/decoder MLPs of 64; Adam (lr 1e-3), gradients clipped to norm 10. PyTorch:
  the step of specs/models/pkm.mem (ridge addressing by `torch.linalg.solve`, the gated write),
  the decoder on the query steps only, binary cross-entropy with logits.

Both sides time whole training steps (forward, backward, clipping, optimiser) on one fixed
batch after a warm-up; PyTorch eager and `torch.compile` (default mode) are timed. Prints, per
model, the median wall ms per step of each, the ratio PyTorch / memctl (above 1: memctl is
faster) and the peak resident memory. Needs the torch interpreter (`--python`, default
/tmp/torchbench/bin/python).
"""
import argparse, json, re, shutil, statistics, sys

from peak_memory import timed

p = argparse.ArgumentParser()
p.add_argument("--memctl", default="target/release/memctl")
p.add_argument("--python", default="/tmp/torchbench/bin/python")
p.add_argument("--model", choices=["lstm", "rmc", "lsam", "namtm", "pkm", "pkm4", "all"], default="all")
p.add_argument("--threads", type=int, default=1)
p.add_argument("--reps", type=int, default=3)
p.add_argument("--iters", type=int, default=50)
p.add_argument("--no-compile", action="store_true", help="skip torch.compile (it takes a minute)")
a = p.parse_args()
if not shutil.which(a.python):
    sys.exit(f"no torch interpreter at {a.python}: set one up as ../shared/bench/README.md says "
             "(python3 -m venv /tmp/torchbench && /tmp/torchbench/bin/pip install torch), or pass --python")

# The training loop every PyTorch model shares: `net`, `opt`, `x`, `y` and `clip` are defined
# by the model's code before it (and `lossf` where it is not the cross-entropy).
LOOP = r"""
def step():
    opt.zero_grad(set_to_none=True)
    loss = lossf(net(x), y)
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
lossf = torch.nn.functional.cross_entropy
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

NAM_TASK = r"""
B, T, V, D, H = 64, 35, 16, 64, 2
DH = D // H
L = torch.nn.Linear
unit = lambda t: torch.nn.functional.normalize(t, dim=-1)
x = torch.randint(0, V, (B, T))
y = torch.randint(0, V, (B, T))

class Seq(torch.nn.Module):
    # Logits of every step, flattened for the cross-entropy against `y`.
    def forward(self, tokens):
        state = self.initial(tokens.shape[0])
        outs = []
        e = self.embed(tokens)
        for t in range(T):
            state, out = self.step(state, e[:, t])
            outs.append(out)
        return torch.stack(outs, 1).reshape(-1, V)

y = y.reshape(-1)
"""

LSAM = NAM_TASK + r"""
class Net(Seq):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(V, D)
        self.qkv, self.p = L(2 * D, 3 * D), L(2 * D, 2 * H)
        self.o, self.f1, self.f2, self.ln = L(D, D), L(D, 128), L(128, D), torch.nn.LayerNorm(D)
        self.out = L(D, V)
    def initial(self, b):
        return torch.zeros(b, H, DH, DH), torch.zeros(b, D)
    def step(self, state, x):
        m, h = state
        z = torch.cat([x, h], -1)
        q, k, v = self.qkv(z).view(-1, 3, H, DH).unbind(1)
        pr, pw = torch.sigmoid(self.p(z)).view(-1, 2, H, 1).unbind(1)
        k = unit(k)
        mk = (m @ k[..., None])[..., 0]                                    # M k
        m = m + ((pw * v - pw * mk)[..., None] * k[:, :, None, :])       # WR, pe = pw
        h = (pr * (m @ unit(q)[..., None])[..., 0]).reshape(-1, D)        # RD
        y = torch.relu(self.o(h)) + x
        y = self.ln(y + self.f2(torch.relu(self.f1(y))))
        return (m, h), self.out(y)

net = Net()
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
clip = lambda ps: torch.nn.utils.clip_grad_norm_(ps, 0.5)
"""

NAMTM = NAM_TASK + r"""
LEN = 32

def tape_write(tape, pos, v, pw):                                     # pe = pw
    old = (pos[..., None] * tape).sum(2)                              # Tᵀ p: [B, H, DH]
    return tape + pos[..., None] * (pw * v - pw * old)[:, :, None]

def head_move(pos, moves, jump):
    left, noop, right, jmp = moves.unbind(-1)
    return (left[..., None] * torch.roll(pos, -1, -1) + noop[..., None] * pos
            + right[..., None] * torch.roll(pos, 1, -1) + jmp[..., None] * jump)

class Net(Seq):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(V, D)
        self.inp, self.inp_ln = L(D, D), torch.nn.LayerNorm(D)
        self.gru = torch.nn.GRUCell(D, D)
        self.p, self.v, self.k, self.q = L(D, 2 * H), L(D, D), L(D, D), L(D, D)
        self.move_r, self.move_w = L(D, 4 * H), L(D, 4 * H)
        self.r, self.r_ln, self.out = L(D, D), torch.nn.LayerNorm(D), L(D, V)
    def initial(self, b):
        heads = torch.eye(H, LEN).expand(b, H, LEN)
        return torch.zeros(b, H, LEN, DH), torch.zeros(b, H, LEN, DH), heads, heads, torch.zeros(b, D)
    def step(self, state, x):
        tape, keys, hr, hw, h = state
        x = self.inp_ln(self.inp(x))
        h = self.gru(x, h)
        pr, pw = torch.sigmoid(self.p(h)).view(-1, 2, H, 1).unbind(1)
        tape = tape_write(tape, hw, self.v(x).view(-1, H, DH), pw)
        r = (pr * (hr[..., None] * tape).sum(2)).reshape(-1, D)
        keys = tape_write(keys, hw, unit(self.k(x).view(-1, H, DH)), pw)
        jump = (keys @ unit(self.q(h).view(-1, H, DH))[..., None])[..., 0]
        hr = head_move(hr, torch.softmax(self.move_r(h).view(-1, H, 4), -1), jump)
        hw = head_move(hw, torch.softmax(self.move_w(h).view(-1, H, 4), -1), jump)
        return (tape, keys, hr, hw, h), self.out(torch.relu(self.r_ln(self.r(r))))

net = Net()
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
clip = lambda ps: torch.nn.utils.clip_grad_norm_(ps, 0.5)
"""

PKM = r"""
B, P, Q, N, C, HID, M, LAM = 24, 8, 4, 32, 32, 64, 32, 0.35
T, K = P + Q, int(sys.argv[4])
MI, ASSIGN = M // K, sys.argv[5] == "1"
L = torch.nn.Linear
pattern = torch.randint(0, 2, (B, T, N)).float() * 2 - 1
flags = torch.zeros(B, T, 2)
flags[:, :P, 0], flags[:, P:, 1] = 1, 1
x = torch.cat([pattern, flags], -1)
y = torch.randint(0, 2, (B, Q, N)).float()
lossf = torch.nn.functional.binary_cross_entropy_with_logits

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = torch.nn.Sequential(L(N, HID), torch.nn.ReLU(), L(HID, C))
        self.dec = torch.nn.Sequential(L(C, HID), torch.nn.ReLU(), L(HID, N))
        if ASSIGN:
            self.assign = torch.nn.Sequential(L(C, 40), torch.nn.ReLU(), L(40, 20), torch.nn.ReLU(),
                                              L(20, K), torch.nn.ReLU(), L(K, K))
        self.r0 = torch.nn.Parameter(torch.rand(K, C, MI) * 0.2 - 0.1)
    def forward(self, xs):
        r = self.r0.expand(xs.shape[0], K, C, MI)
        v = torch.eye(MI).expand(xs.shape[0], K, MI, MI)
        eye = LAM * torch.eye(MI)
        outs = []
        for t in range(T):
            z = self.enc(xs[:, t, :N])                                      # [B, C]
            write = xs[:, t, N, None, None, None]
            eta = (0.05 + 2 * torch.sigmoid(self.assign(z)) if ASSIGN else torch.ones(1, K))[..., None]
            gamma = eta ** -2 / (eta ** -2).sum(1, keepdim=True)           # [B, K, 1]
            rt = r.transpose(-1, -2)
            w = torch.linalg.solve(rt @ r + eye, rt @ z[:, None, :, None])  # ridge: [B, K, MI, 1]
            mu = ((r @ w)[..., 0] * gamma).sum(1)                           # [B, C]
            if t >= P:
                outs.append(self.dec(mu))
            u = v @ w
            beta = 1 / ((w * u).sum(-2, keepdim=True) + eta[..., None] ** 2)
            rn = r + (z - mu)[:, None, :, None] * (beta * u.transpose(-1, -2))
            vn = v - beta * u @ u.transpose(-1, -2)
            r, v = r + write * (rn - r), v + write * (vn - v)
        return torch.stack(outs, 1)

net = Net()
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
clip = lambda ps: torch.nn.utils.clip_grad_norm_(ps, 10.0)
"""

# name: (spec, experiment, memctl overrides, PyTorch code, its extra arguments, title)
MODELS = {
    "lstm": ("specs/examples/assoc.mem", "assoc_lstm", [], LSTM, [],
             "LSTM (assoc_lstm: batch 32, 17 steps, hidden 128)"),
    "rmc": ("specs/examples/nth_farthest.mem", "nfar_rmc", [], RMC, [],
            "RMC (nfar_rmc: batch 128, 4 steps, 4 slots × 64)"),
    "lsam": ("specs/examples/nam_algorithmic.mem", "add_lsam", [], LSAM, [],
             "LSAM (add_lsam: batch 64, 35 steps, width 64)"),
    "namtm": ("specs/examples/nam_algorithmic.mem", "add_namtm", [], NAMTM, [],
              "NAM-TM (add_namtm: batch 64, 35 steps, width 64, tape 32)"),
    "pkm": ("specs/examples/pattern_completion.mem", "pc_pkm", ["k=1", "assign=false"], PKM, ["1", "0"],
            "PKM (pc_pkm k=1, equal weights: batch 24, 12 steps, m 32, code 32)"),
    "pkm4": ("specs/examples/pattern_completion.mem", "pc_pkm", ["k=4", "assign=true"], PKM, ["4", "1"],
             "PKM (pc_pkm k=4, assignment network: batch 24, 12 steps, m 32, code 32)"),
}


def memctl(spec, experiment, overrides):
    out, rss = timed([a.memctl, "bench", spec, experiment, *overrides, "--threads", str(a.threads), "--iters",
                      str(a.iters), "--json"])
    return json.loads(out)["report"]["median_ms"], rss


def torch(code, extra, compiled):
    out, rss = timed([a.python, "-W", "ignore", "-c", HEADER + code + LOOP, str(a.threads), str(a.iters),
                      "1" if compiled else "0", *extra])
    return float(re.search(r"median_ms=([\d.]+)", out).group(1)), rss


for name in (MODELS if a.model == "all" else [a.model]):
    spec, experiment, overrides, code, extra, title = MODELS[name]
    runs = {"memctl": [], "torch eager": [], "torch.compile": []}
    for _ in range(a.reps):
        runs["memctl"].append(memctl(spec, experiment, overrides))
        runs["torch eager"].append(torch(code, extra, False))
        if not a.no_compile:
            runs["torch.compile"].append(torch(code, extra, True))
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
