"""Prompt prefixes stay stable across turns, so that a serving engine's prefix cache (vLLM
``--enable-prefix-caching``) re-uses what it has already computed (docs/serving.md, "Serving at scale").

A scripted DischargeBench encounter is run and every model call's input is rendered the way a chat
template does (``<|role|>text<|end|>`` per message, in order). For each role, consecutive calls are
compared:

- educator (the model under test) and patient: the system prompt is byte-identical on every turn and
  the previous turn's whole rendered prompt is a prefix of the next one (the conversation only grows at
  the end), so the system prompt with the discharge note (educator) or the case facts (patient) is
  always in the cached prefix. Exception, by the paper's design (Algorithm 1, Figure 6): a soft
  correction is appended to the patient's system prompt for one turn. The original system prompt is
  still a byte prefix (the case text stays cached), but the history after it must be prefilled again
  on that turn, and the turn after it falls back to the prefix of the turn before the correction.
- monitor: its system prompt is byte-identical on every call and the ``## Conversation History``
  section only grows, but (paper Figure 6, verbatim) the agent's full system prompt - for an educator
  turn the one holding the discharge note - comes *after* the history, and alternates between the
  educator's and the patient's prompt. So the note is never in the prefix shared with the previous
  monitor call: it is prefilled again on every call. The test asserts this and prints how much of each
  monitor prompt is re-usable.
"""

from __future__ import annotations

from typing import Any

import pytest

from bedside.discharge.records import load_cases
from bedside.discharge.samples import DEMO_CASES
from bedside.protocols import tag_of
from bedside.tasks.discharge import discharge
from tests.conftest import run, scripted

pytestmark = pytest.mark.eval


def render(messages: list[Any]) -> str:
    """A chat template's rendering of the messages (what a serving engine tokenises and caches)."""
    return "".join(f"<|{m.role}|>{m.text}<|end|>" for m in messages)


def common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def calls(sample: Any, role: str | None, protocols: set[str]) -> list[list[Any]]:
    """Inputs of the calls of ``role`` with one of ``protocols``, in the order they were made."""
    events = sorted((e for e in sample.events if e.event == "model" and e.role == role), key=lambda e: e.timestamp)
    return [e.input for e in events if (tag := tag_of(e.input)) is not None and tag.name in protocols]


def run_encounter(tmp_path, **options: Any):
    task = discharge(min_turns=10, max_turns=30, cache_references=False)
    roles = {"patient": scripted(), "monitor": scripted(**options), "grader": scripted()}
    log = run(task, roles=roles, log_dir=tmp_path, limit=1)
    [sample] = log.samples
    return sample, load_cases(DEMO_CASES)[0]


def test_educator_and_patient_prompts_only_grow_at_the_end(tmp_path):
    sample, case = run_encounter(tmp_path)
    educator = calls(sample, None, {"discharge.educator"})
    patient = calls(sample, "patient", {"discharge.patient"})
    comprehension = calls(sample, "patient", {"discharge.comprehension"})
    assert len(educator) >= 5 and len(patient) >= 5 and len(comprehension) == 6

    note = case.discharge_note
    for name, turns, case_text in (("educator", educator, note), ("patient", patient, case.chief_complaint)):
        system = turns[0][0]
        assert system.role == "system" and case_text in system.text, name
        for prev, nxt in zip(turns, turns[1:]):
            assert nxt[0].role == "system" and nxt[0].text == system.text, (
                f"{name}: the system prompt changed between turns"
            )
            assert render(nxt).startswith(render(prev)), f"{name}: the conversation did not only grow at the end"
        # the case text sits in the cached prefix of every turn after the first
        end_of_case = render(turns[0]).index(case_text) + len(case_text)
        assert all(common_prefix(render(a), render(b)) >= end_of_case for a, b in zip(turns, turns[1:])), name

    # the comprehension questions extend the patient's last prompt (its reply and the question appended)
    last = render(patient[-1])
    assert all(render(q).startswith(last) for q in comprehension)


