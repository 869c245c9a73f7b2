"""Derive the simulated evaluator's recorded model from a device-run folder (not a test).

    .venv/bin/python tools/sim_model.py [--run docs/device-runs/search-1gpu-10min-m] [--name h200-run-m]
                                          [--check]

Writes search/evaluate/simulated/<name>.json from the folder's run store (runs.tgz), its
honesty table (honesty-corrected.txt) and env.txt; ``--check`` only compares (exit 1 when the
shipped file differs from what the folder gives).  What the model holds and how the simulation
uses it: search/evaluate/simulated/recorded.py.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from search.evaluate.simulated.recorded import DEFAULT_MODEL, MODELS_DIR, derive, model_json

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", type=Path, default=ROOT / "docs" / "device-runs" / "search-1gpu-10min-m")
    ap.add_argument("--name", default=DEFAULT_MODEL)
    ap.add_argument("--check", action="store_true", help="compare with the shipped model; write nothing")
    args = ap.parse_args()
    text = model_json(derive(args.run, args.name))
    target = MODELS_DIR / f"{args.name}.json"
    if args.check:
        same = target.is_file() and target.read_text(encoding="utf-8") == text
        print(f"{target}: {'matches' if same else 'differs from'} {args.run}")
        return 0 if same else 1
    target.write_text(text, encoding="utf-8")
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
