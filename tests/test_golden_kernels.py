"""The golden check holds on other CPU kernels, not only on the one that wrote the files: the golden
run that computes sentence embeddings and is the cheapest (``discharge_faults``: 4 cases, every
branch of the factual-consistency scorer that reaches the embeddings) is checked with
``make_golden --check`` in a fresh process per setting, with torch forced onto its generic kernels
(``ATEN_CPU_CAPABILITY=default``) on one thread and onto its AVX2 kernels on two
(``BEDSIDE_EMBED_THREADS`` sets torch's intra-op threads, :func:`bedside.scorers.discharge.text_metrics.embed_threads`).
The capability is read at torch's start, so each setting needs its own process; each reports the
capability and thread count it ran with."""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.golden import make_golden

pytestmark = pytest.mark.eval

RUN = "discharge_faults"
X86_64 = platform.machine().lower() in {"x86_64", "amd64"}


def embeds(name: str) -> bool:
    golden = make_golden.path_of(name).read_text()
    return all(f'"{key}": ' in golden for _, key in make_golden.KERNEL_FLOATS)


@pytest.mark.long
@pytest.mark.parametrize(("capability", "threads"), [("default", 1), ("avx2", 2)], ids=["default-1", "avx2-2"])
def test_golden_check_passes_on_other_torch_kernels(capability, threads):
    assert embeds(RUN), f"{RUN} computes no embeddings: choose another run"
    if capability == "avx2" and not X86_64:
        pytest.skip(f"ATEN_CPU_CAPABILITY=avx2 names x86-64 kernels; torch on {platform.machine()} has none")
    env = {
        **os.environ,
        "ATEN_CPU_CAPABILITY": capability,
        "OMP_NUM_THREADS": str(threads),
        "BEDSIDE_EMBED_THREADS": str(threads),
        "HF_HUB_OFFLINE": "1",
    }
    done = subprocess.run(
        [sys.executable, "-m", "tests.golden.make_golden", "--check", RUN],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=600,
    )
    report = done.stdout + done.stderr[-3000:]
    assert done.returncode == 0, report
    assert f"{RUN}: 4 samples, 0 difference(s)" in done.stdout, report
    assert re.search(
        r"factual_consistency\.cosine: \d+ of 4 values moved, max \|diff\| \S+ \(tolerance 1e-05\)", report
    )
    ran = re.search(r"torch CPU capability (\w+), (\d+) intra-op thread\(s\)", done.stdout)
    assert ran, report
    assert int(ran.group(2)) == threads, report
    if ran.group(1) != capability.upper():  # torch falls back to the best kernel this CPU has
        pytest.skip(f"this CPU has no {capability.upper()} kernels for torch: it ran {ran.group(1)} (and passed)")
