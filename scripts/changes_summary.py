"""What `scripts/gpu_measure.sh changes` (or `changes-checks` and `changes-times`) found, in
two tables: each `doctor --check` run (the default, all changes, each unchecked change alone)
with its verdict and largest difference, and each change's step times against the default
build's on the same models. A change is a candidate to be turned on (`Switch::on`, see
src/kernels/cuda/switches.rs) when its check passed alone and with the others, it made some model
faster, and it made none slower (beyond `--noise`, 2 % by default).

Usage: python3 scripts/changes_summary.py FOLDER [--noise 0.02]
(FOLDER holds doctor.txt and steps.txt, as the device call brought them back; with two calls,
put the first call's doctor.txt and both calls' steps.txt together: the script reads every
steps*.txt there.)"""
import argparse
import glob
import os
import re
import sys


def doctor_runs(path):
    """[(setting, passed, worst, problems)] from doctor.txt: the first run is the default
    (no header), later ones follow a `== MEMCTL_CUDA=...` line."""
    runs, setting, worst, problems, passed = [], "default", 0.0, [], None
    def close():
        if passed is not None:
            runs.append((setting, passed, worst, problems))
    for line in open(path, errors="replace"):
        header = re.match(r"== MEMCTL_CUDA=(\S*)", line)
        if header:
            close()
            setting, worst, problems, passed = header.group(1), 0.0, [], None
            continue
        # A model's row has two differences (first step, losses over steps); the sums',
        # updates' and solves' one, then a count.
        row = re.match(r"\s+(check_\w+)\s+(\S+)\s+(\S+)\s", line) or re.match(
            r"\s+(sums|updates|solves)\s+(\S+)\s", line
        )
        if row:
            for value in row.groups()[1:]:
                worst = max(worst, float(value)) if value.lower() != "nan" else float("nan")
        if "beyond the tolerance" in line or re.search(r"\bfailed:", line):
            problems.append(line.strip())
        verdict = re.match(r"check: (passed|FAILED)", line)
        if verdict:
            passed = verdict.group(1) == "passed"
    close()
    return runs


def step_times(paths):
    """{(model, setting): median ms} from steps.txt files: `== SPEC EXPERIMENT [ARGS] cuda
    fused=SETTING` followed by a `memctl_bench ... median_ms=...` line."""
    times, current = {}, None
    for path in paths:
        for line in open(path, errors="replace"):
            header = re.match(r"== (specs/\S+ .*?) cuda fused=(\S+)", line)
            if header:
                current = (header.group(1).split("/")[-1], header.group(2))
                continue
            median = re.search(r"median_ms=([0-9.]+)", line)
            if median and current:
                times[current] = float(median.group(1))
                current = None
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder")
    parser.add_argument("--noise", type=float, default=0.02)
    args = parser.parse_args()
    doctor = os.path.join(args.folder, "doctor.txt")
    runs = doctor_runs(doctor) if os.path.exists(doctor) else []
    print("doctor --check runs:")
    for setting, passed, worst, problems in runs:
        print(f"  {setting:<32} {'passed' if passed else 'FAILED':<7} largest difference {worst:.1e}")
        for p in problems:
            print(f"      {p}")
    verdicts = {setting: passed for setting, passed, _, _ in runs}
    times = step_times(sorted(glob.glob(os.path.join(args.folder, "steps*.txt"))))
    settings = sorted({s for (_, s) in times} - {"default", "0", "1"})
    print("\nms per replayed step, each setting against the default build on the same model:")
    for setting in settings:
        changes = []
        for (model, s), ms in sorted(times.items()):
            base = times.get((model, "default"))
            if s == setting and base:
                changes.append((model, base, ms, ms / base - 1))
        if not changes:
            continue
        cells = ", ".join(f"{m} {b:.2f} → {ms:.2f} ({100 * r:+.1f} %)" for m, b, ms, r in changes)
        if setting.startswith("-"):
            print(f"  without {setting[1:]}: {cells}")
            continue
        pays = any(r < -args.noise for _, _, _, r in changes)
        hurts = any(r > args.noise for _, _, _, r in changes)
        alone = verdicts.get(setting)
        with_all = verdicts.get("1")
        if alone is False or with_all is False:
            verdict = "check FAILED"
        elif alone is None:
            verdict = "not checked alone"
        elif pays and not hurts:
            verdict = "passes and pays: a candidate for checked"
        elif hurts:
            verdict = "slower somewhere"
        else:
            verdict = "within the noise"
        print(f"  {setting}: {verdict}\n      {cells}")


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:
        sys.exit(0)
