"""Persona assignment: uniform, deterministic across processes, overridable by case and task."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pytest
from scipy.stats import chisquare

from bedside.discharge.persona import AXES, assign_persona
from bedside.discharge.records import PersonaFields, load_cases
from bedside.discharge.samples import DEMO_CASES, discharge_dataset
from bedside.solvers.discharge.encounter import educator_prompt, patient_prompt

IDS = [f"case-{i:04d}" for i in range(480)]


@pytest.mark.parametrize("axis", list(AXES))
def test_assignment_is_uniform_over_480_ids(axis):
    counts = Counter(getattr(assign_persona(i, seed=0), axis) for i in IDS)
    assert set(counts) == set(AXES[axis])  # every value is drawn
    expected = len(IDS) / len(AXES[axis])
    assert chisquare([counts[v] for v in AXES[axis]]).pvalue > 0.001, counts
    assert all(abs(counts[v] - expected) < 0.35 * expected for v in AXES[axis]), counts


def test_axes_are_drawn_independently():
    pairs = Counter((assign_persona(i, 0).personality, assign_persona(i, 0).health_literacy) for i in IDS)
    assert len(pairs) == 10  # all 5 x 2 combinations occur


def test_seed_changes_the_draw_and_is_stable():
    a = [assign_persona(i, seed=0).model_dump() for i in IDS[:50]]
    b = [assign_persona(i, seed=0).model_dump() for i in IDS[:50]]
    c = [assign_persona(i, seed=1).model_dump() for i in IDS[:50]]
    assert a == b and a != c


@pytest.mark.eval
def test_stable_across_processes():
    code = (
        "from bedside.discharge.persona import assign_persona;"
        "print([tuple(assign_persona(f'case-{i:04d}', 7).model_dump(exclude={'sources'}).values()) for i in range(40)])"
    )
    runs = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        for _ in range(2)
    }
    assert len(runs) == 1
    here = str([tuple(assign_persona(f"case-{i:04d}", 7).model_dump(exclude={"sources"}).values()) for i in range(40)])
    assert runs.pop().strip() == here


def test_precedence_task_over_case_over_seed():
    fixed = PersonaFields(personality="minimiser", recall_level="poor")
    p = assign_persona("x", 0, fixed, {"personality": "anxious"})
    assert p.personality == "anxious" and p.sources["personality"] == "task"
    assert p.recall_level == "poor" and p.sources["recall_level"] == "case"
    assert p.sources["education_level"] == "seed"


def test_invalid_override_names_the_axis():
    with pytest.raises(ValueError, match="personality='grumpy'"):
        assign_persona("x", 0, None, {"personality": "grumpy"})


def test_task_parameter_runs_one_stratum():
    ds = discharge_dataset(seed=3, overrides={"personality": "distrustful"})
    assert {s.metadata["personality"] for s in ds} == {"distrustful"}
    assert len({s.metadata["health_literacy"] for s in ds}) == 2  # other axes still drawn


def test_persona_text_reaches_both_prompts():
    case = load_cases(DEMO_CASES)[0]
    p = assign_persona(
        case.case_id,
        0,
        None,
        {
            "personality": "anxious",
            "education_level": "high_school",
            "health_literacy": "low",
            "recall_level": "partial",
        },
    )
    patient = patient_prompt(case, p)
    assert "You are an overanxious patient" in patient
    assert "You are a patient with high school education. Understands common terms" in patient
    assert "You have low health literacy. Cannot reliably interpret" in patient
    assert "limited to partial: Have a moderate ability" in patient
    assert case.chief_complaint in patient and case.discharge_note not in patient
    educator = educator_prompt(case, p)
    assert "Personality: anxious" in educator and "Education level: high school" in educator
    assert case.discharge_note in educator


def test_balanced_assignment_gives_every_value_equally_often():
    from collections import Counter

    from bedside.discharge.persona import AXES, balanced_draws

    ids = [f"case-{i}" for i in range(47)]
    draws = balanced_draws(ids, seed=3)
    for axis, values in AXES.items():
        counts = Counter(d[axis] for d in draws.values())
        assert set(counts) == set(values) and max(counts.values()) - min(counts.values()) <= 1, axis
    assert balanced_draws(ids, seed=3) == draws and balanced_draws(ids, seed=4) != draws
    # axes are dealt independently (not the same permutation for every axis)
    assert any(
        draws[i]["personality"] != draws[ids[0]]["personality"]
        for i in ids
        if draws[i]["education_level"] == draws[ids[0]]["education_level"]
    )


def test_balanced_assignment_through_the_task_and_precedence():
    from collections import Counter

    from bedside.tasks.discharge import discharge

    samples = list(discharge(persona_assignment="balanced", health_literacy="low").dataset)
    personality = Counter(s.metadata["personality"] for s in samples)
    assert max(personality.values()) - min(personality.values()) <= 1
    assert {s.metadata["health_literacy"] for s in samples} == {"low"}  # the task parameter still wins
    with pytest.raises(Exception, match="persona_assignment"):
        discharge(persona_assignment="stratified")
