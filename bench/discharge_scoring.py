"""Wall-clock of scoring the 24 demo cases with the scripted grader, split into judge calls and
deterministic metrics (readability, ROUGE-L, embeddings), and the effect of the reference cache.

    .venv/bin/python bench/discharge_scoring.py

All numbers come from one run on this machine and are reported as seconds and ratios. The
scripted grader answers instantly, so "judge" time here is Inspect's per-call overhead plus
prompt rendering and parsing; with a real judge it is dominated by the model.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ["INSPECT_CACHE_DIR"] = tempfile.mkdtemp(prefix="bedside-bench-cache-")

from inspect_ai import eval, score  # noqa: E402
from inspect_ai.model import get_model  # noqa: E402

from bedside.discharge.store import educator_text  # noqa: E402
from bedside.scorers.discharge import text_metrics  # noqa: E402
from bedside.scorers.discharge.comprehension import comprehension  # noqa: E402
from bedside.scorers.discharge.conversation_quality import conversation_quality  # noqa: E402
from bedside.scorers.discharge.encounter_outcome import encounter_outcome  # noqa: E402
from bedside.scorers.discharge.factual_consistency import factual_consistency  # noqa: E402
from bedside.scorers.discharge.topic_checklist import topic_checklist  # noqa: E402
from bedside.tasks.discharge import discharge  # noqa: E402


def scorers(cache: bool = True):
    return [
        encounter_outcome(),
        conversation_quality(),
        topic_checklist(),
        comprehension(cache_references=cache),
        factual_consistency(cache_references=cache),
    ]


def main() -> None:
    log_dir = Path(tempfile.mkdtemp(prefix="bedside-bench-logs-"))
    roles = {r: get_model("bedside/scripted", memoize=False) for r in ("patient", "monitor")}
    t = time.perf_counter()
    [log] = eval(
        discharge(), model="bedside/scripted", model_roles=roles, log_dir=str(log_dir), display="none", score=False
    )
    simulate = time.perf_counter() - t
    grader = {"grader": get_model("bedside/scripted", memoize=False)}

    # one-time costs (embedding model, cmudict, Inspect's scoring set-up) outside the timed runs
    t = time.perf_counter()
    score(log, scorers(cache=False), model_roles=grader, display="none", action="overwrite")
    first_call = time.perf_counter() - t
    t = time.perf_counter()
    score(log, scorers(cache=False), model_roles=grader, display="none", action="overwrite")
    uncached = time.perf_counter() - t
    t = time.perf_counter()
    first = score(log, scorers(), model_roles=grader, display="none", action="overwrite")
    cold = time.perf_counter() - t
    t = time.perf_counter()
    score(log, scorers(), model_roles=grader, display="none", action="overwrite")
    warm = time.perf_counter() - t

    # the deterministic part alone, on exactly the texts the scorers used
    histories = [s.store["EncounterStore:history"] for s in first.samples]
    pairs = [
        pair
        for s in first.samples
        for pair in zip(
            s.scores["factual_consistency"].metadata["note_answers"],
            s.scores["factual_consistency"].metadata["dialogue_answers"],
        )
    ]
    t = time.perf_counter()
    for h in histories:
        text_metrics.readability(educator_text(h))
    t_read = time.perf_counter() - t
    t = time.perf_counter()
    for s in first.samples:
        meta = s.scores["factual_consistency"].metadata
        text_metrics.rouge_l(list(zip(meta["note_answers"], meta["dialogue_answers"])))
    t_rouge = time.perf_counter() - t
    t = time.perf_counter()
    for s in first.samples:
        meta = s.scores["factual_consistency"].metadata
        text_metrics.cosine(list(zip(meta["note_answers"], meta["dialogue_answers"])))
    t_cos = time.perf_counter() - t
    deterministic = t_read + t_rouge + t_cos
    grader_calls = (
        sum(1 for s in first.samples for e in s.events if e.event == "model" and e.role == "grader")
        if first.samples[0].events
        else None
    )

    n = len(first.samples)
    print(f"cases: {n}; answer pairs: {len(pairs)}")
    print(f"simulation (no scoring): {simulate:.1f} s")
    print(f"first scoring call of the process (one-time set-up included): {first_call:.2f} s")
    print(f"scoring, reference cache off: {uncached:.2f} s ({uncached / n * 1000:.0f} ms per case)")
    print(f"scoring, cold reference cache: {cold:.2f} s ({cold / n * 1000:.0f} ms per case)")
    print(f"scoring, warm reference cache: {warm:.2f} s (warm/cold = {warm / cold:.2f})")
    print(
        f"deterministic metrics alone: {deterministic:.2f} s = readability {t_read:.2f} + ROUGE-L {t_rouge:.2f} + embeddings {t_cos:.2f}"
    )
    print(
        f"share of uncached scoring: deterministic {deterministic / uncached:.0%}, judge calls and Inspect overhead {1 - deterministic / uncached:.0%}"
    )
    if grader_calls is not None:
        print(f"grader calls: {grader_calls}")


if __name__ == "__main__":
    main()
