"""Inspect entry point (``[project.entry-points.inspect_ai]``): bedside's model provider and the tasks of
every registered benchmark (each descriptor's ``task_modules``, :mod:`bedside.benchmarks`)."""

import importlib

from inspect_ai.model import ModelAPI, modelapi

from bedside import benchmarks


@modelapi(name="bedside")
def bedside() -> type[ModelAPI]:
    from bedside.providers.api import BedsideAPI

    return BedsideAPI


for _module in benchmarks.task_modules():
    importlib.import_module(_module)
