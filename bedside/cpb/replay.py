"""``bedside/replay``: answers the CPB-Bench tasks' doctor and judge calls with replies recorded by a
released run (the official CPB-Bench repository ships them per model), so that bedside's pipeline
can be checked against the official per-case verdicts (``bedside replay-check``).

    inspect eval bedside/cpb --model bedside/replay -M results=/path/to/clone -M released=gpt-4 \
        --model-role 'grader={model: bedside/replay, model_args: {results: /path/to/clone, released: gpt-4}}' \
        -T data=/path/to/cpb-bench_data

(``-M`` gives arguments to the model under test only: a role gets its own in its mapping's ``model_args``.)

``-M results=`` a results file, a folder of them, or the root of a clone of
``yli-z/cpb-bench-challenging-patient-behaviors`` (then its
``evaluators_single/output_single_turn/`` and ``Negative_cases/negative_generate/evaluator/output/``
folders); ``-M released=`` picks one released model's files by name (``<model>_detailed_results.json``,
``<model>_<DATASET>_negative_detailed_results.json``); without it every ``*_detailed_results.json``
file given is read (they must not record the same case twice). Nothing of those files is part of
bedside: the repository has no licence, the user reads their own copy.

Record format (both kinds): ``dataset``, ``dialog_id``, ``turn_index``, ``behavior_category``
(``"No behavior"`` on controls), ``response`` (the doctor's reply), ``judge_response_raw`` (the
judge's reply), ``evaluation_result`` (the official verdict: failure, or overreacted), controls also
``verdict`` and ``triggered`` (flags A-D). A file is a list of records or an object of lists.

Which record answers a call: the running sample's case (its metadata: dataset, dialog id, turn index
and category; ``IMCS21`` and ``IMCS`` are one corpus), never the prompt text; which reply: the call's
protocol tag (``cpb.doctor`` → ``response``; ``cpb.failure_judge`` and
``cpb.overreaction_judge`` → ``judge_response_raw``). A call with no recorded reply (a case missing
from the files, a mitigation or continuation call, a judge of the other kind) fails with a message
that says so; bedside then counts the case as ``no_reply`` or unscored, visibly.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from inspect_ai.model import ChatMessage, GenerateConfig
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from bedside.compat import sample_state
from bedside.protocols import tag_of

SINGLE_DIR = "evaluators_single/output_single_turn"
NEGATIVE_DIR = "Negative_cases/negative_generate/evaluator/output"
DOCTOR_PROTOCOLS = ("cpb.doctor",)
JUDGE_PROTOCOLS = {"cpb.failure_judge": "positive", "cpb.overreaction_judge": "control"}
CONTROL_CATEGORY = "No behavior"


class ReplayError(RuntimeError):
    """A replay call that has no recorded answer, or recorded files that cannot be read."""


class RecordedCase(BaseModel):
    """One released record (module docstring); unknown fields are ignored."""

    model_config = ConfigDict(extra="ignore")

    dataset: str
    dialog_id: str
    turn_index: int
    behavior_category: str
    response: str | None = None
    judge_response_raw: str | None = None
    evaluation_result: bool
    verdict: str | None = None
    triggered: dict[str, bool] | None = None
    conversation_segment: str | None = None
    source: str = ""  # file it came from (set by the loader)

    @field_validator("dialog_id", mode="before")
    @classmethod
    def _str(cls, v: Any) -> Any:
        return str(v) if isinstance(v, int) else v

    @property
    def kind(self) -> str:
        return "control" if self.behavior_category == CONTROL_CATEGORY else "positive"

    @property
    def key(self) -> tuple[str, str, int, str]:
        return case_key(
            self.dataset, self.dialog_id, self.turn_index, "none" if self.kind == "control" else self.behavior_category
        )


def case_key(dataset: str, dialog_id: Any, turn_index: Any, category: str) -> tuple[str, str, int, str]:
    """(corpus, dialog id, turn index, category) — how a data case and a released record are matched."""
    corpus = "IMCS" if str(dataset).upper() in ("IMCS", "IMCS21") else str(dataset)
    return corpus, str(dialog_id), int(turn_index), category


def sample_key(metadata: dict[str, Any]) -> tuple[str, str, int, str]:
    """The key of a CPB sample (its metadata: ``dataset``, ``dialog_id``, ``turn_index``, ``category``)."""
    return case_key(
        metadata["dataset"], metadata["dialog_id"], metadata["turn_index"], metadata.get("category") or "none"
    )


def results_files(path: str | Path, model: str | None = None) -> list[Path]:
    """The released results files under ``path`` (module docstring), sorted; an error if none."""
    root = Path(path).expanduser()
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise ReplayError(f"results={path}: no such file or folder")
    folders = (
        [root / SINGLE_DIR, root / NEGATIVE_DIR]
        if (root / SINGLE_DIR).is_dir() or (root / NEGATIVE_DIR).is_dir()
        else [root]
    )
    found: list[Path] = []
    for folder in folders:
        for f in sorted(folder.glob("*detailed_results.json")):
            name = f.name
            if (
                model is None
                or name == f"{model}_detailed_results.json"
                or (
                    name.startswith(f"{model}_")
                    and name.endswith("_negative_detailed_results.json")
                    and "_" not in name[len(model) + 1 : -len("_negative_detailed_results.json")]
                )
            ):
                found.append(f)
    if not found:
        raise ReplayError(
            f"results={path}: no *detailed_results.json file" + (f" for model {model!r}" if model else "")
        )
    return found


def load_recorded(files: list[Path]) -> dict[tuple[str, str, int, str], RecordedCase]:
    """Every record of ``files`` by case key. Bad records are reported with file, record and field;
    a case recorded twice is an error naming both places (the replay could not know which to use)."""
    out: dict[tuple[str, str, int, str], RecordedCase] = {}
    problems: list[str] = []
    for f in files:
        try:
            data = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as ex:
            raise ReplayError(f"{f}: cannot be read as JSON: {ex}") from ex
        records = [r for v in data.values() if isinstance(v, list) for r in v] if isinstance(data, dict) else data
        if not isinstance(records, list):
            raise ReplayError(f"{f}: expected a list of records or an object of lists")
        for i, raw in enumerate(records):
            try:
                rec = RecordedCase.model_validate(raw)
            except ValidationError as ex:
                problems += [f"{f}: record #{i}: {'.'.join(map(str, e['loc']))}: {e['msg']}" for e in ex.errors()]
                continue
            rec.source = f"{f.name}#{i}"
            if rec.key in out:
                problems.append(f"{f}: record #{i}: case {rec.key} is recorded twice (also {out[rec.key].source})")
                continue
            out[rec.key] = rec
    if problems:
        shown = problems[:20] + ([f"... and {len(problems) - 20} more"] if len(problems) > 20 else [])
        raise ReplayError("bad recorded results:\n" + "\n".join(shown))
    return out


class ReplayEngine:
    """Recorded replies by (case, protocol); see the module docstring."""

    def __init__(self, results: str | None = None, released: str | None = None) -> None:
        if not results:
            raise ReplayError(
                "bedside/replay needs -M results=PATH (a released results file, folder or repository clone)"
            )
        self.files = results_files(results, released)
        self.cases = load_recorded(self.files)
        digest = hashlib.sha256("|".join(f"{f}:{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in self.files).encode())
        self._identity = f"replay:{digest.hexdigest()[:16]}"
        self.context_window = 0

    def identity(self) -> str:
        return self._identity

    def reply(self, messages: list[ChatMessage], config: GenerateConfig) -> str:
        tag = tag_of(messages)
        name = tag.name if tag else None
        state = sample_state()
        if state is None:
            raise ReplayError("bedside/replay answers only inside a CPB-Bench sample (no running sample)")
        key = sample_key(state.metadata)
        rec = self.cases.get(key)
        if rec is None:
            raise ReplayError(
                f"no recorded reply for case {state.metadata.get('case_id')} {key} in {len(self.files)} file(s)"
            )
        if name in DOCTOR_PROTOCOLS:
            if rec.response is None:
                raise ReplayError(f"case {key}: the record ({rec.source}) has no doctor response")
            return rec.response
        if name in JUDGE_PROTOCOLS:
            if JUDGE_PROTOCOLS[name] != rec.kind:
                raise ReplayError(f"case {key}: {name} called, but the record ({rec.source}) is a {rec.kind} case")
            if rec.judge_response_raw is None:
                raise ReplayError(f"case {key}: the record ({rec.source}) has no judge reply")
            return rec.judge_response_raw
        raise ReplayError(
            f"{name or 'an untagged call'}: not recorded in released single-turn results "
            "(replay covers the doctor and the failure/overreaction judges, mitigation none, turns 0)"
        )
