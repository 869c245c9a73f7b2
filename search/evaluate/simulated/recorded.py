"""A recorded H200 search as the data a simulated evaluator draws from, and how it is derived.

The model is derived from a device-run folder of ``docs/device-runs`` (its ``runs.tgz`` run
store and its honesty table) by :func:`derive`, shipped as JSON beside this module, and checked
against its source by a test.  What it holds, and what the simulation does with it:

- ``wall_share``: the run's wall time over the sum of its evaluations' seconds.  Run m had two
  lanes, so each evaluation's seconds include waits for the other lane; an evaluation holds a
  simulated device for its recorded seconds times this share, which gives one simulated GPU the
  recorded throughput.
- per family: the seconds of every full bench, screened child and verify stage, the seconds of
  every compile ahead, the evaluations, failures and screened children, the seed's (the
  defaults') per-case medians, and the best child's and the children's 90th-percentile fitness
  relative to the seed's.
- the reference (torch.geqrf): its seconds and per-case medians.
- ``noise``: the same file timed in the search and again standalone (the honesty table): the
  spread of the log ratio of its per-case medians within the honesty bar, short and long cases
  apart, and the cases out of the bar (a slower mode) with how much slower they were.
- ``spread``: the median of min/median, max/median and the count of timed calls per case.
"""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
import statistics
import tarfile
import tempfile
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

MODELS_DIR = Path(__file__).resolve().parent
DEFAULT_MODEL = "h200-run-m"
SHORT_BELOW_MS = 1.0  # cases under this are launch-bound: their medians move more between processes


class _Data(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Noise(_Data):
    """The same file's per-case medians in the search and in a standalone bench."""

    pairs: int
    short_below_ms: float
    sigma_short: float  # of log(median), a case under short_below_ms within the honesty bar
    sigma_long: float
    outlier_rate: float  # the share of pairs out of the bar: a process in a slower mode
    outlier_log_factors: list[float]  # log(slower / faster) of each such pair


class Spread(_Data):
    """How a timed case's min, max and call count sit around its median."""

    min_ratio: float
    max_ratio: float
    count: int


class RecordedFamily(_Data):
    evaluations: int
    failures: int
    screened: int
    full_s: list[float]  # seconds of each verified evaluation
    screened_s: list[float]
    verify_s: list[float]  # the verify stage's seconds: how long a failing evaluation takes
    compile_s: list[float]  # each evaluation's compile ahead (first start to last finish)
    seed_ms: dict[str, float]  # the defaults' per-case medians
    best_ratio: float = Field(gt=0)  # the run's best child fitness over the seed's
    # The children's 90th-percentile fitness (screened ones at their estimate) over the seed's:
    # about where Optuna's random start-up trials (10 of the 45-55 children a family had) landed.
    upper_ratio: float = Field(gt=0)


class RecordedRun(_Data):
    name: str
    provenance: dict[str, str]
    evaluations: int
    wall_s: float
    wall_share: float
    families: dict[str, RecordedFamily]
    reference_s: float
    reference_ms: dict[str, float]
    noise: Noise
    spread: dict[str, Spread]  # "short" and "long" cases

    def failure_rate(self, family: str) -> float:
        rec = self.families.get(family)
        return rec.failures / rec.evaluations if rec is not None and rec.evaluations else 0.0


@lru_cache(maxsize=4)
def load(name: str = DEFAULT_MODEL) -> RecordedRun:
    path = MODELS_DIR / f"{name}.json"
    if not path.is_file():
        known = sorted(p.stem for p in MODELS_DIR.glob("*.json"))
        raise ValueError(f"no recorded model {name!r}; shipped: {', '.join(known)}")
    return RecordedRun.model_validate_json(path.read_text(encoding="utf-8"))


# --- derivation from a device-run folder ------------------------------------------------------

def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _rounded(values: list[float], digits: int = 4) -> list[float]:
    return [round(v, digits) for v in values]


def _store_rows(tgz: Path) -> list[tuple[str, str, str, str, int, dict]]:
    """(id, family, state, origin, island, result) of every evaluated candidate, in creation order."""
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(tgz) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("/run.sqlite"))
        tar.extract(member, tmp, filter="data")
        conn = sqlite3.connect(Path(tmp) / member.name)
        try:
            rows = conn.execute("SELECT c.id, c.family, c.state, c.origin, c.island, r.body FROM candidates c "
                                "JOIN results r ON r.candidate_id = c.id ORDER BY c.seq").fetchall()
        finally:
            conn.close()
    return [(cid, fam, state, origin, island, json.loads(body)) for cid, fam, state, origin, island, body in rows]


def _honesty_pairs(table: Path) -> list[tuple[float, float, bool]]:
    """(search ms, standalone ms, within the bar) of each row of an honesty table."""
    pairs = []
    for line in table.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if not parts or line.startswith("#") or not parts[0].startswith("c0"):
            continue
        pairs.append((float(parts[3]), float(parts[4]), parts[7] == "ok"))
    return pairs


