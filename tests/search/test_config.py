from pathlib import Path

import pytest

from kernels.families import FAMILIES
from kernels.suites import get_suite
from search.config import ConfigError, RunConfig, default_config
from search.config_doc import render

ROOT = Path(__file__).parents[2]


@pytest.mark.parametrize("name", ["smoke.yaml", "h200.yaml", "multi-gpu.yaml"])
def test_example_configs_load(name):
    config = RunConfig.from_yaml(ROOT / "runs" / name)
    assert config.name == name.removesuffix(".yaml")
    assert all(f.name in FAMILIES for f in config.families)


def test_defaults_come_from_one_place():
    assert RunConfig.from_yaml_text("{}") == RunConfig()
    assert {f.name for f in RunConfig().families} == {n for n, f in FAMILIES.items() if not f.baseline}
    cpu = default_config(cuda=False)
    assert cpu.evaluation.device == "cpu" and cpu.evaluation.bench_suite == "demo-bench"
    # The demo's bench holds a matrix that householder_unblocked's max_n at one step from its default
    # (128 to 64) hands to torch.geqrf: a gain the demo's short search finds, not one drawn by noise.
    demo = get_suite("demo-bench")
    assert set(get_suite("smoke-bench")) < set(demo) and any(64 < c.n <= 128 for c in demo)
    assert FAMILIES["householder_unblocked"].space().as_params()["max_n"] == 128
    assert default_config(cuda=True).evaluation.bench_suite == "qrv2-bench"
    # Without a GPU the default leaves out the CUDA C++ families (they would time torch.geqrf).
    cuda_only = {n for n, f in FAMILIES.items() if f.needs_cuda}
    assert cuda_only and not cuda_only & {f.name for f in cpu.families}
    assert cuda_only <= {f.name for f in default_config(cuda=True).families}


def test_a_cuda_family_in_a_cpu_run_is_an_error_that_names_it(tmp_path):
    path = tmp_path / "cpu.yaml"
    path.write_text("families: [{name: householder_unblocked}, {name: cuda_onchip}]\n"
                    "evaluation: {device: cpu, verify_suite: smoke-quick, bench_suite: smoke-bench}\n")
    with pytest.raises(ConfigError, match=r"cuda_onchip.*need a GPU"):
        RunConfig.from_yaml(path)


@pytest.mark.parametrize("text, needle", [
    ("budget: {max_eval: 3}", "budget.max_eval: unknown field"),
    ("evaluation: {bench_suite: nope}", "evaluation.bench_suite"),
    ("evaluation: {lanes: 0}", "evaluation.lanes"),
    ("families: [{name: not_a_family}]", "unknown families"),
    ("name: 'has space'", "name"),
    ("llm: {api_key_env: '1BAD'}", "llm.api_key_env"),
    ("mutation: {llm: 0, optuna: 0, crossover: 0}", "at least one mutation weight"),
    ("[1, 2]", "a mapping of fields"),
    ("a: [", "not valid YAML"),
])
def test_bad_configs_name_the_field_and_the_file(tmp_path, text, needle):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        RunConfig.from_yaml(path)
    assert str(path) in str(info.value) and needle in str(info.value)


def test_missing_file():
    with pytest.raises(ConfigError, match="cannot read"):
        RunConfig.from_yaml("/nonexistent/run.yaml")


def test_population_config_adds_the_reference_family():
    pop = RunConfig().to_population_config()
    names = [f.name for f in pop.families]
    assert names[0] == "torch_geqrf" and len(names) == len(set(names))


def test_yaml_round_trip():
    config = RunConfig.from_yaml(ROOT / "runs" / "h200.yaml")
    assert RunConfig.from_yaml_text(config.to_yaml()) == config


def test_config_reference_is_current():
    assert (ROOT / "docs" / "config.md").read_text() == render(), "run: python -m search.config_doc > docs/config.md"


def test_timing_and_limits_are_the_harness_models():
    from kernels.harness.settings import RunLimits, TimingPolicy

    evaluation = RunConfig().evaluation
    assert evaluation.timing == TimingPolicy() and evaluation.limits == RunLimits()
    config = RunConfig.from_yaml_text("evaluation: {timing: {max_seconds: 0.5, warmup_calls: 1}, "
                                      "limits: {case_timeout_s: 60}}")
    assert config.evaluation.timing == TimingPolicy(max_seconds=0.5, warmup_calls=1)
    assert config.evaluation.limits == RunLimits(case_timeout_s=60)


def test_flat_timing_keys_still_load_with_a_deprecation_note():
    from kernels.harness.settings import RunLimits, TimingPolicy

    text = ("evaluation: {case_timeout_s: 120, startup_timeout_s: 90, min_reps: 2, max_reps: 7, "
            "max_seconds_per_case: 0.2, target_rel_stderr: 0.02}")
    with pytest.warns(FutureWarning, match="max_seconds_per_case -> timing.max_seconds"):
        config = RunConfig.from_yaml_text(text)
    assert config.evaluation.limits == RunLimits(case_timeout_s=120, startup_timeout_s=90)
    assert config.evaluation.timing == TimingPolicy(min_reps=2, max_reps=7, max_seconds=0.2, target_rel_stderr=0.02)
    # A store's config.yaml written before the move resumes the same; a re-dump uses the new keys.
    assert RunConfig.from_yaml_text(config.to_yaml()) == config and "case_timeout_s: 120" in config.to_yaml()
    with pytest.warns(FutureWarning):
        mixed = RunConfig.from_yaml_text("evaluation: {case_timeout_s: 30, limits: {startup_timeout_s: 20}}")
    assert mixed.evaluation.limits == RunLimits(case_timeout_s=30, startup_timeout_s=20)


def test_a_timing_key_given_both_ways_is_an_error():
    with pytest.raises(ConfigError, match="max_seconds_per_case .deprecated. and timing.max_seconds both given"):
        RunConfig.from_yaml_text("evaluation: {max_seconds_per_case: 1, timing: {max_seconds: 2}}")
    with pytest.raises(ConfigError, match="evaluation.timing.max_sec: unknown field"):
        RunConfig.from_yaml_text("evaluation: {timing: {max_sec: 2}}")
