"""Multi-model sweeps end to end: three scripted educators that differ (``educator_topics``) run with
``eval_set`` on the same cases and roles (a second call resumes: nothing re-runs); ``bedside rescore``
re-judges the logs with a grader that flips every checklist answer, without re-running a
conversation; ``bedside report`` over both folders gives the leaderboard with paired differences
(checked against the per-case values of the logs) and Kendall's tau of the two graders' rankings."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from inspect_ai.log import read_eval_log
from scipy.stats import kendalltau

from bedside.intervals import summarise as summarise_values
from tests.conftest import bedside_command
from tests.reporting.sweeps import EDUCATORS, run_sweep

pytestmark = pytest.mark.eval

ALL, THREE, ONE = "bedside/scripted", "bedside/scripted {educator_topics=3}", "bedside/scripted {educator_topics=1}"
FLIPPING = "bedside/scripted {judge_invert=checklist}"


def bedside(*args: str) -> None:
    done = bedside_command(*args)
    assert done.returncode == 0, done.stdout + done.stderr


def per_case(logs, key: str, scorer: str) -> dict[str, dict[str, float]]:
    """model label → case id → value (one epoch)."""
    out = {}
    for log in logs:
        args = ", ".join(f"{k}={v}" for k, v in sorted(log.eval.model_args.items()))
        label = log.eval.model + (f" {{{args}}}" if args else "")
        out[label] = {str(s.id): s.scores[scorer].value[key] for s in log.samples}
    return out


def build_sweep(root):
    logs = run_sweep(root / "sweep", EDUCATORS, limit=4)
    again = run_sweep(root / "sweep", EDUCATORS, limit=4)  # eval-set resumes: the finished logs are reused
    assert sorted(log.eval.eval_id for log in again) == sorted(log.eval.eval_id for log in logs)
    assert len(list((root / "sweep").glob("*.eval"))) == 3
    bedside(
        "rescore",
        str(root / "sweep"),
        "--grader",
        "bedside/scripted",
        "-M",
        "judge_invert=checklist",
        "--out",
        str(root / "flipped"),
    )
    rescored = [read_eval_log(str(p)) for p in sorted((root / "flipped").glob("*.eval"))]
    bedside("report", str(root / "sweep"), str(root / "flipped"), "--out", str(root / "report"))
    return logs, rescored, root / "report"


def check_rescore_rejudges_without_rerunning_the_conversations(sweep):
    logs, rescored, _ = sweep
    assert len(rescored) == 3
    before = {(log.eval.model_args.get("educator_topics"), str(s.id)): s for log in logs for s in log.samples}
    for log in rescored:
        assert log.eval.model_roles["grader"].args == {"judge_invert": "checklist"}
        assert log.eval.metadata["bedside_rescore"]["grader"] == FLIPPING
        assert log.eval.metadata["bedside_rescore"]["previous_grader"] == "bedside/scripted"
        for sample in log.samples:
            old = before[(log.eval.model_args.get("educator_topics"), str(sample.id))]
            assert sample.store["EncounterStore:history"] == old.store["EncounterStore:history"]  # same conversation
            assert sample.store["EncounterStore:comprehension"] == old.store["EncounterStore:comprehension"]
            new_answers = sample.scores["topic_checklist"].metadata["answers"]
            old_answers = old.scores["topic_checklist"].metadata["answers"]
            assert new_answers == {q: not a for q, a in old_answers.items()}  # the other grader's verdicts
            assert sample.scores["comprehension"].value == old.scores["comprehension"].value


def check_rescore_calls_only_the_judges(sweep, tmp_path, monkeypatch):
    """Every model call a re-judging makes is a judge protocol: no educator, patient or monitor turn."""
    from bedside.protocols import tag_of
    from bedside.providers.api import BedsideAPI
    from bedside.reporting.rescore import rescore
    from tests.conftest import scripted

    logs, _, _ = sweep
    calls: list[str] = []
    generate = BedsideAPI.generate

    async def counting(self, input, tools, tool_choice, config):
        tag = tag_of(input)
        calls.append(tag.name if tag else "untagged")
        return await generate(self, input, tools, tool_choice, config)

    monkeypatch.setattr(BedsideAPI, "generate", counting)
    [written] = rescore([logs[0].location], scripted(judge_invert="checklist"), tmp_path / "out")
    assert calls and all(c.startswith("discharge.judge_") for c in calls), sorted(set(calls))
    assert {"discharge.judge_quality", "discharge.judge_checklist", "discharge.judge_comprehension"} <= set(calls)
    assert read_eval_log(str(written)).eval.metadata["bedside_rescore"]["grader"] == FLIPPING
    # the same command again (after an interruption): the log judged already is kept, no call is made
    calls.clear()
    assert rescore([logs[0].location], scripted(judge_invert="checklist"), tmp_path / "out") == [] and not calls
    with pytest.raises(FileExistsError, match="already exists"):  # another grader's judging: a clash
        rescore([logs[0].location], scripted(), tmp_path / "out")


def check_leaderboard_ranks_models_with_paired_differences(sweep):
    logs, _, report = sweep
    ranking = pd.read_csv(report / "leaderboard.csv")
    pairs = pd.read_csv(report / "paired_differences.csv")
    tcs = ranking[(ranking["grader"] == "bedside/scripted") & (ranking["key"] == "tcs")].sort_values("rank")
    assert list(tcs["model"]) == [ALL, THREE, ONE] and tcs["order_resolved"].all()
    values = per_case(logs, "tcs", "topic_checklist")
    for row in pairs[(pairs["grader"] == "bedside/scripted") & (pairs["key"] == "tcs")].itertuples():
        shared = sorted(set(values[row.model_a]) & set(values[row.model_b]))
        diffs = [values[row.model_a][c] - values[row.model_b][c] for c in shared]
        want = summarise_values(diffs)  # the report's interval rule applied to the paired differences
        assert (row.n_pairs, row.difference) == (len(shared), pytest.approx(want["mean"]))
        assert (row.ci_lower, row.ci_upper) == (pytest.approx(want["ci_lower"]), pytest.approx(want["ci_upper"]))
        assert row.resolved == (want["ci_lower"] > 0 or want["ci_upper"] < 0)
    # every interval inside its scale (the full educator's comprehension is near 1: its t-interval is clipped)
    likert = ranking["key"].isin(["naturalness", "responsiveness", "clarity", "clinical_relevance"])
    unit = ~likert & (ranking["key"] != "readability")
    assert (ranking.loc[unit, "ci_lower"] >= 0).all() and (ranking.loc[unit, "ci_upper"] <= 1).all()
    assert (ranking.loc[likert, "ci_lower"] >= 1).all() and (ranking.loc[likert, "ci_upper"] <= 5).all()
    # a key on which the scripted judge rates every educator the same: no resolved order
    same = ranking[(ranking["grader"] == "bedside/scripted") & (ranking["key"] == "naturalness")]
    assert not same["order_resolved"].any()
    assert "Leaderboard: models on the same cases" in (report / "index.html").read_text()


def check_judge_sensitivity_shows_the_ranking_move(sweep):
    logs, rescored, report = sweep
    table = pd.read_csv(report / "judge_sensitivity.csv").set_index("key")
    assert set(table["grader_a"]) == {"bedside/scripted"} and set(table["grader_b"]) == {FLIPPING}
    tcs = table.loc["tcs"]
    models = [ALL, THREE, ONE]
    old, new = per_case(logs, "tcs", "topic_checklist"), per_case(rescored, "tcs", "topic_checklist")
    want = kendalltau(
        [np.mean(list(old[m].values())) for m in models], [np.mean(list(new[m].values())) for m in models]
    )
    assert tcs["tau"] == pytest.approx(want.statistic) == -1.0  # the flipped checklist reverses the TCS ranking
    assert tcs["ranking_a"] == " > ".join(models) and tcs["ranking_b"] == " > ".join(reversed(models))
    assert (tcs["n_models"], tcs["n_cases"]) == (3, 4)
    assert tcs["tau_low"] <= tcs["tau"] <= tcs["tau_high"]
    comprehension = table.loc["comprehension"]  # not judged differently: the same order
    assert comprehension["tau"] == 1.0 and comprehension["ranking_a"] == comprehension["ranking_b"]
    assert "Judge sensitivity" in (report / "index.html").read_text()


def test_sweep_rescore_and_report_end_to_end(tmp_path, monkeypatch):
    """One test, so that pytest-xdist runs the scripted sweep once (a module fixture would run on every
    worker that picks one of the checks)."""
    sweep = build_sweep(tmp_path / "run")
    check_rescore_rejudges_without_rerunning_the_conversations(sweep)
    check_leaderboard_ranks_models_with_paired_differences(sweep)
    check_judge_sensitivity_shows_the_ranking_move(sweep)
    (tmp_path / "calls").mkdir()
    check_rescore_calls_only_the_judges(sweep, tmp_path / "calls", monkeypatch)


def test_rates_rank_lower_is_better_and_logs_group_by_grader(tmp_path):
    """CPB-Bench doctors on the same cases (synthetic logs): the lower failure rate ranks first, its
    interval is Wilson's (0/1 outcomes); a log without a grader role is its own group."""
    from inspect_ai.log import EvalLog
    from inspect_ai.model import GenerateConfig, ModelConfig
    from inspect_ai.scorer import Score

    from bedside.intervals import wilson
    from bedside.reporting.load import load
    from bedside.reporting.sweep import case_values, leaderboard
    from tests.reporting.synth import log, sample, write

    def doctor(model: str, failures: list[int], grader: str | None) -> EvalLog:
        the_log = log(
            "bedside/cpb",
            model,
            [sample(f"c{i}", {"cpb_failure": Score(value={"failure": float(f)})}) for i, f in enumerate(failures)],
        )
        if grader:
            the_log.eval.model_roles = {"grader": ModelConfig(model=grader, config=GenerateConfig())}
        return the_log

    rates = {"prov/good": [0, 0, 1, 0, 0, 0, 0, 0], "prov/bad": [1, 1, 1, 0, 1, 1, 0, 1]}
    paths = [write(doctor(m, f, "prov/judge"), tmp_path / f"{m.split('/')[1]}.eval") for m, f in rates.items()]
    paths.append(write(doctor("prov/other", [0] * 8, None), tmp_path / "ungraded.eval"))
    ranking, pairs = leaderboard(case_values(load(paths)))
    failure = ranking[ranking["key"] == "failure"].sort_values("rank")
    assert list(failure["model"]) == ["prov/good", "prov/bad"] and set(failure["grader"]) == {"prov/judge"}
    # a second run of the same model on the same cases (another folder) is a rival, not pooled
    (tmp_path / "rerun").mkdir()
    rerun = write(doctor("prov/good", [1, 1, 1, 1, 1, 1, 1, 0], "prov/judge"), tmp_path / "rerun" / "good.eval")
    again = leaderboard(case_values(load([*paths, rerun])))[0]
    assert set(again.loc[again["key"] == "failure", "model"]) == {
        "prov/bad",
        f"prov/good [{tmp_path.name}]",
        "prov/good [rerun]",
    }
    assert failure.iloc[0]["direction"] == "lower is better"
    assert (failure.iloc[0]["ci_lower"], failure.iloc[0]["ci_upper"]) == tuple(
        pytest.approx(v) for v in wilson(sum(rates["prov/good"]), len(rates["prov/good"]))
    )
    [pair] = pairs[pairs["key"] == "failure"].itertuples()
    assert (pair.model_a, pair.difference, pair.n_pairs) == ("prov/good", pytest.approx(-5 / 8), 8)
    assert -1 <= pair.ci_lower <= pair.ci_upper <= 1 and pair.resolved
    # a re-judged copy whose grader sorts first alphabetically: the run's own grader is still grader_a
    from bedside.reporting.sweep import judge_sensitivity

    (tmp_path / "rejudged").mkdir()
    copies = []
    for model, failures in rates.items():
        copy = doctor(model, failures[::-1], "a/first")
        copy.eval.metadata = {"bedside_rescore": {"grader": "a/first"}}
        copies.append(write(copy, tmp_path / "rejudged" / f"{model.split('/')[1]}.eval"))
    [row] = judge_sensitivity(case_values(load([*paths, *copies]))).itertuples()
    assert (row.grader_a, row.grader_b, row.key, row.tau) == ("prov/judge", "a/first", "failure", 1.0)


