"""Does a discharge note fit the bound models' context windows? Checked when the task is built, before
any model call, so that a note that cannot fit is reported at once instead of ending its session as
a ``system_failure`` (context length) after the first calls.

The note's size is an **estimate**: its characters / :data:`CHARS_PER_TOKEN` (no tokenizer is loaded:
tokenizers are model specific and some download data at run time). A model's window comes from
Inspect's model database (:func:`inspect_ai.model.get_model_info`), or from bedside's own providers'
options (``bedside/scripted -M context_window=N``, ``bedside/local -M n_ctx=N``); a model whose window
is unknown is not checked. Every prompt that carries the note (educator, patient, monitor, the judges
that read it) is longer than the note, so a note above a window is sure to fail there; the check
warns (one line per case and model) and never refuses: the run goes on and the session is counted
as a system failure, as the paper counts context overruns.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable

from inspect_ai.model import Model

logger = logging.getLogger(__name__)

CHARS_PER_TOKEN = 4
LOCAL_DEFAULT_N_CTX = 8192


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def context_window(model: Model) -> int | None:
    """The context window of ``model`` in tokens, or None when unknown."""
    args = getattr(model, "model_args", None) or {}
    name = str(model)
    if name.startswith("bedside/scripted"):
        return int(args["context_window"]) if args.get("context_window") else None
    if name.startswith("bedside/local"):
        return int(args.get("n_ctx") or LOCAL_DEFAULT_N_CTX)
    try:
        from inspect_ai.model import get_model_info

        info = get_model_info(model)
    except Exception:  # an unknown provider or name: nothing to check against
        return None
    return info.context_length if info is not None and info.context_length else None


def bound_models(roles: Iterable[str]) -> dict[str, Model]:
    """The model under test (``educator``) and the bound ``roles`` — only when Inspect has them (a
    task built by ``inspect eval``); empty when the task is built before the eval (Python API)."""
    from inspect_ai.model import get_model, model_roles

    try:
        out = {"educator": get_model()}
    except Exception:
        return {}
    bound = model_roles()
    for role in roles:
        model = bound.get(role)
        if isinstance(model, Model):
            out[role] = model
        elif isinstance(model, list):  # a judge panel: every judge's window
            out.update({role if i == 0 else f"{role} (judge {i + 1})": m for i, m in enumerate(model)})
    return out


def oversized_notes(notes: Iterable[tuple[str, str]], models: dict[str, Model]) -> list[str]:
    """One line per (case, role) whose note (estimated tokens) exceeds that role's model window."""
    windows = {role: (model, context_window(model)) for role, model in models.items()}
    lines = []
    for case_id, note in notes:
        tokens = estimate_tokens(note)
        for role, (model, window) in windows.items():
            if window is not None and tokens > window:
                lines.append(
                    f"case {case_id}: the discharge note is about {tokens:,} tokens (estimated at "
                    f"{CHARS_PER_TOKEN} characters per token), more than the context window of the "
                    f"{role} ({model}: {window:,} tokens); its session will end as a system failure"
                )
    return lines


def warn_oversized_notes(notes: Iterable[tuple[str, str]], roles: Iterable[str]) -> list[str]:
    """Log :func:`oversized_notes` for the bound models as warnings; returns the lines."""
    lines = oversized_notes(notes, bound_models(roles))
    for line in lines:
        logger.warning(line)
    return lines
