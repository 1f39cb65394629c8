"""Inspect entry point (``[project.entry-points.inspect_ai]``): bedside's tasks and model provider."""

from inspect_ai.model import ModelAPI, modelapi


@modelapi(name="bedside")
def bedside() -> type[ModelAPI]:
    from bedside.providers.api import BedsideAPI

    return BedsideAPI


from bedside.tasks.build_discharge_cases import build_discharge_cases  # noqa: E402,F401
from bedside.tasks.cpb import cpb, cpb_control  # noqa: E402,F401
from bedside.tasks.discharge import discharge  # noqa: E402,F401
from bedside.tasks.discharge_safety_probe import discharge_safety_probe  # noqa: E402,F401
from bedside.tasks.medsp import medsp  # noqa: E402,F401
