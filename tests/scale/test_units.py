"""The units of a sharded run (no eval runs here): shards dealt by sample id, stable under reordering and even;
the whole case set decided before the shards; the run's connection budget divided over the units at once."""

from __future__ import annotations

import random

import pytest
from inspect_ai.log import read_eval_log

from bedside.scale.plan import RunSpec, _selected, concurrency, plan
from bedside.scale.shards import ShardInfo, assignment, run_id, shard_info, split, unit_dir

IDS = [f"case-{i:03d}" for i in range(200)]


def test_shards_are_dealt_by_id_whatever_the_order_and_differ_in_size_by_one_at_most() -> None:
    shuffled = IDS[:]
    random.Random(7).shuffle(shuffled)
    assert assignment(IDS, 4) == assignment(shuffled, 4)  # by id, not by position
    parts = split(shuffled, 4)
    assert sorted(i for part in parts for i in part) == sorted(IDS)  # a partition: every id in one shard
    assert all(assignment(IDS, 4)[i] == k + 1 for k, part in enumerate(parts) for i in part)
    assert all(part == [i for i in shuffled if i in set(part)] for part in parts)  # each in the order given
    for n in (1, 7, 48, 199, 200):  # sizes differ by one at most (a run lasts as long as its largest shard)
        for shards in (1, 2, 3, 4, 8):
            sizes = [len(p) for p in split(IDS[:n], shards)]
            assert sum(sizes) == n and max(sizes) - min(sizes) <= 1, (n, shards, sizes)
    # the deal follows the ids' hashes, not their order: a shard is not a run of neighbouring cases
    assert split(IDS[:8], 2) != [IDS[0:8:2], IDS[1:8:2]] and split(IDS[:8], 2) != [IDS[:4], IDS[4:8]]
    assert assignment([7, 8], 2) == assignment(["7", "8"], 2)  # an id as text: 7 and "7" agree
    with pytest.raises(ValueError, match="at least 1"):
        assignment(["a"], 0)


def test_the_budget_is_divided_over_the_units_at_once_and_never_exceeded() -> None:
    # (total, slots, units) -> (units at once, each unit's share); at once × share <= total
    assert concurrency(10, 2, 8) == (2, 5)
    assert concurrency(10, 8, 8) == (8, 1)
    assert concurrency(4, 8, 8) == (4, 1)  # fewer connections than slots: fewer units at once
    assert concurrency(10, 8, 2) == (2, 5)  # fewer units than slots
    for total in range(1, 40):
        for slots in range(1, 12):
            at_once, share = concurrency(total, slots, 16)
            assert 1 <= at_once <= slots and at_once * share <= total


def test_run_ids_and_unit_folders() -> None:
    definition = {"tasks": [["discharge", "m", {"cases": "sha256:1"}, IDS]], "shards": 4}
    assert run_id(definition) == run_id(dict(reversed(list(definition.items()))))  # the same run, found again
    assert run_id(definition) != run_id({**definition, "shards": 2})
    assert unit_dir("s3://b/logs/", "bedside/discharge", "openai-api/loopback/educator", "run-1", 3) == (
        "s3://b/logs/discharge_openai-api-loopback-educator_run-1.shards/3"
    )
    info = ShardInfo("run-1", 3, 4)
    assert str(info) == "shard 3 of 4 of run run-1"

    class Log:
        class eval:  # noqa: N801 (an EvalLog's shape)
            metadata = info.metadata()

    assert shard_info(Log) == info


def test_limit_and_sample_id_select_before_the_shards_as_inspect_does() -> None:
    assert _selected(IDS, 5, None) == IDS[:5]
    assert _selected(IDS, (9, 20), None) == IDS[9:20]  # `--limit 10-20`: Inspect's (start, stop)
    assert _selected(IDS, None, ["case-004", "case-002"]) == ["case-002", "case-004"]  # the set's order
    assert _selected([1, 2, 3], None, ["2"]) == [2]


def test_the_whole_case_set_is_built_once_and_cut_by_id(tmp_path) -> None:
    spec = RunSpec(
        tasks=("bedside/discharge",),
        models=("bedside/scripted",),
        log_dir=str(tmp_path),
        model_roles=("patient=bedside/scripted", "monitor=bedside/scripted", "grader=bedside/scripted"),
        task_args={"persona_assignment": "balanced"},
        shards=4,
        max_connections=8,
        max_samples=6,
    )
    run_plan = plan(spec, slots=2)
    units = run_plan.units
    assert [u.info.shard for u in units] == [1, 2, 3, 4] and len({u.info.run_id for u in units}) == 1
    ids = [i for u in units for i in u.sample_ids]
    assert sorted(ids) == [f"demo-{i:03d}" for i in range(1, 25)] and len(ids) == 24
    assert all(u.task.endswith("@discharge") or u.task == "bedside/discharge" for u in units)
    assert {(u.max_connections, u.max_samples) for u in units} == {(4, 3)}  # 8 and 6 over 2 at once
    assert run_plan.at_once == 2 and run_plan.budget == 8
    assert plan(spec, slots=2).run_id == run_plan.run_id  # the same command finds its run again
    other = plan(RunSpec(**{**spec.__dict__, "task_args": {"persona_assignment": "random"}}), slots=2)
    assert other.run_id != run_plan.run_id


@pytest.mark.eval
def test_a_units_samples_are_those_of_the_whole_case_set(tmp_path) -> None:
    """Balanced persona assignment is decided over the whole case set: a unit's samples carry the personas
    the whole set gave them, not those of its shard alone."""
    import json

    from bedside.scale.unit import run_unit
    from bedside.tasks.discharge import discharge

    args = {"persona_assignment": "balanced", "min_turns": 1, "max_turns": 2}
    whole = {s.id: json.loads(json.dumps(s.metadata)) for s in discharge(**args).dataset}
    spec = RunSpec(
        tasks=("bedside/discharge",),
        models=("bedside/scripted",),
        log_dir=str(tmp_path),
        model_roles=tuple(f"{r}=bedside/scripted" for r in ("patient", "monitor", "grader")),
        task_args=args,
        shards=4,
        eval_args={"log_realtime": False, "score": False},
    )
    unit = max(plan(spec, slots=1).units, key=lambda u: len(u.sample_ids))
    result = run_unit(unit)
    assert result.status == "success" and result.samples == len(unit.sample_ids) >= 4
    log = read_eval_log(result.log)
    # every field the case set gave each sample (personas, traits, the case), as the whole set gave it
    assert {s.id: {k: (s.metadata or {}).get(k) for k in whole[s.id]} for s in log.samples or []} == {
        i: whole[i] for i in unit.sample_ids
    }
    personas = {(m["persona"]["personality"]) for m in (whole[i] for i in unit.sample_ids)}
    assert len(personas) >= 2  # (the unit's samples are not all one persona)


def test_no_log_realtime_reaches_every_units_eval_set_and_is_off_unless_asked() -> None:
    from bedside.cli import parser
    from bedside.scale.command import spec_of
    from bedside.scale.unit import eval_set_arguments

    def units(*flags: str):  # type: ignore[no-untyped-def]
        args = parser().parse_args(["scale", "bedside/discharge", "--model", "mockllm/model", "--shards", "2", *flags])
        return plan(spec_of(args), slots=2).units

    assert all(eval_set_arguments(u)["log_realtime"] is False for u in units("--no-log-realtime"))
    assert all("log_realtime" not in eval_set_arguments(u) for u in units())  # Inspect's default (on)
