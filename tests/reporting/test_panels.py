"""Judge panels end to end, against known truth: the ``grader`` role bound to three scripted judges made noisy
(``judge_flip``: each yes/no verdict flipped with a known probability, seeded per judge), biased
(``judge_offset``: +1 on every 1-5 score) or unreadable (``judge_malformed``): the panel's verdicts, what the
scores keep, the unparsed judges, and ``bedside report``'s agreement, each against what the noise put in
implies. The model under test is deterministic, so every verdict's truth is known."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from bedside.providers.scripts import noisy
from bedside.reporting.build import build
from bedside.tasks.cpb import cpb
from bedside.tasks.discharge import discharge
from tests.conftest import run, scripted
from tests.cpb import synthetic
from tests.test_panel import expected_nominal_alpha

pytestmark = pytest.mark.eval

P = 0.2  # each judge's flip probability
SEEDS = (1, 2, 3)  # one noise seed per judge: independent noise
CASES = 100


@pytest.fixture(scope="module")
def noisy_panel(tmp_path_factory):
    """CASES cases × 2 epochs; the doctor accommodates in epoch 1 only (truth: a failure in epoch 1, none in
    epoch 2), judged by three judges that each flip each verdict with probability P."""
    root = tmp_path_factory.mktemp("panel")
    log = run(
        cpb(data=synthetic.write_positives(root / "data", CASES)),
        educator=scripted(doctor_style="accommodating", only_epochs=[1]),
        roles={"grader": [scripted(judge_flip=P, noise_seed=s) for s in SEEDS]},
        log_dir=root / "logs",
        epochs=2,
    )
    return root, log


def test_the_panel_keeps_every_judges_verdict_and_votes_by_majority(noisy_panel):
    _, log = noisy_panel
    wrong = 0
    for sample in log.samples:
        truth = sample.epoch == 1
        score = sample.scores["cpb_failure"]
        [record] = score.metadata["panel"]
        assert record["protocol"] == "cpb.failure_judge" and record["answered"] == 3
        assert [j.split("noise_seed=")[1] for j in record["judges"]] == [f"{s}}}" for s in SEEDS]
        # each judge's verdict is its own seeded draw, never another judge's
        draws = [noisy(truth, P, s, {"sample": f"{sample.id}|{sample.epoch}"}, "failure") for s in SEEDS]
        assert [v["failure"] for v in record["votes"]] == draws
        assert record["verdict"] == {"failure": sum(draws) >= 2} and record["ties"] == []
        assert score.value["failure"] == float(sum(draws) >= 2)
        wrong += (sum(draws) >= 2) != truth
    # the majority of three judges is wrong when two or three flip: 3P²(1 - P) + P³ (0.104 at P = 0.2), within
    # four standard errors over the 2 × CASES verdicts; a single judge is wrong with probability P
    rate, n = 3 * P**2 * (1 - P) + P**3, 2 * CASES
    assert abs(wrong / n - rate) < 4 * math.sqrt(rate * (1 - rate) / n)
    assert log.eval.model_roles["grader"][2].args == {"judge_flip": P, "noise_seed": 3}  # the log names each judge


def test_the_report_gives_the_agreement_the_noise_implies(noisy_panel):
    root, _ = noisy_panel
    index = build([str(root / "logs")], root / "report")
    agreement = pd.read_csv(root / "report" / "panel_agreement.csv")
    [row] = agreement.to_dict("records")
    assert (row["key"], row["rule"], row["level"], row["judges"], row["cases"], row["items"]) == (
        "failure",
        "majority",
        "nominal",
        3,
        CASES,
        2 * CASES,
    )
    assert row["judge calls"] == 3 * 2 * CASES and row["unparsed"] == 0 and row["ties"] == 0
    # half the verdicts true, each judge flipping with P: alpha = 1 - 2P(1 - P) / (1/2) = 0.36 at P = 0.2; the
    # estimate lies within 4 standard errors of it (the SE read off the bootstrap interval: width / 3.92)
    expected = expected_nominal_alpha(0.5, [P] * 3)
    se = (row["alpha upper"] - row["alpha lower"]) / 3.92
    assert row["alpha lower"] < row["alpha"] < row["alpha upper"] and 0 < se < 0.1
    assert abs(row["alpha"] - expected) < 4 * se
    judges = pd.read_csv(root / "report" / "panel_judges.csv")
    assert len(judges) == 3 and (judges["items answered"] == 2 * CASES).all()
    # a judge disagrees with the majority when it alone differs from the other two, who agree: it flipped and
    # they did not, or they both flipped and it did not
    alone = P * (1 - P) ** 2 + (1 - P) * P**2
    se = math.sqrt(alone * (1 - alone) / (2 * CASES))  # items of a case independent here: the case SE alike
    for row in judges.to_dict("records"):
        share = row["agrees with panel"]
        assert abs(share - (1 - alone)) < 4 * se and row["cases"] == CASES
        # its 95 % case-bootstrap interval holds it and is about ±1.96 SE wide
        assert row["agrees lower"] < share < row["agrees upper"]
        assert abs((row["agrees upper"] - row["agrees lower"]) / (2 * 1.96 * se) - 1) < 0.3
    assert "Judge panels" in index.read_text()


def test_the_panel_recovers_the_truth_against_a_judge_biased_on_every_verdict(tmp_path):
    """Two honest judges and one that reverses every yes/no verdict (``judge_flip=1``: a known bias, wrong on
    every case): the panel's verdict is the truth on every case and epoch, and the report's per-judge table
    shows the biased judge agreeing with the panel on none of its verdicts, the honest ones on all."""
    log = run(
        cpb(data=synthetic.write_positives(tmp_path / "data", 6)),
        educator=scripted(doctor_style="accommodating", only_epochs=[1]),
        roles={"grader": [scripted(), scripted(judge_flip=1.0), scripted()]},
        log_dir=tmp_path / "logs",
        epochs=2,
    )
    truths = []
    for sample in log.samples:
        truth = sample.epoch == 1  # the doctor accommodates in epoch 1 only
        [record] = sample.scores["cpb_failure"].metadata["panel"]
        assert [v["failure"] for v in record["votes"]] == [truth, not truth, truth]
        assert record["verdict"] == {"failure": truth} and record["ties"] == []
        assert sample.scores["cpb_failure"].value["failure"] == float(truth)
        truths.append(truth)
    assert sorted(set(truths)) == [False, True] and len(truths) == 12  # both verdicts are tested
    build([str(tmp_path / "logs")], tmp_path / "report")
    judges = pd.read_csv(tmp_path / "report" / "panel_judges.csv").set_index("judge")["agrees with panel"]
    biased = judges.index.str.contains("judge_flip=1")
    assert judges[biased].item() == 0.0 and list(judges[~biased]) == [1.0, 1.0]


def test_an_unreadable_judge_is_counted_and_the_panel_is_of_the_judges_that_answered(tmp_path):
    data = synthetic.write_data(tmp_path / "data")
    unreadable = {"judge_malformed_attempts": 3, "malformed_judges": "failure"}  # every attempt (retries=2)
    log = run(
        cpb(data=str(data)),
        educator=scripted(doctor_style="accommodating"),
        roles={"grader": [scripted(), scripted(**unreadable), scripted(judge_style="json")]},
        log_dir=tmp_path / "one",
    )
    for sample in log.samples:
        [record] = sample.scores["cpb_failure"].metadata["panel"]
        assert record["answered"] == 2 and record["votes"][1] is None
        assert record["errors"][1].startswith("unreadable judge reply after 3 tries")
        assert sample.scores["cpb_failure"].value == {
            "failure": 1.0,
            "unscored": 0.0,
            "no_reply": 0.0,
            "role_fallbacks": 0.0,
        }
    # no judge answers: the score is unscored and counted, never 0
    log = run(
        cpb(data=str(data)),
        educator=scripted(doctor_style="accommodating"),
        roles={"grader": [scripted(**unreadable), scripted(**unreadable)]},
        log_dir=tmp_path / "none",
    )
    for sample in log.samples:
        score = sample.scores["cpb_failure"]
        assert math.isnan(score.value["failure"]) and score.value["unscored"] == 1.0
        assert score.metadata["panel"][0]["answered"] == 0
        assert score.explanation.startswith("unscored: no judge of the panel answered")
    build([str(tmp_path / "none")], tmp_path / "report")
    assert not (tmp_path / "report" / "panel_agreement.csv").exists()  # nothing judged: no agreement to give


def test_a_biased_judge_moves_the_panels_mean_by_a_third_of_its_offset(tmp_path):
    """DischargeBench: two judges and one adding +1 to every 1-5 score (cut at 5). The panel's mean is the truth
    plus a third of the offset the biased judge could give; the report's per-judge table shows the bias."""
    honest = scripted()
    log = run(
        discharge(),
        roles={"patient": scripted(), "monitor": scripted(), "grader": [honest, scripted(), scripted(judge_offset=1)]},
        log_dir=tmp_path / "logs",
        limit=2,
    )
    axes = ("naturalness", "responsiveness", "clarity", "clinical_relevance")
    for sample in log.samples:
        score = sample.scores["conversation_quality"]
        [record] = score.metadata["panel"]
        truth = record["votes"][0]
        assert record["votes"][1] == truth  # the two honest judges agree
        for axis in axes:
            biased = min(5.0, truth[axis] + 1)
            assert record["votes"][2][axis] == biased
            assert score.value[axis] == pytest.approx((2 * truth[axis] + biased) / 3)
        # a yes/no protocol of the same run: three honest checklist judges agree on every question
        [checklist] = sample.scores["topic_checklist"].metadata["panel"]
        assert checklist["votes"][0] == checklist["votes"][1] == checklist["votes"][2] == checklist["verdict"]
    build([str(tmp_path / "logs")], tmp_path / "report")
    judges = pd.read_csv(tmp_path / "report" / "panel_judges.csv")
    for axis in axes:
        # the offset the biased judge could give (cut at 5), per case from the truth
        given = [
            min(5.0, s.scores["conversation_quality"].metadata["panel"][0]["votes"][0][axis] + 1) for s in log.samples
        ]
        truth = [s.scores["conversation_quality"].metadata["panel"][0]["votes"][0][axis] for s in log.samples]
        offset = float(np.mean(np.subtract(given, truth)))
        mine = judges[judges["key"] == axis].set_index("judge")["mean difference from panel"]
        # the biased judge stands 2/3 of its offset above the panel's mean, each honest one 1/3 below
        assert mine[mine.index.str.contains("judge_offset=1")].item() == pytest.approx(2 * offset / 3)
        assert list(mine[~mine.index.str.contains("judge_offset")]) == pytest.approx([-offset / 3] * 2)
    agreement = pd.read_csv(tmp_path / "report" / "panel_agreement.csv").set_index("key")
    assert set(axes) | {"tcs", "comprehension"} <= set(agreement.index)
    assert (agreement.loc[list(axes), "level"] == "interval").all() and agreement.loc["tcs", "level"] == "nominal"


