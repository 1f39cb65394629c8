"""The factual-consistency embeddings: a text's vector depends on the texts embedded beside it only in its
last digits, and the samples of one event loop waiting for embeddings are embedded together, each getting
its own."""

from __future__ import annotations

import math
import threading
import time

import anyio
import numpy as np
from bedside.scorers.discharge import text_metrics

#: above what the padding of a batch moves a vector by (~1e-7 measured) and 10 times below the golden
#: check's tolerance for a cosine (1e-5)
SAME = 1e-6

TEXTS = [
    "Metoprolol 25 mg by mouth twice daily",
    "Apixaban 5 mg twice a day",
    "Return if you have chest pain, shortness of breath or fainting.",
    "Not applicable",
    "Follow up with cardiology in two weeks; bring your blood pressure log.",
    "Apixaban 5 mg twice a day",
]


def uncached_embed():
    """The real :func:`text_metrics.embed`, not the test session's memo of it (tests/conftest.py)."""
    return getattr(text_metrics.embed, "__wrapped__", text_metrics.embed)


def test_a_text_embeds_the_same_alone_and_among_others():
    embed = uncached_embed()
    together = embed(TEXTS)
    alone = np.stack([embed([text])[0] for text in TEXTS])
    assert together.shape == (len(TEXTS), text_metrics.embedder().get_embedding_dimension())
    assert np.abs(together - alone).max() <= SAME
    assert np.array_equal(together[1], together[5])  # a repeated text: one vector
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-6)


def test_embed_agrees_with_sentence_transformers_encode():
    embed = uncached_embed()
    direct = text_metrics.embedder().encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True)
    assert np.abs(embed(TEXTS) - direct).max() <= SAME


class Recording:
    """A stand-in for :func:`text_metrics.embed` that records each call's texts and answers slowly
    (in the worker thread), so that requests arrive while one is running."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.calls: list[list[str]] = []
        self.fail_on = fail_on
        self.lock = threading.Lock()

    def __call__(self, texts: list[str]) -> np.ndarray:
        with self.lock:
            self.calls.append(list(texts))
        time.sleep(0.2)
        if self.fail_on in texts:
            raise RuntimeError(f"cannot embed {self.fail_on!r}")
        return np.array([[float(len(text)), 1.0] for text in texts])


def pairs_of(k: int) -> list[tuple[str, str]]:
    return [(f"note answer {k}", "x" * (k + 1)), (f"second {k}", "y")]


def cosines_of(k: int) -> list[float]:
    """What :class:`Recording`'s vectors give for ``pairs_of(k)``."""
    return [len(a) * len(b) + 1.0 for a, b in pairs_of(k)]


class Interrupted(BaseException):
    pass


def samples(delays: dict[int, float], cancel_after: dict[int, float] | None = None) -> dict[int, object]:
    """Sample k asks for the cosines of ``pairs_of(k)`` after ``delays[k]`` s, all in one event loop; one
    with a time in ``cancel_after`` is cancelled then. k -> its cosines, or its error's name and text."""
    outcomes: dict[int, object] = {}

    async def sample(k: int) -> None:
        with anyio.move_on_after((cancel_after or {}).get(k, math.inf)):
            await anyio.sleep(delays[k])
            try:
                outcomes[k] = await text_metrics.cosine_async(pairs_of(k))
            except (RuntimeError, Interrupted) as error:
                outcomes[k] = f"{type(error).__name__}: {error}"

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for k in delays:
                tg.start_soon(sample, k)

    anyio.run(main)
    return outcomes


def test_waiting_samples_are_embedded_together_and_each_gets_its_own(monkeypatch):
    recording = Recording()
    monkeypatch.setattr(text_metrics, "embed", recording)
    # the first starts an embedding; the rest arrive during it
    outcomes = samples({k: 0.01 * (k > 0) for k in range(6)})
    assert [len(call) for call in recording.calls] == [4, 20]  # the first alone, the five others in one call
    assert outcomes == {k: cosines_of(k) for k in range(6)}


def test_at_most_pool_requests_samples_are_embedded_in_one_call(monkeypatch):
    recording = Recording()
    monkeypatch.setattr(text_metrics, "embed", recording)
    monkeypatch.setattr(text_metrics, "POOL_REQUESTS", 3)
    outcomes = samples({k: 0.01 * k for k in range(6)})  # they wait in this order
    first_of_each = [call[0] for call in recording.calls]
    assert first_of_each == ["note answer 0", "note answer 1", "note answer 4"]  # 1 alone, then 3, then 2
    assert [len(call) // 4 for call in recording.calls] == [1, 3, 2]
    assert outcomes == {k: cosines_of(k) for k in range(6)}


def test_an_embedding_error_is_each_waiting_sample_s_and_the_pool_goes_on(monkeypatch):
    monkeypatch.setattr(text_metrics, "embed", Recording(fail_on="second 2"))
    # 1 waits with 2, in the failing call (0.2 to 0.4 s); 3 comes after it
    outcomes = samples({0: 0, 1: 0.01, 2: 0.01, 3: 0.5})
    assert outcomes[1] == outcomes[2] == "RuntimeError: cannot embed 'second 2'"
    assert outcomes[0] == cosines_of(0) and outcomes[3] == cosines_of(3)


def test_a_sample_cancelled_while_its_embedding_runs_leaves_the_others_theirs(monkeypatch):
    recording = Recording()
    monkeypatch.setattr(text_metrics, "embed", recording)
    # 0: the first call (0 to 0.2 s); 1 waits first, so starts the second call, with 2 in it (0.2 to 0.4 s),
    # and is cancelled during it; 3 arrives during it: the third call
    outcomes = samples({0: 0, 1: 0.05, 2: 0.1, 3: 0.3}, cancel_after={1: 0.35})
    assert [len(call) for call in recording.calls] == [4, 8, 4]  # nothing embedded twice
    assert sorted(outcomes) == [0, 1, 2, 3]  # the thread's work is not abandoned (anyio's to_thread)
    assert outcomes[2] == cosines_of(2)


def test_an_interrupted_embedding_leaves_the_others_in_it_waiting_for_the_next(monkeypatch):
    recording = Recording()
    interrupted = []

    def embed(texts: list[str]) -> np.ndarray:
        if "second 1" in texts and not interrupted:
            interrupted.append(texts)
            raise Interrupted("interrupted")
        return recording(texts)

    monkeypatch.setattr(text_metrics, "embed", embed)
    outcomes = samples({0: 0, 1: 0.05, 2: 0.1})  # 1 starts the second call, with 2 in it: interrupted
    assert len(interrupted[0]) == 8
    assert [len(call) for call in recording.calls] == [4, 4]  # 2 embedded again, in a call of its own
    assert outcomes == {0: cosines_of(0), 1: "Interrupted: interrupted", 2: cosines_of(2)}


def test_each_event_loop_has_its_own_pool(monkeypatch):
    monkeypatch.setattr(text_metrics, "embed", Recording())

    async def main() -> list[float]:
        return await text_metrics.cosine_async(pairs_of(0))

    assert anyio.run(main) == anyio.run(main) == [13 * 1 + 1.0, 8 * 1 + 1.0]
