"""Runs the documented commands (:mod:`tests.docs_commands`) in this one process, block by block:
``python -m tests.docs_worker --out RESULTS.json [--match REGEX] [--shard K/N]``. One process for all of them (Inspect
and bedside are imported once; each eval then takes about a second), with what a new shell would give
each command restored before it: its environment, its working directory (the block's folder, holding
links to ``tasks/`` and ``datasets/``) and no model that Inspect memoized for an earlier command.

**Addresses.** Every address a command gives a model (a base URL in a role mapping's ``model_args``,
``--model-base-url``, ``<SERVICE>_BASE_URL`` / ``VLLM_BASE_URL`` in its environment) gets its own
loopback server (:class:`tests.loopback.server.LoopbackServer`, which plays every bedside role with
the scripted replies), the same one for that address in every command; the URL in the command is
replaced by the server's. A native API model (``openai/gpt-5.5``, ``anthropic/...``) is first checked
as written, with a placeholder key, up to the model call (``--limit 0``: Inspect parses the command,
builds every model, loads the task and runs its set-up, and calls no model); it then runs as
``openai-api/<provider>/<model>`` against a loopback server standing in for the provider's API
(``<PROVIDER>_BASE_URL``, as the ``openai-api`` provider reads it). ``bedside/local`` (llama.cpp, built
by ``make local``, tested by ``make test-local``) runs as ``bedside/scripted``.

After each eval the log's model events (but those Inspect's cache answered) are counted per model
and compared with what each server answered: every call of the model under test and of every role
reached the server of the address the command gave it, and no other server; a bound role with an
address made at least one call. ``--limit 1`` and ``--display none`` are added unless the command sets
them (``--limit`` is the only change to what an eval does). The servers play CPB-Bench's doctor as one
that goes along with the patient (:data:`OPTIONS`), so that ``-T turns=`` continuations (and their
``patient`` role) run.

**Inputs.** What a command reads and no earlier command of its block wrote is a stand-in
(:func:`stand_ins`, :func:`bedside_inputs`): the shipped demo sets for the MedSP1000 scenarios and
rubrics, synthetic CPB-Bench data and a recorded run in the released format, a synthetic MIMIC-shaped
copy (tests/discharge/mimic/fixture.py), and for ``bedside`` commands a small scripted DischargeBench log wherever
they name a log or a log folder, annotations written for it, the shipped price table. Counts of the
user's data that the small log cannot hold (``annotate export --cases 70``) are capped at its size
(:data:`CAPPED`). Every stand-in a command got is listed in its result.

The result of each command (what ran, how, whether it passed and why not) is one JSON record.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import os
import re
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from glob import glob
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import yaml

from tests.docs_commands import (
    IN_PROCESS,
    REPO,
    SERVED,
    Command,
    classify,
    documented_commands,
    not_run,
    provider,
    service_env,
)

PLACEHOLDER_KEY = "docs-test-key"
#: the scripted behaviour of every loopback server (:class:`Servers`)
OPTIONS = {"doctor_style": "accommodating"}
URL = re.compile(r"https?://[^\s'\",}\]]+")


# --- the models of an eval command and their addresses -------------------------------------------
@dataclass
class ModelRef:
    role: str | None  # None: the model under test
    name: str  # as the command writes it
    address: str | None  # the server it must reach ("gpu-host:8001", "api:openai"); None: in-process/none


def address_key(url: str) -> str:
    parsed = urlparse(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    return f"{parsed.hostname}:{port}"


def address_of(name: str, env: dict[str, str], base_url: str | None = None, args: dict | None = None) -> str | None:
    """The address ``name`` is sent to (module docstring); None: in-process, or none given."""
    args = args or {}
    kind = provider(name)
    if kind in IN_PROCESS:
        return None
    url = base_url or args.get("base_url")
    if not url and kind == "vllm" and args.get("port"):
        url = f"http://localhost:{args['port']}/v1"
    if not url and kind in SERVED:
        url = env.get(service_env(name, "BASE_URL") or "")
    if url:
        return address_key(str(url))
    return None if kind in SERVED else f"api:{kind}"


def inspect_params(argv: list[str]) -> dict[str, Any]:
    """``inspect <sub-command> ...`` parsed by Inspect's own command-line parser (click)."""
    import click

    from tests.compat import inspect_cli

    group = inspect_cli()
    command = group.commands.get(argv[1]) if len(argv) > 1 else None
    if command is None:
        raise ValueError(f"inspect has no sub-command {argv[1:2]}")
    try:
        with command.make_context(argv[1], list(argv[2:])) as ctx:
            return dict(ctx.params)
    except click.exceptions.Exit:
        return {}
    except click.ClickException as error:
        raise ValueError(f"Inspect's parser rejects it: {error.format_message()}") from None


