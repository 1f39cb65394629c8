"""``python -m tests.loopback`` (from the repository's root): the loopback server's command line."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from bedside import benchmarks
from tests.loopback.requests import FAULT_KINDS, Fault
from tests.loopback.server import LoopbackServer


def _option(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def _fault(text: str) -> Fault:
    try:
        return Fault.parse(text)
    except ValueError as ex:
        raise argparse.ArgumentTypeError(str(ex)) from None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m tests.loopback",
        description="Serve bedside's scripted roles as an OpenAI-compatible endpoint on 127.0.0.1.",
    )
    parser.add_argument("--port", type=int, default=8765, help="port (0: any free port; default 8765)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each reply (default 0)")
    parser.add_argument("--jitter", type=float, default=0.0, help="± uniform seconds around --latency (default 0)")
    parser.add_argument(
        "--option",
        type=_option,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a bedside/scripted behaviour option for every role (repeatable)",
    )
    parser.add_argument(
        "--fault",
        type=_fault,
        action="append",
        default=[],
        metavar="KINDS[:RATE[:MODELS[:PROTOCOLS]]]",
        help=(
            "a fault rule (repeatable), e.g. http_500,reset:0.1, not_json:1::<benchmark>.<role> or batch_expired:0.5; "
            f"kinds: {', '.join(FAULT_KINDS)}"
        ),
    )
    parser.add_argument("--fault-seed", type=int, default=0, help="seed of the fault draws (default 0)")
    parser.add_argument("--hang", type=float, default=5.0, help="seconds a 'timeout' fault stalls (default 5)")
    parser.add_argument("--retry-after", type=float, default=1.0, help="Retry-After seconds of a 429 (default 1)")
    parser.add_argument(
        "--context-limit",
        type=int,
        default=None,
        help="estimated prompt tokens above which a 400 context_length_exceeded is returned",
    )
    parser.add_argument("--request-log", default=None, metavar="FILE", help="append one JSON line per request to FILE")
    parser.add_argument(
        "--batch-delay",
        type=float,
        default=0.0,
        help="seconds from a batch's creation (Batch API) until it ends (default 0: at its first poll)",
    )
    parser.add_argument(
        "--no-json-schema",
        action="store_true",
        help="reject JSON-schema response formats like llama-cpp-python's server (500)",
    )
    args = parser.parse_args(argv)
    try:
        server = LoopbackServer(
            port=args.port,
            latency=args.latency,
            jitter=args.jitter,
            options=dict(args.option),
            faults=args.fault,
            fault_seed=args.fault_seed,
            hang=args.hang,
            retry_after=args.retry_after,
            context_limit=args.context_limit,
            request_log=args.request_log,
            json_schema=not args.no_json_schema,
            batch_delay=args.batch_delay,
        )
    except ValueError as ex:
        parser.error(str(ex))
    with server:
        print(f"bedside loopback server: {server.base_url}", flush=True)
        print("point Inspect's openai-api provider at it with:", flush=True)
        for key, value in server.env.items():
            print(f"  export {key}={value}", flush=True)
        first = benchmarks.all_benchmarks()[0]
        roles = " ".join(f"--model-role {role}=openai-api/loopback/{role}" for role in first.roles)
        print(
            f"  inspect eval bedside/{first.tasks[0]} --model openai-api/loopback/{first.subject_role} {roles}",
            flush=True,
        )
        print(f"counters: GET http://{server.host}:{server.port}/stats", flush=True)
        for rule in server.fault_rules:
            print(
                f"fault: {','.join(rule.kinds)} at rate {rule.rate} (models: {sorted(rule.models) or 'any'}, "
                f"protocols: {sorted(rule.protocols) or 'any'}; seed {server.fault_seed})",
                flush=True,
            )
        print("Ctrl-C to stop.", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
        finally:
            print(f"served {server.total_calls} requests: {dict(server.calls)}", flush=True)
            if server.faults:
                print(f"faults injected: {dict(server.faults)}", flush=True)


if __name__ == "__main__":
    main()
