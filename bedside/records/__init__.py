"""Pydantic records of each benchmark and their loaders; helpers the loaders share."""

from __future__ import annotations

from typing import Any


def paths_containing(value: Any, text: str, prefix: str = "") -> list[str]:
    """Dotted paths of the keys or string values within ``value`` that contain ``text``."""
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if text in key:
                found.append(f"{prefix}{key}")
            found += paths_containing(item, text, f"{prefix}{key}.")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += paths_containing(item, text, f"{prefix}{i}.")
    elif isinstance(value, str) and text in value:
        found.append(prefix.rstrip("."))
    return found
