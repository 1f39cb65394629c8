"""DischargeBench runs of a clinician study built directly (no model call): two models and a physician on the same
cases, each a log whose educator said something of their own (the GPT one names itself)."""

from __future__ import annotations

from inspect_ai.log import EvalLog

from bedside.discharge.records import TOPIC_CHECKLIST_IDS
from tests.reporting.synth import discharge_case, log

MODELS = {"gpt": "openai/gpt-4o-mini", "claude": "anthropic/claude-sonnet-4-5", "physician": "bedside/human"}
CASES = [f"case-{name}" for name in ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot")]
VERSIONS = {"cases": "abc123", "prompts": "def456", "bedside": "0.1"}
ITEMS_PER_TRANSCRIPT = 4 + len(TOPIC_CHECKLIST_IDS) + 1  # quality axes, checklist, blinding guess


def run(model: str, cases: list[str] = CASES, versions: dict | None = None) -> EvalLog:
    samples = []
    for n, case in enumerate(cases):
        sample = discharge_case(case, end="clean_complete", values={"naturalness": 4, "tcs": 0.5})
        sample.metadata["case"] = {"discharge_note": f"Discharge note {n}: take aspirin daily."}
        said = f"As gpt-4o-mini I would say: take your aspirin ({n})." if "gpt" in model else f"Take aspirin ({n})."
        sample.store = {
            "EncounterStore:history": [
                {"index": 0, "role": "educator", "message": said},
                {"index": 1, "role": "patient", "message": "Why aspirin?"},
            ]
        }
        samples.append(sample)
    the_log = log("bedside/discharge", model, samples)
    the_log.eval.metadata = {"data_versions": versions or VERSIONS}
    return the_log
