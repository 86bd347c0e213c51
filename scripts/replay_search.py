"""Replays ASHA over a full grid's recorded curves: what a pruner would have spent and kept.

    memctl --store STORE runs --all --format records > grid.json   # the full grid, every trial done
    python3 scripts/replay_search.py grid.json --patience 0.1 --orders 60

A search's decisions depend only on each trial's curves (validation metric at the rungs,
training loss before them) and the order in which trials reach the rungs, so the full grid's
runs (scripts/bench_search.sh's `grid`) replay a pruned search without training: two workers
take a configuration's seeds in turn, each trial advancing by its measured time per step, and
at each rung its configuration's mean over the seeds there is judged as memctl's pruner judges
it (src/search/pruner.rs: ASHA keeps the best `keep`, at least one; with `patience`, a trial
whose training loss fell by more than that fraction over the first rung's span before the rung
goes on; a configuration pruned through one seed stops its others). It prints, for the first
order (`grid(seed = 1)`'s, given by --order) and for random orders: the training steps used
against the grid's, and whether the grid's best configuration (by the mean final validation
loss) finished. A replay, not a run: a real search differs where trials finish at nearly the
same moment.
"""
import argparse, json, math, random
from collections import defaultdict

p = argparse.ArgumentParser()
p.add_argument("records")
p.add_argument("--metric", default="val_loss", help="a loss (lower is better)")
p.add_argument("--min-steps", type=int, default=1500)
p.add_argument("--rungs", type=int, default=3)
p.add_argument("--keep", type=float, default=1 / 3)
p.add_argument("--patience", type=float, default=None)
p.add_argument("--jobs", type=int, default=2)
p.add_argument("--orders", type=int, default=60, help="random orders replayed besides the first")
p.add_argument("--order", default="4.64e-4:16,2.15e-3:48,4.64e-4:48,1e-4:48,2.15e-3:32,1e-2:16,"
               "1e-2:48,1e-4:16,4.64e-4:32,1e-4:32,2.15e-3:16,1e-2:32",
               help="the first order, lr:d pairs (default: specs/bench/search_stm.mem's grid(seed = 1))")
a = p.parse_args()

runs = {}
for r in json.load(open(a.records)):
    if r["status"] == "done":
        c = r["config"]
        runs[(c["train"]["lr"], c["params"]["d"], c["seed"])] = r
configs = sorted({k[:2] for k in runs})
seeds = sorted({k[2] for k in runs})
steps = max(r["steps_run"] for r in runs.values())
per_step = {k: r["train_seconds"] / r["steps_run"] for k, r in runs.items()}
curve = lambda k, name: {int(s): v for s, v in runs[k]["curves"][name]}
final = lambda c, name: sum(runs[c + (s,)]["final_metrics"][name] for s in seeds) / len(seeds)
best = min(configs, key=lambda c: final(c, a.metric))
factor = 1 / a.keep
rung_steps = [round(a.min_steps * factor ** k) for k in range(a.rungs)]
window = a.min_steps - round(a.min_steps / factor)
every = int(runs[next(iter(runs))]["config"]["train"]["eval_every"])


def at_or_before(c, step):
    return c[max((s for s in c if s <= step), default=min(c))]


def replay(order):
    reports = defaultdict(dict)  # rung -> {(config, seed): value}
    pruned, used, guarded = set(), 0, 0
    queue = [(c, s) for c in order for s in seeds]
    running = []  # [time, config, seed, step]
    reached = {}

    def start(now):
        while len(running) < a.jobs and queue:
            c, s = queue.pop(0)
            if c not in pruned:
                running.append([now, c, s, 0])

    start(0.0)
    while running:
        running.sort(key=lambda r: r[0])
        now, c, s, step = running.pop(0)
        step += every
        used += every
        now += per_step[c + (s,)] * every
        stop = c in pruned
        if not stop and step in rung_steps:
            r = rung_steps.index(step)
            reports[r][(c, s)] = curve(c + (s,), a.metric)[step]
            values = defaultdict(list)
            for (cc, _), v in reports[r].items():
                values[cc].append(v)
            means = sorted(sum(v) / len(v) for v in values.values())
            mean = sum(values[c]) / len(values[c])
            cutoff = means[max(1, math.floor(len(means) * a.keep)) - 1] if len(means) > 1 else None
            passes = cutoff is None or mean <= cutoff
            tl = curve(c + (s,), "train_loss")
            before = at_or_before(tl, step - window)
            falling = a.patience is not None and (before - tl[step]) / before > a.patience
            guarded += not passes and falling
            if not (passes or falling):
                stop = True
                pruned.add(c)
        if stop or step >= steps:
            reached[(c, s)] = step
            start(now)
        else:
            running.append([now, c, s, step])
    finished = [c for c in order if all(reached.get((c, s), 0) >= steps for s in seeds)]
    return used / (len(configs) * len(seeds) * steps), best in finished, guarded


first = [tuple(float(x) if i == 0 else int(x) for i, x in enumerate(pair.split(":"))) for pair in a.order.split(",")]
first = [min(configs, key=lambda c: (abs(math.log(c[0] / lr)), c[1] != d)) for lr, d in first]
frac, kept, guarded = replay(first)
print(f"best configuration: lr {best[0]:.3g}, d {best[1]} (final {a.metric} {final(best, a.metric):.3f})")
print(f"first order: {frac:.1%} of the grid's steps, best finished: {kept}, guard's decisions: {guarded}")
if a.orders:
    results = [replay(random.Random(k).sample(configs, len(configs))) for k in range(1, a.orders + 1)]
    fracs = sorted(r[0] for r in results)
    print(f"{a.orders} random orders: mean {sum(fracs) / len(fracs):.1%}, 90th percentile "
          f"{fracs[int(0.9 * len(fracs))]:.1%}, most {fracs[-1]:.1%}; best finished in "
          f"{sum(r[1] for r in results)} of {a.orders}")
