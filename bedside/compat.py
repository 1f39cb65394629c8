"""Every name bedside takes from Inspect's private modules (``inspect_ai.*._*``), in one place.

Inspect's public API (``inspect_ai``, ``inspect_ai.model``, ``inspect_ai.log``, ...) does not offer
these; they may move or change in any Inspect release. pyproject pins ``inspect-ai``; when the pin
moves, this file and its counterpart for the tests, ``tests/compat.py``, are the list to check
(``tests/test_compat.py`` fails on a private Inspect import anywhere else in the repository). Each
entry says who uses it and for what.
"""

from __future__ import annotations

from typing import Any

# What `inspect score` uses to rebuild a log's scorers (bedside.reporting.rescore).
from inspect_ai._eval.score import resolve_scorers

# `-M key=value` parsing exactly as `inspect eval` does it (the `bedside build-cases` command's -M).
from inspect_ai._util.config import parse_cli_args

# Inspect's error for a bad set-up: printed without a traceback by the CLI (bedside.params's
# BadParameter, the data loaders' errors; tests check the type).
from inspect_ai._util.error import PrerequisiteError

# What `inspect_ai.score()` runs before it scores (Inspect's hooks), for bedside rescore, which judges several
# logs at once with `inspect_ai.score_async` (bedside.reporting.rescore).
from inspect_ai._util.platform import platform_init

# Registry plumbing for scorers re-created from a log (scorers/rescore.py): the public
# `inspect_ai.util` has RegistryInfo and registry_info but neither registry_add nor registry_lookup.
from inspect_ai._util.registry import RegistryInfo, registry_add, registry_info, registry_lookup

# Inspect's `.eval` recorder and how it stores a finished sample (long texts as attachments), to write a log
# sample by sample as a run writes it (start, samples, summaries, reductions, header) without holding its samples:
# bedside.log_writer (bedside rescore, bench/readers.py's sweep-sized logs).
from inspect_ai.log._condense import condense_sample
from inspect_ai.log._recorders.eval import EvalRecorder

# The running sample, and Inspect's record that it waits on a person (`bedside/human`).
from inspect_ai.log._samples import awaiting_human, sample_active

# Inspect's cache key (bedside.calls.forget_cached drops the cache entry of an unreadable reply)
# and the epoch of the running sample (bedside.providers.scripted's only_epochs option).
from inspect_ai.model._cache import CacheEntry, epoch
from inspect_ai.model._cache import _cache_entry_path as cache_entry_path

# The eval's generate config, for a role model's inherited options (bedside.roles).
from inspect_ai.model._generate_config import active_generate_config

# The model under test of the eval being set up (bedside.structured, the case-building task's data-use guard).
from inspect_ai.model._model import active_model

# A role's model config as written into the log (bedside.reporting.rescore).
from inspect_ai.model._model_config import model_to_model_config

# The running sample's state (the `bedside/replay` engine answers per sample; `bedside/human` shows its
# case; the scripted model's scripts read the sample's metadata, bedside.providers.scripts).
from inspect_ai.solver._task_state import sample_state


def parse_model_role_cli_args(args: Any) -> Any:
    """``--model-role`` parsing exactly as the ``inspect`` CLI does it (``bedside scale``'s ``--model-role``; the
    tests of role options). Imported on use: Inspect's CLI package is not loaded by ``import inspect_ai``."""
    from inspect_ai._cli.util import parse_model_role_cli_args as parse

    return parse(args)


def eval_resolve_tasks(*args: Any) -> Any:
    """The tasks of an eval built as ``eval()`` builds them: models and roles bound, each task made once per
    model (bedside.scale.plan takes a run's case sets from it). Imported on use, as above."""
    from inspect_ai._eval.eval import eval_resolve_tasks as resolve

    return resolve(*args)


def resolving_eval_tasks() -> bool:
    """Whether Inspect is building the tasks of an eval right now (its ``eval_resolve_tasks`` is on the
    call stack): only then is ``model_roles()`` the roles of that eval, since Inspect leaves the roles
    of the last eval or ``score()`` set in the context afterwards (bedside.roles.check_roles)."""
    import sys
    from types import FrameType

    from inspect_ai._eval.eval import eval_resolve_tasks

    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code is eval_resolve_tasks.__code__:
            return True
        frame = frame.f_back
    return False


def openai_batch_names() -> tuple[type, type, type, Any, Any]:
    """Inspect's OpenAI batcher and what a subclass of it handles (bedside.batch): ``OpenAIBatcher``, the
    ``Batch`` and ``BatchRequest`` records of its base ``Batcher``, ``run_in_background`` (how the batcher
    starts its worker) and ``log_batch`` (where the batcher prints its status lines). Imported on use: they
    load the ``openai`` SDK (seconds), which a process that calls no OpenAI model never needs."""
    from inspect_ai._util.background import run_in_background
    from inspect_ai.model._providers._openai_batch import OpenAIBatcher
    from inspect_ai.model._providers.util.batch import Batch, BatchRequest
    from inspect_ai.model._providers.util.batch_log import log_batch

    return OpenAIBatcher, Batch, BatchRequest, run_in_background, log_batch


def openai_provider_module() -> Any:
    """Inspect's ``openai/`` provider module if this process loaded it (None otherwise), whose name
    ``OpenAIBatcher`` builds a model's batcher (bedside.batch.install sets it)."""
    import sys

    return sys.modules.get("inspect_ai.model._providers.openai")


def collect_task(name: str, kind: str | None) -> int | None:
    """The 1-based index of a ``collect()`` task from its span, or None for any other span:
    ``inspect_ai.util.collect`` runs its i-th coroutine in ``span(f"task-{i}", type="task")`` (which of a
    collect's calls a scripted role is answering, bedside.providers.scripts)."""
    if kind != "task" or not name.startswith("task-") or not name[5:].isdigit():
        return None
    return int(name[5:])


__all__ = [
    "CacheEntry",
    "EvalRecorder",
    "PrerequisiteError",
    "RegistryInfo",
    "active_generate_config",
    "awaiting_human",
    "active_model",
    "cache_entry_path",
    "collect_task",
    "condense_sample",
    "epoch",
    "eval_resolve_tasks",
    "model_to_model_config",
    "openai_batch_names",
    "openai_provider_module",
    "parse_cli_args",
    "parse_model_role_cli_args",
    "platform_init",
    "registry_add",
    "registry_info",
    "registry_lookup",
    "resolving_eval_tasks",
    "resolve_scorers",
    "sample_active",
    "sample_state",
]
