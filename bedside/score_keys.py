"""What a score key is, declared by the scorer that writes it: :class:`ScoreKey`.

Each scorer module declares the keys its scorer writes in its per-sample score value, next to the
scorer, and ties them to it with :func:`declares`::

    KEYS = (
        ScoreKey("tcs", UNIT, role="headline", label="TCS"),
        UNSCORED_KEY,
    )

    @declares(KEYS)
    @scorer(metrics=summary_of(KEYS))
    def topic_checklist(...): ...

A benchmark's scorers are the declared scorers of its package ``scorers/<b>/``
(:attr:`bedside.benchmark.Benchmark.scorers`), and everything that shows a number reads the declarations
through the registry (:mod:`bedside.benchmarks`): the interval rule (by the key's scale,
:mod:`bedside.intervals`), Inspect's summary block and the health block (:mod:`bedside.scorers.metrics`),
``bedside strata``, ``compare``, ``report`` and the sweep leaderboard.
This module is light (no Inspect, no model) and sits beside the registry, not among the scorers: the
registry (which solvers reach) and reports import it without importing a scorer's machinery.

A key's name means one thing everywhere: two scorers that write the same key (``unscored``,
``role_fallbacks``, ``erroneous``) declare the same scale, label and direction (the shared ones are
declared here once), and one label names one key (``tests/test_descriptors.py`` checks both).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from bedside.intervals import COUNT, UNBOUNDED, Scale

Role = Literal["headline", "summary", "detail", "health"]
#: - ``headline``: a column of the benchmark's headline table (the paper's), shown in Inspect's summary
#:   block of its scorer;
#: - ``summary``: shown in Inspect's summary block, not a headline column (a session outcome, an
#:   extension's rates, a breakdown of a headline rate);
#: - ``detail``: per sample only (``bedside strata``, ``report``, ``compare``), in no Inspect block;
#: - ``health``: bookkeeping, gathered with every other scorer's into the one ``health`` block.
ROLES: tuple[Role, ...] = ("headline", "summary", "detail", "health")

HealthKind = Literal["count", "tally", "mean"]
#: how the health block shows a bookkeeping key over samples: ``count`` (the sum, and named in the
#: health scorer's explanation when not 0: a problem to look at), ``tally`` (the sum, not a problem:
#: cases that went one way) or ``mean`` (shown as ``<key> (mean)``)
HEALTH_KINDS: tuple[HealthKind, ...] = ("count", "tally", "mean")

Combine = Literal["max", "sum"]
#: how one sample's values of a health key written by several scorers combine: ``max`` (the same fact
#: written twice, e.g. role fallbacks) or ``sum`` (each scorer's own, e.g. unscored sub-scores)
COMBINE: tuple[Combine, ...] = ("max", "sum")

PanelRule = Literal["mean", "majority"]
#: how a judge panel's verdicts on a key's items combine (:mod:`bedside.panel`): ``mean`` (a Likert or graded
#: score: the mean of the judges that answered) or ``majority`` (a yes/no verdict: the verdict most judges
#: gave; a tie goes against the model under test: the verdict that counts as a failure for a key where lower
#: is better, else the one that counts as not achieved)
PANEL_RULES: tuple[PanelRule, ...] = ("mean", "majority")


@dataclass(frozen=True)
class ScoreKey:
    """One key of a scorer's per-sample score value.

    - ``name``: the key as the score value holds it (and as logs, CSVs and ``--metric`` name it);
    - ``scale``: the range its values take (:class:`bedside.intervals.Scale`; picks the interval rule);
    - ``role``: where it is shown (:data:`ROLES`);
    - ``label``: the paper's name for it, as Inspect's blocks and the reports' headers show it (default:
      the name);
    - ``lower_is_better``: the direction ``compare`` and the leaderboard read (default: higher is better);
    - ``health``: for a ``health`` key, how the health block shows it (:data:`HEALTH_KINDS`);
      ``combine``: how a sample's values from several scorers combine (:data:`COMBINE`);
      ``health_name``: its name in the health block when that differs from ``name`` (two scorers' keys
      of one name that mean different things there);
    - ``reported``: False for bookkeeping left out of every table (``strata``, ``report``, ``compare``);
    - ``pooled``: a ratio pooled over items, never a mean of per-case values (``strata`` leaves it out; the
      benchmark's own report section pools it);
    - ``panel``: for a key a judge's verdicts decide, how a judge panel's verdicts on its items combine
      (:data:`PANEL_RULES`; the protocols' ballots name the key each verdict counts toward, :mod:`bedside.panel`);
      ``bedside report`` gives the judges' agreement per such key (nominal Krippendorff's alpha for
      ``majority``, interval alpha for ``mean``).
    - ``items``: for a key that is a share of yes/no verdicts on items (a checklist's answers, a rubric's
      items met), how to read those verdicts from the score's metadata: ``fn(metadata) -> {item id: True,
      False or None (not judged)}``. Consistency over epochs (:mod:`bedside.reporting.epochs`) counts
      flips and pass^k per item; a key declared binary is a verdict of its own.
    """

    name: str
    scale: Scale = UNBOUNDED
    role: Role = "detail"
    label: str = ""
    lower_is_better: bool = False
    health: HealthKind | None = None
    combine: Combine = "max"
    health_name: str = ""
    reported: bool = True
    pooled: bool = False
    panel: PanelRule | None = None
    items: Callable[[dict[str, Any]], dict[str, bool | None]] | None = None

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"score key {self.name!r}: role {self.role!r} is not one of {ROLES}")
        if (self.role == "health") != (self.health is not None):
            raise ValueError(f"score key {self.name!r}: a health key, and only one, says how the block shows it")
        if self.health is not None and self.health not in HEALTH_KINDS:
            raise ValueError(f"score key {self.name!r}: health {self.health!r} is not one of {HEALTH_KINDS}")
        if self.panel is not None and self.panel not in PANEL_RULES:
            raise ValueError(f"score key {self.name!r}: panel {self.panel!r} is not one of {PANEL_RULES}")
        if self.combine not in COMBINE:
            raise ValueError(f"score key {self.name!r}: combine {self.combine!r} is not one of {COMBINE}")
        object.__setattr__(self, "label", self.label or self.name)
        object.__setattr__(self, "health_name", self.health_name or self.name)

    @property
    def shown(self) -> bool:
        """Whether Inspect's summary block of its scorer shows it."""
        return self.role in ("headline", "summary")


