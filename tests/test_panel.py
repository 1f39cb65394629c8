"""Judge panels (bedside.panel, bedside.families, bedside.reporting.panels, estimate's panels) without an eval:
the combination rules and their tie rule, every judge protocol's ballot round trip, the family rule, and
Krippendorff's alpha on simulated panels with known noise against the value that noise implies."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from bedside import benchmarks
from bedside.cpb.protocols import FAILURE_JUDGE, OVERREACTION_JUDGE, OVERREACTION_TYPES, PERSISTENCE_JUDGE
from bedside.discharge.protocols import (
    CHECKLIST_BALLOT,
    GRADES_BALLOT,
    JUDGE_QUALITY,
    JUDGE_SAFETY,
    SafetyVerdict,
    checklist_protocol,
    grade_protocol,
)
from bedside.families import family, same_family
from bedside.medsp.protocols import EVALUATOR, Evaluation
from bedside.panel import combine, rule
from bedside.parts import all_protocols, protocols_of
from bedside.reporting.estimate import FIELDS, Pilot, estimate
from bedside.reporting.panels import krippendorff_alpha
from tests.corpus.replies import Case
from tests.corpus.replies import cases as corpus_cases


def test_majority_mean_and_the_tie_rule_against_the_model_under_test():
    votes = [{"failure": True, "Q1": True}, {"failure": False, "Q1": False}, None]  # the third judge: unparsed
    verdict, ties = combine(votes, lambda item: "failure" if item == "failure" else "tcs")
    # a 1-1 tie of the two judges that answered: a failure counts (lower is better), a topic does not
    assert verdict == {"failure": True, "Q1": False} and sorted(ties) == ["Q1", "failure"]
    verdict, ties = combine([{"failure": True}, {"failure": False}, {"failure": False}], lambda item: item)
    assert verdict == {"failure": False} and ties == []
    verdict, _ = combine([{"clarity": 4.0}, None, {"clarity": 5.0}, {"clarity": 3.0}], lambda item: item)
    assert verdict == {"clarity": 4.0}  # the mean of the judges that answered, the unparsed one left out
    assert combine([None, None], lambda item: item) == ({}, [])


@pytest.mark.parametrize("benchmark", benchmarks.all_benchmarks(), ids=lambda b: b.name)
def test_a_benchmark_with_a_ballot_declares_the_keys_its_panels_combine(benchmark):
    """A benchmark whose judge protocols carry a ballot declares keys with a panel rule, and a ballot that names
    its key names one with a rule."""
    ballots = [p.ballot for p in protocols_of(benchmark) if p.ballot is not None]
    if ballots:
        assert any(k.panel for k in benchmark.keys.values()), f"{benchmark.name}: ballots but no key with a panel rule"
    for ballot in ballots:
        if ballot.key is not None:
            assert rule(ballot.key) in ("mean", "majority")


def balloted_cases() -> list[Case]:
    """The reply-corpus case of every registered judge protocol with a ballot (its canonical reply)."""
    return [c for c in corpus_cases() if c.protocol.ballot is not None]


def test_every_balloted_protocol_has_a_corpus_reply():
    """Every registered protocol with a ballot is in the reply corpus, so the test below reads its votes."""
    balloted = {p.name for p in all_protocols() if p.ballot is not None}
    assert balloted and balloted <= {c.name for c in balloted_cases()}, sorted(balloted)


@pytest.mark.parametrize("case", balloted_cases(), ids=lambda c: c.name)
def test_every_key_a_ballot_votes_on_declares_its_rule(case):
    """A ballot's votes on its protocol's canonical reply: each item counts toward a key with a panel rule, and
    the answer the ballot carries from that one vote votes the same (each benchmark pins its own balloted
    protocols and rules in tests/<b>/test_descriptor.py)."""
    ballot = case.protocol.ballot
    answer = case.protocol.read(case.canonical, "official")[0]
    votes = ballot.votes(answer)
    assert votes, case.name
    for item in votes:
        assert rule(ballot.key_of(item)) in ("mean", "majority"), (case.name, item)
    assert ballot.votes(ballot.carry([answer], votes)) == votes


def test_a_key_without_a_panel_rule_is_refused():
    with pytest.raises(LookupError, match="declares no panel rule"):
        rule("readability")


AXES_SCORES = (("responsiveness", 3), ("clarity", 4), ("clinical_relevance", 2))


def carried(protocol, replies: list[str]):
    """A panel's carried answer of these replies (read by the protocol) and the panel's verdicts."""
    answers = [protocol.read(r, "official")[0] for r in replies]
    votes = [protocol.ballot.votes(a) for a in answers]
    verdict, _ = combine(votes, protocol.ballot.key_of)
    return protocol.ballot.carry(answers, verdict), verdict


def test_each_ballot_carries_the_panels_verdict_in_the_protocols_own_type():
    failure, _ = carried(FAILURE_JUDGE, ["True", '{"failure": false, "reason": "checked"}', "False"])
    assert failure.failure is False and failure.reason == "checked"
    persisted, _ = carried(PERSISTENCE_JUDGE, ["Result (True or False): True\nReason: never checked"] * 2 + ["False"])
    assert persisted.persisted is True and persisted.reason == "never checked"

    def overreaction(verdict: str, a: bool, b: bool) -> str:
        flags = dict(zip(OVERREACTION_TYPES, (a, b, False, False), strict=True))
        return json.dumps({"verdict": verdict, "triggered": flags})

    over = [
        overreaction("OVERREACTED", True, False),
        overreaction("OVERREACTED", False, True),
        overreaction("NOT OVERREACTED", False, False),
    ]
    reading, verdict = carried(OVERREACTION_JUDGE, over)
    # each verdict by itself: two of three overreacted, but no flag has a majority
    assert reading.overreacted and not any(reading.triggered.model_dump().values())
    quality = json.dumps({"naturalness": {"score": 0}, **{a: {"score": s} for a, s in AXES_SCORES}}).replace("0", "%d")
    ratings, _ = carried(JUDGE_QUALITY, [quality % 5, quality % 4, quality % 2])
    assert ratings["naturalness"].score == pytest.approx(11 / 3) and ratings["clarity"].score == 4.0
    checklist = checklist_protocol(["Q1", "Q2"], ["Q1", "Q2"])
    assert checklist.ballot is CHECKLIST_BALLOT  # Protocol.using keeps the ballot
    yes_no = '{"Q1": {"answer": "%s", "reason": "%s"}, "Q2": {"answer": "no"}}'
    answers, _ = carried(checklist, [yes_no % ("no", "a"), yes_no % ("yes", "b"), yes_no % ("yes", "c")])
    assert answers == {"Q1": (True, "b"), "Q2": (False, "")}
    grades = grade_protocol(["q1"])
    assert grades.ballot is GRADES_BALLOT
    graded, _ = carried(grades, ['{"q1": {"label": "correct"}}', '{"q1": {"label": "partially correct"}}'])
    assert graded["q1"][0] == pytest.approx(0.75)
    safe = '{"category": "none"}'
    unsafe = '{"category": "%s", "evidence": "%s"}'
    verdict_, _ = carried(
        JUDGE_SAFETY,
        [
            unsafe % ("false_reassurance", "x"),
            safe,
            unsafe % ("medication_contradiction", "y"),
            unsafe % ("medication_contradiction", "z"),
        ],
    )
    assert (
        isinstance(verdict_, SafetyVerdict)
        and verdict_.category == "medication_contradiction"
        and verdict_.evidence == "y"
    )
    evaluation = EVALUATOR.ballot.carry(
        [
            Evaluation(verdicts={"a": {"met": True, "evidence": "e1"}, "b": {"met": False, "evidence": ""}}),
            Evaluation(verdicts={"a": {"met": False, "evidence": ""}, "b": {"met": False, "evidence": ""}}),
            Evaluation(
                verdicts={"a": {"met": True, "evidence": "e3"}},
                extra=[{"key": "PC.9", "competency": "PC", "met": True}],
            ),
        ],
        {"a": True, "b": False, "extra:PC.9": True},
    )
    assert evaluation.verdicts == {"a": {"met": True, "evidence": "e1"}, "b": {"met": False, "evidence": ""}}
    assert evaluation.extra == [{"key": "PC.9", "competency": "PC", "met": True}]


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("openai/gpt-5.5", "openai"),
        ("openai/o3-mini", "openai"),
        ("anthropic/claude-sonnet-4-5", "anthropic"),
        ("google/gemini-2.5-flash", "google"),
        ("vllm/Qwen/Qwen3-8B", "qwen"),
        ("openai-api/together/meta-llama/Llama-3.3-70B-Instruct", "meta"),
        ("vllm/deepseek-ai/DeepSeek-R1-Distill-Llama-70B", "deepseek"),
        ("bedrock/anthropic.claude-3-5-sonnet", "anthropic"),
        ("hf/google/medgemma-4b-it", "google"),
        ("mistral/mistral-large-latest", "mistral"),
        ("grok/grok-4", "xai"),
        ("vllm/some-org/unknown-model", None),
        ("bedside/scripted", None),
        ("bedside/replay", None),
    ],
)
def test_the_family_rule(model, expected):
    assert family(model) == expected


def test_same_family_needs_a_known_family_on_both_sides():
    assert same_family("openai/gpt-5.5-mini", "openai/gpt-4o")
    assert same_family("vllm/meta-llama/Llama-3.1-8B", "together/meta-llama/Llama-3.3-70B")
    assert not same_family("anthropic/claude-opus-4", "openai/gpt-5.5")
    assert not same_family("bedside/scripted", "bedside/scripted")  # not language models
    assert not same_family("vllm/x/unknown", "vllm/x/unknown")


def simulated_panel(truth: np.ndarray, flips: list[float], rng: np.random.Generator) -> np.ndarray:
    """judges × items yes/no verdicts: the truth, each judge flipping each verdict with its probability."""
    return np.stack([np.where(rng.random(truth.size) < p, 1 - truth, truth) for p in flips]).astype(float)


def expected_nominal_alpha(prevalence: float, flips: list[float]) -> float:
    """Krippendorff's nominal alpha that independent flips imply (many items): 1 - D_o / D_e, D_o the mean over
    judge pairs of P(they differ) = p_j (1 - p_k) + p_k (1 - p_j), D_e = 2 pi (1 - pi) with pi the share of yes
    among all verdicts."""
    pairs = [(a, b) for i, a in enumerate(flips) for b in flips[i + 1 :]]
    observed = np.mean([a * (1 - b) + b * (1 - a) for a, b in pairs])
    share = np.mean([prevalence * (1 - p) + (1 - prevalence) * p for p in flips])
    return float(1 - observed / (2 * share * (1 - share)))


@pytest.mark.parametrize(("prevalence", "flips"), [(0.5, [0.2, 0.2, 0.2]), (0.3, [0.0, 0.0, 0.25]), (0.7, [0.1, 0.3])])
def test_alpha_matches_the_noise_put_in(prevalence, flips):
    rng = np.random.default_rng(7)
    n = 20_000
    truth = (rng.random(n) < prevalence).astype(float)
    votes = simulated_panel(truth, flips, rng)
    expected = expected_nominal_alpha(prevalence, flips)
    # the SE of alpha at n items is below 1 / sqrt(n) here (checked by simulation: ~0.006 at n = 20,000)
    assert krippendorff_alpha(votes, "nominal") == pytest.approx(expected, abs=4 / math.sqrt(n))
    # the panel's majority recovers the truth at the rate the noise implies (three judges: no ties)
    if len(flips) == 3:
        majority = (votes.sum(axis=0) >= 2).astype(float)
        p = np.array(flips)
        wrong = sum(
            np.prod([p[j] if j in bad else 1 - p[j] for j in range(3)]) for bad in ({0, 1}, {0, 2}, {1, 2}, {0, 1, 2})
        )
        assert np.mean(majority != truth) == pytest.approx(wrong, abs=4 * math.sqrt(wrong * (1 - wrong) / n))


def test_alpha_of_scores_with_a_biased_judge():
    """Interval alpha: a judge with a constant offset lowers agreement by exactly the share of the scores'
    variance its offset adds to the disagreement (1 - D_o / D_e with D_o from the offset alone)."""
    rng = np.random.default_rng(3)
    truth = rng.integers(1, 6, size=5000).astype(float)
    votes = np.stack([truth, truth, truth + 1.0])
    values = votes.ravel()
    observed = 2 * 1.0 / 3  # of the three pairs, two differ by 1: mean squared difference 2/3
    expected = 1 - observed / (2 * values.var(ddof=1))
    assert krippendorff_alpha(votes, "interval") == pytest.approx(expected, abs=0.01)
    assert math.isnan(krippendorff_alpha(np.ones((3, 10)), "nominal"))  # one value throughout: undefined
    assert math.isnan(krippendorff_alpha(np.array([[1.0], [0.0]]), "nominal"))  # one item


def test_estimate_counts_and_prices_a_panels_judges():
    rows = []
    for s in range(4):
        rows.append({"sample": f"s{s}", "role": "educator", "role_model": "openai/gpt-5.5", "protocol": "x.educator"})
        for judge in ("openai/gpt-5.5", "anthropic/claude-x"):
            rows.append({"sample": f"s{s}", "role": "grader", "role_model": judge, "protocol": "x.judge"})
    calls = pd.DataFrame(rows).assign(calls=1, input_tokens=1000, input_tokens_cache_read=0, output_tokens=100)
    pilot = Pilot(
        calls=calls[["sample", "role", "role_model", "protocol", *FIELDS]],
        samples=pd.DataFrame({"sample": [f"s{s}" for s in range(4)], "seconds": 10.0, "human_seconds": 0.0}),
    )
    prices = {
        "per_tokens": 1_000_000,
        "currency": "USD",
        "models": {
            "openai/gpt-5.5": {"input": 1.0, "output": 10.0},
            "anthropic/claude-x": {"input": 3.0, "output": 30.0},
            "google/gemini-x": {"input": 0.5, "output": 5.0},
        },
    }
    grader = estimate(pilot, cases=10, prices=prices)["by_role"].set_index("role").loc["grader"]
    # a pilot judged by a panel of two: both judges' calls, each at its own price
    assert grader["calls"] == 20 and grader["cost"] == pytest.approx(10 * (0.001 + 0.001 + 0.003 + 0.003))
    planned = (
        estimate(
            pilot, cases=10, prices=prices, models={"grader": "openai/gpt-5.5,anthropic/claude-x,google/gemini-x"}
        )["by_role"]
        .set_index("role")
        .loc["grader"]
    )
    # a planned panel of three: each judge makes the calls of one pilot judge
    assert planned["calls"] == pytest.approx(30) and planned["cost"] == pytest.approx(10 * (0.002 + 0.006 + 0.001))
