"""Conformance suite for every registered family.

(a) every ``smoke`` case on CPU with the family's default parameters, the real
    Triton kernels running under TRITON_INTERPRET=1, checked by verify_qr;
(b) seeded random assignments from each family's declared space, rendered
    into the file and run on a subset of the smoke cases;
(c) registry and space properties (a SPACE value list for every PARAMS key,
    defaults valid and equal to the file's PARAMS, the description is the file's
    docstring, render -> read_params round trip, render keeps the structure
    fingerprint, the source screen passes, load_candidate loads it);
(d) on a GPU (marked ``gpu``): the 22 ``qrv2-tests`` cases through the harness.

The CUDA C++ families skip (a) and (b): without CUDA they call torch.geqrf; what can be
checked of them on CPU is in tests/kernels/test_cuda_families.py.
"""

from __future__ import annotations

import ast
import random
from pathlib import Path

import pytest
import torch
from pydantic import ValidationError

from kernels.candidate import load_candidate, materialize
from kernels.inputs import generate_input
from kernels.families import BASELINE_PATH, FAMILIES, FAMILIES_DIR, RegisteredFamily, get_family
from kernels.harness.screen import screen_source
from kernels.params import ParamSpace, read_params, read_space, render_params, structure_fingerprint
from kernels.suites import get_suite
from kernels.verify import verify_qr

ALL = list(FAMILIES)
SEARCHED = [name for name, fam in FAMILIES.items() if not fam.baseline]
TRITON = [name for name in SEARCHED if FAMILIES[name].language == "triton"]
# CUDA C++ families call torch.geqrf without CUDA: running them on CPU would test geqrf.
ON_CPU = [name for name in ALL if not FAMILIES[name].needs_cuda]
ON_CPU_SEARCHED = [name for name in SEARCHED if not FAMILIES[name].needs_cuda]
SMOKE = get_suite("smoke")
# (b) runs on these: every size class of the smoke suite, plain and stressed.
SUBSET = [c for c in SMOKE if (c.n, c.case) in {(2, "dense"), (8, "rankdef"), (32, "mixed"), (64, "clustered")}]
SEEDS = (11, 12)
ALLOWED_IMPORTS = {"torch", "triton", "triton.language", "math", "os", "functools", "hashlib",
                   "torch.utils.cpp_extension"}


