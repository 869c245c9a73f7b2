from kernels.suites import get_suite
from search.engine.prompt import Inspiration, ParentView, PromptAttempt, PromptContext, build_messages, results_table

SUITE = list(get_suite("qrv2-bench"))


def parent(**kw):
    base = dict(candidate_id="c0000042", source="def custom_kernel(A):\n    return A\n", params={"block": 32},
                cases=[{"case": SUITE[3].name, "status": "ok", "median_ms": 12.0, "baseline_ms": 995.0,
                        "speedup": 82.9, "residuals": {"factor": 0.01, "orth": 0.4}}],
                geomean_ms=12.0, speedup=82.9,
                profile={SUITE[3].name: {"kernels_per_call": 33, "syncs": 0, "memcpys": 0, "device_ms": 11.5,
                                         "top_kernels": [{"name": "_trailing_update", "share": 0.7}]}})
    base.update(kw)
    return ParentView(**base)


def test_prompt_carries_everything_the_issue_names():
    ctx = PromptContext(
        family="blocked_wy", description="Blocked compact-WY Householder.", space={"block": "Choice(16, 32)"},
        parent=parent(), suite=SUITE,
        attempts=[PromptAttempt("c0000040", "llm", "failed_verify", "R - QᵀA too large in matrix 3",
                                note="tf32 update")],
        inspirations=[Inspiration("lookahead_split", "c0000007", 30.0, "def custom_kernel(A):\n    pass\n" * 2000)])
    system, user = build_messages(ctx)
    text = user["content"]
    assert system["role"] == "system" and "H200" in system["content"]
    for needle in ("custom_kernel(A) -> (H, tau)", "20*n*eps32", "Blocked compact-WY", "block: Choice(16, 32)",
                   "## Parent c0000042", "block=32", "82.9", "_trailing_update 70%", "33 kernels/call",
                   "R - QᵀA too large", "tf32 update", "champion of family `lookahead_split`", "(truncated)",
                   "<<<<<<< SEARCH"):
        assert needle in text, needle
    # The floors of the 640x512 case: 4/3·512³·640 flops at 50.6 TFLOP/s = 2.26 ms.
    assert "| 2.26 |" in text


def test_merge_prompt_has_both_parents():
    ctx = PromptContext(family="f", description="d", space={}, parent=parent(), suite=SUITE,
                        second_parent=parent(candidate_id="c0000050", source="def custom_kernel(A):\n    return 2\n"))
    text = build_messages(ctx)[1]["content"]
    assert "## Second parent c0000050" in text and "Merge the two parents" in text


def test_results_table_handles_failures_and_unknown_cases():
    table = results_table([{"case": "weird-1x1-c0", "status": "error", "message": "boom"}], SUITE)
    assert "boom" in table and "weird-1x1-c0" in table
