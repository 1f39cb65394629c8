"""Prompt templates and prompt data, kept as files under ``prompts/`` (Jinja2 ``.j2`` and YAML).

Every benchmark text that is part of its specification (persona descriptions, agent prompts,
judge prompts, checklists) lives in ``prompts/<benchmark>/`` and cites its source at the top.
Code renders them with :func:`render` (strict: a missing variable is an error) and reads data
with :func:`load_yaml`.
"""

from __future__ import annotations

from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import jinja2
import yaml

from bedside.paths import PROMPTS_DIR


@lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(PROMPTS_DIR)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=False,
        autoescape=False,
    )


def render(name: str, **variables: Any) -> str:
    """Render ``prompts/<name>`` (e.g. ``"<benchmark>/<template>.j2"``) with ``variables``."""
    return _env().get_template(name).render(**variables).strip()


@cache
def source(name: str) -> str:
    """The text of ``prompts/<name>`` as written, unrendered (cached): for reading a template's fixed
    wording, e.g. a judge's criteria shown to a person beside their fields."""
    return (Path(PROMPTS_DIR) / name).read_text(encoding="utf-8")


@cache
def load_yaml(name: str) -> Any:
    """Parsed content of ``prompts/<name>`` (cached; treat as read-only)."""
    path = Path(PROMPTS_DIR) / name
    with path.open(encoding="utf-8") as f:
        return yaml.safe_load(f)