def _noise(pairs: list[tuple[float, float, bool]]) -> Noise:
    def sigma(logs: list[float]) -> float:
        # The log ratio of two independent draws has twice one draw's variance.
        return math.sqrt(sum(x * x for x in logs) / len(logs) / 2) if logs else 0.0

    inside = [(s, b) for s, b, ok in pairs if ok]
    outliers = [abs(math.log(s / b)) for s, b, ok in pairs if not ok]
    return Noise(pairs=len(pairs), short_below_ms=SHORT_BELOW_MS,
                 sigma_short=round(sigma([math.log(s / b) for s, b in inside if s < SHORT_BELOW_MS]), 6),
                 sigma_long=round(sigma([math.log(s / b) for s, b in inside if s >= SHORT_BELOW_MS]), 6),
                 outlier_rate=round(len(outliers) / len(pairs), 6), outlier_log_factors=_rounded(outliers, 6))


def _spread(rows: list[tuple[str, str, str, str, int, dict]]) -> dict[str, Spread]:
    ratios: dict[str, tuple[list[float], list[float], list[int]]] = {"short": ([], [], []), "long": ([], [], [])}
    for *_, result in rows:
        for case in result["cases"]:
            median, low, high, count = case.get("median_ms"), case.get("min_ms"), case.get("max_ms"), case.get("count")
            if case["status"] != "ok" or not median or low is None or high is None or not count:
                continue
            mins, maxs, counts = ratios["short" if median < SHORT_BELOW_MS else "long"]
            mins.append(low / median)
            maxs.append(high / median)
            counts.append(count)
    return {kind: Spread(min_ratio=round(statistics.median(mins), 6), max_ratio=round(statistics.median(maxs), 6),
                         count=int(statistics.median(counts)))
            for kind, (mins, maxs, counts) in ratios.items() if mins}


def derive(run_folder: Path, name: str) -> RecordedRun:
    """The model of the run in ``run_folder`` (``runs.tgz``, ``honesty-corrected.txt``, ``env.txt``)."""
    tgz, honesty, env = run_folder / "runs.tgz", run_folder / "honesty-corrected.txt", run_folder / "env.txt"
    rows = _store_rows(tgz)
    started = min(r["started_at"] for *_, r in rows)
    finished = max(r["finished_at"] for *_, r in rows)
    lane_seconds = sum(r["eval_seconds"] for *_, r in rows)
    seeds = {fam: r for _, fam, _, origin, island, r in rows if origin == "seed" and island == 0}
    reference = next(r for _, fam, *_, r in rows if fam == "torch_geqrf")
    families: dict[str, RecordedFamily] = {}
    for fam in sorted({fam for _, fam, *_ in rows if fam != "torch_geqrf"}):
        mine = [(state, origin, r) for _, f, state, origin, _, r in rows if f == fam]
        seed = seeds[fam]
        children = [r["geomean_ms"] for state, origin, r in mine if state == "verified" and origin != "seed"]
        ratios = sorted((r["geomean_ms"] if state == "verified" else r["screen"]["estimate_ms"]) / seed["geomean_ms"]
                        for state, origin, r in mine if origin != "seed" and state in ("verified", "screened"))
        families[fam] = RecordedFamily(
            evaluations=len(mine), failures=sum(state not in ("verified", "screened") for state, _, _ in mine),
            screened=sum(state == "screened" for state, _, _ in mine),
            full_s=_rounded([r["eval_seconds"] for state, _, r in mine if state == "verified"]),
            screened_s=_rounded([r["eval_seconds"] for state, _, r in mine if state == "screened"]),
            verify_s=_rounded([r["stage_seconds"].get("verify", 0.0) for _, _, r in mine]),
            compile_s=_rounded([r["stage_seconds"].get("compile_ahead", 0.0) for _, _, r in mine]),
            seed_ms={c["case"]: round(c["median_ms"], 6) for c in seed["cases"]},
            best_ratio=round(min(children) / seed["geomean_ms"] if children else 1.0, 6),
            upper_ratio=round(ratios[int(0.9 * (len(ratios) - 1))] if ratios else 1.0, 6))
    provenance = {
        "run": run_folder.name,
        "source": f"docs/device-runs/{run_folder.name}/runs.tgz (the run store), honesty-corrected.txt, env.txt",
        "runs.tgz sha256": _sha256(tgz), "honesty-corrected.txt sha256": _sha256(honesty),
        "environment": " | ".join(line.strip() for line in env.read_text(encoding="utf-8").splitlines() if line.strip()),
        "derived by": "python tools/sim_model.py (search.evaluate.simulated.recorded.derive)",
    }
    return RecordedRun(
        name=name, provenance=provenance, evaluations=len(rows), wall_s=round(finished - started, 3),
        wall_share=round((finished - started) / lane_seconds, 6), families=families,
        reference_s=round(reference["eval_seconds"], 4),
        reference_ms={c["case"]: round(c["median_ms"], 6) for c in reference["cases"]},
        noise=_noise(_honesty_pairs(honesty)), spread=_spread(rows))


def model_json(model: RecordedRun) -> str:
    return json.dumps(model.model_dump(mode="json"), indent=1, sort_keys=True) + "\n"
