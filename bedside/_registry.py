"""Inspect entry point (``[project.entry-points.inspect_ai]``): bedside's model provider and the tasks of
every registered benchmark (its task modules, ``tasks/<b>*.py``: :mod:`bedside.benchmarks`)."""

from inspect_ai.model import ModelAPI, modelapi

from bedside import benchmarks


@modelapi(name="bedside")
def bedside() -> type[ModelAPI]:
    from bedside.providers.api import BedsideAPI

    return BedsideAPI


benchmarks.task_functions()  # importing its modules registers each task
