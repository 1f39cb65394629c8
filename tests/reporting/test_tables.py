"""Every table of ``bedside report`` against numbers computed by hand from small synthetic logs."""

from __future__ import annotations

import math

import pytest
from inspect_ai.scorer import Score

from bedside.cpb import report as cpb_report
from bedside.discharge import BENCHMARK
from bedside.discharge import report as discharge_report
from bedside.intervals import LIKERT, UNIT, mean_interval
from bedside.medsp import report as medsp_report
from bedside.reporting import tables, usage
from bedside.reporting.load import LoadedLog, benchmark_of, label_of, scores_frame
from bedside.reporting.run import Run
from tests.reporting.synth import NAN, discharge_case, event, log, sample

Z = 1.959963984540054


def wilson(k: int, n: int) -> tuple[float, float]:
    p = k / n
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n)) / (1 + Z * Z / n)
    return centre - half, centre + half


def loaded(the_log) -> LoadedLog:
    return LoadedLog(
        path=f"/x/{the_log.eval.model.replace('/', '_')}.eval",
        log=Run.of(the_log),
        label=label_of(the_log),
        benchmark=benchmark_of(the_log),
    )


CALM = {"personality": "calm", "education_level": "low", "health_literacy": "high", "recall_level": "poor"}


@pytest.fixture(scope="module")
def discharge_logs() -> list[LoadedLog]:
    a = log(
        "bedside/discharge",
        "prov/a",
        [
            discharge_case(
                "a1",
                end="clean_complete",
                turns=12,
                values=dict(
                    naturalness=4,
                    responsiveness=4,
                    clarity=5,
                    clinical_relevance=3,
                    readability=8,
                    tcs=0.4,
                    comprehension=0.5,
                    rouge_l=0.5,
                    cosine=0.7,
                ),
                events=[
                    event(None, "prov/a", 1000, 200),
                    event("patient", "openai/gpt-5.5", 2000, 100),
                    event("patient", "openai/gpt-5.5", 1000, 100, cache_read=1000),
                    event("grader", "unpriced/x", 500, 50, cache="read"),
                    event("grader", "unpriced/x", 300, 30),
                ],
            ),
            discharge_case(
                "a2",
                end="hard_stop",
                values=dict(
                    naturalness=5,
                    responsiveness=3,
                    clarity=4,
                    clinical_relevance=4,
                    readability=6,
                    tcs=0.8,
                    comprehension=1.0,
                    rouge_l=0.7,
                    cosine=0.9,
                ),
                events=[event(None, "prov/a", 3000, 400)],
            ),
            discharge_case(
                "a3",
                end="clean_complete",
                turns=20,
                char_break_turns=(5, 9),
                persona=CALM,
                chapter="Diseases of the Circulatory System",
                values=dict(
                    naturalness=3,
                    responsiveness=5,
                    clarity=3,
                    clinical_relevance=5,
                    readability=10,
                    tcs=0.6,
                    comprehension=NAN,
                    rouge_l=0.6,
                    cosine=0.8,
                ),
            ),
            discharge_case("a4", end="error", persona=CALM, values={}),
        ],
    )
    b1 = dict(
        responsiveness=4,
        clarity=4,
        clinical_relevance=4,
        readability=7,
        tcs=0.5,
        comprehension=0.5,
        rouge_l=0.5,
        cosine=0.5,
    )
    b_samples = [
        discharge_case("b1", end="clean_complete", values={**b1, "naturalness": 2}),
        discharge_case("b1", end="clean_complete", values={**b1, "naturalness": 4}),
        discharge_case("b2", end="max_turns", values={**b1, "naturalness": 5}),
    ]
    b_samples[1].epoch = 2
    b = log("bedside/discharge", "prov/b", b_samples, task_args={"behavior": "care_resistance", "seed": 0})
    return [loaded(a), loaded(b)]


@pytest.fixture(scope="module")
def frame(discharge_logs):
    return scores_frame(discharge_logs)


B = "prov/b (behavior=care_resistance)"


@pytest.mark.eval
def test_labels_name_the_variant(discharge_logs):
    assert [x.label for x in discharge_logs] == ["prov/a", B]
    assert [x.benchmark for x in discharge_logs] == ["discharge", "discharge"]


