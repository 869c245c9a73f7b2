import random
from typing import Annotated, Literal

import pytest
from pydantic import ValidationError, model_validator

from kernels.params import (Choice, FloatRange, IntRange, ParamSpace, ParamsError, read_params, render_params,
                            structure_fingerprint)

SOURCE = '''"""A family."""
import torch

# qrsearch: params
PARAMS = {
    "block": 32,
    "precision": "ieee",
}
# qrsearch: end params


def custom_kernel(A):
    return torch.geqrf(A)  # uses PARAMS["block"]
'''


class Space(ParamSpace):
    block: Annotated[int, Choice(16, 32, 64)] = 32
    precision: Literal["ieee", "tf32x3"] = "ieee"


class Ranged(ParamSpace):
    stages: Annotated[int, IntRange(1, 5)] = 2
    warps: Annotated[int, IntRange(2, 16, step=2, log=True)] = 4
    ratio: Annotated[float, FloatRange(0.1, 0.9)] = 0.5
    fused: bool = True

    @model_validator(mode="after")
    def _rule(self):
        if self.stages > 3 and self.warps > 8:
            raise ValueError("too many stages for that many warps")
        return self


def test_read_and_render_round_trip():
    assert read_params(SOURCE) == {"block": 32, "precision": "ieee"}
    out = render_params(SOURCE, {"precision": "tf32x3", "block": 64})
    assert read_params(out) == {"block": 64, "precision": "tf32x3"}
    assert out.replace("64", "32").replace("tf32x3", "ieee") == SOURCE
    assert list(read_params(out)) == ["block", "precision"]  # the file's key order is kept


def test_render_refuses_other_keys():
    with pytest.raises(ParamsError, match="missing"):
        render_params(SOURCE, {"block": 64})
    with pytest.raises(ParamsError, match="unknown"):
        render_params(SOURCE, {"block": 64, "precision": "ieee", "extra": 1})


def test_missing_or_malformed_block():
    with pytest.raises(ParamsError, match="no '# qrsearch: params'"):
        read_params("import torch\n")
    bad = SOURCE.replace('"block": 32,', '"block": torch.zeros(1),')
    with pytest.raises(ParamsError, match="literal"):
        read_params(bad)


def test_fingerprint_ignores_values_formatting_and_comments_only():
    base = structure_fingerprint(SOURCE)
    assert structure_fingerprint(render_params(SOURCE, {"block": 16, "precision": "tf32x3"})) == base
    assert structure_fingerprint(SOURCE.replace("# uses PARAMS", "# reads PARAMS")) == base
    assert structure_fingerprint(SOURCE.replace("return torch.geqrf(A)", "return torch.geqrf( A )")) == base
    assert structure_fingerprint(SOURCE.replace("torch.geqrf(A)", "torch.geqrf(A.contiguous())")) != base
    assert structure_fingerprint(SOURCE.replace('"precision": "ieee",', '"precision": "ieee", "new": 1,')) != base
    assert structure_fingerprint("def broken(:\n").startswith("raw-")


def test_space_dimensions_and_validation():
    dims = Space.dimensions()
    assert dims["block"] == Choice(16, 32, 64)
    assert dims["precision"] == Choice("ieee", "tf32x3")
    assert Space().as_params() == {"block": 32, "precision": "ieee"}
    with pytest.raises(ValidationError):
        Space(block=48)
    with pytest.raises(ValidationError):
        Space(block=32, extra=1)
    assert Ranged.dimensions()["fused"] == Choice(False, True)


def test_sampling_is_seeded_valid_and_covers_the_space():
    a = [Ranged.sample(random.Random(3)) for _ in range(2)]
    assert a[0] == a[1]
    rng = random.Random(0)
    samples = [Ranged.sample(rng) for _ in range(300)]
    assert all(not (s.stages > 3 and s.warps > 8) for s in samples)
    assert {s.stages for s in samples} == {1, 2, 3, 4, 5}
    assert {s.warps for s in samples} <= {2, 4, 6, 8, 10, 12, 14, 16}
    assert all(0.1 <= s.ratio <= 0.9 for s in samples)


def test_int_range_respects_step():
    r = IntRange(2, 16, step=2)
    assert r.contains(4) and not r.contains(5) and not r.contains(18) and not r.contains(True)


def test_space_without_dimension_is_an_error():
    class Bad(ParamSpace):
        block: int = 3

    with pytest.raises(TypeError, match="has no dimension"):
        Bad.dimensions()


def test_a_fingerprint_parses_a_files_text_around_its_params_once_and_stays_the_same():
    import random

    from kernels.families import FAMILIES
    from kernels.params import _fingerprint

    fam = FAMILIES["blocked_wy"]
    rng = random.Random(3)
    children = [fam.render(fam.space.sample(rng)) for _ in range(5)]
    assert {structure_fingerprint(c) for c in children} == {_fingerprint(c) for c in children} == \
        {_fingerprint(fam.source())}
    # The same text around the block with other keys, or other code, is another structure.
    renamed = SOURCE.replace('"precision": "ieee",', '"precision2": "ieee",')
    assert structure_fingerprint(renamed) == _fingerprint(renamed) != structure_fingerprint(SOURCE)
    edited = children[0].replace("import torch", "import torch\nimport math", 1)
    assert structure_fingerprint(edited) == _fingerprint(edited) != structure_fingerprint(children[0])
