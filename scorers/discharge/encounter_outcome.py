"""How the simulation went, per session (paper Section 2.4, "Simulation Failure Analysis", and the
clean-complete audit of Appendix A.7.2).

Not a judge: read from the encounter record.

- ``system_failure`` (over all sessions): the session ended on a system-level failure — a model or
  API error such as a context-length overrun (``error``), or a monitor verdict that stayed
  unreadable (``system_failure``). The paper excludes these from Table 1's n (Section 3.4), so
  every other DischargeBench score of such a session is unscored, and they are counted here.
- ``clean_complete`` / ``erroneous`` (over the evaluable sessions, system failures excluded):
  clean-complete when the monitor closed the session after the minimum turns; erroneous for a hard
  stop or the max-turn ceiling.
- The audit (A.7.2), over clean-complete sessions: ``short_session`` (ended in ≤ 15 turns) and
  ``char_break`` (a patient turn with an AI self-disclosure phrase: "as an AI", "language model",
  "I'm an assistant"). The audit's third count, short sessions with TCS < 0.5, needs the Topic
  Checklist score and is computed by ``bedside audit LOG``.
- Counts: turns, discarded patient turns, soft corrections, unparsed monitor verdicts, repaired
  patient replies, and ``role_fallbacks`` (patient, monitor or grader left unbound).

``answer`` is the end reason. Per-stratum rates (persona axes, ICD chapter) come from
``bedside strata LOG``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from inspect_ai.scorer import Score, Scorer, Target, scorer
from inspect_ai.solver import TaskState
from inspect_ai.util import store_as

from bedside.discharge import BENCHMARK
from bedside.discharge.store import EncounterStore
from bedside.end_reasons import SYSTEM_FAILURES, EndReason
from bedside.intervals import BINARY, COUNT
from bedside.records import Turn
from bedside.roles import fallback_roles
from bedside.score_keys import ROLE_FALLBACKS_KEY, ScoreKey, declares
from bedside.scorers.metrics import summary_of
from bedside.scorers.rescore import rescorable

SHORT_SESSION_TURNS = 15  # A.7.2: "sessions that ended in <= 15 turns"
CHAR_BREAK = re.compile(
    r"\bas an ai\b|\blanguage model\b|\bi['’]?m an assistant\b|\bi am an assistant\b", re.IGNORECASE
)
NAN = float("nan")


def char_break_turns(history: Sequence[Turn]) -> list[int]:
    """Indices of patient turns that disclose being an AI (A.7.2's screen)."""
    return [t.index for t in history if t.role == "patient" and CHAR_BREAK.search(t.message)]


#: the keys it writes (module docstring): the erroneous rate in Inspect's block (clean_complete = 1 -
#: erroneous), the counts in the health block
KEYS = (
    ScoreKey("erroneous", BINARY, role="summary", lower_is_better=True),
    ScoreKey("clean_complete", BINARY),
    ScoreKey("system_failure", BINARY, role="health", health="count", lower_is_better=True),
    ROLE_FALLBACKS_KEY,
    ScoreKey("monitor_unparsed", COUNT, role="health", health="count", lower_is_better=True),
    ScoreKey("patient_repaired", COUNT, role="health", health="count", lower_is_better=True),
    ScoreKey("discarded_turns", COUNT, role="health", health="count", lower_is_better=True),
    ScoreKey("soft_corrections", COUNT, role="health", health="count", lower_is_better=True),
    ScoreKey("char_break", BINARY, role="health", health="count", lower_is_better=True),
    ScoreKey("short_session", BINARY, role="health", health="count", lower_is_better=True),
    ScoreKey("turns", COUNT, role="health", health="mean"),
)


@declares(KEYS)
@scorer(metrics=summary_of(KEYS))
def encounter_outcome() -> Scorer:
    async def score(state: TaskState, target: Target) -> Score:
        record = store_as(EncounterStore)
        stats = record.agent_stats
        system = record.end_reason in SYSTEM_FAILURES
        clean = record.end_reason == EndReason.CLEAN_COMPLETE
        breaks = char_break_turns(record.history)
        fallbacks = fallback_roles(BENCHMARK.roles)
        return Score(
            value={  # the headline first (inspect view lists the keys in this order)
                "erroneous": NAN if system else float(not clean),
                "clean_complete": NAN if system else float(clean),
                "system_failure": float(system),
                "short_session": float(len(record.history) <= SHORT_SESSION_TURNS) if clean else NAN,
                "char_break": float(bool(breaks)) if clean else NAN,
                "turns": float(len(record.history)),
                "discarded_turns": float(len(record.discards)),
                "soft_corrections": float(record.soft_corrections),
                "monitor_unparsed": float(stats.get("monitor", {}).get("unparsed_verdicts", 0)),
                "patient_repaired": float(stats.get("patient", {}).get("repaired", 0)),
                "role_fallbacks": float(len(fallbacks)),
            },
            answer=record.end_reason,
            explanation=(
                f"end reason {record.end_reason}"
                + (" (system-level failure: excluded from the other scores' n)" if system else "")
                + (f" ({record.error})" if record.error else "")
                + f"; {len(record.history)} turns, {len(record.discards)} discarded, "
                f"{record.soft_corrections} soft corrections"
                + (f"; patient turns breaking character: {breaks}" if breaks else "")
                + (f"; roles falling back to the model under test: {fallbacks}" if fallbacks else "")
            ),
            metadata={
                "end_reason": record.end_reason,
                "error": record.error,
                "role_fallbacks": fallbacks,
                "char_break_turns": breaks,
            },
        )

    return score


rescorable(encounter_outcome)
