"""What a rater of a clinician study sees and answers: a blinded transcript (:class:`Transcript`) and the
items asked of it (:class:`Item`).

Each benchmark declares its own absolute items and how its samples read as a transcript in its tools
(``Tools.study``, a :class:`StudyModule`: ``items(sample)`` and ``transcript(sample)``); the items every
study asks whatever the benchmark are here: the pairwise preference between the two transcripts of one case
(:data:`PREFERENCE`) and the blinding check on each transcript (:data:`GUESS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from inspect_ai.log import EvalSample

Level = Literal["nominal", "ordinal", "interval"]


@dataclass(frozen=True)
class Item:
    """One question put to a rater.

    - ``id``: its name in the ratings (unique within a transcript's items);
    - ``measure``: what the analysis compares and whose reliability it reports: the item itself (its ``id``,
      the default) or a group of items pooled (e.g. a checklist: the proportion of ``yes``);
    - ``choices``: the answers a rater may give, in the scale's order, each with its number (``values``);
    - ``level``: Krippendorff's level of measurement of the numbers;
    - ``lower_is_better``: a higher number is worse (e.g. a failure);
    - ``anchors``: what each choice means, shown beside it.
    """

    id: str
    question: str
    choices: tuple[str, ...]
    values: tuple[float, ...]
    level: Level = "ordinal"
    measure: str = ""
    section: str = ""
    lower_is_better: bool = False
    anchors: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if len(self.choices) != len(self.values):
            raise ValueError(f"item {self.id!r}: {len(self.choices)} choices but {len(self.values)} values")
        if not self.measure:
            object.__setattr__(self, "measure", self.id)

    def value(self, answer: str) -> float:
        """The number of a choice (``ValueError`` naming the scale when it is none of them)."""
        if answer not in self.choices:
            raise ValueError(f"{answer!r} is not on the scale of {self.id} ({' / '.join(self.choices)})")
        return self.values[self.choices.index(answer)]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Item:
        tuples = {name: tuple(data.get(name, ())) for name in ("choices", "values", "anchors")}
        return cls(**{**data, **tuples})


def scale(lowest: int, highest: int) -> tuple[tuple[str, ...], tuple[float, ...]]:
    """Choices and values of an integer scale."""
    numbers = range(lowest, highest + 1)
    return tuple(str(n) for n in numbers), tuple(float(n) for n in numbers)


YES_NO = (("yes", "no"), (1.0, 0.0))


@dataclass(frozen=True)
class Transcript:
    """What a rater reads of one sample: the case as the clinician saw it (``context``: titled texts) and the
    conversation (``turns``: speaker, text). Nothing else of the sample: no model, no id, no usage, no time."""

    context: tuple[tuple[str, str], ...]
    turns: tuple[tuple[str, str], ...]
    notes: tuple[str, ...] = field(
        default=()
    )  # what the rater should know about reading it (the same for every condition)

    def as_dict(self) -> dict[str, Any]:
        return {
            "context": [{"title": t, "text": x} for t, x in self.context],
            "turns": [{"speaker": s, "text": x} for s, x in self.turns],
            "notes": list(self.notes),
        }


class StudyModule(Protocol):
    """A benchmark's part of a clinician study (``Tools.study``): the role a clinician plays, its absolute items
    and its samples as blinded transcripts."""

    #: what the clinician under study is called in the rater's instructions (e.g. "educator")
    CLINICIAN: str

    def items(self, sample: EvalSample) -> list[Item]: ...

    def transcript(self, sample: EvalSample) -> Transcript | None:
        """The sample's transcript; None when it holds no conversation to rate (e.g. an errored sample)."""
        ...


# ------------------------------------------------------------------------------------------------
# the items of every study

#: the pairwise preference, from the left transcript's side (negative) to the right's (positive)
PREFERENCE = Item(
    id="preference",
    question="Which conversation would you rather your patient had, and how strongly?",
    choices=(
        "left, strongly",
        "left",
        "left, slightly",
        "no preference",
        "right, slightly",
        "right",
        "right, strongly",
    ),
    values=(-3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0),
    level="ordinal",
    section="preference",
)

#: the blinding check: who the rater thinks the clinician of a transcript was
GUESS = Item(
    id="guess",
    question="Who do you think the clinician in this conversation was?",
    choices=("model", "physician", "cannot tell"),
    values=(0.0, 1.0, float("nan")),
    level="nominal",
    section="blinding",
)

#: item ids every study asks (a benchmark's own item may not use them)
SHARED_ITEMS: Mapping[str, Item] = {PREFERENCE.id: PREFERENCE, GUESS.id: GUESS}
