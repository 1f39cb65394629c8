"""Golden scores: every sample's score values and answer on each benchmark's scripted runs, with
``bedside/scripted`` for every role. Each registered benchmark declares its runs in
``tests/<benchmark>/golden.py`` (``RUNS``: run name -> temporary folder -> (task, eval arguments,
scripted-model options per role)); their values are ``tests/<benchmark>/golden/<run>.json``.

A refactor must leave these byte-identical; when a reading rule changes on purpose, regenerate them
in a commit of their own and say which values changed and why:

    .venv/bin/python -m tests.golden.make_golden          # rewrite tests/<benchmark>/golden/*.json
    .venv/bin/python -m tests.golden.make_golden --check  # compare, print every difference
    .venv/bin/python -m tests.golden.make_golden --check discharge_faults   # one run

``tests/test_golden_scores.py`` runs the same comparison in the test suite, and
``tests/test_golden_kernels.py`` runs ``--check`` with torch forced onto other CPU kernels.

Every value is compared exactly (counts, end reasons, discrete grades, answers, and the floats
computed in pure Python: ROUGE-L, readability, checklist and rubric ratios), except the keys of
:data:`KERNEL_FLOATS`: floating-point results of numeric-library kernels, whose last digits depend
on the CPU, the BLAS and the kernel torch picks; they are compared within the tolerance declared
there.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent


def _declared() -> dict[str, tuple[str, Callable[[Path], Any]]]:
    """run name -> (benchmark, run), from every registered benchmark's ``tests/<benchmark>/golden.py``."""
    from bedside import benchmarks

    found: dict[str, tuple[str, Callable[[Path], Any]]] = {}
    for benchmark in benchmarks.all_benchmarks():
        module = f"tests.{benchmark.name}.golden"
        try:
            runs = importlib.import_module(module).RUNS
        except ModuleNotFoundError as error:
            if error.name in (module, f"tests.{benchmark.name}"):
                continue  # a benchmark without golden runs
            raise
        for name, run in runs.items():
            if name in found:
                raise ValueError(f"golden run {name!r} is declared by {found[name][0]} and {benchmark.name}")
            found[name] = (benchmark.name, run)
    return found


def _runs() -> dict[str, Callable[[Path], Any]]:
    """Every declared golden run, by name."""
    return {name: run for name, (_, run) in _declared().items()}


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
            log_realtime=False,
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


#: (scorer, key) -> absolute tolerance, for the golden values that are floating-point results of
#: numeric-library kernels; every other value is compared exactly.
#:
#: ``factual_consistency.cosine``: the mean of float32 all-MiniLM-L6-v2 embedding cosines (torch, MKL /
#: oneDNN, and numpy's BLAS for the dot product). Measured on the AMD EPYC (AVX-512) that wrote the
#: golden files, max |diff| over the 28 cosines of ``discharge`` and ``discharge_faults``:
#: - ATEN_CPU_CAPABILITY=avx512 (the files' own kernel) 0; =avx2 1.0e-7; =default 6.9e-8; each the same
#:   with OMP_NUM_THREADS and BEDSIDE_EMBED_THREADS 1 or 2;
#: - OPENBLAS_CORETYPE=Prescott (numpy's BLAS without AVX) 2.9e-8; numpy without its AVX2 / AVX-512
#:   loops (NPY_DISABLE_CPU_FEATURES="X86_V3 X86_V4 AVX512_ICL") 0;
#: - all generic at once (ATEN default, Prescott, numpy baseline, MKL_ENABLE_INSTRUCTIONS=SSE4_2,
#:   ONEDNN_MAX_CPU_ISA=SSE41) 8.5e-8;
#: - reported from an AMD EPYC Zen 3 (AVX2, no AVX-512): 6e-8 (0.7623060770953695 -> 0.762306137320896).
#: A float32 step at 0.76 is 6e-8. The tolerance, 1e-5, is 100 times the largest difference measured
#: (room for arm64 and other BLAS builds) and 10 times below a change of 1e-4, which fails
#: (``tests/test_golden_scores.py``); the cosines are reported to 3 decimals.
KERNEL_FLOATS: dict[tuple[str, str], float] = {("factual_consistency", "cosine"): 1e-5}


def path_of(name: str) -> Path:
    """The golden file of run ``name``: ``tests/<benchmark>/golden/<name>.json``."""
    return TESTS / _declared()[name][0] / "golden" / f"{name}.json"


def golden_files() -> list[Path]:
    """Every declared run's golden file."""
    return [path_of(name) for name in _declared()]


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
                    if wv.get(k) == gv.get(k):
                        continue
                    tolerance = KERNEL_FLOATS.get((scorer, k))
                    drift = _drift(wv.get(k), gv.get(k))
                    if tolerance is not None and drift is not None and drift <= tolerance:
                        continue
                    beyond = f" (|diff| {drift:.1e} > {tolerance:.0e})" if tolerance is not None and drift else ""
                    diffs.append(f"{name} {key} {scorer}.{k}: {wv.get(k)!r} -> {gv.get(k)!r}{beyond}")
            else:
                diffs.append(f"{name} {key} {scorer}: {wv!r} -> {gv!r}")
    return diffs


def _drift(want: Any, got: Any) -> float | None:
    """|want - got| of two finite floats; None for anything else (compared exactly)."""
    numbers = [v for v in (want, got) if isinstance(v, float) and math.isfinite(v)]
    return abs(want - got) if len(numbers) == 2 else None


def kernel_drift(name: str, got: dict[str, Any]) -> dict[tuple[str, str], tuple[float, int, int]]:
    """For each :data:`KERNEL_FLOATS` key in run ``name``: (max |diff|, values that differ, values)."""
    want = json.loads(path_of(name).read_text())
    out: dict[tuple[str, str], tuple[float, int, int]] = {}
    for scorer, k in KERNEL_FLOATS:
        drifts = [
            _drift(w["scores"].get(scorer, {}).get(k), got[key]["scores"].get(scorer, {}).get(k))
            for key, w in want.items()
            if key in got
        ]
        found = [d for d in drifts if d is not None]
        if found:
            out[scorer, k] = (max(found), sum(d > 0 for d in found), len(found))
    return out


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
            for (scorer, k), (drift, moved, n) in kernel_drift(name, got).items():
                tolerance = KERNEL_FLOATS[scorer, k]
                print(
                    f"  {scorer}.{k}: {moved} of {n} values moved, max |diff| {drift:.1e} (tolerance {tolerance:.0e})"
                )
            failed |= bool(diffs)
        else:
            path_of(name).parent.mkdir(exist_ok=True)
            path_of(name).write_text(json.dumps(got, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
            print(f"wrote {path_of(name)} ({len(got)} samples)")
    if "torch" in sys.modules:  # the kernels the embeddings ran on
        torch = sys.modules["torch"]
        capability, threads = torch.backends.cpu.get_cpu_capability(), torch.get_num_threads()
        print(f"torch CPU capability {capability}, {threads} intra-op thread(s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
