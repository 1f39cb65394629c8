"""Judge panels: the ``grader`` role bound to several models, and how their answers combine.

Bind a panel with Inspect's list form of a role (``--model-role grader=a,b,c``, or a YAML list whose
entries may carry ``model_args`` and a config); a role bound to one model is one judge, as the papers
used, and everything below is skipped. :func:`bedside.calls.grader` returns a :class:`Panel` when the role
is bound to several models, and :func:`bedside.calls.ask` answers a judge call of a panel so:

1. every judge is asked the same prompt under the same protocol, concurrently, each through the one loop
   of :func:`bedside.calls.ask` (an unreadable reply is retried with a fresh sample up to the protocol's
   ``retries``);
2. a judge whose reply stays unreadable (or whose call fails) is **unparsed** for that call: the panel's
   verdict is of the judges that answered, and the record says how many did (``answered``) and which did
   not; when no judge answered, the call is unreadable exactly as one judge's would be (the score is
   unscored and counted, never 0);
3. the protocol's :class:`Ballot` reads each answer's verdicts — item → a yes/no or a number, each item
   counting toward one score key — and the panel's verdict on each item is the rule that key declares
   (:attr:`bedside.score_keys.ScoreKey.panel`): ``mean`` of the judges that gave the item (Likert and
   graded scores), or ``majority`` (yes/no). A yes/no tie (an even number of judges answered) goes against
   the model under test: it is the verdict that counts toward the key when lower is better (a failure, an
   overreaction, unsafe advice), else the one that does not (a checklist topic not covered, a rubric item
   not met); each tie is recorded;
4. the ballot carries the panel's verdicts into one answer of the protocol's own type (the first answering
   judge's, its reasons or evidence taken from a judge who gave the panel's verdict), so a scorer computes
   its score from a panel exactly as from one judge;
5. the answer keeps a :class:`PanelRecord` per call: every judge's verdicts (``None`` for an unparsed
   one) and error, the panel's verdicts, ``answered``, the ties, and the judges of the same family as the
   model under test (:mod:`bedside.families`). Scorers keep the records in the score's metadata (``panel``,
   :func:`panel_metadata`), where ``inspect view`` shows them and ``bedside report`` reads the judges'
   agreement per key (:mod:`bedside.reporting.panels`).

A protocol without a ballot (its reply is text, not a verdict, e.g. reference answers a scorer compares by
text similarity) is answered by the panel's first judge alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from inspect_ai.model import Model

from bedside.benchmarks import score_key

#: one answer's verdicts: item -> a yes/no (bool) or a number (float)
Verdicts = dict[str, bool | float]


@dataclass(frozen=True)
class Panel:
    """Several judge models bound to one role, in the order they were bound."""

    judges: tuple[Model, ...]
    same_family: tuple[str, ...] = ()  # the judges of the model under test's family (bedside.families)

    def __post_init__(self) -> None:
        if len(self.judges) < 2:
            raise ValueError("a panel has two judges or more (one judge is the model itself)")

    @property
    def names(self) -> list[str]:
        """Each judge's name: the model with its model arguments (``bedside/scripted {judge_flip=0.2}``), and
        ``#2``, ``#3`` ... on a name bound more than once."""
        names = [judge_name(m) for m in self.judges]
        return [n if names.count(n) == 1 else f"{n} #{names[: i + 1].count(n)}" for i, n in enumerate(names)]

    def __str__(self) -> str:
        return " + ".join(self.names)


def judge_name(model: Model) -> str:
    args = ", ".join(f"{k}={v}" for k, v in sorted((getattr(model, "model_args", None) or {}).items()))
    return f"{model}" + (f" {{{args}}}" if args else "")


@dataclass(frozen=True)
class Ballot:
    """How a panel reads one protocol's answers (declared on the protocol, :attr:`bedside.protocols.Protocol.ballot`).

    - ``key``: the score key every item's verdict counts toward; ``None``: each item *is* a score key;
    - ``votes``: one readable answer -> its verdicts (item -> bool or float);
    - ``carry``: (the readable answers in panel order, the panel's verdicts) -> one answer of the protocol's
      type that holds the panel's verdicts (texts such as reasons taken from a judge who agrees)."""

    votes: Callable[[Any], Verdicts]
    carry: Callable[[list[Any], Verdicts], Any]
    key: str | None = None

    def key_of(self, item: str) -> str:
        return self.key if self.key is not None else item


@dataclass
class PanelRecord:
    """One judged call answered by a panel (module docstring, 5)."""

    protocol: str
    judges: list[str]
    votes: list[Verdicts | None]  # each judge's verdicts; None: unparsed (unreadable after retries, or failed)
    errors: list[str | None]
    verdict: Verdicts
    keys: dict[str, str]  # item -> score key
    answered: int
    ties: list[str] = field(default_factory=list)
    same_family: list[str] = field(default_factory=list)
    label: dict[str, Any] = field(default_factory=dict)  # the call's own label (e.g. the turn judged)

    def dump(self) -> dict[str, Any]:
        return asdict(self)


def rule(key: str) -> str:
    """The panel rule score key ``key`` declares (``LookupError`` if it declares none: a ballot names a key
    that cannot be combined)."""
    declared = score_key(key, strict=True)
    if declared.panel is None:
        raise LookupError(
            f"score key {key!r} declares no panel rule (ScoreKey.panel) but a protocol's ballot votes on it"
        )
    return declared.panel


def tie_verdict(key: str) -> bool:
    """A yes/no tie's verdict (module docstring, 3): against the model under test."""
    return score_key(key, strict=True).lower_is_better


def combine(votes: Sequence[Verdicts | None], key_of: Callable[[str], str]) -> tuple[Verdicts, list[str]]:
    """The panel's verdict on every item some judge gave (module docstring, 3) and the items decided by the tie
    rule. ``votes``: each judge's verdicts, None for an unparsed judge."""
    given: dict[str, list[bool | float]] = {}
    for judge in votes:
        for item, value in (judge or {}).items():
            given.setdefault(item, []).append(value)
    verdict: Verdicts = {}
    ties: list[str] = []
    for item, values in given.items():
        key = key_of(item)
        if rule(key) == "mean":
            verdict[item] = sum(float(v) for v in values) / len(values)
            continue
        yes = sum(bool(v) for v in values)
        if yes * 2 == len(values):
            verdict[item] = tie_verdict(key)
            ties.append(item)
        else:
            verdict[item] = yes * 2 > len(values)
    return verdict, ties


def agreeing(answers: list[Any], votes: Callable[[Any], Verdicts], item: str, verdict: bool | float) -> Any:
    """The first answer whose verdict on ``item`` is the panel's, else the first that gave ``item`` (a mean, or a
    tie no judge's verdict matches): where a carried answer takes its reason or evidence from."""
    gave = [a for a in answers if item in votes(a)]
    return next((a for a in gave if votes(a)[item] == verdict), gave[0] if gave else answers[0])


def panel_metadata(*answers: Any) -> dict[str, Any]:
    """``{"panel": [record, ...]}`` of the answers a panel gave (their :attr:`bedside.calls.Answer.panel`), for a
    score's metadata; ``{}`` when no panel answered (one judge: the metadata is as without panels)."""
    records = [r.dump() for a in answers if a is not None for r in a.panel]
    return {"panel": records} if records else {}
