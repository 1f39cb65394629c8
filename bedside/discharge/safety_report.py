"""``bedside safety LOG...``: the advice-safety scorer's results (:mod:`bedside.scorers.discharge.advice_safety`).

- per session: any unsafe turn, the count of unsafe turns by category, unscored turns, the flagged
  turns with their quoted evidence;
- overall: the rate of sessions with any unsafe turn and with a turn of each category, n and 95 %
  Wilson intervals (:func:`bedside.intervals.rate_text`, the rate rule of :mod:`bedside.intervals`);
- per stratum (ICD chapter, persona axes): the same rates (:func:`bedside.reporting.strata.strata_table`);
- on ``discharge_safety_probe`` logs (crafted transcripts): per turn, planted unsafe turns caught
  (any category, and the planted category) and safe turns falsely flagged, by planted category. Turns
  of one transcript are counted as independent in these intervals (a simplification: there are
  one planted and about two safe turns per transcript).
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from bedside.cli import add_command
from bedside.discharge.protocols import UNSAFE_CATEGORIES
from bedside.discharge.safety_probe import turn_outcomes
from bedside.intervals import rate_text
from bedside.reporting.load import read_run
from bedside.reporting.strata import strata_table

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog

    from bedside.reporting.run import Run

SCORER = "advice_safety"


def sessions(log: Any) -> list[dict[str, Any]]:
    out = []
    for sample in log.samples or []:
        score = (sample.scores or {}).get(SCORER)
        if score is None:
            continue
        meta = score.metadata or {}
        out.append(
            {
                "id": str(sample.id),
                "epoch": sample.epoch,
                "values": score.value,
                "counts": meta.get("counts", {}),
                "turns": meta.get("turns", []),
                "probe": (sample.metadata or {}).get("probe"),
                "explanation": score.explanation or "",
            }
        )
    return out


def probe_outcomes(rows: list[dict[str, Any]]) -> dict[str, dict[str, list[float]]]:
    """Per planted category (and "all"): caught / category matched per planted turn, false flags per safe turn."""
    out: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        if not row["probe"]:
            continue
        for t in turn_outcomes(row["probe"], row["turns"]):
            if t["judged"] is None:
                continue
            if t["planted"]:
                for group in ("all", t["planted"]):
                    out[group]["caught"].append(float(t["judged"] != "none"))
                    out[group]["category"].append(float(t["judged"] == t["planted"]))
            else:
                out["all"]["false_flag"].append(float(t["judged"] != "none"))
    return out


def _grader(log: EvalLog | Run) -> str:
    """The model bound to the grader role of ``log``, else the model under test (the grader's fallback)."""
    from inspect_ai.model import ModelConfig

    grader = (log.eval.model_roles or {}).get("grader")
    if isinstance(grader, list):  # a judge panel
        return " + ".join(g.model for g in grader)
    return grader.model if isinstance(grader, ModelConfig) else log.eval.model


def render(paths: list[str]) -> str:

    lines: list[str] = []
    for path in paths:
        log = read_run(path)
        rows = sessions(log)
        lines += [f"# {path} ({log.eval.task}, grader {_grader(log)})", ""]
        if not rows:
            lines += ["no advice_safety scores in this log (run DischargeBench with -T safety=true)", ""]
            continue
        lines += [
            "## Sessions",
            "",
            "| session | any unsafe | " + " | ".join(UNSAFE_CATEGORIES) + " | unscored turns |",
            "|---|---|" + "---|" * len(UNSAFE_CATEGORIES) + "---|",
        ]
        for r in rows:
            any_unsafe = r["values"].get("unsafe_session")
            shown = "unscored" if any_unsafe is None or any_unsafe != any_unsafe else ("yes" if any_unsafe else "no")
            lines.append(
                f"| {r['id']} | {shown} | "
                + " | ".join(str(r["counts"].get(c, 0)) for c in UNSAFE_CATEGORIES)
                + f" | {int(r['values'].get('safety_unscored_turns', 0))} |"
            )
        lines += ["", "## Rates over sessions (95 % Wilson)", ""]
        for key in ("unsafe_session", *(f"unsafe_{c}" for c in UNSAFE_CATEGORIES)):
            values = [float(r["values"][key]) for r in rows if r["values"].get(key) == r["values"].get(key)]
            lines.append(f"- {key}: {rate_text(values)}")
        table = strata_table(log)
        table = table[(table["scorer"] == SCORER) & (table["key"] == "unsafe_session")]
        if len(table):
            lines += [
                "",
                "## unsafe_session per stratum",
                "",
                "| stratum | group | rate | 95 % CI | n |",
                "|---|---|---|---|---|",
            ]
            for _, t in table.iterrows():
                interval = f"[{t['ci_lower']:.3f}, {t['ci_upper']:.3f}]"
                lines.append(f"| {t['stratum']} | {t['group']} | {t['mean']:.3f} | {interval} | {t['n']} |")
        probe = probe_outcomes(rows)
        if probe:
            lines += ["", "## Crafted transcripts: per turn (95 % Wilson; turns treated as independent)", ""]
            lines.append(f"- planted unsafe turns caught (any category): {rate_text(probe['all']['caught'])}")
            lines.append(
                f"- planted unsafe turns caught with the planted category: {rate_text(probe['all']['category'])}"
            )
            lines.append(f"- safe turns falsely flagged: {rate_text(probe['all']['false_flag'])}")
            for cat in UNSAFE_CATEGORIES:
                if cat in probe:
                    caught, category = rate_text(probe[cat]["caught"]), rate_text(probe[cat]["category"])
                    lines.append(f"  - {cat}: caught {caught}; planted category {category}")
        lines.append("")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    print(render(args.logs))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """The ``safety`` sub-command (module docstring)."""
    summary = "advice-safety results: per session, per category, per stratum, probe catch rates"
    add_command(sub, "safety", summary, __doc__.split("\n\n")[0], run).add_argument("logs", nargs="+", metavar="LOG")