def role_values(model_role: tuple[str, ...] | None) -> dict[str, Any]:
    """``--model-role`` values as Inspect reads them before it builds the models (name, list or mapping)."""
    from bedside.compat import parse_cli_args

    return dict(parse_cli_args(model_role, force_str=False)) if model_role else {}


def eval_models(command: Command) -> list[ModelRef]:
    """The models of an ``inspect eval``/``eval-set`` command and the address the command gives each."""
    from bedside.compat import parse_cli_args

    params = inspect_params(command.argv)
    refs = []
    args = dict(parse_cli_args(params.get("m")))
    for name in [m.strip() for m in (params.get("model") or "").split(",") if m.strip()]:
        refs.append(ModelRef(None, name, address_of(name, command.env, params.get("model_base_url"), args)))
    for role, value in role_values(params.get("model_role")).items():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, dict):
                name = str(item.get("model"))
                refs.append(ModelRef(role, name, address_of(name, command.env, args=item.get("model_args") or {})))
            else:
                refs.append(ModelRef(role, str(item), address_of(str(item), command.env)))
    return refs


def native(name: str) -> bool:
    """A model of a provider's own API (its key, its address): not in-process, not a server's."""
    return provider(name) not in IN_PROCESS | SERVED


# --- the loopback servers -------------------------------------------------------------------------
class Servers:
    """One loopback server per address, for the whole run; all of them are bedside's test channel.
    Each plays CPB-Bench's doctor as one that goes along with the patient (:data:`OPTIONS`), so that
    every case is a failure and ``-T turns=`` continues it with the ``patient`` role; the other
    benchmarks' roles are the scripted defaults."""

    def __init__(self) -> None:
        self.by_address: dict[str, Any] = {}

    def url(self, address: str) -> str:
        from tests.loopback.server import LoopbackServer

        if address not in self.by_address:
            self.by_address[address] = LoopbackServer(options=OPTIONS).start()
        return self.by_address[address].base_url

    @property
    def channel(self) -> str:
        return ",".join(s.base_url for s in self.by_address.values())

    def reset(self) -> None:
        for server in self.by_address.values():
            server.reset()

    def answered(self) -> dict[str, Counter[str]]:
        """Requests answered since the last reset, per address and model name (the request's ``model``)."""
        found: dict[str, Counter[str]] = {}
        for address, server in self.by_address.items():
            counts: Counter[str] = Counter()
            for (model, _protocol), n in server.routes.items():
                counts[model] += n
            if counts:
                found[address] = counts
        return found

    def stop(self) -> None:
        for server in self.by_address.values():
            server.stop()


def request_model(name: str) -> str:
    """The ``model`` an OpenAI-compatible request of ``name`` carries (its provider and service dropped)."""
    parts = name.split("/")
    return "/".join(parts[2:] if parts[0] == "openai-api" else parts[1:])


# --- stand-in inputs -------------------------------------------------------------------------------
class Inputs:
    """The stand-ins of one block, built on first use in the block's scratch folder."""

    def __init__(self, scratch: Path, small_log: Path, block: list[Command]) -> None:
        self.scratch, self.small_log, self.block = scratch, small_log, block
        self.built: dict[str, str] = {}
        self.notes: list[str] = []  # what the running command got instead of the user's data

    def get(self, name: str, build: Callable[[Path], Path]) -> str:
        if name not in self.built:
            self.built[name] = str(build(self.scratch / "stand-ins" / name))
        self.notes.append(f"stand-in: {name}")
        return self.built[name]

    def released(self) -> list[str]:
        """Released CPB-Bench model names the block's commands ask a recorded run for."""
        names = []
        for command in self.block:
            text = command.text
            names += re.findall(r"released[=:]\s*([\w.\-]+)", text)
            if command.program == "bedside replay-check" and "--model" in command.argv:
                names.append(command.argv[command.argv.index("--model") + 1])
        return sorted(set(names)) or ["gpt-4"]


