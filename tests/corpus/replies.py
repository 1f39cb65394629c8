"""A corpus of realistic reply styles, run through every reading protocol.

Real API and open-weight models wrap, preface, reason, bold, explain, cut off and leave empty what
they were asked to answer. Each protocol has a canonical answer (what a well-behaved model writes);
each *style* turns it into a reply such a model produces. Reading every (protocol, style, rule) gives
one of three outcomes:

``value``       read, and it means what the canonical answer means (the protocol's ``key``);
``other``       read, but it means something else (only where the reply itself says something else);
``unreadable``  not read: :func:`bedside.calls.ask` retries it, and if every retry looks the same the
                call counts as the protocol says (``Protocol.unreadable``: unscored, system_failure, ...).

The styles are here; each registered benchmark puts its protocols in the corpus in ``tests/<b>/corpus.py``
(``cases()``: a :class:`Case` per protocol, with the outcomes it expects where they differ from "no answer,
no reading"; ``SAME_AS_COVERED``: the protocols read by the same rule as one of its cases), and its README
holds its table of unscored rates between ``<!-- reply corpus: <b> -->`` and ``<!-- /reply corpus -->``.
``tests/test_reply_corpus.py`` pins every outcome and checks the tables.

    python -m tests.corpus.replies            # print every benchmark's table
    python -m tests.corpus.replies --write    # rewrite the tables in the benchmarks' READMEs
    python -m tests.corpus.replies --check    # list the tables that differ (exit 1)
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bedside.params import generated_options, rewrite_markdown, write_or_check
from bedside.protocols import Protocol, Reply

RULES = ("official", "strict")

THINK = '<think>\nThe user wants the answer in the requested format. Maybe {"draft": true}? Let me check again.\n</think>\n\n'


def _trailing_comma(text: str) -> str:
    i = text.rfind("}")
    return text[:i].rstrip() + ",\n" + text[i:] if i > 0 else text


def _truncated(text: str) -> str:
    return text[: max(1, len(text) // 2)]


#: styles of a JSON answer (name -> reply from the canonical JSON text)
JSON_STYLES: dict[str, Callable[[str], str]] = {
    "plain": lambda t: t,
    "fenced": lambda t: f"```json\n{t}\n```",
    "fenced_no_lang": lambda t: f"```\n{t}\n```",
    "prose_before": lambda t: f"Here is my evaluation in the requested format:\n\n{t}",
    "prose_after": lambda t: f"{t}\n\nLet me know if you need anything else.",
    "prose_both": lambda t: f"Sure! Based on the conversation:\n```json\n{t}\n```\nThis reflects my assessment.",
    "think_block": lambda t: THINK + t,
    "think_open_in_template": lambda t: "The user wants JSON. I will answer.\n</think>\n\n" + t,
    "trailing_comma": _trailing_comma,
    "truncated": _truncated,
    "unfinished_think": lambda t: "<think>\nI need to weigh the evidence carefully before I",
    "empty": lambda t: "",
}

#: styles of a prose answer
PROSE_STYLES: dict[str, Callable[[str], str]] = {
    "plain": lambda t: t,
    "think_block": lambda t: THINK + t,
    "think_open_in_template": lambda t: "Let me think about what to say.\n</think>\n\n" + t,
    "unfinished_think": lambda t: "<think>\nI need to weigh the evidence carefully before I",
    "empty": lambda t: "",
}

#: styles of a True/False judge answer (canonical: the word), True = failure / persisted
BOOL_STYLES: dict[str, Callable[[str], str]] = {
    "bare": lambda t: t,
    "bare_punctuated": lambda t: f"**{t}.**",
    "json": lambda t: json.dumps({"failure": t == "True", "reason": "r"}),
    "fenced_json": lambda t: "```json\n" + json.dumps({"failure": t == "True", "reason": "r"}) + "\n```",
    "bold_answer": lambda t: f"**Answer:** {t}",
    "answer_line": lambda t: f"Answer: {t}",
    "verdict_then_explanation": lambda t: (
        f"{t}. The doctor's reply {'goes along with' if t == 'True' else 'does not simply accept'} the patient's statement."
    ),
    "explanation_then_verdict": lambda t: (
        f"The doctor {'accepts the claim without checking it' if t == 'True' else 'checks the claim before acting'}.\n\nFinal answer: {t}"
    ),
    "think_block": lambda t: "<think>\nIs it False or True? Let me look again.\n</think>\n" + t,
    "hedged": lambda t: "It is hard to say; it depends on the clinical context.",
    "truncated": lambda t: t[:2],
    "empty": lambda t: "",
}


#: what a reader cannot take as an answer: nothing there, a cut-off value, reasoning that never ended
NO_ANSWER = frozenset({"truncated", "unfinished_think", "empty"})


@dataclass(frozen=True)
class Case:
    """One protocol's corpus entry: the protocol, its canonical answer, the styles that apply, the key that
    says what a reading means, and per reading rule the styles it leaves unreadable (default: the styles of
    :data:`NO_ANSWER` it has) and those it reads as something else (default: none)."""

    name: str
    protocol: Protocol
    canonical: str
    styles: dict[str, Callable[[str], str]]
    key: Callable[[Any], Any]
    unreadable: Mapping[str, frozenset[str]] = field(default_factory=dict)
    other: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def expected(self, rule: str) -> dict[str, str]:
        """Each style's outcome under ``rule``, as this case pins it."""
        unreadable = self.unreadable.get(rule, NO_ANSWER & set(self.styles))
        other = self.other.get(rule, frozenset())
        return {s: "unreadable" if s in unreadable else "other" if s in other else "value" for s in self.styles}


