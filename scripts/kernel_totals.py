"""Sums an ncu --csv report (scripts/gpu_kernel_times.sh) by kernel name: launches, total and
mean duration, largest total first. Usage: python3 scripts/kernel_totals.py REPORT.csv"""
import csv
import sys
from collections import defaultdict


def main(path):
    totals, counts = defaultdict(float), defaultdict(int)
    with open(path, newline="") as f:
        rows = csv.reader(line for line in f if line.startswith('"'))
        header = next(rows, None)
        if header is None:
            sys.exit(f"{path}: no ncu table")
        name, unit, value = header.index("Kernel Name"), header.index("Metric Unit"), header.index("Metric Value")
        for row in rows:
            scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}[row[unit]]
            totals[row[name][:60]] += float(row[value].replace(",", "")) * scale
            counts[row[name][:60]] += 1
    whole = sum(totals.values())
    print(f"{sum(counts.values())} launches, {whole / 1e3:.2f} ms of kernel time")
    for k in sorted(totals, key=totals.get, reverse=True):
        print(f"{totals[k] / 1e3:8.3f} ms {100 * totals[k] / whole:5.1f} % {counts[k]:6d} × {totals[k] / counts[k]:8.2f} µs  {k}")


if __name__ == "__main__":
    try:
        main(sys.argv[1])
    except BrokenPipeError:  # `| head`
        pass
