"""Probe (not a test, not the product): the driver's CPU per actor call, a request's text against
its ticket (docs/scale.md, "Session 36"), and per announcement through the pool's ``Slot``, whole
against as its difference from the family's last one (alternate children differ in one knob).

    .venv/bin/python lab/actor_call_cost.py [FAMILY ...] [--calls 300] [--rounds 6]

One actor that answers at once, on a local Ray bound to loopback; for each family, rounds of
``--calls`` calls carrying a simulated request's JSON and as many naming a ticket, then as many
announcements each way, interleaved; prints this process's user+system CPU per call (Ray's driver
threads included).
"""

from __future__ import annotations

import argparse
import resource
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("families", nargs="*", default=["cuda_blocked", "cuda_onchip", "householder_unblocked"])
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args()
    import ray

    from kernels.families import FAMILIES
    from kernels.params import read_params
    from search.evaluate.slots import Slot
    from tests.search.evaluate.test_simulated_worker import request

    @ray.remote(num_cpus=0)
    class Sink:
        def evaluate(self, text: str | None, ticket: int | None = None) -> tuple[None, list[str]]:
            return None, []

        def prefetch(self, text: str, ticket: int | None = None, delta: tuple | None = None) -> bool:
            return True

    ray.init(num_cpus=1, include_dashboard=False, logging_level="ERROR", _node_ip_address="127.0.0.1")
    try:
        actor = Sink.remote()  # type: ignore[attr-defined]
        ray.get(actor.evaluate.remote(None, 0))
        for family in args.families:
            text = request("c1", family).model_dump_json()
            params = read_params(FAMILIES[family].source())
            knob, values = next((k, (v, not v)) for k, v in params.items() if isinstance(v, bool))
            children = [request(f"c{i}", family, {**params, knob: values[i % 2]}) for i in range(args.calls)]
            per_call: dict[str, list[float]] = {"text": [], "ticket": [], "announce whole": [], "announce delta": []}
            for _ in range(args.rounds):
                for kind, book in per_call.items():
                    slot = Slot(name="gpu0", actor=actor, gpu=True)
                    before = cpu_s()
                    if kind.startswith("announce"):
                        for child in children:
                            if kind == "announce whole":
                                slot.sources_here.clear()
                            slot.enqueue(child)
                        ray.get(actor.evaluate.remote(None, 0))  # after the announcements, in order
                    else:
                        ray.get([actor.evaluate.remote(text, None) if kind == "text" else actor.evaluate.remote(None, i)
                                 for i in range(args.calls)])
                    book.append(1000 * (cpu_s() - before) / args.calls)
            means = {kind: round(sum(xs) / len(xs), 3) for kind, xs in per_call.items()}
            print(f"{family} ({len(text) / 1024:.0f} KB): driver CPU ms a call, "
                  + ", ".join(f"{kind} {mean}" for kind, mean in means.items())
                  + f"; rounds {({k: [round(x, 3) for x in xs] for k, xs in per_call.items()})}")
    finally:
        ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
