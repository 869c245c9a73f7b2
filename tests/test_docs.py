"""What a new user reads: the README's quick start for either kind of machine, its "Use the winner"
example (run here on the CPU, through the exported file's fallback, and checked by the verifier),
the config reference (every field, nested ones too, with a meaning, and a priced ``models:``
example that loads), only commands that exist, and the architecture and the README agreeing."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import typing
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
USER_DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def section(text: str, title: str) -> str:
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else None]


def code_blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def test_the_quick_start_is_two_commands_for_a_cpu_machine_and_two_for_a_gpu_machine():
    blocks = [b.strip().splitlines() for b in code_blocks(section(README, "Quick start"), "bash")]
    assert len(blocks) == 2 and all(len(b) == 2 for b in blocks), blocks
    (cpu_setup, cpu_run), (gpu_setup, gpu_run) = blocks
    assert cpu_run == gpu_run == "qrsearch launch"
    # The CPU build of the torch that CI installs, before the project (so pip fetches no CUDA build).
    pinned = re.search(r'pip install -q "torch==([0-9.]+)"', (ROOT / ".ci" / "run").read_text())[1]
    torch_cpu = f"pip install torch=={pinned} --index-url https://download.pytorch.org/whl/cpu"
    assert torch_cpu in cpu_setup and cpu_setup.index(torch_cpu) < cpu_setup.index('pip install -e ".[')
    assert "torch" not in gpu_setup and 'pip install -e ".[' in gpu_setup


def _store_with_champion(run_dir: Path, family: str) -> None:
    """A run whose champion of ``family`` is the family's own file (what a seed exports as)."""
    from kernels.families import FAMILIES
    from population.config import FamilyConfig, PopulationConfig
    from population.models import CaseOutcome, CaseStatus, EvalResult, NewCandidate, Origin, State
    from population.run import Run

    families = (FamilyConfig(name="torch_geqrf", islands=1, capacity=1, tuning_budget=0),
                FamilyConfig(name=family, islands=1, capacity=4, tuning_budget=0))
    config = {"name": "winner", "families": [{"name": family}]}
    run = Run.create(run_dir, PopulationConfig(seed=0, families=families), run_config_json=json.dumps(config))
    for name in ("torch_geqrf", family):
        source = FAMILIES[name].source()
        cand = run.add_candidate(NewCandidate(family=name, origin=Origin.SEED, source=source, params={},
                                              fingerprint="seed"))
        run.mark_running(cand.id)
        cases = (CaseOutcome(case="dense-8x16-c1", status=CaseStatus.OK, median_ms=1.0, min_ms=1.0, max_ms=1.0),)
        run.tell(cand.id, State.VERIFIED, result=EvalResult(candidate_id=cand.id, cases=cases, geomean_ms=1.0,
                                                            device="cpu"))
    run.close()


RUN_THE_EXAMPLE = """\
import sys
import torch

torch.manual_seed(0)
exec(compile(open(sys.argv[1]).read(), "README: Use the winner", "exec"))
torch.save({"A": A, "H": H, "tau": tau, "Q": Q, "R": R}, "out.pt")
"""


