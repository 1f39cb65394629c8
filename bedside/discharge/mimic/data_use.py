"""The PhysioNet data-use guard of the case extraction: MIMIC-IV-Note text goes only to a local model
(or to an endpoint the user declares zero-retention), checked before any model call."""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from bedside.params import SetupError

if TYPE_CHECKING:
    from inspect_ai.model import Model

# ---------------------------------------------------------------------------------------------
# the data-use guard (PhysioNet Credentialed Health Data Use Agreement)

#: ``DischargeCase.provenance`` of the cases ``bedside build-cases`` writes (data under the agreement)
MIMIC_PROVENANCE = "MIMIC-IV-Note"

#: providers whose model runs in this process or on a server the user operates
LOCAL_MODELS = ("bedside/local", "bedside/scripted")
SELF_HOSTED_PREFIXES = ("vllm/", "hf/", "llama-cpp-python/", "ollama/")


class DataUseRefused(SetupError):
    """The extraction would send MIMIC note text to an endpoint that is not known to keep it local."""


def is_loopback(url: str | None) -> bool:
    """True for an http(s) URL whose host is localhost, 127.0.0.0/8 or ::1."""
    if not url:
        return False
    host = urlparse(url if "://" in url else f"http://{url}").hostname
    if host is None:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


#: how a run declares zero retention (the end of a refusal)
DECLARE = "-T zero_retention=true (bedside build-cases: --zero-retention)"


def endpoint_problem(model_name: str, base_url: str | None, zero_retention: bool, declare: str = DECLARE) -> str | None:
    """Why ``model_name`` at ``base_url`` may not receive note text (None: it may); ``declare``: how the user
    declares zero retention where the refusal is met."""
    if zero_retention:
        return None
    if model_name in LOCAL_MODELS or is_loopback(base_url):
        return None
    if model_name.startswith(SELF_HOSTED_PREFIXES) and not base_url:  # in-process or a server it starts here
        return None
    where = f"base URL {base_url}" if base_url else "the provider's public API"
    return (
        f"Refusing to send MIMIC-IV-Note text to {model_name} ({where}): it is not a local endpoint. "
        "The PhysioNet Credentialed Health Data Use Agreement (v1.5.0) forbids sharing the data with "
        "third parties, and an online model API may retain or review what it is sent; the paper ran "
        "its extraction under a zero-data-retention agreement. Use a local model (bedside/local, "
        "hf/..., or vllm/..., ollama/..., llama-cpp-python/..., openai-api/... with a base URL on "
        "localhost, 127.0.0.1 or ::1; a self-hosted server elsewhere counts as remote), or, only if your "
        "endpoint has zero data retention, say so "
        f"explicitly with {declare}."
    )


def model_identity(model: Model) -> tuple[str, str | None]:
    return str(model), getattr(model.api, "base_url", None)


def check_endpoint(model: Model, zero_retention: bool) -> None:
    """Raise :class:`DataUseRefused` unless ``model`` is local or ``zero_retention`` was declared."""
    name, base_url = model_identity(model)
    problem = endpoint_problem(name, base_url, zero_retention)
    if problem:
        raise DataUseRefused(problem)