#: unscored sub-scores of a sample (each scorer counts its own; the health block sums them)
UNSCORED_KEY = ScoreKey(
    "unscored", COUNT, role="health", health="count", combine="sum", lower_is_better=True, reported=False
)
#: model roles of the task left unbound, so falling back to the model under test (names in the score metadata)
ROLE_FALLBACKS_KEY = ScoreKey("role_fallbacks", COUNT, role="health", health="count", lower_is_better=True)

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Declaration:
    """What a scorer declares beside Inspect's ``@scorer`` (:func:`declares`): the keys it writes, the tasks
    whose runs it scores, when it applies, and the reply protocols of its own model calls."""

    keys: tuple[ScoreKey, ...]
    #: the Inspect tasks whose runs it scores; None: its benchmark's main task (the task named as the benchmark)
    tasks: tuple[str, ...] | None = None
    #: whether it applies to a run, from the task's arguments (by name); None: always
    when: Callable[[Mapping[str, Any]], bool] | None = None
    #: the reply protocols of its own model calls (a judge declared with its scorer; :func:`bedside.parts.protocols_of`)
    protocols: tuple[Any, ...] = ()


def declares(
    keys: Sequence[ScoreKey],
    tasks: Sequence[str] | None = None,
    when: Callable[[Mapping[str, Any]], bool] | None = None,
    protocols: Sequence[Any] = (),
) -> Callable[[F], F]:
    """Tie ``keys`` to the scorer below (put it above Inspect's ``@scorer``): the registry reads them from the
    scorer (:func:`keys_of`). A task's scorers are built from these declarations
    (:func:`bedside.scorers.metrics.task_scorers`): ``tasks`` (default: the benchmark's main task) and ``when``
    (a test of the task's arguments; default: always) say which runs it scores; ``protocols``: the reply
    protocols of its own calls, registered with its benchmark's (:func:`bedside.parts.all_protocols`)."""
    declared = tuple(keys)
    names = [k.name for k in declared]
    if len(set(names)) != len(names):
        raise ValueError(f"a score key is declared twice: {names}")
    declaration = Declaration(declared, None if tasks is None else tuple(tasks), when, tuple(protocols))

    def tie(factory: F) -> F:
        factory.declaration = declaration  # type: ignore[attr-defined]
        return factory

    return tie


def declaration_of(factory: Callable[..., Any]) -> Declaration:
    """What a scorer (its ``@scorer`` factory) declares (:func:`declares`)."""
    try:
        return factory.declaration  # type: ignore[attr-defined]
    except AttributeError:
        raise LookupError(
            f"scorer {getattr(factory, '__name__', factory)!r} declares no score keys (@declares)"
        ) from None


def is_declared(value: Any) -> bool:
    """Whether ``value`` is a scorer factory with a declaration (:func:`declares`)."""
    return isinstance(getattr(value, "declaration", None), Declaration)


def keys_of(factory: Callable[..., Any]) -> tuple[ScoreKey, ...]:
    """The keys a scorer (its ``@scorer`` factory) declares (:func:`declares`)."""
    return declaration_of(factory).keys
