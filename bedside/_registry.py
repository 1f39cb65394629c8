"""Inspect entry point (``[project.entry-points.inspect_ai]``): bedside's model provider, and the tasks and the
scorers of every registered benchmark (its task modules, ``tasks/<b>*.py``, and its ``scorers/<b>/``:
:mod:`bedside.benchmarks`)."""

from inspect_ai.model import ModelAPI, modelapi

from bedside import benchmarks


@modelapi(name="bedside")
def bedside() -> type[ModelAPI]:
    from bedside.providers.api import BedsideAPI

    return BedsideAPI


benchmarks.task_functions()  # importing its modules registers each task
benchmarks.scorer_factories()  # and each scorer (a task builds its scorers only when called)