def medsp_rubrics(root: Path) -> Path:
    """The demo scenarios' frozen rubrics in one folder, as the release's ``rubrics/`` is, with a
    ``subset.json`` naming them MedSP1000-Q100 (so that ``-T subset=q100`` finds one)."""
    root.mkdir(parents=True)
    demo = REPO / "datasets" / "medsp" / "demo"
    keys = []
    for rubric in sorted(demo.glob("*/*_scenario*.json")):
        shutil.copy(rubric, root / rubric.name)
        case, scenario = rubric.stem.rsplit("_", 1)
        keys.append(f"{case}/{scenario}")
    subset = {"name": "MedSP1000-Q100", "description": "stand-in", "n_scenarios": len(keys), "scenarios": keys}
    (root / "subset.json").write_text(json.dumps(subset))
    return root


def cpb_data(root: Path) -> Path:
    from tests.cpb.synthetic import write_data

    return write_data(root)


def cpb_clone(inputs: Inputs) -> Callable[[Path], Path]:
    """A recorded run in the released format for every case of the stand-in CPB-Bench data, each
    recorded verdict the one bedside reads from the recorded judge reply (so replay-check agrees)."""

    def build(root: Path) -> Path:
        from bedside.cpb.replay import sample_key
        from bedside.cpb.samples import control_dataset, positive_dataset
        from tests.cpb.test_replay import CAREFUL, control, positive

        data = inputs.get("cpb-bench_data", cpb_data)
        single = root / "evaluators_single" / "output_single_turn"
        negative = root / "Negative_cases" / "negative_generate" / "evaluator" / "output"
        single.mkdir(parents=True)
        negative.mkdir(parents=True)
        positives: dict[str, list[dict]] = {}
        for sample in positive_dataset(data):
            dataset, dialog, turn, category = sample_key(sample.metadata or {})
            positives.setdefault(dataset, []).append(positive(dataset, dialog, turn, category, CAREFUL, "False", False))
        controls: dict[str, list[dict]] = {}
        for sample in control_dataset(data):
            dataset, dialog, turn, _ = sample_key(sample.metadata or {})
            controls.setdefault(dataset, []).append(control(dataset, dialog, turn, CAREFUL, "NOT OVERREACTED", ""))
        for name in inputs.released():
            (single / f"{name}_detailed_results.json").write_text(json.dumps(positives))
            for dataset, records in controls.items():
                (negative / f"{name}_{dataset}_negative_detailed_results.json").write_text(json.dumps(records))
        return root

    return build


def mimic(part: str) -> Callable[[Path], Path]:
    def build(root: Path) -> Path:
        from tests.discharge.mimic.fixture import write_fixture

        fixture = root.parent / "mimic-fixture"
        if not fixture.exists():
            write_fixture(fixture)
        return fixture / ("mimic-iv" if part == "hosp" else "mimic-iv-note")

    return build


def stand_ins(inputs: Inputs) -> list[tuple[str, str, Callable[[Path], Path]]]:
    """(pattern of a path the docs name, stand-in name, builder). Paths of the user's data only."""
    return [
        (r"^/path/to/scenarios$", "medsp-scenarios", lambda _: REPO / "datasets" / "medsp" / "demo"),
        (r"^/path/to/release/rubrics$", "medsp-rubrics", medsp_rubrics),
        (r"^/path/to/cpb-bench_data$", "cpb-bench_data", cpb_data),
        (r"^/path/to/cpb-bench-clone$", "cpb-bench-clone", cpb_clone(inputs)),
        (r"^physionet\.org/files/mimiciv/3\.1$", "mimic-iv", mimic("hosp")),
        (r"^physionet\.org/files/mimic-iv-note/2\.2$", "mimic-iv-note", mimic("note")),
    ]


