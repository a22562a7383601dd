"""Outlier runs and their likely causes, on call sequences built to sit on each side of every threshold."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spanreplay.cost import ModelCall, PricedCall, RunFacts, Usage, builtin_prices, find_outliers, price_calls
from spanreplay.cost._outliers import GROWTH_MIN_CALLS, LOOP_MIN_REPEATS, causes_of


def calls(
    run_id: str, prompts: Sequence[int], *, digests: Sequence[str] | None = None, output: int = 50
) -> list[PricedCall]:
    made = [
        ModelCall(
            run_id=run_id,
            seq=2 * n + 1,  # a tool call between each model call
            model="claude-sonnet-4-6",
            start_ns=1_000 + n,
            usage=Usage(input=prompt, output=output),
            input_digest=digests[n] if digests is not None else f"{run_id}-{n}",
        )
        for n, prompt in enumerate(prompts)
    ]
    return price_calls(made, builtin_prices())


def facts(*run_ids: str, agent: str = "support") -> dict[str, RunFacts]:
    return {r: RunFacts(run_id=r, agent=agent, status="ok", start_ns=1) for r in run_ids}


def test_a_run_just_over_the_factor_is_flagged_and_one_at_it_is_not() -> None:
    usual = {f"r{n}": calls(f"r{n}", [950]) for n in range(5)}  # 1,000 tokens each
    at_limit = calls("at", [2950])  # 3,000 tokens: 3x, not over
    over = calls("over", [2951])
    runs = {**usual, "at": at_limit, "over": over}
    found = find_outliers(facts(*runs), runs)
    assert [o.run.run_id for o in found] == ["over"]
    assert found[0].median_tokens == 1000
    assert found[0].ratio == pytest.approx(3.001)


def test_each_agent_is_measured_against_its_own_median() -> None:
    small = {f"s{n}": calls(f"s{n}", [100]) for n in range(3)}
    big = {f"b{n}": calls(f"b{n}", [10_000]) for n in range(3)}
    runs_facts = {**facts(*small, agent="small"), **facts(*big, agent="big")}
    assert find_outliers(runs_facts, {**small, **big}) == []


def test_three_identical_requests_are_a_loop_and_two_are_an_ordinary_retry() -> None:
    same = ["d"] * LOOP_MIN_REPEATS
    (cause,) = causes_of(calls("x", [500] * LOOP_MIN_REPEATS, digests=same), median_calls=1)
    assert cause.kind == "retry_loop"
    assert cause.seq == 1
    assert cause.seqs == (1, 3, 5)
    two = causes_of(calls("y", [500, 500], digests=["d", "d"]), median_calls=1)
    assert [c.kind for c in two] != ["retry_loop"]


def test_a_prompt_growing_over_four_calls_to_twice_its_size_is_a_stuffed_context() -> None:
    grown = causes_of(calls("g", [100, 50, 200, 400, 800, 1600]), median_calls=6)
    assert grown[0].kind == "growing_context"
    assert grown[0].seq == 3  # where the growth started: the second call shrank first
    assert grown[0].seqs == (3, 5, 7, 9, 11)
    short = causes_of(calls("s", [100, 200, 400][: GROWTH_MIN_CALLS - 1]), median_calls=3)
    assert "growing_context" not in [c.kind for c in short]
    slow = causes_of(calls("w", [100, 110, 120, 130, 140]), median_calls=5)  # grows, but only 1.4x
    assert "growing_context" not in [c.kind for c in slow]


def test_without_a_loop_or_growth_many_calls_or_one_large_call_is_named() -> None:
    many = causes_of(calls("m", [100, 90] * 10), median_calls=4)
    assert [c.kind for c in many] == ["many_calls"]
    assert many[0].seq == 9  # the fifth call: past the median run's four
    large = causes_of(calls("l", [100, 9000, 100]), median_calls=3)
    assert [c.kind for c in large] == ["large_call"]
    assert large[0].seq == 3
    assert "one large call: seq 3" in large[0].summary


def test_runs_outside_spanreplay_and_runs_without_calls_are_never_outliers() -> None:
    usual = {f"r{n}": calls(f"r{n}", [100]) for n in range(3)}
    foreign = calls("trace abc", [100_000])
    runs = {**facts(*usual), "trace abc": RunFacts("trace abc", recorded=False)}
    assert find_outliers(runs, {**usual, "trace abc": foreign, "empty": []}) == []


@given(st.lists(st.lists(st.integers(min_value=0, max_value=10**6), min_size=1, max_size=8), min_size=1, max_size=12))
def test_every_flagged_run_exceeds_the_factor_and_names_a_step_it_made(prompts: list[list[int]]) -> None:
    runs = {f"r{n}": calls(f"r{n}", p) for n, p in enumerate(prompts)}
    for outlier in find_outliers(facts(*runs), runs, factor=3.0):
        assert outlier.totals.total_tokens > 3.0 * outlier.median_tokens
        made = {c.call.seq for c in runs[outlier.run.run_id]}
        assert outlier.causes
        assert outlier.seq in made