@pytest.mark.eval
def test_table1_n_excludes_system_failures_and_intervals_follow_the_scale(frame):
    long, wide = discharge_report.table1(frame)
    a = wide.set_index("model").loc["prov/a"]
    assert (a["n"], a["system_failures"]) == (3, 1)
    cell = long[(long["model"] == "prov/a")].set_index("key")
    na = cell.loc["naturalness"]
    assert (na["mean"], na["n"]) == (4.0, 3)
    # bedside's interval rule (bootstrap percentile on a 1-5 scale): inside [3, 5] (Student's t gave [1.5, 6.5])
    low, high = mean_interval([4, 5, 3], LIKERT)
    assert (na["ci_lower"], na["ci_upper"]) == pytest.approx((low, high)) and 3 <= low < 4 < high <= 5
    tcs = cell.loc["tcs"]
    assert tcs["mean"] == pytest.approx(0.6) and tcs["ci_upper"] == pytest.approx(
        mean_interval([0.4, 0.8, 0.6], UNIT)[1]
    )
    comp = cell.loc["comprehension"]  # a3 unscored: left out of this column's n
    assert (comp["mean"], comp["n"]) == (0.75, 2)
    assert (comp["ci_lower"], comp["ci_upper"]) == pytest.approx((0.5, 1.0))  # t gave [-2.4, 3.9]
    assert a["Comprehension n"] == 2 and a["NA"] == f"4.000 [{low:.3f}, {high:.3f}]"  # the paper's 3 decimals
    assert cell.loc["readability", "mean"] == 8.0 and cell.loc["cosine", "mean"] == pytest.approx(0.8)


@pytest.mark.eval
def test_table1_averages_epochs_per_case(frame):
    long, wide = discharge_report.table1(frame)
    na = long[(long["model"] == B) & (long["key"] == "naturalness")].iloc[0]
    # b1: epochs 2 and 4 -> 3; b2: 5 -> mean 4 over 2 cases, sd sqrt(2)
    assert (na["mean"], na["n"]) == (4.0, 2)
    assert (na["ci_lower"], na["ci_upper"]) == pytest.approx((3.0, 5.0))  # t gave [-8.7, 16.7]
    assert wide.set_index("model").loc[B, "n"] == 2


@pytest.mark.eval
def test_by_stratum_icd_chapter_and_persona(frame):
    grid = tables.by_stratum(frame, "icd_chapter", BENCHMARK.headline_keys, "discharge")
    row = grid[(grid["model"] == "prov/a") & (grid["key"] == "naturalness")].set_index("group")
    assert row.loc["Neoplasms", "mean"] == 4.5 and row.loc["Neoplasms", "n"] == 2
    assert row.loc["Diseases of the Circulatory System", "n"] == 1  # a4 (system failure) is unscored
    assert math.isnan(row.loc["Diseases of the Circulatory System", "ci_lower"])
    persona = tables.by_stratum(frame, "personality", ["tcs"], "discharge")
    anxious = persona[(persona["model"] == "prov/a") & (persona["group"] == "anxious")].iloc[0]
    assert anxious["mean"] == pytest.approx(0.6) and (anxious["ci_lower"], anxious["ci_upper"]) == pytest.approx(
        (0.4, 0.8)
    )


@pytest.mark.eval
def test_failure_analysis_counts_mix_and_erroneous_rate(frame):
    counts = discharge_report.outcome_counts(frame).set_index("model")
    assert counts.loc["prov/a"].tolist() == [4, 2, 1, 1]
    assert counts.loc[B].tolist() == [3, 2, 1, 0]  # per case and epoch
    mix = discharge_report.end_reasons(frame)
    a = mix[mix["model"] == "prov/a"].set_index("end_reason")
    assert a["count"].to_dict() == {"clean_complete": 2, "error": 1, "hard_stop": 1}
    assert a["share"].to_dict() == {"clean_complete": 0.5, "error": 0.25, "hard_stop": 0.25}
    errs = discharge_report.erroneous_by_axis(frame)
    anxious = errs[
        (errs["model"] == "prov/a") & (errs["stratum"] == "personality") & (errs["group"] == "anxious")
    ].iloc[0]
    assert (anxious["mean"], anxious["n"]) == (0.5, 2)
    assert (anxious["ci_lower"], anxious["ci_upper"]) == pytest.approx(wilson(1, 2))
    calm = errs[(errs["model"] == "prov/a") & (errs["stratum"] == "personality") & (errs["group"] == "calm")].iloc[0]
    assert (calm["mean"], calm["n"]) == (0.0, 1)  # the system failure is not an erroneous session
    assert set(errs["stratum"]) == {"personality", "education_level", "health_literacy", "recall_level"}