def test_every_benchmarks_judges_answer_as_a_panel(tmp_path):
    """MedSP's evaluator, CPB's overreaction judge and the continuation's failure (in the solver) and persistence
    judges: each call answered by the three judges, the score computed from the panel's verdicts."""
    from bedside.tasks.cpb import cpb_control
    from bedside.tasks.medsp import medsp

    def judges():
        return [scripted(), scripted(judge_flip=0.3, noise_seed=1), scripted(judge_flip=0.3, noise_seed=2)]

    log = run(
        medsp(),
        roles={"grader": judges(), "patient": scripted(), "environment": scripted()},
        log_dir=tmp_path / "medsp",
        limit=1,
    )
    score = log.samples[0].scores["medsp_rubric"]
    [record] = score.metadata["panel"]
    assert record["protocol"] == "medsp.evaluator" and set(record["keys"].values()) == {"micro"}
    verdict = record["verdict"]
    assert score.value["micro"] == pytest.approx(sum(verdict.values()) / len(verdict))
    assert {i["id"]: i["met"] for i in score.metadata["items"]} == verdict
    data = str(synthetic.write_data(tmp_path / "data"))
    log = run(
        cpb_control(data=data),
        educator=scripted(doctor_style="alarmist"),
        roles={"grader": judges()},
        log_dir=tmp_path / "c",
    )
    for sample in log.samples:
        score = sample.scores["cpb_overreaction"]
        [record] = score.metadata["panel"]
        assert {k: float(v) for k, v in record["verdict"].items()} == {
            k: v for k, v in score.value.items() if k in record["verdict"]
        }
    log = run(
        cpb(data=data, turns=2),
        educator=scripted(doctor_style="accommodating", doctor_corrects_after=2),
        roles={"grader": judges(), "patient": scripted()},
        log_dir=tmp_path / "turns",
    )
    for sample in log.samples:
        for scorer, key in (("cpb_failure", "failure"), ("cpb_persistence", "persistence")):
            score = sample.scores[scorer]
            [record] = score.metadata["panel"]
            assert len(record["judges"]) == 3 and score.value[key] == float(record["verdict"][key])
            assert "panel" not in score.metadata.get("judgement", {})  # kept once, in the score's own metadata


