"""Which PARAMS variants of lab/blocked_probe.py runs to adopt (lab; read by lab/probe_adopt.sh).

    python lab/pick_winners.py BY PROBE.txt [PROBE.txt ...]

Each probe file was run with the baseline as its first variant ('base:').  In each file, the candidate
whose median is at least BY (a fraction) below the baseline's at every shape of that file, and of those
the one with the lowest geometric mean of its ratios to the baseline, wins.  Prints the winners'
overrides joined as KEY=VALUE,... (tools/param_variant.py's form; nothing where no candidate won) on
stdout, and one line a file saying why on stderr.  A winner that sets a key an earlier file's winner
set to another value is not adopted (each file should probe its own knobs; the same value is fine).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from blocked_probe import read_medians  # noqa: E402


def winner(path: str, by: float) -> tuple[str | None, dict, str]:
    """(name, overrides, why) of the file's winning candidate, or (None, {}, why)."""
    medians, overrides = read_medians(path)
    names = list(dict.fromkeys(name for _, name in medians))
    shapes = list(dict.fromkeys(shape for shape, _ in medians))
    if not names or names[0] != "base":
        return None, {}, f"{path}: no 'base' timed first: nothing adopted"
    best: tuple[float, str] | None = None
    for name in names[1:]:
        ratios = [medians[(s, name)] / medians[(s, "base")] for s in shapes if (s, name) in medians]
        if len(ratios) == len(shapes) and all(r <= 1 - by for r in ratios):
            score = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
            if best is None or score < best[0]:
                best = (score, name)
    if best is None:
        return None, {}, f"{path}: no candidate {by:.1%} faster at every shape ({', '.join(shapes)})"
    return best[1], overrides[best[1]], f"{path}: {best[1]} x{best[0]:.3f} {overrides[best[1]]}"


def main(argv: list[str]) -> int:
    by = float(argv[0])
    chosen: dict[str, object] = {}
    for path in argv[1:]:
        _, found, why = winner(path, by)
        clash = sorted(key for key in set(found) & set(chosen) if found[key] != chosen[key])
        if clash:
            why += f"; not adopted: an earlier file's winner set {clash} otherwise"
        else:
            chosen.update(found)
        print(why, file=sys.stderr)
    print(",".join(f"{key}={value}" for key, value in chosen.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