def test_the_use_the_winner_example_runs_an_exported_file_and_its_result_verifies(tmp_path, capsys):
    import torch

    from kernels.verify import verify_qr
    from search.cli.app import main

    _store_with_champion(tmp_path / "run", "householder_unblocked")
    with pytest.raises(SystemExit) as exit_info:
        main(["export", str(tmp_path / "run"), "--family", "householder_unblocked", "-o", str(tmp_path / "hh.py")])
    assert exit_info.value.code in (0, None)
    assert "use it: from hh import custom_kernel" in capsys.readouterr().out
    text = section(README, "Use the winner")
    (example,) = code_blocks(text, "python")
    assert "from hh import custom_kernel" in example
    (tmp_path / "example.py").write_text(example)
    (tmp_path / "run_example.py").write_text(RUN_THE_EXAMPLE)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # on a CPU: the file's fallback
    proc = subprocess.run([sys.executable, "run_example.py", "example.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = torch.load(tmp_path / "out.pt")
    torch.manual_seed(0)
    pristine = torch.randn(40, 176, 176)  # the example's A, drawn again
    verdict = verify_qr(pristine, (out["H"], out["tau"]), given=out["A"])
    assert verdict.ok, verdict.message
    assert torch.allclose(out["Q"] @ out["R"], pristine, atol=1e-4)
    # The caveats a user must read before relying on the file.
    for caveat in ("torch.geqrf", "max_n", "nvcc", "CUDA graph per shape", "bf16x3", "qrsearch verify"):
        assert caveat in text, caveat


def _fields(model: type[BaseModel], prefix: str = "") -> list[str]:
    from search.config import MutationMix

    out = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, MutationMix):
            continue  # its rows are the registered operators
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            out += _fields(annotation, f"{prefix}{name}.")
            continue
        out.append(f"{prefix}{name}")
        args = typing.get_args(annotation)
        if typing.get_origin(annotation) is list and args and isinstance(args[0], type) \
                and issubclass(args[0], BaseModel):
            out += _fields(args[0], f"{prefix}{name}[].")
    return out


def test_the_config_reference_documents_every_field_nested_ones_included():
    from search.config import RunConfig

    doc = (ROOT / "docs" / "config.md").read_text()
    rows = {m[1]: m[2].strip() for m in re.finditer(r"^\| `([^`]+)` \| [^|]+ \| [^|]+ \|(.*)\|$", doc, re.M)}
    fields = _fields(RunConfig)
    assert {"families[].islands", "families[].island_size", "llm.models[].name", "llm.models[].weight",
            "llm.models[].usd_per_mtok_in", "llm.models[].usd_per_mtok_out"} <= set(fields)
    for field in fields:
        assert field in rows, f"{field} is not in docs/config.md"
        assert rows[field], f"{field} has no meaning in docs/config.md"
    for title, body in re.findall(r"^## (.+)\n\n(.*)\n", doc, re.M):
        assert body.strip(), f"section {title} has no description"


def test_the_priced_models_example_loads_and_is_in_the_reference():
    from search.config import RunConfig
    from search.config.sections import LLM_MODELS_EXAMPLE

    config = RunConfig.model_validate(yaml.safe_load(LLM_MODELS_EXAMPLE))
    assert config.llm.enabled and len(config.llm.models) == 2
    assert all(m.usd_per_mtok_in > 0 and m.usd_per_mtok_out > 0 for m in config.llm.models)
    assert config.budget.max_llm_cost_usd is not None
    assert LLM_MODELS_EXAMPLE.strip() in (ROOT / "docs" / "config.md").read_text()


def test_the_docs_name_only_commands_that_exist():
    from search.cli.app import COMMANDS

    for path in USER_DOCS:
        text = path.read_text(encoding="utf-8")
        named = set(re.findall(r"`qrsearch ([a-z][a-z_-]*)", text))
        named |= set(re.findall(r"^\s*qrsearch ([a-z][a-z_-]*)", "\n".join(code_blocks(text, "bash")), re.M))
        unknown = named - set(COMMANDS)
        assert not unknown, f"{path.name} names commands that do not exist: {sorted(unknown)}"


NUMBERS = {"three": 3, "four": 4, "five": 5, "six": 6, "seven": 7}


def test_the_architecture_and_the_readme_count_the_same_rooms_as_the_code():
    rooms = sorted(p.parent.name for p in (ROOT / "search").glob("*/__init__.py"))
    assert rooms == ["cli", "config", "engine", "evaluate", "inspect", "mutation", "run"]
    for path in (ROOT / "README.md", ROOT / "docs" / "architecture.md"):
        said = re.findall(r"\b(three|four|five|six|seven) rooms", path.read_text(), re.I)
        assert said and {NUMBERS[w.lower()] for w in said} == {len(rooms)}, (path.name, said)


@pytest.mark.parametrize("path", [ROOT / "README.md", ROOT / "docs" / "config.md", ROOT / "docs" / "inspect.md",
                                  ROOT / "docs" / "llm.md"], ids=lambda p: p.name)
def test_user_docs_tell_no_internal_history(path):
    text = path.read_text(encoding="utf-8")
    found = re.findall(r"\bsession \d+\b|\bissue \d+\b|closing notes?\b|kernels-v3 issue", text, re.I)
    assert not found, f"{path.name}: {found}"