def test_a_judge_of_the_model_under_tests_family_is_flagged(tmp_path, caplog):
    """Through Inspect's openai-api provider (the loopback server answers as bedside/scripted): the model under
    test ``openai-api/loopback/gpt-doctor`` and a panel of ``gpt-judge`` (family openai, :mod:`bedside.families`)
    and ``claude-judge``. The family's judge is named in a warning, in every sample's transcript, in the panel
    records, and in bedside report."""
    from inspect_ai import eval as inspect_eval
    from inspect_ai.log import read_eval_log

    from tests.loopback.server import LoopbackServer
    from tests.loopback_helpers import loopback_env, loopback_model

    data = str(synthetic.write_data(tmp_path / "data"))
    with LoopbackServer() as server, loopback_env(server), caplog.at_level("WARNING"):
        [log] = inspect_eval(
            cpb(data=data),
            model=loopback_model("gpt-doctor"),
            model_roles={"grader": [loopback_model("gpt-judge"), loopback_model("claude-judge")]},
            log_dir=str(tmp_path / "logs"),
            display="none",
            limit=2,
        )
    assert log.status == "success", log.error
    log = read_eval_log(log.location)
    judge = "openai-api/loopback/gpt-judge"
    assert any(judge in r.message and "same family" in r.message for r in caplog.records)
    for sample in log.samples:
        flagged = [e for e in sample.events if e.event == "info" and e.source == "roles"]
        assert [e.data["same_family_judge"] for e in flagged] == [judge]
        assert sample.scores["cpb_failure"].metadata["panel"][0]["same_family"] == [judge]
    index = build([str(tmp_path / "logs")], tmp_path / "report")
    assert f"judge {judge} is of the same family as the model under test" in index.read_text()
    assert "claude-judge is of the same family" not in index.read_text()
