"""Whole evaluations through Inspect's ``openai-api`` provider against a faulty loopback server:
nothing is lost. Every sample is in the log, scored or marked with its end reason;
retries are bounded and every one of them is accounted for by the server's fault counters.

Settings used throughout: the ``openai`` client's own retries off and Inspect's backoff shortened
to 50 ms (:func:`tests.reliability.helpers.fast_model`); ``max_retries`` bounded; the per-attempt
timeout below the server's ``hang``. Inspect applies an eval's ``attempt_timeout`` to the model
under test only (``Model._resolve_config`` lets role models inherit ``max_retries``, ``timeout``,
``max_connections`` and ``cache``, not ``attempt_timeout``): role models get theirs in their own
config (``test_role_models_need_their_own_attempt_timeout``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from inspect_ai import Task, eval, task_with
from inspect_ai.log import EvalLog, read_eval_log
from inspect_ai.model import GenerateConfig, Model

from bedside.end_reasons import SYSTEM_FAILURES, EndReason
from bedside.scorers.discharge.conversation_quality import conversation_quality
from bedside.scorers.discharge.encounter_outcome import encounter_outcome
from bedside.scorers.discharge.topic_checklist import topic_checklist
from bedside.tasks.discharge import discharge
from bedside.tasks.medsp import medsp
from tests.loopback.server import CONTENT_FAULTS, TRANSPORT_FAULTS, Fault, LoopbackServer
from tests.reliability.helpers import ServerProcess, account, end_reasons, fast_model, model_events, replicate_discharge

pytestmark = pytest.mark.eval

DISCHARGE_ROLES = ("patient", "monitor", "grader")
CLEAN_COMPLETE, HARD_STOP, MAX_TURNS = EndReason.CLEAN_COMPLETE, EndReason.HARD_STOP, EndReason.MAX_TURNS
ERROR, SYSTEM_FAILURE = EndReason.ERROR, EndReason.SYSTEM_FAILURE
END_REASONS = {CLEAN_COMPLETE, HARD_STOP, MAX_TURNS, ERROR, SYSTEM_FAILURE}
JUDGE_SCORERS = ("conversation_quality", "topic_checklist")
MAX_RETRIES = 4
ATTEMPT_TIMEOUT = 3  # seconds (Inspect takes whole seconds)
HANG = 6  # seconds a "timeout" fault stalls: twice the attempt timeout


def lean_discharge(judge_retries: int = 2, **task_args: Any) -> Task:
    """DischargeBench with its judge scorers that need no embedding model (encounter outcome,
    conversation quality, topic checklist); the encounter and every judge call are the real ones."""
    task = discharge(cache_references=False, judge_retries=judge_retries, **task_args)
    judges = [conversation_quality(judge_retries=judge_retries), topic_checklist(judge_retries=judge_retries)]
    return task_with(task, scorer=[encounter_outcome(), *judges])


def models(roles: tuple[str, ...], attempt_timeout: int | None = ATTEMPT_TIMEOUT) -> tuple[Model, dict[str, Model]]:
    config = GenerateConfig(attempt_timeout=attempt_timeout)
    return fast_model("educator"), {r: fast_model(r, config=config) for r in roles}


@contextmanager
def pointed_at(base_url: str) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LOOPBACK_API_KEY", "reliability-test")
        mp.setenv("LOOPBACK_BASE_URL", base_url)
        mp.setenv("BEDSIDE_LOOPBACK_URL", base_url)
        yield


def run_eval(task: Task, roles: tuple[str, ...], log_dir: Any, **eval_args: Any) -> EvalLog:
    """The eval, its log read back. Without Inspect's realtime sample buffer (for watching a running
    eval in ``inspect view``; the log file is what these tests read)."""
    educator, role_models = models(roles)
    eval_args = {"max_retries": MAX_RETRIES, "attempt_timeout": ATTEMPT_TIMEOUT, "log_realtime": False, **eval_args}
    [log] = eval(task, model=educator, model_roles=role_models, log_dir=str(log_dir), display="none", **eval_args)
    assert log.status == "success", log.error
    return read_eval_log(log.location)


def assert_discharge_accounted(log: EvalLog, ids: set[str]) -> Counter[str]:
    """Every case is in the log, scored, with an end reason; system failures are unscored by the
    judges, never silently dropped. Returns the end reasons."""
    assert log.samples is not None and {s.id for s in log.samples} == ids and len(log.samples) == len(ids)
    assert log.results is not None and log.results.completed_samples == len(ids)
    for sample in log.samples:
        assert sample.error is None, (sample.id, sample.error)
        reason = sample.store["EncounterStore:end_reason"]
        assert reason in END_REASONS, (sample.id, reason)
        outcome = sample.scores["encounter_outcome"]
        assert outcome.answer == reason and outcome.value["system_failure"] == float(reason in SYSTEM_FAILURES)
        for name in JUDGE_SCORERS:
            score = sample.scores[name]
            if reason in SYSTEM_FAILURES:  # excluded from n, and says why
                assert "system-level failure" in (score.explanation or ""), (sample.id, name)
            assert score.explanation, (sample.id, name)
    return end_reasons(log)


# ---------------------------------------------------------------------------------------------
# 48 cases at a 10 % fault rate


def test_discharge_48_cases_at_10_percent_faults(tmp_path):
    """48 cases (the 24 demo cases twice, new ids), 10 % of requests faulted with every transport
    and content fault kind, the server in its own process (as a remote endpoint)."""
    data = replicate_discharge(48, tmp_path / "cases.jsonl")
    ids = {f"rel-{i:03d}" for i in range(1, 49)}
    kinds = ",".join(TRANSPORT_FAULTS + CONTENT_FAULTS)
    args = ("--fault", f"{kinds}:0.1", "--fault-seed", "11", "--hang", str(HANG), "--retry-after", "0.1")
    with ServerProcess(*args, request_log=tmp_path / "requests.jsonl") as server, pointed_at(server.base_url):
        log = run_eval(lean_discharge(data=str(data), min_turns=4, max_turns=8), DISCHARGE_ROLES, tmp_path / "logs")
        stats = server.stats()
        lines = server.log_lines()
    reasons = assert_discharge_accounted(log, ids)
    assert reasons[MAX_TURNS] + reasons[CLEAN_COMPLETE] >= 40, reasons  # the faults were absorbed

    faults = Counter(stats["faults"])
    acc = account(log)
    assert set(faults) == set(TRANSPORT_FAULTS + CONTENT_FAULTS), faults  # every kind happened
    assert 0.07 <= sum(faults.values()) / stats["requests"] <= 0.13, (faults, stats["requests"])
    # every injected transport fault is one failed attempt in the log (Inspect logs each attempt as
    # a ModelEvent, the failed ones with their error); the only other failed attempts are client-side
    # attempt timeouts of a busy machine ("spurious"), each a failed event too
    transport = sum(faults[k] for k in TRANSPORT_FAULTS)
    assert acc.other_failures == []
    spurious = acc.retries - transport
    assert 0 <= spurious <= acc.failed["timeout"], (acc.failed, faults)
    for kind in ("http_500", "http_503", "rate_limit"):
        assert faults[kind] - spurious <= acc.failed[kind] <= faults[kind], (kind, acc.failed, faults)
    dropped = faults["reset"] + faults["truncated"]
    assert dropped - spurious <= acc.failed["connection"] <= dropped + faults["timeout"], (acc.failed, faults)
    # one model event per attempt; the server saw each (an attempt that times out on a busy client
    # may never reach it), and its request log agrees with its counters
    assert 0 <= acc.events - stats["requests"] <= spurious and len(lines) == stats["requests"]
    # content faults were answered (HTTP 200), then re-asked (a verdict or utterance that cannot be
    # read) or accepted as prose (a patient's plain-text reply, counted as repaired)
    content = Counter()
    for route in stats["fault_routes"]:
        content[route["model"], route["kind"]] += route["n"]

    def agent_total(agent: str, key: str) -> int:
        return sum(s.store["EncounterStore:agent_stats"][agent][key] for s in log.samples)

    monitor_faults = content["monitor", "not_json"] + content["monitor", "missing_fields"]
    assert abs(agent_total("monitor", "unparsed_replies") - monitor_faults) <= spurious
    assert abs(agent_total("patient", "unparsed") - content["patient", "missing_fields"]) <= spurious
    assert abs(agent_total("patient", "repaired") - content["patient", "not_json"]) <= spurious
    # retries are bounded: at most MAX_RETRIES retries per call, and a call that ran out of them
    # ended its session ("error") or left its judge score unscored, visibly
    assert acc.longest_retry_run <= MAX_RETRIES + 1
    assert acc.exhausted <= reasons[ERROR] + sum(
        1 for s in log.samples for n in JUDGE_SCORERS if "judge call failed" in (s.scores[n].explanation or "")
    )
    assert stats["open_connections"] >= 0 and stats["peak_connections"] >= 1
    print(
        f"\n48 cases: {stats['requests']} requests, {acc.events} model events, faults {dict(faults)}, "
        f"failed attempts {dict(acc.failed)} (spurious client timeouts {spurious}), longest retry run "
        f"{acc.longest_retry_run}, end reasons {dict(reasons)}"
    )


#: how each transport fault shows in the log: the failed attempt's error category (helpers.ATTEMPT_ERRORS)
SHOWS_AS = {
    "http_500": "http_500",
    "http_503": "http_503",
    "rate_limit": "rate_limit",
    "timeout": "timeout",
    "reset": "connection",
    "truncated": "connection",
}


@pytest.mark.parametrize("kind", TRANSPORT_FAULTS)
def test_each_transport_fault_alone_is_retried_and_absorbed(tmp_path, kind):
    # one case, a quarter of all requests (every role) failing with this kind: the session and its
    # scores come out as without faults, and each fault is one failed attempt in the log
    with (
        LoopbackServer(faults=[Fault(kind, 0.25)], fault_seed=3, hang=2.5, retry_after=0.1) as server,
        pointed_at(server.base_url),
    ):
        educator, roles = models(DISCHARGE_ROLES, attempt_timeout=1)
        [log] = eval(
            lean_discharge(min_turns=2, max_turns=4),
            model=educator,
            model_roles=roles,
            limit=1,
            log_dir=str(tmp_path),
            display="none",
            max_retries=6,
            attempt_timeout=1,
        )
        faults = server.faults[kind]
    log = read_eval_log(log.location)
    reasons = assert_discharge_accounted(log, {"demo-001"})
    assert reasons == {MAX_TURNS: 1}
    acc = account(log)
    assert faults > 0 and acc.failed[SHOWS_AS[kind]] >= faults and acc.other_failures == []
    assert not any(
        math.isnan(v) for n in JUDGE_SCORERS for k, v in log.samples[0].scores[n].value.items() if k != "unscored"
    )


# ---------------------------------------------------------------------------------------------
# MedSP1000 at a 10 % fault rate


def test_medsp_at_10_percent_faults(tmp_path):
    kinds = TRANSPORT_FAULTS + CONTENT_FAULTS
    with (
        LoopbackServer(faults=[Fault(kinds, 0.1)], fault_seed=5, hang=HANG, retry_after=0.1) as server,
        pointed_at(server.base_url),
    ):
        log = run_eval(medsp(max_turns=6), ("patient", "environment", "grader"), tmp_path)
        faults, requests = Counter(server.faults), server.requests
    samples = log.samples or []
    assert len(samples) == 7 and log.results is not None and log.results.completed_samples == 7
    for sample in samples:
        assert sample.error is None and sample.scores, sample.id
        assert sample.store.get("MedSPStore:end_reason"), sample.id
    acc = account(log)
    assert sum(faults.values()) > 0 and requests <= acc.events
    for kind in ("http_500", "http_503", "rate_limit"):
        assert acc.failed[kind] == faults[kind]
    assert acc.longest_retry_run <= MAX_RETRIES + 1


# ---------------------------------------------------------------------------------------------
# replies that are never readable, retries that run out, a context that overflows


@pytest.mark.parametrize("kind", ["not_json", "missing_fields"])
def test_monitor_that_never_returns_valid_json_ends_system_failure(tmp_path, kind):
    # the paper's policy: a verdict on a supervised (patient) turn that stays unreadable after the
    # monitor's retries is a system-level failure; the session ends there (no endless loop), excluded
    # from n, recorded. The educator's turn 0 is only observed: kept, its unreadable observation counted.
    with (
        LoopbackServer(faults=[Fault(kind, 1.0, protocols=["discharge.monitor"])]) as server,
        pointed_at(server.base_url),
    ):
        log = run_eval(lean_discharge(min_turns=2, max_turns=6, parse_retries=2), DISCHARGE_ROLES, tmp_path, limit=2)
        monitor_calls = server.faults[kind]
    reasons = assert_discharge_accounted(log, {"demo-001", "demo-002"})
    assert reasons == {SYSTEM_FAILURE: 2}
    assert monitor_calls == 2 * 2 * 3  # the first two verdicts of each session, asked 1 + parse_retries times
    for sample in log.samples:
        assert "verdict stayed unreadable" in sample.store["EncounterStore:error"]
        assert sample.store["EncounterStore:unread_observations"] == [0]
        assert sample.store["EncounterStore:agent_stats"]["monitor"]["unparsed_verdicts"] == 2
        assert sample.scores["encounter_outcome"].value["monitor_unparsed"] == 2.0
        assert all(math.isnan(v) for k, v in sample.scores["topic_checklist"].value.items() if k != "unscored")


def test_judge_that_never_returns_valid_json_leaves_the_score_unscored(tmp_path):
    rule = Fault("not_json,missing_fields", 1.0, protocols=["discharge.judge_quality", "discharge.judge_checklist"])
    with LoopbackServer(faults=[rule]) as server, pointed_at(server.base_url):
        log = run_eval(lean_discharge(min_turns=2, max_turns=4, judge_retries=1), DISCHARGE_ROLES, tmp_path, limit=1)
        judged = sum(server.faults.values())
    [sample] = log.samples
    assert judged == 2 * 2  # two judges, each asked 1 + judge_retries times
    for name in JUDGE_SCORERS:
        score = sample.scores[name]
        assert score.value["unscored"] >= 1 and "unreadable" in score.explanation, score
    assert sample.scores["encounter_outcome"].answer in (MAX_TURNS, CLEAN_COMPLETE)


def test_retries_that_run_out_are_bounded_and_recorded(tmp_path):
    # the patient's server always fails: each call is tried 1 + max_retries times, then the session
    # ends "error" with the provider's message; the judges still score the educator's turns
    with LoopbackServer(faults=[Fault("http_500", 1.0, models=["patient"])]) as server, pointed_at(server.base_url):
        log = run_eval(lean_discharge(min_turns=2, max_turns=6), DISCHARGE_ROLES, tmp_path, limit=1, max_retries=2)
        routes = Counter(server.fault_routes)
    [sample] = log.samples
    assert sample.store["EncounterStore:end_reason"] == ERROR
    assert "InternalServerError after 3 attempt(s)" in sample.store["EncounterStore:error"]
    # 3 attempts for the patient's turn; no comprehension questions after a system-level failure
    assert routes == {("patient", "discharge.patient", "http_500"): 3}
    assert sample.store["EncounterStore:comprehension"] == []
    acc = account(log)
    assert acc.longest_retry_run == 3 and acc.exhausted == 1 and acc.failed["http_500"] == 3
    assert sample.scores["encounter_outcome"].value["system_failure"] == 1.0


def test_context_length_error_mid_session_ends_error(tmp_path):
    # a server that refuses prompts above 4,700 estimated tokens: the session runs until its history
    # makes a prompt too long (the monitor's, around turn 12), then ends "error" (stop_reason
    # model_length); the 400 is never retried
    with LoopbackServer(context_limit=4700) as server, pointed_at(server.base_url):
        log = run_eval(lean_discharge(min_turns=2, max_turns=30), DISCHARGE_ROLES, tmp_path, limit=2)
        refused = server.faults["context_length"]
    reasons = assert_discharge_accounted(log, {"demo-001", "demo-002"})
    assert reasons == {ERROR: 2}
    acc = account(log)
    assert acc.model_length == refused and acc.retries == 0
    for sample in log.samples:
        rec = sample.store
        assert "context window exceeded" in rec["EncounterStore:error"]
        assert len(rec["EncounterStore:history"]) >= 6  # mid-session: the accepted turns are kept


def test_role_models_inherit_the_evals_attempt_timeout(tmp_path):
    """Inspect gives the eval's ``attempt_timeout`` to the model under test only; bedside's roles
    inherit it (``bedside.roles.role_model``), so a stalled patient call is cut off either way."""
    stall = Fault("timeout", 1.0, models=["patient"], protocols=["discharge.patient"])
    with LoopbackServer(faults=[stall], hang=2.5) as server, pointed_at(server.base_url):
        task = lean_discharge(min_turns=1, max_turns=2)
        educator, _ = models(())
        roles = {"patient": fast_model("patient"), "monitor": fast_model("monitor"), "grader": fast_model("grader")}
        [inherited] = eval(
            task,
            model=educator,
            model_roles=roles,
            log_dir=str(tmp_path),
            display="none",
            limit=1,
            max_retries=0,
            attempt_timeout=1,
            score=False,
        )
        _, own = models(("patient", "monitor", "grader"), attempt_timeout=1)
        [configured] = eval(
            task,
            model=educator,
            model_roles=own,
            log_dir=str(tmp_path),
            display="none",
            limit=1,
            max_retries=0,
            attempt_timeout=1,
            score=False,
        )

    def patient_errors(log: EvalLog) -> list[str]:
        log = read_eval_log(log.location)
        return [e.error for s in log.samples for e in model_events(s) if e.role == "patient" and e.error]

    assert patient_errors(inherited) and all("AttemptTimeoutError" in e for e in patient_errors(inherited))
    assert patient_errors(configured) and all("AttemptTimeoutError" in e for e in patient_errors(configured))


def test_exhausted_retries_record_the_providers_message():
    """When Inspect's retries run out, tenacity raises ``RetryError[<Future at 0x...>]``;
    ``generate_checked`` records the last attempt's own error (status and provider message)."""
    import asyncio

    from inspect_ai.model import ChatMessageUser

    from bedside.calls import GenerationError, generate_checked

    with LoopbackServer(faults=[Fault("http_500", 1.0)]) as server, pointed_at(server.base_url):
        model = fast_model("patient")
        with pytest.raises(GenerationError) as err:
            asyncio.run(generate_checked(model, [ChatMessageUser(content="Hi")], GenerateConfig(max_retries=1)))
    assert "Error code: 500" in str(err.value) and " at 0x" not in str(err.value)