@pytest.fixture(scope="module")
def interpret():
    """Run Triton kernels on CPU tensors with the interpreter (read when a
    candidate's @triton.jit runs and when custom_kernel is called)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRITON_INTERPRET", "1")
        yield


_loaded: dict[str, object] = {}


def _load(path: Path):
    key = str(path)
    if key not in _loaded:
        _loaded[key] = load_candidate(path)
    return _loaded[key]


def _check(kernel, case) -> None:
    a = generate_input(case.batch, case.n, case.cond, case.seed, case.case)
    given = a.clone()
    result = verify_qr(a, kernel(given), given)
    assert result.ok, f"{case.name}: {result.message} ({result.summary()})"


# --- (c) registry and spaces -------------------------------------------------


def test_registry_has_the_families_of_the_issue():
    assert {"householder_unblocked", "blocked_wy", "lookahead_split", "torch_geqrf"} <= set(FAMILIES)
    baselines = [f for f in FAMILIES.values() if f.baseline]
    assert [f.name for f in baselines] == ["torch_geqrf"]
    assert baselines[0].path == BASELINE_PATH
    assert baselines[0].space.dimensions() == {}


def test_get_family_names_the_registered_ones():
    assert get_family("blocked_wy") is FAMILIES["blocked_wy"]
    with pytest.raises(KeyError, match="registered families: .*blocked_wy"):
        get_family("no_such_family")


@pytest.mark.parametrize("name", ALL)
def test_record_is_frozen_and_described(name):
    fam = get_family(name)
    assert isinstance(fam, RegisteredFamily)
    with pytest.raises(AttributeError):
        fam.name = "other"  # type: ignore[misc]
    assert len(fam.description) > 100 and "\n" not in fam.description
    lo, hi = fam.n_range
    assert 1 <= lo <= hi
    assert fam.path.parent == FAMILIES_DIR and fam.path.is_file()


@pytest.mark.parametrize("name", ALL)
def test_defaults_are_valid_and_are_the_files_params(name):
    fam = get_family(name)
    defaults = fam.default_params()
    assert isinstance(defaults, fam.space)
    assert fam.space.model_validate(defaults.as_params()) == defaults
    assert read_params(fam.source()) == defaults.as_params()
    rendered = fam.render(defaults)
    assert read_params(rendered) == read_params(fam.source())
    assert structure_fingerprint(rendered) == structure_fingerprint(fam.source())


@pytest.mark.parametrize("name", ALL)
def test_the_files_space_block_gives_every_params_key_its_values(name):
    fam = get_family(name)
    params, space = read_params(fam.source()), read_space(fam.source())
    assert list(space) == list(fam.space.model_fields)  # the block's order is the sampler's
    assert set(space) == set(params)
    for key, values in space.items():
        assert params[key] in values, key
        assert fam.space.dimensions()[key].values == tuple(values), key


@pytest.mark.parametrize("name", ALL)
def test_the_description_is_the_files_docstring_on_one_line(name):
    fam = get_family(name)
    docstring = ast.get_docstring(ast.parse(fam.source()))
    assert docstring and fam.description == " ".join(docstring.split())


@pytest.mark.parametrize("name", ALL)
def test_every_field_is_a_dimension(name):
    space = get_family(name).space
    dims = space.dimensions()
    assert set(dims) == set(space.model_fields)
    for field, dim in dims.items():
        assert dim.contains(getattr(space(), field)), field


@pytest.mark.parametrize("name", SEARCHED)
def test_render_round_trips_and_keeps_the_structure(name):
    fam = get_family(name)
    fingerprint = structure_fingerprint(fam.source())
    rng = random.Random(7)
    for _ in range(20):
        params = fam.space.sample(rng)
        assert isinstance(params, ParamSpace)
        for rendered in (fam.render(params), fam.render(params.as_params())):
            assert read_params(rendered) == params.as_params()
            assert structure_fingerprint(rendered) == fingerprint
            assert screen_source(rendered) == []


@pytest.mark.parametrize("name", SEARCHED)
def test_render_rejects_assignments_outside_the_space(name):
    fam = get_family(name)
    params = fam.default_params().as_params()
    with pytest.raises(ValidationError):
        fam.render({**params, "not_a_knob": 1})
    key, dim = next(iter(fam.space.dimensions().items()))
    with pytest.raises(ValidationError):
        fam.render({**params, key: "surely-not-a-value"})
    with pytest.raises(TypeError):
        fam.render(FAMILIES["torch_geqrf"].default_params())


def test_render_applies_to_a_mutated_descendant():
    fam = get_family("blocked_wy")
    mutated = fam.source().replace("def _size_class(n: int) -> str:", "def _size_class(n: int) -> str:  # mutated")
    params = {**fam.default_params().as_params(), "bn": 128}
    rendered = fam.render(params, source=mutated)
    assert "# mutated" in rendered and read_params(rendered)["bn"] == 128


def test_cross_field_rules_drop_assignments_that_cannot_launch():
    BlockedWYSpace = get_family("blocked_wy").space

    with pytest.raises(ValidationError, match="registers"):
        BlockedWYSpace(maxnreg_le512=255, warps_le512=16)
    with pytest.raises(ValidationError, match="registers"):
        BlockedWYSpace(max_n=2048, leaf=32, nb_gt1024=32)
    assert BlockedWYSpace(maxnreg_le512=128, warps_le512=16).maxnreg_le512 == 128


@pytest.mark.parametrize("name", ALL)
def test_file_is_a_standalone_submission(interpret, name):
    # (loaded under the interpreter like every other load of the family files
    # in this module: Triton's interpreter mixes up a file loaded in both modes)
    fam = get_family(name)
    source = fam.source()
    assert screen_source(source) == []
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module or "")
    assert imported <= ALLOWED_IMPORTS, imported - ALLOWED_IMPORTS
    assert callable(_load(fam.path))
    assert "allow_tf32" not in source and "set_float32_matmul_precision" not in source


@pytest.mark.parametrize("name", TRITON)
def test_every_gemm_names_its_precision(name):
    """No tl.dot falls back to Triton's default (TF32) precision."""
    tree = ast.parse(get_family(name).source())
    dots = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", None) == "dot"]
    assert dots or name == "householder_unblocked"
    for call in dots:
        assert any(k.arg == "input_precision" for k in call.keywords), ast.unparse(call)


