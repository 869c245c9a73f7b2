import random
from typing import Annotated, Literal

import pytest
from pydantic import ValidationError, model_validator

from kernels.params import (Choice, FloatRange, IntRange, ParamSpace, ParamsError, read_params, read_space,
                            render_params, space_model, structure_fingerprint)

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


SPACED = SOURCE.replace("# qrsearch: end params\n", '''# qrsearch: end params

# qrsearch: space
SPACE = {
    "block": [16, 32, 64],  # a comment beside a dimension
    "precision": ["ieee", "tf32x3"],
}
# qrsearch: end space
''')


def _outcome(space, assignment):
    try:
        return space(**assignment).as_params()
    except ValidationError as exc:
        return [(e["loc"], e["msg"]) for e in exc.errors()]


def test_a_space_block_builds_the_space_it_declares():
    built = space_model("BuiltSpace", read_space(SPACED), read_params(SPACED))
    assert built.__name__ == "BuiltSpace" and issubclass(built, ParamSpace)
    assert built.dimensions() == Space.dimensions()
    assert built().as_params() == Space().as_params() == read_params(SPACED)
    for assignment in ({"block": 64}, {"block": 48}, {"block": "32"}, {"precision": "tf32"}, {"extra": 1}, {}):
        assert _outcome(built, assignment) == _outcome(Space, assignment), assignment
    assert render_params(SPACED, built(block=64).as_params()).count("# qrsearch: space") == 1


def test_booleans_and_numbers_keep_their_types_and_order():
    built = space_model("Typed", {"fused": [False, True], "order": [True, False], "ratio": [0.5, 0.25]},
                        {"fused": True, "order": True, "ratio": 0.5})
    assert built.model_fields["fused"].annotation is bool
    assert built.dimensions()["order"].values == (True, False)  # the order a sampler draws from
    with pytest.raises(ValidationError):
        built(ratio=0.3)


def test_rules_drop_what_the_values_alone_allow():
    def no_wide_tf32(p):
        if p["block"] == 64 and p["precision"] == "tf32x3":
            raise ValueError("64-wide blocks in tf32x3 spill")

    built = space_model("RuledSpace", read_space(SPACED), read_params(SPACED), [no_wide_tf32])
    with pytest.raises(ValidationError, match="spill"):
        built(block=64, precision="tf32x3")
    assert built(block=64).block == 64 and built(precision="tf32x3").precision == "tf32x3"
    rng = random.Random(0)
    assert all(not (p.block == 64 and p.precision == "tf32x3") for p in (built.sample(rng) for _ in range(50)))


def test_a_file_without_a_space_block_has_no_knobs_and_a_broken_block_is_refused():
    assert read_space(SOURCE) == {}
    for body in ('"block": []', '"block": [16, "32"]', '"block": 16', '"block": [None]'):
        broken = SPACED.replace('"block": [16, 32, 64]', body)
        with pytest.raises(ParamsError, match="SPACE"):
            read_space(broken)
    with pytest.raises(ParamsError, match="one assignment"):
        read_space(SPACED.replace("SPACE = {", "OTHER = {"))


def test_space_and_params_keys_must_agree():
    with pytest.raises(ParamsError, match=r"PARAMS keys without values \['precision'\]"):
        space_model("Short", {"block": [16, 32]}, {"block": 32, "precision": "ieee"})
    with pytest.raises(ParamsError, match=r"SPACE keys without a PARAMS value \['stages'\]"):
        space_model("Long", {"block": [16, 32], "stages": [1, 2]}, {"block": 32})


def test_a_long_runs_structures_are_parsed_once_each(monkeypatch):
    import kernels.params as params

    # More structures than a few dozen (a run with an LLM makes hundreds): each parsed once.
    sources = [SOURCE + f"\nEXTRA_{i} = {i}\n" for i in range(200)]
    first = [structure_fingerprint(s) for s in sources]
    assert len(set(first)) == 200
    monkeypatch.setattr(params, "_fingerprint", lambda source: pytest.fail("parsed again"))
    again = [structure_fingerprint(render_params(s, {"block": 16, "precision": "tf32x3"})) for s in sources]
    assert again == first
