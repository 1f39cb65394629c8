"""Where the project's data folders are: ``prompts/`` and ``datasets/``.

In a source checkout (and an editable install) they are the folders at the repository root.
A regular install (``pip install .``) ships them inside the package as ``bedside/_prompts`` and
``bedside/_datasets`` (see ``pyproject.toml``).
"""

from __future__ import annotations

import os
from pathlib import Path

_PKG = Path(__file__).resolve().parent


def _locate(repo_name: str, packaged_name: str) -> Path:
    for candidate in (_PKG.parent / repo_name, _PKG / packaged_name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"cannot find the {repo_name}/ folder next to {_PKG}")


PROMPTS_DIR: Path = _locate("prompts", "_prompts")
DATASETS_DIR: Path = _locate("datasets", "_datasets")


def user_path(data: str | Path) -> Path:
    """A data path as the user meant it. ``inspect eval tasks/x.py`` builds the task with the working
    directory switched to ``tasks/``, so a relative ``-T data=`` path is looked up first against the
    shell's working directory (``$PWD``, which ``os.chdir`` does not change), then as given."""
    path = Path(str(data)).expanduser()  # str(): `-T data=2024` arrives YAML-parsed as an int
    shell = os.environ.get("PWD")
    if not path.is_absolute() and shell and (Path(shell) / path).exists():
        return (Path(shell) / path).resolve()
    return path


def user_output_path(out: str | Path) -> Path:
    """A path to write as the user meant it: its folder found as :func:`user_path` finds a path (so a
    relative ``-T out=cases.jsonl`` lands in the shell's working directory, not in ``tasks/``)."""
    path = Path(str(out)).expanduser()
    return path if path.is_absolute() else user_path(path.parent) / path.name