# --- (a) smoke on CPU with the defaults ---------------------------------------


@pytest.mark.parametrize("case", SMOKE, ids=lambda c: c.name)
@pytest.mark.parametrize("name", ON_CPU)
def test_smoke_defaults(interpret, name, case):
    _check(_load(get_family(name).path), case)


# --- (b) random assignments ---------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", ON_CPU_SEARCHED)
def test_random_assignments(interpret, tmp_path, name, seed):
    fam = get_family(name)
    params = fam.space.sample(random.Random(f"{name}-{seed}"))
    kernel = load_candidate(materialize(fam.render(params), tmp_path))
    for case in SUBSET:
        _check(kernel, case)


def test_cooperative_panel_code_path(interpret, tmp_path):
    """lookahead_split's row-split cooperative panel (one program per panel on
    the interpreter, which runs programs one after the other), forced on for
    smoke sizes with a split threshold outside the declared space."""
    fam = get_family("lookahead_split")
    params = {**fam.default_params().as_params(), "nb": 16, "panel_programs": 32, "split_rows": 16}
    kernel = load_candidate(materialize(render_params(fam.source(), params), tmp_path))
    for case in SMOKE:
        if case.n >= 32 and case.case in ("dense", "rankdef", "upper", "rowscale", "mixed"):
            _check(kernel, case)


def test_cholqr2_panels_take_two_barriers_and_fall_back_on_dependent_columns(interpret, tmp_path, monkeypatch):
    """coop_panel=cholqr2 (n = 64, panels of 16, split below row 48: split panels at k = 0, 16,
    32).  A well-conditioned matrix takes Cholesky QR on every split panel, so its barrier flags
    end at the last split panel's epoch e0 + 3 = 45 (e0 = 2 · (16 + 5)); the other matrix of the
    batch has a zero and a repeated column in that panel, which must fall back to one barrier
    per column and the Gram matrix for T (flags at e0 + 16 + 4 = 62).  Both verify."""
    fam = get_family("lookahead_split")
    params = {**fam.default_params().as_params(), "nb": 16, "panel_programs": 32, "split_rows": 16,
              "coop_panel": "cholqr2"}
    kernel = load_candidate(materialize(render_params(fam.source(), params), tmp_path))
    flags: list[torch.Tensor] = []
    zeros = torch.zeros

    def spy(*args, **kwargs):
        t = zeros(*args, **kwargs)
        if kwargs.get("dtype") == torch.int32:
            flags.append(t)
        return t

    monkeypatch.setattr(torch, "zeros", spy)
    a = generate_input(2, 64, 1.0, 11, "dense")
    a[1, :, 35] = 0.0
    a[1, :, 40] = a[1, :, 33]
    given = a.clone()
    result = verify_qr(a, kernel(given), given)
    assert result.ok, result.summary()
    assert len(flags) == 1
    assert flags[0].max(dim=1).values.tolist() == [45, 62]


def test_tail_norms_survive_tiny_and_huge_scales(interpret):
    """Matrices scaled so that squared entries leave FP32's normal range
    (1e-34, 1e34): the norms are rescaled.  (Scales beyond about 1e-20 or
    1e17 also under/overflow the products xᵀA and are out of the contract's
    range; torch.geqrf handles those, the families do not.)"""
    torch.manual_seed(0)
    base = torch.randn(2, 24, 24)
    for fam in ("householder_unblocked", "blocked_wy", "lookahead_split"):
        kernel = _load(get_family(fam).path)
        for scale in (1e-17, 1e17):
            a = (base * scale).contiguous()
            given = a.clone()
            result = verify_qr(a, kernel(given), given)
            assert result.ok, f"{fam} at scale {scale:g}: {result.message}"


# --- (d) GPU: the qrv2-tests suite through the harness --------------------------


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("name", SEARCHED)
def test_qrv2_tests_on_gpu(name):
    from kernels.harness.job import CandidateJob
    from kernels.harness.runner import run_candidate

    report = run_candidate(CandidateJob(get_family(name).path, get_suite("qrv2-tests"), suite="qrv2-tests",
                                        mode="verify", device="cuda"))
    failed = [f"{c.case.name}: {c.status} {c.message}" for c in report.cases if not c.ok]
    assert not failed, failed
