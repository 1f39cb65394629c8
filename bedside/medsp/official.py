"""The official MedSP1000 texts, read from a clone of MAGIC-AI4Med/MedSP1000 (MIT licence; ``prompts=PATH``):
the system and test-time prompt builders of ``src/simulate/prompts.py``, the per-turn message builders of
``controller.py`` (``SimulationController._build_*_prompt``, run on :class:`~bedside.medsp.records.SimState`)
and ``test_time._action_to_text``. Only these definitions (and the literal constants and helpers they use)
are executed, never the official modules themselves.

Shared by the simulation's prompt set (:mod:`bedside.solvers.medsp.prompts`) and the evaluator's
(:mod:`bedside.scorers.medsp.evaluator`): :func:`official_source` loads a clone once per path.
"""

from __future__ import annotations

import ast
import builtins
import json
import re
from collections.abc import Sequence
from dataclasses import asdict
from functools import lru_cache
from pathlib import Path
from typing import Any

from bedside.medsp.records import RolePacket, SimState
from bedside.paths import user_path


class OfficialPromptsError(ValueError):
    """``prompts=PATH`` does not point to a usable clone of the official repository."""


#: what bedside reads from a clone of MAGIC-AI4Med/MedSP1000 (``src/simulate/``)
OFFICIAL_PROMPT_FUNCTIONS = (
    "build_examinee_system_prompt",
    "build_sp_system_prompt",
    "build_environment_system_prompt",
    "build_evaluator_system_prompt_frozen_rubric",
    "build_tts_domain_selection_prompt",
    "build_tts_expert_analysis_prompt",
    "build_tts_synthesis_prompt",
    "build_tts_consensus_prompt",
    "build_tts_revision_note",
    "build_tts_selector_prompt",
)
OFFICIAL_CONTROLLER_METHODS = (
    "_opening_context",
    "_recent_turns",
    "_build_examinee_prompt",
    "_build_sp_prompt",
    "_build_environment_prompt",
    "_build_evaluator_prompt",
)
OFFICIAL_CONTROLLER_FUNCTIONS = ("_format_speak_for_prompt",)
OFFICIAL_TEST_TIME_FUNCTIONS = ("_action_to_text",)
OFFICIAL_CONTROLLER_CLASS = "SimulationController"


def _literal(node: ast.AST) -> bool:
    try:
        ast.literal_eval(node)
        return True
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False


