"""Time memctl's LSTM training step against PyTorch's `nn.LSTM`, back to back.

    python3 scripts/bench_lstm_vs_torch.py --memctl target/release/memctl --threads 1 --reps 3

The experiment is `specs/examples/assoc.mem assoc_lstm`: associative retrieval with 7 pairs
(17 tokens of a 37-token vocabulary, 10 classes scored at the last step), batch 32, an
embedding of width 32, an LSTM of 128 units and a linear read-out, RMSprop (lr 1e-3,
momentum 0.9) with gradients clipped by value at 10. The PyTorch model is the one its users
write: `nn.Embedding`, `nn.LSTM(batch_first=True)`, `nn.Linear` on the last step's output.
Both time whole training steps (forward, backward, clipping, optimiser) on one fixed batch
after a warm-up; PyTorch eager and `torch.compile` (default mode) are timed. Reports the
median wall ms per step of each, the ratio PyTorch / memctl (above 1: memctl is faster) and
the peak resident memory. Needs the torch interpreter (`--python`, default
/tmp/torchbench/bin/python).
"""
import argparse, json, re, subprocess, sys, statistics

from peak_memory import timed

p = argparse.ArgumentParser()
p.add_argument("--memctl", default="target/release/memctl")
p.add_argument("--python", default="/tmp/torchbench/bin/python")
p.add_argument("--threads", type=int, default=1)
p.add_argument("--reps", type=int, default=3)
p.add_argument("--iters", type=int, default=50)
p.add_argument("--no-compile", action="store_true", help="skip torch.compile (it takes a minute)")
a = p.parse_args()

TORCH = r"""
import sys, time, statistics, torch
threads, iters, compiled = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
torch.set_num_threads(threads)
torch.manual_seed(0)
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
x = torch.randint(0, V, (B, T))
y = torch.randint(0, C, (B,))

def step():
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(net(x), y)
    loss.backward()
    torch.nn.utils.clip_grad_value_(net.parameters(), 10.0)
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


def memctl():
    out, rss = timed([a.memctl, "bench", "specs/examples/assoc.mem", "assoc_lstm", "--threads", str(a.threads),
                      "--iters", str(a.iters), "--json"])
    return json.loads(out)["report"]["median_ms"], rss


def torch(compiled):
    out, rss = timed([a.python, "-W", "ignore", "-c", TORCH, str(a.threads), str(a.iters), "1" if compiled else "0"])
    return float(re.search(r"median_ms=([\d.]+)", out).group(1)), rss


runs = {"memctl": [], "torch eager": [], "torch.compile": []}
for _ in range(a.reps):
    runs["memctl"].append(memctl())
    runs["torch eager"].append(torch(False))
    if not a.no_compile:
        runs["torch.compile"].append(torch(True))

ours = statistics.median(ms for ms, _ in runs["memctl"])
print(f"LSTM (assoc_lstm: batch 32, 17 steps, hidden 128), {a.threads} thread(s), medians of {a.reps} runs")
print(f"{'':14} {'ms/step':>9} {'vs memctl':>10} {'peak MB':>8}")
for name, rs in runs.items():
    if not rs:
        continue
    ms = statistics.median(m for m, _ in rs)
    rss = max(r for _, r in rs)
    print(f"{name:14} {ms:9.2f} {ms / ours:9.2f}x {rss:8.0f}")
