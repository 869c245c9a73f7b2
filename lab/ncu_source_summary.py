"""Sum up Nsight Compute's per-instruction page (``ncu --page source --print-source sass --csv``): the share
of warp-stall samples and of executed instructions per opcode, the stall reasons, the samples before,
inside and after the kernel's hottest loop, and the hottest instructions.

    python lab/ncu_source_summary.py NCU.csv [--top 20]

The loop is the span between the most executed backward branch and its target.
"""

from __future__ import annotations

import argparse
import csv
from collections import Counter
from pathlib import Path

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"


def _number(text: str) -> float:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", type=Path)
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args()
    rows = list(csv.reader(args.csv.open(encoding="utf-8")))
    start = next((i for i, row in enumerate(rows) if row and row[0] == "Address"), None)
    if start is None:
        raise SystemExit(f"{args.csv}: no per-instruction table (run ncu with --page source --csv)")
    header = rows[start]
    col = {name: i for i, name in enumerate(header)}
    data = [row for row in rows[start + 1:] if len(row) == len(header)]
    samples = [_number(row[col[SAMPLES]]) for row in data]
    executed = [_number(row[col[EXECUTED]]) for row in data]
    total, total_executed = sum(samples) or 1.0, sum(executed) or 1.0
    print(f"{args.csv.name}: {len(data)} instructions, {sum(samples):.0f} samples, {sum(executed):.0f} executed")

    by_sample, by_executed = Counter(), Counter()
    for row, s, e in zip(data, samples, executed):
        words = row[col["Source"]].split()
        if words:
            opcode = (words[1] if words[0].startswith("@") and len(words) > 1 else words[0]).split(".")[0]
            by_sample[opcode] += s
            by_executed[opcode] += e
    print("\nopcode      samples  executed")
    for opcode, s in by_sample.most_common(12):
        print(f"  {opcode:10s} {100 * s / total:5.1f}%  {100 * by_executed[opcode] / total_executed:5.1f}%")

    reasons = {name: sum(_number(row[col[name]]) for row in data)
               for name in header if name.startswith("stall_") and "Not Issued" not in name}
    print("\nstall reasons: " + ", ".join(f"{name[6:]} {100 * value / total:.1f}%"
                                          for name, value in sorted(reasons.items(), key=lambda kv: -kv[1])[:8]))

    addresses = [int(row[col["Address"]], 16) for row in data]
    branches = [(e, a, row[col["Source"]]) for row, a, e in zip(data, addresses, executed) if " BRA " in f" {row[col['Source']]} "]
    loops = [(e, a, int(source.split("0x")[-1].split()[0].rstrip(";"), 16)) for e, a, source in branches
             if "0x" in source and int(source.split("0x")[-1].split()[0].rstrip(";"), 16) < a]
    if loops:
        _, end, begin = max(loops)
        inside = sum(s for s, a in zip(samples, addresses) if begin <= a <= end)
        before = sum(s for s, a in zip(samples, addresses) if a < begin)
        print(f"\nhottest loop {begin:#x}-{end:#x}: before {100 * before / total:.1f}%, inside "
              f"{100 * inside / total:.1f}%, after {100 * (total - before - inside) / total:.1f}% of the samples")

    print(f"\nhottest {args.top} instructions (samples, executed)")
    for row, s, e in sorted(zip(data, samples, executed), key=lambda t: -t[1])[:args.top]:
        print(f"  {row[col['Address']]:>16} {100 * s / total:5.1f}% {e:>10.0f}  {row[col['Source']][:72]}")


if __name__ == "__main__":
    main()