@pytest.mark.eval
def test_audit_counts_and_ids(discharge_logs):
    row = discharge_report.audit(discharge_logs).set_index("model").loc["prov/a"]
    assert (row["clean_complete"], row["short"], row["low_tcs_short"], row["char_break"]) == (2, 1, 1, 1)
    assert (row["short_ids"], row["low_tcs_short_ids"], row["char_break_ids"]) == ("a1", "a1", "a3")
    assert row["char_break_turns"] == 2 and row["complete_after_audit"] == 0


@pytest.mark.eval
def test_usage_and_cost_per_case_and_role(discharge_logs, tmp_path):
    prices_file = tmp_path / "prices.yaml"
    prices_file.write_text(
        "currency: EUR\nper_tokens: 1000\nmodels:\n"
        "  prov/a: {input: 1.0, output: 2.0}\n"
        "  openai/*: {input: 0.5, output: 4.0, input_cache_read: 0.1}\n"
    )
    prices = usage.load_prices(prices_file)
    by_case = usage.usage_by_case(discharge_logs, prices)
    a1 = by_case[(by_case["model"] == "prov/a") & (by_case["id"] == "a1")].set_index("role")
    assert a1.loc["educator", "input_tokens"] == 1000 and a1.loc["educator", "cost"] == pytest.approx(1.0 + 0.4)
    patient = a1.loc["patient"]
    assert (
        patient["calls"],
        patient["input_tokens"],
        patient["output_tokens"],
        patient["input_tokens_cache_read"],
    ) == (2, 3000, 200, 1000)
    assert patient["cost"] == pytest.approx(3000 * 0.5 / 1000 + 200 * 4.0 / 1000 + 1000 * 0.1 / 1000)
    grader = a1.loc["grader"]  # the cached call is counted, but not its tokens
    assert (grader["calls"], grader["cached_calls"], grader["input_tokens"]) == (2, 1, 300)
    assert math.isnan(grader["cost"]) and usage.unpriced(by_case) == ["unpriced/x"]
    by_role = usage.usage_by_role(by_case).set_index(["model", "role"])
    educator = by_role.loc[("prov/a", "educator")]
    assert (educator["cases"], educator["input_tokens"], educator["output_tokens"]) == (2, 4000, 600)
    assert educator["cost"] == pytest.approx(1.4 + 3.0 + 0.8) and educator["cost_per_case"] == pytest.approx(5.2 / 2)
    per_case = usage.cost_per_case(by_case).set_index(["model", "id"])
    assert per_case.loc[("prov/a", "a1"), "cost"] == pytest.approx(1.4 + 1.5 + 0.8 + 0.1)  # unpriced grader skipped
    assert per_case.loc[("prov/a", "a1"), "total_tokens"] == 1200 + 2100 + 2100 + 330


def test_batched_calls_are_their_own_mode_priced_less_the_batch_discount(tmp_path):
    """A grader's calls sent through a batch API (their generate config's ``batch``) are a row of their own,
    mode ``batch``, priced less the model's batch_discount; without one, at the full price, and named."""
    events = [event(None, "prov/a", 1000, 100), event("grader", "openai/j", 2000, 200, batch=True)]
    events.append(event("grader", "openai/j", 2000, 200))  # the same grader, live (e.g. an earlier pass)
    held = Run.of(log("bedside/cpb", "prov/a", [sample("c1", {}, events=events)]), "c.eval")
    logs = [LoadedLog("c.eval", held, "prov/a", "cpb")]
    table = "currency: USD\nper_tokens: 1000\nmodels:\n  prov/a: {input: 1.0, output: 2.0}\n  openai/*: {input: 0.5, output: 4.0%s}\n"
    prices_file = tmp_path / "prices.yaml"
    prices_file.write_text(table % ", batch_discount: 0.5")
    prices = usage.load_prices(prices_file)
    by_role = usage.usage_by_role(usage.usage_by_case(logs, prices)).set_index(["role", "mode"])
    live = 2000 * 0.5 / 1000 + 200 * 4.0 / 1000
    assert by_role.loc[("grader", "live"), "cost"] == pytest.approx(live)
    assert by_role.loc[("grader", "batch"), "cost"] == pytest.approx(live / 2)
    assert by_role.loc[("grader", "batch"), "calls"] == 1 and by_role.loc[("doctor", "live"), "cost"] == pytest.approx(
        1.2
    )
    assert usage.undiscounted(usage.usage_by_case(logs, prices), prices) == []
    prices_file.write_text(table % "")
    prices = usage.load_prices(prices_file)
    by_case = usage.usage_by_case(logs, prices)
    assert usage.usage_by_role(by_case).set_index(["role", "mode"]).loc[("grader", "batch"), "cost"] == pytest.approx(
        live
    )
    assert usage.undiscounted(by_case, prices) == ["openai/j"]
    prices_file.write_text(table % ", batch_discount: 50")
    with pytest.raises(ValueError, match="'openai/\\*': batch_discount is the fraction off"):
        usage.load_prices(prices_file)


