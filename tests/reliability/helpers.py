"""Helpers for the reliability tests: models with short retry waits, replicated case
files, and the accounting of what a faulty run left in its log.

Two retry layers sit between a bedside call and the loopback server: the ``openai`` client (2
retries by default, with its own 0.5-8 s backoff that honours ``Retry-After``) and Inspect's own
(``GenerateConfig.max_retries`` / ``timeout`` / ``attempt_timeout``; unlimited retries by default,
exponential backoff starting at 3 s, capped at 30 min: ``inspect_ai.model._retry``). There is no
environment variable for Inspect's backoff; a provider sets it with ``ModelAPI.retry_wait()``. The
tests therefore build each model with the ``openai`` client's own retries off (``max_retries=0`` as
a model argument: every retry is then Inspect's, visible in the log) and with ``retry_wait``
overridden on that model's API object (:func:`fast_model`), so a retry waits 50 ms, not 3 s+.

Inspect (0.3.285) records every attempt of a model call as its own ``ModelEvent``: a failed attempt
carries ``error`` (``Error code: 500 - ...``, ``Connection error.``, ``AttemptTimeoutError(...)``),
the attempt that succeeds carries the output. So with the client's retries off, the server's request
count equals the number of model events, and the failed events are the retries.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inspect_ai.log import EvalLog, EvalSample
from inspect_ai.model import Model, get_model
from tenacity import wait_fixed

from bedside.discharge.samples import DEMO_CASES

LOOPBACK = "openai-api/loopback"
RETRY_WAIT = 0.05  # seconds between Inspect's retries in these tests


def fast_model(role: str, *, client_retries: int = 0, wait: float = RETRY_WAIT, **model_args: Any) -> Model:
    """``openai-api/loopback/<role>`` (environment: ``LOOPBACK_BASE_URL``/``LOOPBACK_API_KEY``), not
    memoized, with the ``openai`` client's retries set to ``client_retries`` and Inspect's retry
    backoff shortened to a fixed ``wait``."""
    model = get_model(f"{LOOPBACK}/{role}", memoize=False, max_retries=client_retries, **model_args)
    model.api.retry_wait = lambda: wait_fixed(wait)  # type: ignore[method-assign]
    return model


def demo_records() -> list[dict[str, Any]]:
    return [json.loads(line) for line in DEMO_CASES.read_text().splitlines() if line.strip()]


def replicate_discharge(n: int, path: Path, prefix: str = "rel") -> Path:
    """``n`` DischargeBench cases cycled from the 24 demo cases, each with a new id and a replica
    line in its note (two replicas never send the same prompt)."""
    demo = demo_records()
    with path.open("w") as out:
        for i in range(n):
            case = dict(demo[i % len(demo)])
            source = case["case_id"]
            case["case_id"] = f"{prefix}-{i + 1:03d}"
            first, _, rest = case["discharge_note"].partition("\n")
            case["discharge_note"] = f"{first}\nReplica {i + 1} of {source}.\n{rest}"
            out.write(json.dumps(case) + "\n")
    return path


def model_events(sample: EvalSample) -> list[Any]:
    return [e for e in sample.events if e.event == "model"]


#: how Inspect words a failed attempt, per loopback fault kind
ATTEMPT_ERRORS = {
    "http_500": re.compile(r"Error code: 500\b"),
    "http_503": re.compile(r"Error code: 503\b"),
    "rate_limit": re.compile(r"Error code: 429\b"),
    "connection": re.compile(r"Connection error"),  # reset and truncated
    "timeout": re.compile(r"AttemptTimeoutError|timed out", re.IGNORECASE),
}


@dataclass
class Accounting:
    """What the model events of a log say about the calls that were made."""

    events: int = 0
    failed: Counter[str] = field(default_factory=Counter)  # failed attempts by ATTEMPT_ERRORS kind
    other_failures: list[str] = field(default_factory=list)
    longest_retry_run: int = 0  # most consecutive failed attempts of one call
    exhausted: int = 0  # calls whose every attempt failed (retries ran out)
    model_length: int = 0  # outputs with stop_reason model_length

    @property
    def retries(self) -> int:
        return sum(self.failed.values()) + len(self.other_failures)


def account(log: EvalLog) -> Accounting:
    acc = Accounting()
    for sample in log.samples or []:
        run: dict[tuple[str | None, str], int] = {}
        for e in model_events(sample):
            acc.events += 1
            call = (e.role, _input_key(e))
            if e.error:
                kind = next((k for k, rx in ATTEMPT_ERRORS.items() if rx.search(e.error)), None)
                if kind is None:
                    acc.other_failures.append(e.error)
                else:
                    acc.failed[kind] += 1
                run[call] = run.get(call, 0) + 1
                acc.longest_retry_run = max(acc.longest_retry_run, run[call])
            else:
                run.pop(call, None)
                if e.output is not None and e.output.stop_reason == "model_length":
                    acc.model_length += 1
        acc.exhausted += sum(1 for n in run.values() if n)  # a call that never succeeded
    return acc


def _input_key(event: Any) -> str:
    return "\x00".join(m.text for m in event.input) + f"|{event.config.seed}"


def end_reasons(log: EvalLog, store_key: str = "EncounterStore:end_reason") -> Counter[str]:
    return Counter(s.store.get(store_key, "") for s in log.samples or [])


class ServerProcess:
    """``python -m tests.loopback`` in a child process (its own interpreter: no GIL shared with
    the eval), with a request log; ``stats()`` reads ``GET /stats``. A context manager."""

    def __init__(self, *args: str, request_log: Path | None = None, cwd: Path | None = None) -> None:
        import subprocess
        import sys

        from tests.conftest import REPO

        self.request_log = request_log
        command = [sys.executable, "-m", "tests.loopback", "--port", "0", *args]
        if request_log is not None:
            command += ["--request-log", str(request_log)]
        self.proc = subprocess.Popen(
            command, cwd=cwd or REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        first = self.proc.stdout.readline() if self.proc.stdout else ""
        if "http://" not in first:
            self.proc.kill()
            rest = self.proc.stdout.read() if self.proc.stdout else ""
            raise RuntimeError(f"the loopback server did not start: {first}{rest}")
        self.base_url = first.split()[-1]
        self.root = self.base_url.removesuffix("/v1")

    def stats(self) -> dict[str, Any]:
        import urllib.request

        with urllib.request.urlopen(f"{self.root}/stats", timeout=30) as response:
            return json.loads(response.read())

    def log_lines(self) -> list[dict[str, Any]]:
        if self.request_log is None or not self.request_log.exists():
            return []
        return [json.loads(line) for line in self.request_log.read_text().splitlines() if line.strip()]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except Exception:
                self.proc.kill()
        if self.proc.stdout:
            self.proc.stdout.close()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def env(self) -> dict[str, str]:
        return {
            "LOOPBACK_API_KEY": "reliability-test",
            "LOOPBACK_BASE_URL": self.base_url,
            "BEDSIDE_LOOPBACK_URL": self.base_url,
        }


def event_request_key(event: Any) -> str:
    """The loopback server's request key (as in its request log) of the request a ModelEvent made:
    the server reads the protocol from the call's ``X-Bedside-Protocol`` header (the call's tag)."""
    from bedside.protocols import tag_of
    from tests.loopback.server import Request, request_key

    found = tag_of(event.input)
    request = Request(
        body={},
        messages=event.input,
        protocol=found.name if found else None,
        seed=int(event.config.seed or 0),
        model=event.model.rsplit("/", 1)[-1],
        number=0,
        found_by="",
    )
    return request_key(request).hex()[:16]
