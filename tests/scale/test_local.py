"""``bedside scale ... --workers 2`` on a laptop: a new local Ray instance of two CPUs, whatever Ray's
temporary folder holds. A dead cluster leaves its address in ``<Ray's temp folder>/ray_current_cluster``;
Ray's own look-up (``ray.init()`` without an address) would try to join it (and refuse the local instance's
CPUs); the command starts its own instance and runs the run, every sample once."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.reliability.helpers import replicate_discharge
from tests.scale.helpers import (
    CountingServerProcess,
    environment,
    lean_task,
    loopback_arguments,
    ray_environment,
    run_samples,
    scale,
    shards_of,
)

pytestmark = pytest.mark.eval


@pytest.fixture
def ray_tmp() -> Iterator[Path]:
    """Ray's temporary folder for the command (``RAY_TMPDIR``): short (Ray's socket paths have a length
    limit), holding the address file of a cluster that no longer runs."""
    folder = Path(tempfile.mkdtemp(prefix="bs-ray-", dir="/tmp"))
    (folder / "ray").mkdir()
    (folder / "ray" / "ray_current_cluster").write_text("127.0.0.1:9\n")  # the discard port: nothing answers
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.long
def test_a_local_run_starts_its_own_ray_instance_whatever_a_dead_cluster_left(tmp_path: Path, ray_tmp: Path) -> None:
    data = replicate_discharge(4, tmp_path / "cases.jsonl", prefix="local")
    with CountingServerProcess(tmp_path / "requests.jsonl") as server:
        env = environment(**server.env, **ray_environment(), RAY_TMPDIR=str(ray_tmp))
        env.pop("RAY_ADDRESS", None)
        env_flags = [arg for name in server.env for arg in ("--env", name)]
        done = scale(
            lean_task(tmp_path),
            *["-T", f"data={data}", "-T", "min_turns=2", "-T", "max_turns=2"],
            *loopback_arguments(),
            *["--workers", "2", *env_flags, "--log-dir", str(tmp_path / "logs")],
            cwd=tmp_path,
            env=env,
        )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "2 at once on 2 slot(s)" in done.stdout, done.stdout
    assert " on node " in done.stdout, done.stdout  # the units ran as Ray tasks
    assert shards_of(tmp_path / "logs") == [(1, "success"), (2, "success")]
    assert run_samples(tmp_path / "logs") == {(f"local-{i:03d}", 1): 1 for i in range(1, 5)}
