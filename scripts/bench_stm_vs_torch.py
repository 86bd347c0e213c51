"""Time memctl's STM training step against the PyTorch eager reference, back to back.

    python3 scripts/bench_stm_vs_torch.py --memctl target/release/memctl --config a --threads 1 --reps 3

Runs `memctl bench specs/bench/stm.mem stm_a|stm_b` and ../shared/bench/stm_torch.py with the
same configuration and thread count, alternating, `--reps` times each, each under
`/usr/bin/time -v` for the peak resident memory. Reports per run the median wall time per
step and the median CPU time per step (memctl measures it itself; for PyTorch the reference
script is run with `time.perf_counter` replaced by `time.process_time`, i.e. the process's CPU
time, all threads). On a machine shared with other work, CPU time is the steadier figure.
Needs the torch interpreter (`--python`, default /tmp/torchbench/bin/python).
"""
import argparse, re, shutil, statistics, subprocess, sys

from peak_memory import timed

p = argparse.ArgumentParser()
p.add_argument("--memctl", default="target/release/memctl")
p.add_argument("--python", default="/tmp/torchbench/bin/python")
p.add_argument("--torch-script", default="../shared/bench/stm_torch.py")
p.add_argument("--config", choices=["a", "b"], default="a")
p.add_argument("--threads", type=int, default=1)
p.add_argument("--reps", type=int, default=3)
p.add_argument("--iters", type=int, default=None)
a = p.parse_args()
if not shutil.which(a.python):
    sys.exit(f"no torch interpreter at {a.python}: set one up as ../shared/bench/README.md says "
             "(python3 -m venv /tmp/torchbench && /tmp/torchbench/bin/pip install torch), or pass --python")

sizes = {"a": "--d 32 --nq 4 --nr 32", "b": "--d 96 --nq 8 --nr 96"}[a.config]
iters = a.iters or (20 if a.config == "a" else 5)
warmup = 3 if a.config == "a" else 1


def torch(cpu):
    code = (
        "import sys, time\n"
        f"if {cpu}: time.perf_counter = time.process_time\n"
        f"sys.argv = [{a.torch_script!r}] + sys.argv[1:]\n"
        f"exec(compile(open({a.torch_script!r}).read(), {a.torch_script!r}, 'exec'))\n"
    )
    cmd = [a.python, "-W", "ignore", "-c", code] + sizes.split() + [
        "--batch", "32", "--steps", "20", "--threads", str(a.threads), "--iters", str(iters), "--warmup", str(warmup)]
    out, rss = timed(cmd)
    return float(re.search(r"median_ms=([\d.]+)", out).group(1)), rss


rows = []
for rep in range(a.reps):
    out, rss = timed([a.memctl, "bench", "specs/bench/stm.mem", f"stm_{a.config}", "--threads", str(a.threads),
                      "--iters", str(iters), "--warmup", str(warmup)])
    m_wall = float(re.search(r"median_ms=([\d.]+)", out).group(1))
    m_cpu = float(re.search(r"median_cpu_ms=([\d.]+)", out).group(1))
    t_wall, t_rss = torch(False)
    t_cpu, _ = torch(True)
    rows.append((m_wall, m_cpu, rss, t_wall, t_cpu, t_rss))
    print(f"config {a.config} threads {a.threads} rep {rep + 1}: memctl wall {m_wall:.1f} ms cpu {m_cpu:.1f} ms "
          f"rss {rss:.0f} MiB | torch wall {t_wall:.1f} ms cpu {t_cpu:.1f} ms rss {t_rss:.0f} MiB | "
          f"ratio wall {t_wall / m_wall:.2f} cpu {t_cpu / m_cpu:.2f}", flush=True)
med = lambda i: statistics.median(r[i] for r in rows)
print(f"median: memctl wall {med(0):.1f} cpu {med(1):.1f} rss {med(2):.0f} | torch wall {med(3):.1f} cpu {med(4):.1f} "
      f"rss {med(5):.0f} | torch/memctl wall {med(3) / med(0):.2f} cpu {med(4) / med(1):.2f}")
