"""Judge calls through a provider's batch API: what bedside adds to Inspect's batch mode for OpenAI.

Inspect 0.3.285 sends a model's calls through OpenAI's Batch API when the model's generate config has
``batch`` (``--model-role 'grader={model: openai/..., config: {batch: ...}}'``, ``bedside rescore --batch``):
its ``OpenAIBatcher`` gathers the calls, uploads them as a JSONL file, creates a batch, polls it every
``tick`` seconds and hands each call its line of the result files. What it does not do, and a judge pass
of thousands of calls needs, :class:`Batcher` (a subclass, used for every OpenAI model of a process that
makes bedside's calls, :func:`install`) adds:

1. **Failed lines read as OpenAI writes them.** OpenAI reports a request that failed inside a batch as a
   line of the error file whose ``response`` has the HTTP status and the error body (``{"response":
   {"status_code": 500, "body": {"error": ...}}, "error": null}``), and a request the batch never ran
   (``expired``, ``cancelled``) as ``{"response": null, "error": {"code": "batch_expired", ...}}``. Inspect
   reads the first as a completion (a validation error that throws away every result of the batch) and
   the second as an HTTP status (a ``TypeError`` that stops the scoring run). Here the first is the
   provider's error for that call (a 5xx or 429 is retried in a later batch by Inspect's retry, a 400 such
   as ``context_length_exceeded`` is the model's answer), the second a 503 for that call (retried: it never
   ran), and every other line of the batch keeps its result. A call whose retries run out fails, and the
   judge counts it unscored, as for a live call.
2. **A journal of the batches sent.** Each batch is written down when it is created (its id and, per
   request, the custom id and a hash of the request) in ``bedside-batches/`` beside Inspect's generation
   cache (``INSPECT_CACHE_DIR``, default ``~/.cache/inspect_ai``), and removed once its results are
   downloaded. A re-run of the same judge pass after an interruption asks for the same requests: each one
   that a batch still on record holds is not sent again but collected from that batch (polled until it
   ends, then its result line taken). With Inspect's cache on for the grader (``config: {cache: true}``;
   ``bedside rescore --batch`` sets it), the calls whose results had come back are answered from the cache,
   so a re-run sends only the calls that no batch holds. A batch the provider no longer knows (404: another
   account, or deleted) is forgotten and its requests are sent anew. Results of a collected batch that no
   call of the re-run asked for are dropped. (A batch created in the instant between the provider's answer
   and its record, when the process dies there, is not on record: its calls are sent again.)
3. **No transcript left in the provider's file storage.** OpenAI keeps an uploaded batch file, and the
   result files, until they are deleted; Inspect deletes none. Once a batch's results are in, its input and
   result files are deleted (best effort: a failure is printed with the batch's status lines).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
from inspect_ai.model import cache_path
from openai import NOT_GIVEN, NotFoundError

from bedside.compat import openai_batch_names

OpenAIBatcher, InspectBatch, InspectBatchRequest, run_in_background, log_batch = openai_batch_names()

#: the journal's folder, beside Inspect's generation cache (module docstring)
JOURNAL_DIR = "bedside-batches"
#: what a request line that a batch never ran (expired, cancelled) becomes: retried, as a 503
NOT_RUN_STATUS = 503


def journal_dir() -> Path:
    """Where batches are written down: ``bedside-batches/`` beside Inspect's generation cache."""
    return cache_path().parent / JOURNAL_DIR


