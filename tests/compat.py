"""Every name the tests take from Inspect's private modules (``inspect_ai.*._*``), in one place: the
counterpart of ``bedside/compat.py`` for what only the tests use. ``tests/test_compat.py`` fails on a
private Inspect import anywhere but these two files. Each entry says who uses it and for what.
"""

from __future__ import annotations

from typing import Any

# The value Inspect reports for a metric when every sample is unscored (tests/test_metrics.py).
from inspect_ai._eval.task.results import empty_metric_value

# `--model-role` parsing as the `inspect` CLI does it (the tests of role options): the product's, which
# `bedside scale` uses.
from bedside.compat import parse_model_role_cli_args


def inspect_cli() -> Any:
    """The ``inspect`` command (its click group), to parse and run documented commands in one process
    (tests/docs_worker.py). Imported on use, as above."""
    from inspect_ai._cli.main import inspect

    return inspect


def forget_models() -> None:
    """Drop the models Inspect memoizes for the rest of the process (by model string, not by the
    environment) and the vLLM servers it has resolved (one per model name, for the process), so that a
    command run after another one in the same process points its models at its own addresses, as a
    new ``inspect`` process would (tests/docs_worker.py runs every documented command in one process).
    No server is stopped: vLLM servers that Inspect started itself are not touched by tests."""
    from inspect_ai.model._model import _models
    from inspect_ai.model._providers._vllm_lora import _vllm_servers

    _models.clear()
    for name, server in list(_vllm_servers.items()):
        if server.process is None:
            del _vllm_servers[name]


__all__ = ["empty_metric_value", "forget_models", "inspect_cli", "parse_model_role_cli_args"]
