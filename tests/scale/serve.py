"""``python -m tests.scale.serve REQUEST_LOG [LATENCY]``: the loopback server, counting the requests it is
answering at once per model name (``GET /stats``: ``in_flight_peak``), with a request log. Prints its base
URL on the first line, then serves until terminated.

The count is what a connection budget limits: every request holds one HTTP connection of the client from
its start to its reply, so the most requests in flight for one model is the most connections the run held
open to that model at once, over every process of the run."""

from __future__ import annotations

import json
import signal
import sys
import threading
from collections import Counter
from typing import Any

from tests.loopback.server import LoopbackServer


class CountingServer(LoopbackServer):
    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.in_flight: Counter[str] = Counter()
        self.in_flight_peak: Counter[str] = Counter()

    async def _chat_completions(self, http):  # type: ignore[no-untyped-def]
        try:
            model = str((await http.json()).get("model", ""))  # aiohttp keeps the body for the handler
        except (ValueError, json.JSONDecodeError):
            model = ""
        with self._lock:
            self.in_flight[model] += 1
            self.in_flight_peak[model] = max(self.in_flight_peak[model], self.in_flight[model])
        try:
            return await super()._chat_completions(http)
        finally:
            with self._lock:
                self.in_flight[model] -= 1

    def stats(self) -> dict[str, Any]:
        out = super().stats()
        with self._lock:
            out["in_flight_peak"] = dict(self.in_flight_peak)
        return out


def main() -> None:
    latency = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with CountingServer(port=0, latency=latency, request_log=sys.argv[1]) as server:
        print(server.base_url, flush=True)
        stop.wait()


if __name__ == "__main__":
    main()
