"""Scripted models made noisy and biased, and the noise measured back: the scripted judges flip each yes/no
verdict with a known probability (``judge_flip``, seeded by ``noise_seed``, per sample, epoch and item:
:func:`bedside.providers.scripts.noisy`), and DischargeBench's quality judge adds a known offset
(``judge_offset``); ``compare``'s MDD and the epochs' flips, within-case SD and pass^k recover that noise.

The model under test is deterministic, so each verdict's truth is known; every tolerance is 4 standard
errors of the statistic, derived beside it. :mod:`tests.reporting.test_noise_floor` checks the same
statistics with more cases, on logs built directly."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bedside.providers.scripts import noisy
from bedside.reporting import detectable, epochs
from bedside.reporting.compare import compare
from bedside.reporting.load import load, scores_frame
from bedside.tasks.cpb import cpb
from tests.conftest import run, scripted
from tests.cpb import synthetic

P = 0.2  # the judges' flip probability
CASES = 50


def test_a_noisy_draw_is_seeded_by_sample_epoch_and_item():
    situation = {"sample": "c1|1"}
    draws = [noisy(False, 0.5, 0, {"sample": f"c{i}|1"}, "failure") for i in range(2000)]
    assert abs(np.mean(draws) - 0.5) < 4 * math.sqrt(0.25 / 2000)  # independent across samples
    assert noisy(True, 0.5, 0, situation, "Q1") == noisy(True, 0.5, 0, dict(situation), "Q1")  # seeded
    assert noisy(True, 0.0, 0, situation, "Q1") is True and noisy(True, 1.0, 0, situation, "Q1") is False
    other_epoch = [noisy(False, 0.5, 0, {"sample": f"c{i}|2"}, "failure") for i in range(2000)]
    other_seed = [noisy(False, 0.5, 1, {"sample": f"c{i}|1"}, "failure") for i in range(2000)]
    for other in (other_epoch, other_seed):  # agree by chance only: half the time (SE sqrt(0.25 / 2000))
        assert abs(np.mean(np.equal(draws, other)) - 0.5) < 4 * math.sqrt(0.25 / 2000)


@pytest.fixture(scope="module")
def noisy_cpb(tmp_path_factory):
    """Two runs of CASES cases × 2 epochs whose failure judge flips each verdict with probability P, with
    seeds 1 and 2 (two independent runs of the same doctor and judge)."""
    root = tmp_path_factory.mktemp("noisy-cpb")
    data = synthetic.write_positives(root / "data", CASES)
    return [
        run(
            cpb(data=data),
            roles={"grader": scripted(judge_flip=P, noise_seed=seed)},
            log_dir=root / f"s{seed}",
            epochs=2,
        )
        for seed in (1, 2)
    ]


@pytest.mark.eval
def test_the_flip_share_within_case_sd_and_pass_k_match_the_noise_put_in(noisy_cpb):
    """Per epoch a verdict is a failure with probability P (the truth is no failure): the failure rate is P
    (SE sqrt(P(1 - P) / 2n)); a case flips between its two epochs with probability 2P(1 - P) (SE over the 2n
    cases of both runs); the within-case variance is P(1 - P) (each case's is 0 or 1/2, 1/2 with probability
    2P(1 - P)); pass^2, both epochs without failure, is (1 - P)² (a 0/1 per case)."""
    logs = load([log.location for log in noisy_cpb])
    n = 2 * CASES
    failures = scores_frame(logs).query("key == 'failure'")["value"]
    assert abs(failures.mean() - P) < 4 * math.sqrt(P * (1 - P) / (2 * n))
    flips = epochs.flips(epochs.verdicts(logs), pass_k=2)
    failure = flips[flips["verdict"] == "failure"]
    f = 2 * P * (1 - P)
    shares = failure["flip_share"].to_numpy()
    assert list(failure["n_units"]) == [CASES, CASES]  # each run on its own (labelled by its folder)
    assert abs(shares.mean() - f) < 4 * math.sqrt(f * (1 - f) / n)
    pass_2 = (1 - P) ** 2
    assert abs(failure["pass_k"].mean() - pass_2) < 4 * math.sqrt(pass_2 * (1 - pass_2) / n)
    sd = epochs.within_case_sd(scores_frame(logs))
    variance = (sd[sd["key"] == "failure"]["within_sd"] ** 2).mean()
    assert abs(variance - P * (1 - P)) < 4 * 0.5 * math.sqrt(f * (1 - f) / n)


@pytest.mark.eval
def test_compares_mdd_matches_the_noise_of_two_noisy_runs(noisy_cpb):
    """A case's difference of epoch means, (a1 + a2 - b1 - b2) / 2 with four independent Bernoulli(P), has
    variance σ² = P(1 - P) and fourth moment μ4 = (4 κ + 36 (P(1 - P))²) / 16 with κ = P(1 - P)(1 - 3P(1 - P)):
    SE(s) = sqrt((μ4 - σ⁴) / n) / (2σ); the MDD is mdd(σ, n) within δ*(n) × 4 SE(s)."""
    [result] = compare(noisy_cpb[0], noisy_cpb[1], ["failure"], None, resamples=999)
    pq = P * (1 - P)
    mu4 = (4 * pq * (1 - 3 * pq) + 36 * pq**2) / 16
    se_sd = math.sqrt((mu4 - pq**2) / CASES) / (2 * math.sqrt(pq))
    assert (result.n, result.epochs) == (CASES, 2)
    assert abs(result.sd_difference - math.sqrt(pq)) < 4 * se_sd
    assert abs(result.mdd - detectable.mdd(math.sqrt(pq), CASES)) < 4 * se_sd * detectable.effect(CASES)


@pytest.mark.eval
def test_a_judge_without_noise_never_flips(tmp_path):
    data = synthetic.write_positives(tmp_path / "data", 7)
    log = run(cpb(data=data), roles={"grader": scripted()}, log_dir=tmp_path / "logs", epochs=2)
    [row] = epochs.flips(epochs.verdicts(load([log.location]))).to_dict("records")
    assert (row["n_units"], row["flip_share"]) == (7, 0.0)


@pytest.mark.eval
def test_checklist_answers_and_rubric_items_flip_as_the_noise_put_in(tmp_path):
    """The same noise on DischargeBench's checklist answers (tcs) and MedSP1000's rubric items
    (scenario_mean), read per item from the logs: an item flips with probability 2P(1 - P), items drawn
    independently (SE over the units)."""
    from bedside.tasks.discharge import discharge
    from bedside.tasks.medsp import medsp

    grader = scripted(judge_flip=P, noise_seed=3)
    discharge_log = run(
        discharge(),
        educator=scripted(educator_topics=1),  # a short session: every question is still answered
        roles={"patient": scripted(), "monitor": scripted(), "grader": grader},
        log_dir=tmp_path / "d",
        limit=1,
        epochs=2,
    )
    medsp_log = run(
        medsp(),
        roles={"patient": scripted(), "environment": scripted(), "grader": grader},
        log_dir=tmp_path / "m",
        limit=2,
        epochs=2,
    )
    table = epochs.flips(epochs.verdicts(load([discharge_log.location, medsp_log.location])))
    f = 2 * P * (1 - P)
    judged = {
        "tcs": {(s.id, q) for s in discharge_log.samples for q in s.scores["topic_checklist"].metadata["answers"]},
        "scenario_mean": {
            (s.id, i["id"]) for s in medsp_log.samples for i in s.scores["medsp_rubric"].metadata["items"]
        },
    }
    for verdict, units in judged.items():
        [row] = table[table["verdict"] == verdict].to_dict("records")
        assert (row["unit"], row["n_units"]) == ("item", len(units)) and len(units) >= 10
        assert abs(row["flip_share"] - f) < 4 * math.sqrt(f * (1 - f) / row["n_units"]), (verdict, row)


@pytest.mark.eval
def test_a_judge_with_a_known_offset_is_measured_by_compare(tmp_path):
    """The same DischargeBench conversations re-judged by a grader that adds -1 to every 1-5 score (cut at 1):
    compare's difference is the offset on every case (no spread: an MDD of 0, a significant drop)."""
    from bedside.reporting.rescore import rescore
    from bedside.tasks.discharge import discharge

    log = run(
        discharge(),
        roles={"patient": scripted(), "monitor": scripted(), "grader": scripted()},
        log_dir=tmp_path / "a",
        limit=2,
    )
    [biased] = rescore([log.location], scripted(judge_offset=-1), tmp_path / "b")
    for axis in ("naturalness", "clarity", "clinical_relevance"):
        [result] = compare(log.location, str(biased), [axis], None, resamples=999)
        before = [s.scores["conversation_quality"].value[axis] for s in log.samples]
        assert result.difference == pytest.approx(np.mean([max(1, v - 1) - v for v in before]))
        if min(before) > 1:  # no score at the floor: exactly the offset
            assert result.difference == -1 and result.mdd == 0 and result.verdict == "significant drop"