def test_shipped_price_table_is_marked_as_examples():
    prices = usage.load_prices()
    assert "EXAMPLE" in usage.default_prices_path().read_text()
    assert usage.price_of("bedside/scripted", prices) == {"input": 0.0, "output": 0.0}
    assert usage.price_of("vllm/meta-llama/x", prices) is not None and usage.price_of("nobody/x", prices) is None


@pytest.mark.eval
def test_cpb_rates_by_category_dataset_language():
    def case(sid, category, dataset, language, failure):
        return sample(
            sid,
            {"cpb_failure": Score(value={"failure": failure, "unscored": float(failure != failure)})},
            {"category": category, "dataset": dataset, "language": language},
        )

    positives = log(
        "bedside/cpb",
        "prov/a",
        [
            case("p1", "care_resistance", "ACI", "en", 1.0),
            case("p2", "care_resistance", "ACI", "en", 0.0),
            case("p3", "false_belief", "IMCS", "zh", 1.0),
            case("p4", "false_belief", "MedDG", "zh", NAN),
            case("p5", "false_belief", "IMCS", "zh", 0.0),
            case("p6", "false_belief", "IMCS", "zh", 0.0),
        ],
    )
    flag = "A_false_contradiction_flag"
    controls = log(
        "bedside/cpb_control",
        "prov/a",
        [
            sample(
                "n1",
                {"cpb_overreaction": Score(value={"overreaction": 1.0, flag: 1.0})},
                {"dataset": "ACI", "language": "en"},
            ),
            sample(
                "n2",
                {"cpb_overreaction": Score(value={"overreaction": 0.0, flag: 0.0})},
                {"dataset": "ACI", "language": "en"},
            ),
        ],
    )
    frame = scores_frame([loaded(positives), loaded(controls)])
    table = cpb_report.cpb_table(frame)

    def get(stratum, group, key):
        return table[(table["stratum"] == stratum) & (table["group"] == group) & (table["key"] == key)].iloc[0]

    overall = get("overall", "all", "failure")
    assert (overall["mean"], overall["n"]) == (2 / 5, 5)
    assert (overall["ci_lower"], overall["ci_upper"]) == pytest.approx(wilson(2, 5))
    assert (get("category", "false_belief", "failure")["mean"], get("category", "false_belief", "failure")["n"]) == (
        1 / 3,
        3,
    )
    assert get("dataset", "IMCS", "failure")["n"] == 3
    assert table[(table["group"] == "MedDG") & (table["key"] == "failure")].empty  # only unscored cases
    assert get("language", "en", "failure")["mean"] == 0.5
    assert get("overall", "all", "overreaction")["mean"] == 0.5 and get("overall", "all", flag)["n"] == 2
    assert cpb_report.cpb_keys(frame) == ["failure", "overreaction", flag]


