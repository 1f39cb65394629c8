"""The local engine's speed: the model calls of one demo session, through ``bedside/local`` as it was
(one llama.cpp context with a 1 GB prompt-state RAM cache, no flash attention) and as it is (a
context per conversation, flash attention), in one process, alternating, reported as a ratio.

    .venv/bin/python bench/local_engine.py [--rounds 1] [--max-tokens 32]

The workload is the exact sequence of requests of the demo's session (educator, monitor, patient,
the comprehension answers and every judge), taken from a ``bedside/scripted`` run of the demo's
configuration (one case, ``min_turns=2``, ``max_turns=4``, ``monitor_layout=prefix_cache``) so that
it is the same for both engines; each request's reply is capped at ``--max-tokens`` so that the
comparison is about reading prompts, where the two engines differ. Needs ``make local``.
"""

from __future__ import annotations

import argparse
import tempfile
import time

from inspect_ai import eval
from inspect_ai.log import read_eval_log
from inspect_ai.model import GenerateConfig, get_model

from bedside.providers import local
from bedside.providers.local import LocalEngine
from bedside.tasks.discharge import discharge

BEFORE = {"slots": 1, "cache_mb": 1024, "flash_attn": False}
AFTER: dict[str, object] = {}


def workload() -> list[list]:
    scripted = get_model("bedside/scripted", memoize=False)
    with tempfile.TemporaryDirectory() as tmp:
        [log] = eval(
            discharge(min_turns=2, max_turns=4, monitor_layout="prefix_cache"),
            model=scripted,
            model_roles={"patient": scripted, "monitor": scripted, "grader": scripted},
            limit=1,
            log_dir=tmp,
            display="none",
        )
        sample = read_eval_log(log.location, resolve_attachments=True).samples[0]
    calls = sorted((e for e in sample.events if e.event == "model"), key=lambda e: e.timestamp)
    return [e.input for e in calls]


def run(options: dict, requests: list[list], max_tokens: int) -> float:
    local._pools.clear()  # a fresh engine: nothing processed yet
    engine = LocalEngine(**options)  # type: ignore[arg-type]
    start = time.perf_counter()
    for messages in requests:
        engine._complete(engine.request(messages, GenerateConfig(max_tokens=max_tokens, temperature=0.0)))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--max-tokens", type=int, default=32)
    args = parser.parse_args()
    requests = workload()
    tokens = sum(sum(len(m.text) for m in r) for r in requests) // 4
    print(f"{len(requests)} requests, about {tokens} prompt tokens in all; replies capped at {args.max_tokens} tokens")
    ratios = []
    for i in range(args.rounds):
        before = run(BEFORE, requests, args.max_tokens)
        after = run(AFTER, requests, args.max_tokens)
        ratios.append(before / after)
        print(f"round {i + 1}: before {before:.1f} s, after {after:.1f} s, before/after {before / after:.2f}")
    print(f"median before/after: {sorted(ratios)[len(ratios) // 2]:.2f} (n={len(ratios)} rounds)")


if __name__ == "__main__":
    main()