def test_soft_correction_breaks_the_patients_prefix_for_one_turn(tmp_path):
    # the monitor WARNs the patient's turn 3 (history index): the correction is appended to the patient's
    # system prompt for its next turn only (paper Algorithm 1 / Figure 6)
    sample, case = run_encounter(tmp_path, monitor_warn_turns=[3])
    patient = calls(sample, "patient", {"discharge.patient"})
    systems = [turns[0].text for turns in patient]
    base = systems[0]
    corrected = [i for i, s in enumerate(systems) if s != base]
    assert len(corrected) == 1, "one soft correction, applied to exactly one patient turn"
    [k] = corrected
    assert systems[k].startswith(base + "\n\n") and "CORRECTION FOR THIS RESPONSE" in systems[k]
    assert 0 < k < len(patient) - 1

    before, during, after = render(patient[k - 1]), render(patient[k]), render(patient[k + 1])
    end_of_system = len(f"<|system|>{base}")
    # the corrected turn still shares the original system prompt (with the case text) ...
    assert common_prefix(before, during) == end_of_system
    # ... but not the history after it: that much is prefilled again on the corrected turn
    reprefilled = len(during) - end_of_system
    # the next turn is uncorrected and extends the turn before the correction (not the corrected one)
    assert after.startswith(before)
    assert common_prefix(during, after) == end_of_system
    print(
        f"soft correction on patient turn {k}: {reprefilled} characters re-prefilled "
        f"({reprefilled / len(during):.0%} of that prompt); prefix back on the next turn"
    )
    # every other pair of consecutive patient turns keeps the whole previous prompt as prefix
    for i, (a, b) in enumerate(zip(patient, patient[1:])):
        if i not in (k - 1, k):
            assert render(b).startswith(render(a))


def test_monitor_prefix_is_the_system_prompt_and_history_but_not_the_note(tmp_path):
    sample, case = run_encounter(tmp_path)
    monitor = calls(sample, "monitor", {"discharge.monitor"})
    assert len(monitor) >= 10
    system = monitor[0][0].text
    assert all(m[0].role == "system" and m[0].text == system for m in monitor), "monitor system prompt changed"
    assert all(len(m) == 2 and m[1].role == "user" for m in monitor)

    def history(request: str) -> str:
        return request.split("## Prompt Given to", 1)[0]

    note = case.discharge_note
    shared, total, note_in_prefix = 0, 0, 0
    for prev, nxt in zip(monitor, monitor[1:]):
        # the conversation-history section only grows (the first call shows a placeholder instead)
        if "(No prior turns" not in prev[1].text:
            assert history(nxt[1].text).startswith(history(prev[1].text).rstrip("\n"))
        prefix = common_prefix(render(prev), render(nxt))
        shared += prefix
        total += len(render(nxt))
        start = render(nxt).find(note)
        note_in_prefix += int(start >= 0 and start + len(note) <= prefix)
    # paper Figure 6 (verbatim) puts the agent prompt after the history: the note is re-prefilled on every call
    assert note_in_prefix == 0
    assert any(note in m[1].text for m in monitor), "the educator's prompt (with the note) reaches the monitor"
    print(
        f"monitor: {shared / total:.0%} of the characters of calls 2..{len(monitor)} lie in the prefix shared with "
        f"the previous call; {(total - shared) / (len(monitor) - 1):.0f} characters per call are prefilled again"
    )


def test_monitor_prefix_cache_layout_keeps_the_note_in_the_shared_prefix(tmp_path):
    """``-T monitor_layout=prefix_cache``: the agent prompt section comes first, so each monitor call
    extends the previous call for the same speaker up to the end of that call's history, and the
    note (in the educator's prompt) is in the prefix shared with the previous educator-turn call."""
    task = discharge(min_turns=10, max_turns=30, cache_references=False, monitor_layout="prefix_cache")
    log = run(
        task, roles={"patient": scripted(), "monitor": scripted(), "grader": scripted()}, log_dir=tmp_path, limit=1
    )
    [sample] = log.samples
    note = load_cases(DEMO_CASES)[0].discharge_note
    monitor = calls(sample, "monitor", {"discharge.monitor"})
    assert len(monitor) >= 10

    def speaker(request: list[Any]) -> str:
        return request[1].text.split("## Prompt Given to ", 1)[1].split(" Agent", 1)[0]

    def through_history(request: list[Any]) -> str:
        # the rendered call up to the end of its conversation history (what the next call re-uses)
        text = render(request)
        return text[: text.index("## Agent Response (Turn to Evaluate)")].rstrip("\n")

    assert all(m[1].text.startswith("## Prompt Given to ") for m in monitor)
    shared, total, educator_pairs = 0, 0, 0
    for i, nxt in enumerate(monitor):
        earlier = [m for m in monitor[:i] if speaker(m) == speaker(nxt)]
        if not earlier or "(No prior turns" in earlier[-1][1].text:
            continue
        prev = earlier[-1]
        assert render(nxt).startswith(through_history(prev)), (
            f"monitor call {i} does not extend the previous {speaker(nxt)} call"
        )
        shared += common_prefix(render(prev), render(nxt))
        total += len(render(nxt))
        if speaker(nxt) == "educator":
            educator_pairs += 1
            assert render(nxt).index(note) + len(note) <= common_prefix(render(prev), render(nxt))
    assert educator_pairs >= 3
    print(
        f"monitor (prefix_cache layout): {shared / total:.0%} of the characters lie in the prefix shared with the "
        f"previous call for the same speaker"
    )