@pytest.mark.eval
def test_medsp_rates_overall_and_per_specialty():
    from bedside.medsp.rubric import rubric_rates_from_counts

    comps = ("PC", "MK", "SBP", "ICS", "PBLI", "PROF")

    def counts(pc, mk):
        return {c: [0, 0] for c in comps} | {"PC": list(pc), "MK": list(mk)}

    cases = [
        ("Pediatrics", counts((2, 3), (1, 1))),
        ("Pediatrics", counts((3, 3), (0, 2))),
        ("Pediatrics", counts((1, 2), (1, 2))),
        ("Pediatrics", counts((0, 1), (1, 1))),
        ("Pediatrics", counts((2, 2), (0, 0))),
        ("Surgery", counts((1, 4), (2, 2))),
    ]
    samples = []
    for i, (specialty, c) in enumerate(cases):
        met, judged = sum(v[0] for v in c.values()), sum(v[1] for v in c.values())
        samples.append(
            sample(
                f"m{i}",
                {
                    "medsp_rubric": Score(
                        value={"micro": met / judged, "scenario_mean": met / judged},
                        metadata={"counts": c, "specialty": specialty},
                    )
                },
                {"specialty": specialty},
            )
        )
    samples.append(
        sample(
            "unscored",
            {"medsp_rubric": Score(value={"micro": NAN}, metadata={"counts": counts((0, 0), (0, 0))})},
            {"specialty": "Pediatrics"},
        )
    )
    table, omitted = medsp_report.medsp_table([loaded(log("bedside/medsp", "prov/a", samples))])
    rows = table.set_index(["group", "metric"])
    assert rows.loc[("all", "micro"), "mean"] == pytest.approx(
        (2 + 1 + 3 + 0 + 1 + 1 + 0 + 1 + 2 + 1 + 2) / (3 + 1 + 3 + 2 + 2 + 2 + 1 + 1 + 2 + 4 + 2)
    )
    assert rows.loc[("all", "PC"), "mean"] == pytest.approx(9 / 15) and rows.loc[
        ("all", "MK"), "mean"
    ] == pytest.approx(5 / 8)
    assert rows.loc[("all", "macro"), "mean"] == pytest.approx((9 / 15 + 5 / 8) / 2)
    assert rows.loc[("all", "micro"), "n"] == 6
    assert rows.loc[("specialty=Pediatrics", "PC"), "mean"] == pytest.approx(8 / 11)
    helper = rubric_rates_from_counts([c for _, c in cases])
    assert rows.loc[("all", "micro"), "ci_lower"] == pytest.approx(helper["micro lower"])
    assert ("specialty=Surgery", "micro") not in rows.index
    assert omitted.to_dict("records") == [{"model": "prov/a", "specialty": "Surgery", "n": 1}]


def test_wide_cells_and_order():
    import pandas as pd

    long = pd.DataFrame(
        [
            {"model": "m", "group": "g", "key": "b", "mean": 0.5, "ci_lower": 0.25, "ci_upper": 0.75, "n": 4},
            {"model": "m", "group": "g", "key": "a", "mean": 1.0, "ci_lower": NAN, "ci_upper": NAN, "n": 1},
        ]
    )
    table = tables.wide(long, ["model", "group"], "key", order=["a", "b"])
    assert table.columns.tolist() == ["model", "group", "a", "b"]
    assert table.iloc[0].tolist() == ["m", "g", "1.000 (n=1)", "0.500 [0.250, 0.750] (n=4)"]


@pytest.mark.eval
def test_runs_of_one_model_on_the_same_cases_are_told_apart(tmp_path):
    from bedside.reporting.load import load
    from tests.reporting.synth import write

    case = lambda sid: discharge_case(sid, end="clean_complete", values={"tcs": 0.5})  # noqa: E731
    for folder in ("baseline", "candidate"):
        (tmp_path / folder).mkdir()
        write(log("bedside/discharge", "prov/a", [case("x1"), case("x2")]), tmp_path / folder / "run.eval")
    (tmp_path / "shards").mkdir()
    write(log("bedside/discharge", "prov/s", [case("x1")]), tmp_path / "shards" / "1.eval")
    write(log("bedside/discharge", "prov/s", [case("x2")]), tmp_path / "shards" / "2.eval")
    labels = sorted(item.label for item in load([str(tmp_path)]))
    assert labels == ["prov/a [baseline]", "prov/a [candidate]", "prov/s", "prov/s"]  # shards are pooled


@pytest.mark.eval
def test_report_command_reports_a_missing_path(tmp_path, capsys):
    from bedside.cli import main

    assert main(["report", str(tmp_path / "nope.eval"), "--out", str(tmp_path / "out")]) == 2
    assert "no such file" in capsys.readouterr().out
