"""Inspect entry point (``[project.entry-points.inspect_ai]``): bedside's model provider, the tasks of
every registered benchmark (each descriptor's ``task_modules``, :mod:`bedside.benchmarks`) and the hook of
the loopback test channel (:mod:`bedside.testing.channel`; registered only when ``BEDSIDE_LOOPBACK_URL``
names a test server)."""

import importlib

from inspect_ai.model import ModelAPI, modelapi

from bedside import benchmarks
from bedside.testing import channel


@modelapi(name="bedside")
def bedside() -> type[ModelAPI]:
    from bedside.providers.api import BedsideAPI

    return BedsideAPI


for _module in benchmarks.task_modules():
    importlib.import_module(_module)


if channel.channel_urls():
    channel.register()