def request_key(request: dict[str, Any], scope: str) -> str:
    """What identifies a request across runs: its body as it goes into the batch's input file (without
    the headers, which hold a per-call id), and the endpoint it goes to (``scope``)."""
    body = {k: v for k, v in request.items() if k != "extra_headers" and v is not NOT_GIVEN}
    text = json.dumps(body, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(f"{scope}\n{text}".encode()).hexdigest()


class Journal:
    """The batches sent to one endpoint (``scope``: base URL and endpoint) and not yet collected, one file
    per batch in ``folder`` (written whole, then renamed: a reader never sees half a record)."""

    def __init__(self, folder: Path, scope: str) -> None:
        self.folder, self.scope = folder, scope
        self.created: dict[str, int] = {}  # batch id -> creation time, of the batches on record
        self._holding: dict[str, list[tuple[str, str]]] = {}  # request key -> [(batch id, custom id)]
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            try:
                record = json.loads(path.read_text())
            except (OSError, ValueError):
                continue  # a record being written by another process, or not one of ours
            if record.get("scope") != scope:
                continue
            self.created[record["batch"]] = int(record.get("created", time.time()))
            for custom_id, key in record["requests"]:
                self._holding.setdefault(key, []).append((record["batch"], custom_id))

    def _path(self, batch_id: str) -> Path:
        return self.folder / f"{hashlib.sha256(f'{self.scope}|{batch_id}'.encode()).hexdigest()[:32]}.json"

    def sent(self, batch_id: str, requests: list[tuple[str, str]]) -> None:
        """Write down a batch just created: (custom id, request key) per request."""
        self.folder.mkdir(parents=True, exist_ok=True)
        record = {"scope": self.scope, "batch": batch_id, "created": int(time.time()), "requests": requests}
        path = self._path(batch_id)
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(json.dumps(record))
        temporary.replace(path)

    def claim(self, key: str) -> tuple[str, str] | None:
        """(batch id, custom id) of a batch on record that holds this request (taken: a second identical
        request gets the next one), or None."""
        holders = self._holding.get(key)
        return holders.pop(0) if holders else None

    def forget(self, batch_id: str) -> None:
        """The batch's results are in (or it is gone): remove its record and its requests."""
        self._path(batch_id).unlink(missing_ok=True)
        self.created.pop(batch_id, None)
        for key, holders in list(self._holding.items()):
            holders[:] = [h for h in holders if h[0] != batch_id]
            if not holders:
                del self._holding[key]


class Batcher(OpenAIBatcher):  # type: ignore[misc,valid-type]
    """Inspect's ``OpenAIBatcher`` that reads failed lines as OpenAI writes them and keeps a journal of
    its batches (module docstring)."""

    _is_batch_worker_running: bool  # Inspect's Batcher's: whether its worker runs

    def __init__(
        self, client: Any, config: Any, retry_config: Any, response_cls: Any, endpoint: str = "/v1/chat/completions"
    ):
        super().__init__(client, config, retry_config, response_cls, endpoint=endpoint)
        self.scope = f"{str(client.base_url).rstrip('/')} {endpoint}"
        self.journal = Journal(journal_dir(), self.scope)
        self._adopted: set[str] = set()  # batches of an earlier run this batcher collects
        self._unclaimed: dict[str, Any] = {}  # custom id -> result, of adopted batches' requests not asked for yet

    # -- reading result lines ---------------------------------------------------------------------------
    def _parse_jsonl_line(self, line_data: dict[str, Any]) -> tuple[str, Any]:
        line = dict(line_data)
        custom_id = line.pop("custom_id", "")
        if not custom_id:
            raise ValueError(f"Unable to find custom_id in batched request result. {line}")
        error, response = line.get("error"), line.get("response") or {}
        if error is None:
            status = int(response.get("status_code", 200))
            if status == 200:
                return custom_id, self._response_cls.model_validate(response["body"])
            return custom_id, self._status_error(status, response.get("body"))
        code, message = error.get("code"), error.get("message") or "the batch did not run this request"
        if isinstance(code, int):  # a provider that reports an HTTP status here
            return custom_id, self._status_error(code, {"error": {"message": message, "code": code}})
        body = {"error": {"message": f"[{code}] {message}", "type": "batch_error", "code": code}}
        return custom_id, self._status_error(NOT_RUN_STATUS, body)

    def _status_error(self, status: int, body: Any) -> Exception:
        response = httpx2.Response(status_code=status, json=body, request=httpx2.Request("POST", self.endpoint))
        return self._openai_client._make_status_error_from_response(response)

    # -- the journal ------------------------------------------------------------------------------------
    async def generate_for_request(self, request: dict[str, Any]) -> Any:
        held = self.journal.claim(request_key(request, self.scope))
        if held is None:
            return await super().generate_for_request(request)
        batch_id, custom_id = held
        if custom_id in self._unclaimed:
            return _result(self._unclaimed.pop(custom_id))
        batch = self._inflight_batches.get(batch_id)
        if batch is None and batch_id in self._adopted:  # collected already, without this request
            return await super().generate_for_request(request)
        if batch is None:
            batch = InspectBatch(id=batch_id, requests={}, created_at=self.journal.created.get(batch_id, 0))
            self._inflight_batches[batch_id] = batch
            self._adopted.add(batch_id)
        send, receive = anyio.create_memory_object_stream[Any](1)
        batch.requests[custom_id] = InspectBatchRequest(request=request, result_stream=send, custom_id=custom_id)
        if not self._is_batch_worker_running:
            self._is_batch_worker_running = True
            run_in_background(self._batch_worker)
        return _result(await receive.receive())

    async def _create_batch(self, batch: list[Any]) -> str:
        keys = [request_key(r.request, self.scope) for r in batch]  # before the headers are taken off
        batch_id = await super()._create_batch(batch)
        self.journal.sent(batch_id, [(r.custom_id, key) for r, key in zip(batch, keys, strict=True)])
        return batch_id

    async def _check_batch(self, batch: Any) -> Any:
        try:
            return await super()._check_batch(batch)
        except NotFoundError:
            if batch.id not in self._adopted:
                raise
        # a batch of an earlier run that the provider does not know: send its requests anew
        self.journal.forget(batch.id)
        del self._inflight_batches[batch.id]
        for waiting in batch.requests.values():
            self._intake_queue.append(InspectBatchRequest(request=waiting.request, result_stream=waiting.result_stream))
        return None

    async def _resolve_inflight_batch(self, batch: Any, results: dict[str, Any]) -> None:
        asked = {custom_id: r for custom_id, r in results.items() if custom_id in batch.requests}
        self._unclaimed.update({c: r for c, r in results.items() if c not in batch.requests})
        await self._delete_files(batch.id)  # first: once the calls have their results, the run may end
        self.journal.forget(batch.id)
        await super()._resolve_inflight_batch(batch, asked)

    async def _delete_files(self, batch_id: str) -> None:
        """Delete the batch's input file (the transcripts) and its result files from the provider's storage,
        where they would otherwise stay until deleted: the results are in the log now. Best effort: a
        failure is logged, the run goes on."""
        try:
            info = await self._openai_client.batches.retrieve(batch_id)
            for file_id in (info.input_file_id, info.output_file_id, info.error_file_id):
                if file_id:
                    await self._openai_client.files.delete(file_id)
        except Exception as error:  # the results are delivered already; a file left behind is only reported
            log_batch(f"Batch {batch_id}: its files could not be deleted from the provider's storage: {error}")

    async def _fail_and_cleanup_inflight_batch(self, description: str, batch: Any, error: Exception) -> None:
        self.journal.forget(batch.id)
        await super()._fail_and_cleanup_inflight_batch(description, batch, error)


def _result(value: Any) -> Any:
    if isinstance(value, Exception):
        raise value
    return value


def install(module: Any) -> None:
    """Make :class:`Batcher` the batcher of the OpenAI models of this process (``module``: Inspect's
    ``openai/`` provider module, which builds a model's batcher at its first batched call from its name
    ``OpenAIBatcher``)."""
    if module.OpenAIBatcher is not Batcher:
        module.OpenAIBatcher = Batcher