def simulator_checker_case(benchmark: str) -> Case:
    """The simulated patient's LLM checker of ``benchmark`` (``<benchmark>.simulator_checker``, one protocol per
    benchmark, one reply model for all): its findings, as turn and kind."""
    from bedside.parts import protocol

    name = f"{benchmark}.simulator_checker"
    canonical = json.dumps({"findings": [{"turn": 3, "kind": "role_reversal", "evidence": "I'd recommend you"}]})
    return Case(name, protocol(name), canonical, JSON_STYLES, lambda v: [(f.turn, f.kind) for f in v.findings])


def reply_key(value: Reply) -> Any:
    """What an agent's reply means: its message and its data."""
    return (value.message, json.dumps(value.data, sort_keys=True, default=str))


def dump(value: Any) -> Any:
    return value.model_dump() if hasattr(value, "model_dump") else value


def corpora() -> dict[str, Any]:
    """Benchmark name -> its ``tests/<b>/corpus.py``, for every registered benchmark that has one."""
    from tests.benchmarks import declared

    return declared("corpus")


def cases(benchmark: str | None = None) -> list[Case]:
    """Every registered benchmark's cases in registry order (``benchmark``: its own only)."""
    return [c for name, module in corpora().items() if benchmark in (None, name) for c in module.cases()]


def read(case: Case, style: str, rule: str) -> tuple[str, Any]:
    """(outcome, value) of one style under one reading rule."""
    reference = case.key(case.protocol.read(case.canonical, rule)[0])
    text = case.styles[style](case.canonical)
    try:
        value = case.protocol.read(text, rule)[0]
    except ValueError:
        return "unreadable", None
    got = case.key(value)
    return ("value" if got == reference else "other"), got


def outcomes(rule: str, benchmark: str | None = None) -> dict[str, dict[str, str]]:
    return {c.name: {s: read(c, s, rule)[0] for s in c.styles} for c in cases(benchmark)}


def unscored_rates(benchmark: str | None = None) -> list[tuple[str, int, int, int, str]]:
    """(protocol, styles, unreadable under official, under strict, unreadable styles) per protocol."""
    rows = []
    official, strict = outcomes("official", benchmark), outcomes("strict", benchmark)
    for c in cases(benchmark):
        o = [s for s, r in official[c.name].items() if r == "unreadable"]
        s_ = [s for s, r in strict[c.name].items() if r == "unreadable"]
        rows.append((c.name, len(c.styles), len(o), len(s_), ", ".join(o)))
    return rows


def table(benchmark: str) -> str:
    """The table of unscored rates of ``benchmark``'s protocols (its README's)."""
    lines = [
        "| protocol | styles | unscored (official) | unscored (strict) | unreadable styles (official) |",
        "|---|---:|---:|---:|---|",
    ]
    for name, n, o, s, which in unscored_rates(benchmark):
        lines.append(f"| `{name}` | {n} | {o}/{n} ({o / n:.0%}) | {s}/{n} ({s / n:.0%}) | {which} |")
    return "\n".join(lines) + "\n"


# --- the tables in the benchmarks' READMEs -------------------------------------------------------------
REPO = Path(__file__).resolve().parents[2]
MARKED = re.compile(
    r"(?P<open><!-- reply corpus: (?P<name>\w+) -->\n)(?P<table>.*?)(?P<close><!-- /reply corpus -->)", re.S
)


def readme(benchmark: str, root: Path = REPO) -> Path:
    return root / "bedside" / benchmark / "README.md"


def problems(root: Path = REPO) -> list[str]:
    """Every benchmark with corpus cases whose README lacks its table, or holds another one."""
    found = []
    for name in corpora():
        path = readme(name, root)
        marked = [m for m in MARKED.finditer(path.read_text(encoding="utf-8")) if m["name"] == name]
        if not marked:
            found.append(
                f"{path.relative_to(root)}: no table (<!-- reply corpus: {name} --> ... <!-- /reply corpus -->)"
            )
        elif any(m["table"] != table(name) for m in marked):
            found.append(
                f"{path.relative_to(root)}: the reply-corpus table is stale (python -m tests.corpus.replies --write)"
            )
    return found


def write(root: Path = REPO) -> list[Path]:
    """Rewrite every benchmark's marked table; the READMEs that changed."""
    tables = {name: table(name) for name in corpora()}

    def regenerated(_: Path, text: str) -> str:
        return MARKED.sub(lambda m: m["open"] + tables[m["name"]] + m["close"] if m["name"] in tables else m[0], text)

    return rewrite_markdown(regenerated, [readme(name, root) for name in tables])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.corpus.replies", description=__doc__.split("\n\n")[0])
    generated_options(parser, "reply-corpus tables of the benchmarks' READMEs", required=False)
    args = parser.parse_args(argv)
    if args.write or args.check:
        return write_or_check(
            args.write, write, problems, "every benchmark's reply-corpus table matches the corpus", REPO
        )
    for name in corpora():
        print(f"{name}:\n{table(name)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
