"""What a run's numbers depend on besides the models, as content hashes written into every log
(``metadata["data_versions"]``): the case data (a file: its hash; a folder: one hash per file), any other
data files the task read (a rubric folder, a subset file), the benchmark's prompt set (``prompts/<benchmark>/``)
and bedside's version. A task whose input is not a case set records its input under ``cases`` all the same
(the case extraction: its cohort file), so every log has the same three keys. ``bedside compare`` refuses
to pair runs whose hashes differ unless told to (``--allow-different-data``), naming what differs
(:func:`differences`, :func:`check_same_data`)."""

from __future__ import annotations

import hashlib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from bedside.paths import PROMPTS_DIR

#: the log metadata key
KEY = "data_versions"


def file_hash(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def folder_hashes(folder: Path) -> dict[str, str]:
    """One hash per file under ``folder`` (relative POSIX path -> hash), hidden files left out."""
    return {
        p.relative_to(folder).as_posix(): file_hash(p)
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts)
    }


def tree_hash(folder: Path) -> str:
    """One hash of every file under ``folder`` (names and contents)."""
    digest = hashlib.sha256()
    for name, h in folder_hashes(folder).items():
        digest.update(f"{name}\0{h}\n".encode())
    return "sha256:" + digest.hexdigest()


def bedside_version() -> str:
    try:
        return version("bedside")
    except PackageNotFoundError:
        return "unknown"


def content_hashes(location: str | Path | None) -> str | dict[str, str] | None:
    """A file's hash, a folder's per-file hashes, None for nothing there."""
    if location is None:
        return None
    path = Path(location)
    return folder_hashes(path) if path.is_dir() else file_hash(path) if path.is_file() else None


def data_versions(location: str | Path | None, benchmark: str, **more: str | Path | None) -> dict[str, Any]:
    """The ``data_versions`` record of a run on the data at ``location`` (a dataset's location) and the
    other files or folders it read (``more``: name -> path, e.g. ``rubrics`` and ``subset``)."""
    prompts = PROMPTS_DIR / benchmark
    return {
        "cases": content_hashes(location),
        **{name: content_hashes(path) for name, path in more.items() if path is not None},
        "prompts": tree_hash(prompts) if prompts.is_dir() else None,
        "bedside": bedside_version(),
    }


def differences(
    a: dict[str, Any] | None, b: dict[str, Any] | None, ignore: tuple[str, ...] = ("bedside",)
) -> list[str]:
    """Which hashes differ between two runs' records, by name (``cases``, ``cases/<file>``, ``rubrics/<file>``,
    ``subset``, ``prompts``); bedside's version is recorded, not compared (``ignore``). A log without a
    record (written before bedside recorded one) differs only from a log with one."""
    if not a or not b:
        return [] if not a and not b else [f"{KEY} (recorded in one log only)"]
    out: list[str] = []
    for key in sorted((set(a) | set(b)) - set(ignore)):
        x, y = a.get(key), b.get(key)
        if isinstance(x, dict) and isinstance(y, dict):
            out += [f"{key}/{name}" for name in sorted(set(x) | set(y)) if x.get(name) != y.get(name)]
        elif x != y:
            out.append(key)
    return out


def sweep_problems(logs: Any) -> list[str]:
    """For a sweep (logs with ``path``, ``log`` and ``benchmark``): one line per log whose recorded data or
    prompts differ from the first log of its benchmark's task, naming the two logs and what differs. Runs
    of another task of the benchmark (e.g. a probe beside its runs) read other
    inputs by design and are compared only with each other."""
    first: dict[tuple[str, str], Any] = {}
    problems: list[str] = []
    for item in logs:
        ref = first.setdefault((item.benchmark, item.log.eval.task.split("/")[-1]), item)
        diff = differences(versions_of(ref.log), versions_of(item.log))
        if diff:
            problems.append(f"{item.path} vs {ref.path}: {', '.join(diff)} {'differs' if len(diff) == 1 else 'differ'}")
    return problems


class DataMismatch(ValueError):
    """Two runs to be paired were run on different data or prompts."""


def versions_of(log: Any) -> dict[str, Any] | None:
    """The record of an Inspect log (None for a log without one)."""
    return (log.eval.metadata or {}).get(KEY)


def check_same_data(a: Any, a_name: str, b: Any, b_name: str, allow: bool = False) -> list[str]:
    """Raise :class:`DataMismatch` (one line: the two logs, what differs, the flag) when the logs ``a`` and
    ``b`` were run on different data or prompts, unless ``allow``; returns what differs."""
    diff = differences(versions_of(a), versions_of(b))
    if diff and not allow:
        raise DataMismatch(
            f"{a_name} and {b_name} were not run on the same data and prompts ({', '.join(diff)} "
            f"{'differs' if len(diff) == 1 else 'differ'}): their scores are not paired; "
            "pass --allow-different-data to pair them anyway"
        )
    return diff
