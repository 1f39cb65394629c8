"""Role fallbacks are counted the same way in every task, the judge (grader) included."""

from __future__ import annotations

from bedside.tasks.cpb import cpb, cpb_control
from bedside.tasks.discharge import discharge
from bedside.tasks.medsp import medsp
from tests.conftest import run


def fallbacks(log):
    found = []
    for sample in log.samples:
        for score in sample.scores.values():
            if isinstance(score.value, dict) and "role_fallbacks" in score.value:
                found.append((score.value["role_fallbacks"], sorted(score.metadata["role_fallbacks"])))
    return found


def test_every_task_counts_unbound_roles_including_the_grader(tmp_path):
    from tests.cpb import synthetic

    data = str(synthetic.write_data(tmp_path / "cpb"))
    cases = [
        (discharge(), ["grader", "monitor", "patient"]),
        (medsp(), ["environment", "grader", "patient"]),
        (cpb(data=data), ["grader"]),
        (cpb(data=data, turns=2), ["grader", "patient"]),
        (cpb_control(data=data), ["grader"]),
    ]
    for i, (task, roles) in enumerate(cases):
        log = run(task, roles={}, log_dir=tmp_path / str(i), limit=1)
        found = fallbacks(log)
        assert found, task.name
        assert all(count == len(roles) and names == roles for count, names in found), (task.name, found)
