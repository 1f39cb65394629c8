"""Golden scores: every sample's score values and answer on the scripted runs of the shipped demo
data (DischargeBench, MedSP1000) and of the synthetic CPB-Bench test data (``tests/cpb/synthetic.py``),
with ``bedside/scripted`` for every role.

A refactor must leave these byte-identical; when a reading rule changes on purpose, regenerate them
in a commit of their own and say which values changed and why:

    .venv/bin/python -m tests.golden.make_golden          # rewrite tests/golden/*.json
    .venv/bin/python -m tests.golden.make_golden --check  # compare, print every difference

``tests/test_golden_scores.py`` runs the same comparison in the test suite.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _runs() -> dict[str, Callable[[Path], Any]]:
    from bedside.tasks.cpb import cpb, cpb_control
    from bedside.tasks.discharge import discharge
    from bedside.tasks.medsp import medsp
    from tests.cpb import synthetic

    def cpb_data(tmp: Path) -> str:
        return str(synthetic.write_data(tmp / "cpb-bench_data"))

    # name -> tmp dir -> (task, eval arguments, scripted-model options per role ("model" = under test))
    return {
        "discharge": lambda tmp: (discharge(), {}, {}),
        "discharge_faults": lambda tmp: (
            discharge(),
            {"limit": 4},
            {
                "monitor": {"monitor_warn_turns": [3]},
                "patient": {"break_character_turns": [2], "break_character_attempts": 1},
            },
        ),
        "discharge_monitor_unreadable": lambda tmp: (
            discharge(),
            {"limit": 2},
            {"monitor": {"monitor_malformed_attempts": 3}},
        ),
        "medsp": lambda tmp: (medsp(), {}, {}),
        "medsp_evaluator_omits": lambda tmp: (
            medsp(),
            {"limit": 2},
            {"grader": {"medsp_evaluator_missing_item_attempts": 3}},
        ),
        "medsp_panel": lambda tmp: (medsp(scaling="panel", panel_size=2), {"limit": 2}, {}),
        "cpb": lambda tmp: (cpb(data=cpb_data(tmp)), {}, {}),
        "cpb_accommodating": lambda tmp: (
            cpb(data=cpb_data(tmp)),
            {},
            {"model": {"doctor_style": "accommodating"}, "grader": {"judge_style": "explained"}},
        ),
        "cpb_continuation": lambda tmp: (
            cpb(data=cpb_data(tmp), turns=2),
            {},
            {"model": {"doctor_style": "accommodating", "doctor_corrects_after": 2}},
        ),
        "cpb_control": lambda tmp: (cpb_control(data=cpb_data(tmp)), {}, {}),
        "cpb_control_alarmist": lambda tmp: (
            cpb_control(data=cpb_data(tmp)),
            {},
            {"model": {"doctor_style": "alarmist"}},
        ),
    }


def _value(v: Any) -> Any:
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, dict):
        return {k: _value(x) for k, x in sorted(v.items())}
    if isinstance(v, list):
        return [_value(x) for x in v]
    return v


def golden_of(name: str) -> dict[str, Any]:
    """Run one scripted task and return {sample id/epoch: {answer, scores}}."""
    from inspect_ai import eval
    from inspect_ai.log import read_eval_log
    from inspect_ai.model import get_model

    def scripted(**options: Any):
        return get_model("bedside/scripted", memoize=False, **options)

    with tempfile.TemporaryDirectory() as tmp:
        task, args, options = _runs()[name](Path(tmp))
        [log] = eval(
            task,
            model=scripted(**options.get("model", {})),
            model_roles={r: scripted(**options.get(r, {})) for r in ("patient", "monitor", "grader", "environment")},
            log_dir=str(Path(tmp) / "logs"),
            display="none",
            **args,
        )
        if log.status != "success":
            raise RuntimeError(f"{name}: {log.error}")
        log = read_eval_log(log.location)
    out: dict[str, Any] = {}
    for s in sorted(log.samples or [], key=lambda s: (str(s.id), s.epoch)):
        out[f"{s.id}#{s.epoch}"] = {
            # every scorer's answer, by name (not "the first scorer's": scorer order is presentation)
            "answer": {k: v.answer for k, v in sorted((s.scores or {}).items()) if v.answer is not None},
            "scores": {k: _value(v.value) for k, v in sorted((s.scores or {}).items())},
        }
    return out


def path_of(name: str) -> Path:
    return HERE / f"{name}.json"


def differences(name: str, got: dict[str, Any]) -> list[str]:
    want = json.loads(path_of(name).read_text())
    diffs: list[str] = []
    for key in sorted(set(want) | set(got)):
        if key not in got or key not in want:
            diffs.append(f"{name} {key}: {'missing' if key not in got else 'new'} sample")
            continue
        w, g = want[key], got[key]
        if w["answer"] != g["answer"]:
            diffs.append(f"{name} {key} answer: {w['answer']!r} -> {g['answer']!r}")
        for scorer in sorted(set(w["scores"]) | set(g["scores"])):
            wv, gv = w["scores"].get(scorer), g["scores"].get(scorer)
            if wv == gv:
                continue
            if isinstance(wv, dict) and isinstance(gv, dict):
                for k in sorted(set(wv) | set(gv)):
                    if wv.get(k) != gv.get(k):
                        diffs.append(f"{name} {key} {scorer}.{k}: {wv.get(k)!r} -> {gv.get(k)!r}")
            else:
                diffs.append(f"{name} {key} {scorer}: {wv!r} -> {gv!r}")
    return diffs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed JSON instead of writing it")
    parser.add_argument("names", nargs="*", help="runs (default: all)")
    args = parser.parse_args(argv)
    names = args.names or list(_runs())
    failed = False
    for name in names:
        got = golden_of(name)
        if args.check:
            diffs = differences(name, got)
            print(f"{name}: {len(got)} samples, {len(diffs)} difference(s)")
            for d in diffs:
                print("  " + d)
            failed |= bool(diffs)
        else:
            path_of(name).write_text(json.dumps(got, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
            print(f"wrote {path_of(name)} ({len(got)} samples)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