def test_cpb_doctor_sweep_through_the_report(tmp_path):
    """Three scripted CPB-Bench doctors on the same synthetic cases (eval_set), ranked by failure rate."""
    from inspect_ai import eval_set

    from bedside.tasks.cpb import cpb
    from tests.conftest import scripted
    from tests.cpb import synthetic

    data = str(synthetic.write_data(tmp_path / "cpb-bench_data"))
    doctors = [{"doctor_style": "careful"}, {"doctor_accommodates_on": "I "}, {"doctor_style": "accommodating"}]
    ok, _ = eval_set(
        cpb(data=data),
        log_dir=str(tmp_path / "logs"),
        model=[scripted(**d) for d in doctors],
        model_roles={"grader": scripted()},
        display="none",
        log_realtime=False,  # no live sample buffer: the test reads the finished log
    )
    assert ok
    bedside("report", str(tmp_path / "logs"), "--out", str(tmp_path / "report"))
    ranking = pd.read_csv(tmp_path / "report" / "leaderboard.csv")
    failure = ranking[ranking["key"] == "failure"].sort_values("rank")
    assert list(failure["model"]) == [
        "bedside/scripted {doctor_style=careful}",
        "bedside/scripted {doctor_accommodates_on=I }",
        "bedside/scripted {doctor_style=accommodating}",
    ]
    assert list(failure["mean"]) == [0.0, 0.5, 1.0] and set(failure["n"]) == {4}
    assert set(failure["direction"]) == {"lower is better"}