#: sessions in the small log (:func:`small_log`)
SESSIONS = 4
#: (sub-command, option, cap): counts of the user's data, capped at what the small log holds
CAPPED = (("annotate", "--cases", SESSIONS), ("annotate", "--shared", SESSIONS // 2))


#: a path of the user's data the docs name (``/path/to/...``, a PhysioNet download)
USER_PATH = re.compile(r"(?<![\w./-])(?:/path/to/|physionet\.org/)[\w./-]*[\w]")


def substitute_paths(argv: list[str], inputs: Inputs) -> list[str]:
    """Every path of the user's data (:data:`USER_PATH`: in a word, a ``-T name=value``, a role
    mapping) replaced by its stand-in (:func:`stand_ins`); one without a stand-in is an error."""
    patterns = stand_ins(inputs)

    def replace(match: re.Match[str]) -> str:
        for pattern, name, build in patterns:
            if re.match(pattern, match[0]):
                return inputs.get(name, build)
        raise ValueError(f"no stand-in for {match[0]} (add one to tests/docs_worker.py's stand_ins)")

    return [USER_PATH.sub(replace, word) for word in argv]


def small_log(folder: Path) -> Path:
    """A small scripted DischargeBench log (4 sessions, every role bound, every scorer)."""
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import get_model

    from bedside.tasks.discharge import discharge

    def scripted():  # noqa: ANN202
        return get_model("bedside/scripted", memoize=False)

    [log] = inspect_eval(
        discharge(),
        model=scripted(),
        model_roles={r: scripted() for r in ("patient", "monitor", "grader")},
        limit=SESSIONS,
        log_dir=str(folder),
        display="none",
    )
    assert log.status == "success", log.error
    return Path(log.location)


def fill_template(template: Path, out: Path) -> None:
    """``annotations_template.csv`` with every ``value`` filled in (the first value of its ``scale``),
    as the physicians would return it."""
    with template.open(newline="") as handle:
        comments = [line for line in handle if line.startswith("#")]
    with template.open(newline="") as handle:
        rows = list(csv.DictReader(line for line in handle if not line.startswith("#")))
    for row in rows:
        row["value"] = re.split(r"[/|,;]| to |–|-", row.get("scale") or "1")[0].strip() or "1"
    with out.open("w", newline="") as handle:
        handle.writelines(comments)
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def physician_annotations(logs: list[str], out: Path) -> None:
    """Two physicians' ratings of the conversation-quality axes for the sessions of ``logs``."""
    from inspect_ai.log import read_eval_log

    rows = []
    for path in logs:
        for sample in read_eval_log(path).samples or []:
            for annotator, shift in (("phys_a", 0), ("phys_b", 1)):
                for i, item in enumerate(("naturalness", "responsiveness", "clarity", "clinical_relevance")):
                    rows.append([sample.id, annotator, item, 1 + (i + shift + len(str(sample.id))) % 5])
    with out.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["case_id", "annotator", "item", "value"])
        writer.writerows(rows)


def bedside_inputs(argv: list[str], inputs: Inputs, cwd: Path) -> list[str]:
    """A ``bedside`` command's inputs (its positional log paths, ``--annotations``, ``--prices``) that do
    not exist yet: the small log, annotations for it, the shipped price table; globs expanded;
    :data:`CAPPED` counts capped."""
    from bedside.cli import parser

    argv = list(argv)
    sub = argv[1] if len(argv) > 1 else ""
    for i, word in enumerate(argv):
        if any(c in word for c in "*?") and not word.startswith("-"):
            matches = sorted(glob(word, root_dir=cwd))
            if not matches:
                raise ValueError(f"{word} matches no file (no earlier command of the block wrote one)")
            argv[i : i + 1] = [" ".join(matches)]  # joined for now, split below
    argv = [w for word in argv for w in (word.split(" ") if " " in word and not word.startswith("{") else [word])]
    positional = log_inputs(parser(), argv[1:])
    for path in positional:
        target = cwd / path
        if target.exists():
            continue
        if path.endswith(".eval"):
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(inputs.small_log, target)
        else:
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy(inputs.small_log, target / inputs.small_log.name)
        inputs.notes.append(f"stand-in: the small log as {path}")
    for option, build in (("--annotations", "annotations"), ("--prices", "prices")):
        if option not in argv:
            continue
        target = cwd / argv[argv.index(option) + 1]
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        inputs.notes.append(f"stand-in: {option} {target.name}")
        if build == "prices":
            shutil.copy(REPO / "bedside" / "reporting" / "prices.yaml", target)
        else:
            templates = sorted(cwd.glob("**/annotations_template.csv"))
            if templates:
                fill_template(templates[0], target)
            else:
                logs = [str(cwd / p) for p in positional]
                physician_annotations([str(p) for p in expand_logs(logs)], target)
    for name, option, cap in CAPPED:
        if sub == name and option in argv:
            i = argv.index(option) + 1
            capped = str(min(int(argv[i]), cap))
            if capped != argv[i]:
                inputs.notes.append(f"capped: {option} {argv[i]} -> {capped} (the small log holds {SESSIONS} sessions)")
            argv[i] = capped
    return argv


def log_inputs(top: argparse.ArgumentParser, args: list[str]) -> list[str]:
    """The logs (or log folders) a ``bedside`` command reads: its sub-command's positional arguments
    and ``--log``."""
    namespace, _ = top.parse_known_args(args)
    parser, dests = top, ["log"]
    while True:
        actions = [a for a in parser._actions if not a.option_strings and a.dest != "help"]
        subs = [a for a in actions if isinstance(a, argparse._SubParsersAction)]
        dests += [a.dest for a in actions if a not in subs]
        if not subs:
            break
        parser = subs[0].choices[getattr(namespace, subs[0].dest)]
    found: list[str] = []
    for dest in dests:
        value = getattr(namespace, dest, None)
        found += value if isinstance(value, list) else [value] if isinstance(value, str) else []
    return found


def expand_logs(paths: list[str]) -> list[Path]:
    found = []
    for path in map(Path, paths):
        found += sorted(path.glob("**/*.eval")) if path.is_dir() else [path]
    return found


# --- running one command ---------------------------------------------------------------------------
@dataclass
class Result:
    source: str
    text: str
    how: str  # "run", "run (stand-ins for ...)", "parsed", "dry-run", "not run"
    ok: bool
    detail: str = ""
    seconds: float = 0.0
    checks: list[str] = field(default_factory=list)
    docs: str = ""  # the folder of Markdown files it came from


@contextlib.contextmanager
def environment(env: dict[str, str], cwd: Path) -> Iterator[None]:
    saved, before = dict(os.environ), os.getcwd()
    os.environ.update(env)
    os.environ["PWD"] = str(cwd)
    os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(before)
        os.environ.clear()
        os.environ.update(saved)


def rewrite_models(argv: list[str], rewrite: Callable[[str], str]) -> list[str]:
    """``argv`` with every model name of ``--model``, ``--model-role`` (names, lists, mappings) and
    bedside's ``--grader`` passed through ``rewrite``."""
    out = list(argv)
    for i, word in enumerate(argv[:-1]):
        value = argv[i + 1]
        if word in ("--model", "--grader") and argv[:2] != ["bedside", "replay-check"]:
            out[i + 1] = ",".join(rewrite(m.strip()) for m in value.split(","))
        elif word == "--model-role":
            role, _, spec = value.partition("=")
            parsed = yaml.safe_load(spec) if spec.strip().startswith(("{", "[")) else None
            if isinstance(parsed, dict):
                parsed["model"] = rewrite(str(parsed["model"]))
                out[i + 1] = f"{role}={json.dumps(parsed)}"
            else:
                out[i + 1] = f"{role}=" + ",".join(rewrite(m.strip()) for m in spec.split(","))
    return out


def set_option(argv: list[str], option: str, value: str) -> list[str]:
    out = list(argv)
    if option in out:
        out[out.index(option) + 1] = value
        return out
    return [*out, option, value]


def invoke_inspect(argv: list[str]) -> None:
    from tests.compat import forget_models, inspect_cli

    forget_models()
    try:
        inspect_cli().main(args=argv[1:], prog_name="inspect", standalone_mode=False)
    except SystemExit as done:
        if done.code not in (0, None):
            raise RuntimeError(f"inspect exited with status {done.code}") from None


def new_logs(folder: Path, before: set[Path]) -> list[Path]:
    return sorted(set(folder.glob("**/*.eval")) - before) if folder.exists() else []


def check_addresses(
    refs: list[ModelRef], logs: list[Path], servers: Servers, rewrite: Callable[[str], str]
) -> list[str]:
    """Problems (empty: none): each log's model events, counted per model, against what each server
    answered; every model with an address made at least one call."""
    from inspect_ai.log import read_eval_log

    expected: dict[str, Counter[str]] = {}
    problems = []
    for path in logs:
        log = read_eval_log(str(path))
        if log.status != "success":
            problems.append(f"{path.name}: status {log.status}: {log.error.message if log.error else ''}")
            continue
        calls: Counter[tuple[str | None, str]] = Counter()
        for sample in log.samples or []:
            # a reply from Inspect's generation cache (the judges' note-only calls) sent no request
            calls.update((e.role, e.model) for e in sample.events if e.event == "model" and e.cache != "read")
        under_test = [r for r in refs if r.role is None and rewrite(r.name) == log.eval.model]
        bound = [r for r in refs if r.role is not None]
        for ref in under_test + bound:
            name = rewrite(ref.name)
            made = sum(n for (role, model), n in calls.items() if role == ref.role and model == name)
            who = f"role {ref.role}" if ref.role else "the model under test"
            if ref.address is None:
                continue
            if made == 0:
                problems.append(f"{path.name}: {who} ({ref.name}) made no call")
            expected.setdefault(ref.address, Counter())[request_model(name)] += made
    answered = servers.answered()
    for address in sorted(set(expected) | set(answered)):
        want, got = expected.get(address, Counter()), answered.get(address, Counter())
        if want != got:
            problems.append(f"server {address}: expected calls {dict(want)}, answered {dict(got)}")
    return problems


def stand_in(name: str) -> str:
    """The model that runs for ``name``: a native API model as ``openai-api/<provider>/...`` (against its
    stand-in server), ``bedside/local`` as ``bedside/scripted``, every other model as written."""
    if name == "bedside/local":
        return "bedside/scripted"
    return f"openai-api/{name}" if native(name) else name


def model_names(command: Command) -> list[str]:
    """Every model a command names (``inspect eval``'s models and roles; bedside's ``--grader``, ``--model``)."""
    if command.program.startswith("inspect eval"):
        return [ref.name for ref in eval_models(command)]
    found: list[str] = []
    rewrite_models(command.argv, lambda name: found.append(name) or name)
    return found


def api_env(block: list[Command], servers: Servers) -> dict[str, str]:
    """The user's environment for the native API providers the block's commands use: each provider's
    base URL pointed at its stand-in server and a placeholder key, for every command of the block (a
    later command, e.g. ``bedside rescore``, may build a model an earlier one ran)."""
    env = {}
    for command in block:
        with contextlib.suppress(ValueError):
            for name in model_names(command):
                if native(name):
                    env[service_env(name, "BASE_URL") or ""] = servers.url(f"api:{provider(name)}")
                    env[service_env(name, "API_KEY") or ""] = PLACEHOLDER_KEY
    return env


def with_servers(values: list[str], servers: Servers) -> list[str]:
    """Every URL the docs wrote replaced by the URL of its address's loopback server."""
    return [URL.sub(lambda m: servers.url(address_key(m[0])), v) for v in values]


def run_eval(
    command: Command, argv: list[str], cwd: Path, servers: Servers, inputs: Inputs, env: dict[str, str]
) -> Result:
    result = Result(command.source, command.text, "run", ok=False)
    refs = eval_models(command)
    for ref in refs:
        if ref.address is not None:
            servers.url(ref.address)
    argv = with_servers(argv, servers)
    natives = sorted({provider(r.name) for r in refs if native(r.name)})
    params = inspect_params(argv)
    if natives:  # as written, with placeholder keys, up to the model call
        accept = set_option(argv, "--limit", "0")
        accept = set_option(set_option(accept, "--log-dir", tempfile.mkdtemp(dir=inputs.scratch)), "--display", "none")
        with environment({**env, "BEDSIDE_LOOPBACK_URL": servers.channel}, cwd):
            invoke_inspect(accept)
        result.how = f"run ({', '.join(natives)}: checked as written up to the model call, run against a stand-in API)"
    run = rewrite_models(argv, stand_in)
    limited = params.get("limit") is None and not params.get("sample_id")
    if params.get("display") is None:
        run = [*run, "--display", "none"]
    if limited:
        run = [*run, "--limit", "1"]
    log_dir = cwd / (params.get("log_dir") or "logs")
    before = set(log_dir.glob("**/*.eval")) if log_dir.exists() else set()
    servers.reset()
    with environment({**env, "BEDSIDE_LOOPBACK_URL": servers.channel}, cwd):
        invoke_inspect(run)
    logs = new_logs(log_dir, before)
    if not logs:
        result.detail = f"no log was written to {log_dir}"
        return result
    problems = check_addresses(refs, logs, servers, stand_in)
    routed = sorted({f"{r.role or 'model under test'} -> {r.address}" for r in refs if r.address})
    result.checks.append(f"{len(logs)} log(s); calls per address: {', '.join(routed) or 'in-process only'}")
    result.ok = not problems
    result.detail = "; ".join(problems)
    return result


#: ``bedside`` commands whose ``--model`` / ``--model-role`` only name a price (they call no model)
PRICED_ONLY = ("bedside estimate",)


def run_bedside(
    command: Command, argv: list[str], cwd: Path, servers: Servers, inputs: Inputs, env: dict[str, str]
) -> Result:
    from bedside.cli import main as bedside
    from tests.compat import forget_models

    result = Result(command.source, command.text, "run", ok=False)
    argv = with_servers(argv, servers)
    if argv[0] in ("python", "python3"):
        argv = ["bedside", *argv[3:]]
    named = {address_key(u) for word in [*command.argv, *command.env.values()] for u in URL.findall(word)}
    named |= {f"api:{provider(n)}" for n in model_names(command) if native(n)}
    if command.program not in PRICED_ONLY:  # a price is looked up under the name the command gives
        argv = rewrite_models(argv, stand_in)
    with environment({**env, "BEDSIDE_LOOPBACK_URL": servers.channel}, cwd):
        argv = bedside_inputs(argv, inputs, cwd)
        forget_models()
        servers.reset()
        code = bedside(argv[1:])
    if code != 0:
        result.detail = f"bedside exited with status {code}"
        return result
    answered = set(servers.answered())
    if answered - named:
        result.detail = f"calls reached {sorted(answered - named)}, which the command does not name"
    elif named and model_names(command) and not answered and command.program not in PRICED_ONLY:
        result.detail = f"its models made no call (expected at {sorted(named)})"
    else:
        result.ok = True
        if answered:
            result.checks.append(f"calls answered at {', '.join(sorted(answered))}")
    return result


def run_not_run(command: Command, check: str) -> Result:
    if check.startswith("unlisted"):
        why = check.removeprefix("unlisted: ")
        detail = f"cannot run here ({why}) and is not listed in NOT_RUN (tests/docs_commands.py)"
        return Result(command.source, command.text, "not run", False, detail)
    entry = not_run(command)
    reason = entry.reason if entry else ""
    if check == "target":
        makefile = (REPO / "Makefile").read_text()
        missing = [t for t in command.argv[1:] if not re.search(rf"^{re.escape(t)}:", makefile, re.M)]
        detail = f"the Makefile has no target {missing}" if missing else f"the Makefile defines it; not run: {reason}"
        return Result(command.source, command.text, "target", not missing, detail)
    if check == "parsed":
        try:
            inspect_params(command.argv)
        except ValueError as error:
            return Result(command.source, command.text, "parsed", False, str(error))
        return Result(command.source, command.text, "parsed", True, f"parsed; not run: {reason}")
    return Result(command.source, command.text, "not run", True, reason)


def plain(message: str) -> str:
    """An error message without the rich markup Inspect gives some (``[bold]QWEN_API_KEY[/bold]``)."""
    from rich.errors import MarkupError
    from rich.text import Text

    try:
        return Text.from_markup(message).plain
    except MarkupError:
        return message


def run_block(block: list[Command], servers: Servers, small: Path, root: Path, done: dict[str, str]) -> list[Result]:
    """Run the commands of one block in order, in a fresh folder; ``done``: texts already run (and passed)."""
    cwd = Path(tempfile.mkdtemp(prefix="block-", dir=root))
    for name in ("tasks", "datasets"):
        (cwd / name).symlink_to(REPO / name)
    inputs = Inputs(cwd / ".scratch", small, block)
    inputs.scratch.mkdir()
    env = api_env(block, servers)
    results = []
    for command in block:
        start = time.perf_counter()
        how = classify(command)
        output = io.StringIO()
        try:
            with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
                if how != "run":
                    result = run_not_run(command, how)
                elif command.text in done:  # the same command, with stand-ins, passed already
                    result = Result(command.source, command.text, f"same as {done[command.text]}", True)
                else:
                    argv = substitute_paths(command.argv, inputs)
                    written = with_servers(substitute_paths(list(command.env.values()), inputs), servers)
                    command_env = {**env, **dict(zip(command.env, written))}
                    run = run_eval if command.program.startswith("inspect") else run_bedside
                    result = run(command, argv, cwd, servers, inputs, command_env)
        except Exception as error:
            result = Result(command.source, command.text, how, False, f"{type(error).__name__}: {plain(str(error))}")
            result.checks.append(traceback.format_exc()[-3000:])
        result.checks += list(dict.fromkeys(inputs.notes))
        inputs.notes.clear()
        if not result.ok:
            result.checks.append("output: " + output.getvalue()[-3000:])
        elif how == "run" and command.text not in done:
            done[command.text] = command.source
        result.seconds = round(time.perf_counter() - start, 2)
        results.append(result)
    return results


def shard(commands: list[Command], k: int, n: int) -> list[Command]:
    """The commands of the blocks in share ``k`` of ``n``: whole blocks (a block's commands run in order, in
    one folder), each given to the share with the fewest commands so far, in the docs' order, so that
    ``n`` workers finish at about the same time; but a block with a command that an earlier block of a
    share already has (the same text: ``bedside build-cases --help`` shows the README's command) goes
    to that share, where it passes as the same command (:func:`run_block`) instead of running twice,
    unless that share would then hold more than the largest block above the smallest share. The shares
    of 0..n-1 together are ``commands``."""
    blocks: dict[int, list[Command]] = {}
    for command in commands:
        blocks.setdefault(command.block, []).append(command)
    largest = max((len(block) for block in blocks.values()), default=0)
    sizes = [0] * n
    texts: list[set[str]] = [set() for _ in range(n)]
    mine: list[Command] = []
    for block in blocks.values():
        share = sizes.index(min(sizes))
        for other in range(n):
            fits = sizes[other] + len(block) - min(sizes) <= largest
            if fits and any(c.text in texts[other] for c in block if classify(c) == "run"):
                share = other
                break
        sizes[share] += len(block)
        texts[share].update(c.text for c in block)
        if share == k:
            mine += block
    return mine


def main(argv: list[str] | None = None) -> int:
    options = argparse.ArgumentParser(prog="python -m tests.docs_worker")
    options.add_argument("--out", required=True)
    options.add_argument(
        "--docs", action="append", type=Path, help="a folder of Markdown files (default: the repository)"
    )
    options.add_argument("--match", default=None, help="only commands whose text matches this regular expression")
    options.add_argument(
        "--shard", default="0/1", help="K/N: only the blocks of the repository's docs in share K of N (see shard)"
    )
    options.add_argument("--extra", action="append", type=Path, default=[], help="a folder of Markdown run whole")
    args = options.parse_args(argv)
    k, n = (int(part) for part in args.shard.split("/"))
    by_block: dict[tuple[Path, int], list[Command]] = {}
    for docs in args.docs or [REPO]:
        for command in shard(documented_commands(docs.resolve()), k, n):
            if args.match is None or re.search(args.match, command.text):
                by_block.setdefault((docs.resolve(), command.block), []).append(command)
    for docs in args.extra:
        for command in documented_commands(docs.resolve()):
            by_block.setdefault((docs.resolve(), command.block), []).append(command)
    root = Path(tempfile.mkdtemp(prefix="bedside-docs-"))
    os.environ["INSPECT_CACHE_DIR"] = str(root / "inspect-cache")  # neither the user's cache, nor into it
    servers = Servers()
    results: list[Result] = []
    start = time.perf_counter()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            small = small_log(root / "small-log")
        done: dict[str, str] = {}
        for (docs, _), block in by_block.items():
            for result in run_block(block, servers, small, root, done):
                result.docs = str(docs)
                results.append(result)
    finally:
        servers.stop()
        shutil.rmtree(root, ignore_errors=True)
    Path(args.out).write_text(
        json.dumps(
            {"seconds": round(time.perf_counter() - start, 1), "results": [asdict(r) for r in results]}, indent=1
        )
    )
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