def _definitions(
    path: Path, names: Sequence[str], *, methods_of: str | None = None, methods: Sequence[str] = ()
) -> dict[str, Any]:
    """The named functions (and, of class ``methods_of``, the named methods, as plain functions) of a
    Python file, with every top-level literal constant and helper function they may use. Only these
    definitions are executed, never the module itself (its imports and other statements are left out)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, UnicodeDecodeError, SyntaxError) as ex:
        raise OfficialPromptsError(f"prompts: cannot read {path}: {ex}") from ex
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    constants: dict[str, ast.stmt] = {}
    for n in tree.body:
        if isinstance(n, ast.Assign) and _literal(n.value):
            constants.update({t.id: n for t in n.targets if isinstance(t, ast.Name)})
        elif (
            isinstance(n, ast.AnnAssign)
            and n.value is not None
            and _literal(n.value)
            and isinstance(n.target, ast.Name)
        ):
            constants[n.target.id] = n
    picked: list[ast.FunctionDef] = [functions[name] for name in names if name in functions]
    if methods_of:
        cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == methods_of), None)
        for node in cls.body if cls is not None else []:
            if isinstance(node, ast.FunctionDef) and node.name in methods:
                node.decorator_list = []
                picked.append(node)
    # the module-level helpers and literal constants the picked functions use (transitively)
    needed: list[ast.stmt] = []
    queue: list[ast.AST] = list(picked)
    seen: set[str] = set()
    while queue:
        for ref in ast.walk(queue.pop()):
            if isinstance(ref, ast.Name) and ref.id not in seen:
                seen.add(ref.id)
                found = functions.get(ref.id) or constants.get(ref.id)
                if found is not None and found not in needed and found not in picked:
                    needed.append(found)
                    queue.append(found)
    body: list[ast.stmt] = [n for n in tree.body if isinstance(n, ast.ImportFrom) and n.module == "__future__"]
    body += [n for n in tree.body if n in needed or n in picked]  # in file order
    body += [n for n in picked if n not in tree.body]  # the methods
    namespace: dict[str, Any] = {
        "__builtins__": builtins,
        "__name__": f"bedside_official_{path.stem}",
        "json": json,
        "re": re,
        "asdict": asdict,
        "Any": Any,
        "Path": Path,
    }
    exec(compile(ast.fix_missing_locations(ast.Module(body=body, type_ignores=[])), str(path), "exec"), namespace)  # noqa: S102
    missing = [n for n in (*names, *methods) if n not in namespace]
    if missing:
        raise OfficialPromptsError(f"prompts: {path} lacks {', '.join(missing)} (is it the official MedSP1000 code?)")
    return namespace


def _initial_feedback(path: Path) -> str | None:
    """The official placeholder feedback of the first turn (``SimulationController.__init__``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.keyword)
            and node.arg == "latest_environment_feedback"
            and isinstance(node.value, ast.List)
        ):
            texts = [e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            if texts:
                return texts[0]
    return None


class _Bundle:
    """What the official prompt builders expect of a role bundle."""

    def __init__(self, packet: RolePacket) -> None:
        self.packet = packet

    def compiled_text(self, strip_strikethrough: bool = True) -> str:
        return self.packet.compiled_text(strip_strikethrough=strip_strikethrough)


class OfficialSource:
    """The official definitions of one clone: ``fns`` (prompt builders and helpers), the controller's
    prompt-building methods (:meth:`controller`) and the first turn's placeholder feedback."""

    def __init__(self, source: Path) -> None:
        folder = source / "src" / "simulate" if (source / "src" / "simulate").is_dir() else source
        files = {stem: folder / f"{stem}.py" for stem in ("prompts", "controller", "test_time")}
        absent = [str(p) for p in files.values() if not p.is_file()]
        if absent:
            raise OfficialPromptsError(
                f"prompts={str(source)!r}: not a clone of the official MedSP1000 repository; "
                f"missing {', '.join(absent)} "
                "(give the repository root or its src/simulate folder)"
            )
        self.name = str(source)
        self.fns = _definitions(files["prompts"], OFFICIAL_PROMPT_FUNCTIONS)
        controller = _definitions(
            files["controller"],
            OFFICIAL_CONTROLLER_FUNCTIONS,
            methods_of=OFFICIAL_CONTROLLER_CLASS,
            methods=OFFICIAL_CONTROLLER_METHODS,
        )
        self.fns.update({n: controller[n] for n in OFFICIAL_CONTROLLER_FUNCTIONS})
        self.controller_class = type("OfficialController", (), {m: controller[m] for m in OFFICIAL_CONTROLLER_METHODS})
        self.fns.update(_definitions(files["test_time"], OFFICIAL_TEST_TIME_FUNCTIONS))
        self.placeholder = _initial_feedback(files["controller"])

    def controller(self, case_id: str, case_title: str, state: SimState) -> Any:
        obj = self.controller_class()
        obj.state = state
        obj.case = type("Case", (), {"case_id": case_id, "case_title": case_title})()
        return obj


@lru_cache(maxsize=8)
def _official(path: str) -> OfficialSource:
    return OfficialSource(Path(path))


def official_source(prompts: str) -> OfficialSource:
    """The clone at ``prompts`` (a relative path is read against the shell's working directory,
    :func:`bedside.paths.user_path`), loaded once per path."""
    return _official(str(user_path(str(prompts))))


def is_bedside(prompts: str | None) -> bool:
    """``prompts=`` names bedside's own wording (``None``, ``""`` or ``"bedside"``), not a clone."""
    return prompts in (None, "", "bedside")
