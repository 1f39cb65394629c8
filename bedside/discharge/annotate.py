"""``bedside annotate export LOG_OR_DIR... --cases N --seed S --out DIR``: physician annotation
packets for validating DischargeBench's judge (paper Section 2.3.2 and Appendix A.6).

It samples ``N`` judged sessions from the logs — seeded, spread evenly over the educator models
(the paper's 70 cases were "stratified by educator model") — and writes, in a seeded random order:

==============================  ================================================================
``P001.html`` …                 one self-contained page per case (inline CSS, no script, no
                                image, no external resource): the instructions of the paper's
                                annotation tool, the discharge note, the transcript, and the
                                items to rate in the paper's three-stage order — Conversation
                                Quality (four 1–5 axes with the judge's anchors, Figure 8), Topic
                                Checklist (all 21 questions, yes/no, as in A.6.4), Comprehension
                                (the patient's answers to q1–q6, correct / partially correct /
                                incorrect) — then the Virtual Patient quality survey of A.6.2
                                (five 1–4 items, with the patient's assigned persona)
``index.html``                  the packets in order, with who rates which
``annotations_template.csv``    one row per (packet, annotator, item) with an empty ``value``:
                                fill it in and pass it to ``bedside agreement`` as it is
``key/judge.eval``              NOT for annotators: the judge's scores of each packet, as an
                                Inspect log whose sample ids are the packet ids
``key/key.csv``                 NOT for annotators: packet → log, model, sample id, epoch
==============================  ================================================================

**Blind**: the pages and the template show no judge output (no score, no reason, no extracted
reference answer) and no model identity (A.6.4: "The identity of the educator model … and any prior
LLM-judge output are hidden from the physicians"). That is why the template's ``case_id`` is the
packet id and the judge's values travel in ``key/judge.eval``: after annotation (``--out packets/``),

    bedside agreement --annotations annotations_filled.csv packets/key/judge.eval

reads the filled template unchanged (items and values are in :mod:`bedside.discharge.agreement`'s
format; extra columns ``section`` and ``scale`` are for the person typing and are ignored). The
survey items (``vp_*``) have no judge value: ``agreement`` reports them physician vs physician only
(Spearman's ρ; they are not among its κ axes).

**Annotators** (``--annotators phys_a,phys_b``): with ``--shared K`` the first K packets are rated by
every annotator and the others are dealt out in turn (the paper: 20 shared, 25 each); by default every
annotator rates every packet.

``bedside annotate from-logs LOG_OR_DIR... --annotators NAME,... --out FILE.csv``: the same ratings from
physicians who
judged in the browser instead (``bedside rescore LOGS --grader bedside/human``, one folder per physician,
named in the same order by ``--annotators``; :mod:`bedside.providers.human`): every Table 5 item each
physician's log holds — the four 1–5 axes, the
21 checklist answers and the q1–q6 comprehension grades — one row per (case, physician, item) in
``bedside agreement``'s format, with the educator model (``model``) and the epoch. Then

    bedside agreement --annotations FILE.csv LOGS

compares them with the judge's own values in the original ``LOGS`` (Table 5).
"""

from __future__ import annotations

import argparse
import csv
import html
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from inspect_ai.log import EvalLog, EvalSample, write_eval_log

from bedside.cli import BadInput, add_command, bad_input
from bedside.discharge import PERSONA_AXES
from bedside.discharge.protocols import quality_rubric
from bedside.discharge.ratings import CHECKLIST_ID, COMPREHENSION_ITEMS, LIKERT, judge_values
from bedside.discharge.records import topic_checklist_questions
from bedside.prompts import load_yaml
from bedside.reporting.html import Page
from bedside.reporting.load import LoadedLog, load

TEXTS = "discharge/annotation.yaml"
QUALITY_AXES = ("naturalness", "responsiveness", "clarity", "clinical_relevance")
GRADES = ("correct", "partially correct", "incorrect")
TEMPLATE_COLUMNS = ("case_id", "annotator", "item", "value", "section", "scale")
#: ``bedside annotate from-logs``'s columns (``bedside agreement``'s, with the educator model and the epoch)
ANNOTATION_COLUMNS = ("case_id", "annotator", "item", "value", "model", "epoch")

EXTRA_STYLE = """<style>
.turn { margin: 0.3em 0; padding: 0.3em 0.6em; border-left: 4px solid #bbb; white-space: pre-wrap; }
.turn.educator { border-color: #2b6cb0; background: #f3f7fc; }
.turn.patient { border-color: #9c4221; background: #fdf6f0; }
.speaker { font-weight: bold; }
pre.note { white-space: pre-wrap; background: #fafafa; border: 1px solid #ddd; padding: 0.8em; }
.item { margin: 0.6em 0 1em 0; padding: 0.4em 0.6em; border: 1px solid #e2e2e2; }
.item .code { font-family: monospace; color: #555; } .item ul { margin: 0.2em 0 0.3em 1.2em; font-size: 0.9em; }
.choices label { margin-right: 1.2em; white-space: nowrap; }
.answer { white-space: pre-wrap; background: #fdf6f0; padding: 0.3em; }
</style>"""


class AnnotateError(ValueError):
    """Input that cannot be exported (exit code 2)."""


@dataclass
class Item:
    """One thing to rate: its CSV id, the stage it belongs to, its question and its choices."""

    id: str
    section: str
    question: str
    choices: tuple[str, ...]
    anchors: list[str] = field(default_factory=list)
    context: str = ""  # shown with the item (the patient's comprehension answer)

    @property
    def scale(self) -> str:
        return "/".join(self.choices)


@dataclass
class Case:
    """A sampled session: where it comes from (kept in the key) and what the page shows."""

    source: LoadedLog
    sample: EvalSample
    packet: str = ""
    annotators: tuple[str, ...] = ()


# ------------------------------------------------------------------------------------------------
# what physicians rate (texts from the paper and prompts/)


def items_for(sample: EvalSample) -> list[Item]:
    """Every item of one packet, in the page's (and the template's) order."""
    items = [
        Item(
            name.lower().replace(" ", "_"),
            "conversation_quality",
            f"{name}: {description}",
            ("1", "2", "3", "4", "5"),
            list(anchors),
        )
        for name, description, anchors in quality_rubric()
    ]
    for q in topic_checklist_questions():
        items.append(Item(q["id"], "topic_checklist", f"[{q['topic']}] {q['text']}", ("yes", "no")))
    asked = {a.get("id"): a for a in encounter(sample).get("comprehension", [])}
    for q in load_yaml("discharge/comprehension_questions.yaml")["questions"]:
        record = asked.get(q["id"], {})  # the question as it was put to the patient, and the answer
        items.append(
            Item(
                q["id"],
                "comprehension",
                record.get("question") or q["text"],
                GRADES,
                context=record.get("answer") or "(no answer recorded)",
            )
        )
    survey = load_yaml(TEXTS)["vp_survey"]
    for q in survey["items"]:
        items.append(
            Item(
                q["id"],
                "vp_survey",
                f"({q['label']}) {q['question']}",
                tuple(str(v) for v in survey["scale"]),
                [f"The patient {q['consider']}"],
            )
        )
    return items


# ------------------------------------------------------------------------------------------------
# reading and sampling


def encounter(sample: EvalSample) -> dict:
    """The ``EncounterStore`` fields of a DischargeBench sample (history, comprehension answers, …)."""
    prefix = "EncounterStore:"
    return {k[len(prefix) :]: v for k, v in (sample.store or {}).items() if k.startswith(prefix)}


def annotatable(sample: EvalSample) -> bool:
    """A session with a dialogue that the judge scored (system-level failures have no scores)."""
    outcome = (sample.scores or {}).get("encounter_outcome")
    failed = outcome is not None and isinstance(outcome.value, dict) and outcome.value.get("system_failure") == 1.0
    return bool(encounter(sample).get("history")) and "conversation_quality" in (sample.scores or {}) and not failed


def read_logs(paths: Sequence[str]) -> list[LoadedLog]:
    """The DischargeBench runs among ``paths``: their records (:func:`bedside.reporting.load.load`)."""
    out = [item for item in load(paths) if item.benchmark == "discharge"]
    if not out:
        raise AnnotateError(f"no DischargeBench log in {', '.join(paths)}")
    return out


def sample_cases(logs: Sequence[LoadedLog], n: int, seed: int) -> list[Case]:
    """``n`` sessions spread evenly over the models (seeded), then put in a seeded random order."""
    rng = random.Random(seed)
    by_model: dict[str, list[Case]] = {}
    for item in logs:  # each sample's scores and store (no messages, no events), one at a time
        for sample in item.log.transcripts(exclude={"messages", "events", "attachments", "events_data"}):
            if annotatable(sample):
                light = sample.model_copy(update={"store": {}})  # read again whole if chosen
                by_model.setdefault(item.label, []).append(Case(item, light))
    available = sum(len(v) for v in by_model.values())
    if n < 1 or n > available:
        raise AnnotateError(
            f"--cases {n}: the logs hold {available} judged session(s) with a dialogue "
            f"({', '.join(f'{k}: {len(v)}' for k, v in sorted(by_model.items()))})"
        )
    pools = []
    for label in sorted(by_model):
        pool = sorted(by_model[label], key=lambda c: (str(c.sample.id), c.sample.epoch))
        rng.shuffle(pool)
        pools.append(pool)
    chosen: list[Case] = []
    while len(chosen) < n:  # round robin over the models (stratified by educator model)
        for pool in pools:
            if pool and len(chosen) < n:
                chosen.append(pool.pop())
    rng.shuffle(chosen)
    for case in chosen:  # the chosen sessions whole, to show them
        case.sample = case.source.log.sample(case.sample.id, case.sample.epoch, resolve_attachments=True)
    return chosen


def assign(cases: list[Case], annotators: Sequence[str], shared: int | None) -> None:
    """Packet ids in the presentation order, and who rates each packet (module docstring)."""
    shared = len(cases) if shared is None else shared
    if not 0 <= shared <= len(cases):
        raise AnnotateError(f"--shared {shared}: must be between 0 and --cases ({len(cases)})")
    width = max(3, len(str(len(cases))))
    for index, case in enumerate(cases):
        case.packet = f"P{index + 1:0{width}d}"
        case.annotators = tuple(annotators) if index < shared else (annotators[(index - shared) % len(annotators)],)


# ------------------------------------------------------------------------------------------------
# writing


def _choices(item: Item) -> str:
    name = html.escape(item.id)
    return (
        '<div class="choices">'
        + "".join(
            f'<label><input type="radio" name="{name}" value="{html.escape(c)}"> {html.escape(c)}</label>'
            for c in item.choices
        )
        + "</div>"
    )


def _item(item: Item) -> str:
    anchors = "".join(f"<li>{html.escape(a)}</li>" for a in item.anchors)
    context = f'<p>Patient\'s answer:</p><div class="answer">{html.escape(item.context)}</div>' if item.context else ""
    return (
        f'<div class="item" data-item="{html.escape(item.id)}"><p><span class="code">{html.escape(item.id)}</span> '
        f"{html.escape(item.question)}</p>{context}"
        + (f"<ul>{anchors}</ul>" if anchors else "")
        + _choices(item)
        + "</div>"
    )


def persona_list(meta: dict) -> str:
    """The assigned persona: each axis's label and the paper's description (``personas.yaml``)."""
    traits = load_yaml("discharge/personas.yaml")
    rows = []
    for axis in PERSONA_AXES:
        trait = traits.get(axis, {}).get(str(meta.get(axis)))
        if trait is None:
            rows.append(f"<dt>{html.escape(axis.replace('_', ' '))}: not recorded</dt>")
            continue
        rows.append(
            f"<dt>{html.escape(axis.replace('_', ' '))}: <b>{html.escape(trait['label'])}</b></dt>"
            f'<dd class="answer">{html.escape(trait["description"])}</dd>'
        )
    return f'<dl class="persona">{"".join(rows)}</dl>'


def page(case: Case) -> str:
    """The packet's HTML (static; see the module docstring for what it shows and hides)."""
    texts = load_yaml(TEXTS)
    stages, survey = texts["stages"], texts["vp_survey"]
    meta = case.sample.metadata or {}
    note = (meta.get("case") or {}).get("discharge_note", "")
    items = items_for(case.sample)
    p = Page(f"Annotation packet {case.packet}")
    p.parts.append(EXTRA_STYLE)
    p.note(
        f"Rated by: {', '.join(case.annotators)}. Enter each rating in annotations_template.csv on the row "
        f"case_id={case.packet}, your annotator name and the item code shown in grey (the buttons below are "
        "only a worksheet: nothing on this page is saved)."
    )
    p.heading("Discharge note")
    p.parts.append(f'<pre class="note">{html.escape(note)}</pre>')
    p.heading("Conversation")
    for number, turn in enumerate(encounter(case.sample).get("history", []), start=1):
        role = str(turn.get("role", ""))
        p.parts.append(
            f'<div class="turn {html.escape(role)}"><span class="speaker">{number}. '
            f"{html.escape(role.capitalize())}:</span> {html.escape(str(turn.get('message', '')))}</div>"
        )
    for section in ("conversation_quality", "topic_checklist", "comprehension"):
        stage = stages[section]
        p.heading(f"Stage {list(stages).index(section) + 1}: {stage['title']}")
        p.parts.append(f"<p>{html.escape(stage['instructions'])}</p>")
        if stage.get("rules"):
            p.parts.append("<ul>" + "".join(f"<li>{html.escape(r)}</li>" for r in stage["rules"]) + "</ul>")
        if stage.get("grades"):
            p.parts.append(
                "<ul>"
                + "".join(
                    f"<li><b>{html.escape(g['value'])}</b> — {html.escape(g['text'])}</li>" for g in stage["grades"]
                )
                + "</ul>"
            )
        if stage.get("closing"):
            p.parts.append(f"<p>{html.escape(stage['closing'])}</p>")
        p.parts.extend(_item(i) for i in items if i.section == section)
    p.heading(survey["title"])
    p.parts.append(
        "<p>The Virtual Patient was assigned this persona (trait descriptions of the paper's Appendix "
        "A.2, as given to the patient):</p>" + persona_list(meta)
    )
    p.parts.append(f"<p>{html.escape(survey['instructions'])}</p>")
    labels = ", ".join(f"{k} = {v}" for k, v in survey["scale_labels"].items())
    p.parts.append(f"<p>Rate each statement on a {len(survey['scale'])}-point scale ({html.escape(labels)}).</p>")
    p.parts.extend(_item(i) for i in items if i.section == "vp_survey")
    return p.render()


def key_log(cases: Sequence[Case]) -> EvalLog:
    """The judge's scores of every packet, as a log whose sample ids are the packet ids."""
    first = cases[0].source.log
    spec = first.eval.model_copy(
        update={
            "model": "annotation-key",
            "model_args": {},
            "task_args": {},
            "metadata": {**(first.eval.metadata or {}), "annotation_key": True},
        }
    )
    samples = [
        case.sample.model_copy(
            update={
                "id": case.packet,
                "epoch": 1,
                "events": [],
                "attachments": {},
                "metadata": {
                    **(case.sample.metadata or {}),
                    "annotation_source": {
                        "log": case.source.path,
                        "model": case.source.label,
                        "sample_id": str(case.sample.id),
                        "epoch": case.sample.epoch,
                    },
                },
            }
        )
        for case in cases
    ]
    return EvalLog(eval=spec, plan=first.plan, status="success", samples=samples)


def export(
    paths: Sequence[str],
    n: int,
    seed: int,
    out: str | Path,
    annotators: Sequence[str] = ("phys_a", "phys_b"),
    shared: int | None = None,
) -> list[Case]:
    """Write the packets (module docstring); returns the cases in packet order."""
    annotators = [a.strip() for a in annotators if a.strip()]
    if not annotators or len(set(annotators)) != len(annotators):
        raise AnnotateError(f"--annotators: give distinct names, got {list(annotators)}")
    cases = sample_cases(read_logs(paths), n, seed)
    assign(cases, annotators, shared)
    out = Path(out)
    (out / "key").mkdir(parents=True, exist_ok=True)
    for case in cases:
        (out / f"{case.packet}.html").write_text(page(case), encoding="utf-8")
    with (out / "annotations_template.csv").open("w", newline="", encoding="utf-8") as handle:
        handle.write(
            "# bedside annotation template: fill in `value` (see the packet pages); the judge's values are in "
            "key/judge.eval.\n# Then: bedside agreement --annotations THIS_FILE.csv key/judge.eval\n"
            "# The vp_* items (Virtual Patient survey) have no judge value: agreement reports them physician vs "
            "physician only.\n"
        )
        writer = csv.writer(handle)
        writer.writerow(TEMPLATE_COLUMNS)
        for case in cases:
            items = items_for(case.sample)
            for annotator in case.annotators:
                writer.writerows([case.packet, annotator, i.id, "", i.section, i.scale] for i in items)
    with (out / "key" / "key.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["packet", "annotators", "model", "sample_id", "epoch", "log"])
        writer.writerows(
            [c.packet, " ".join(c.annotators), c.source.label, str(c.sample.id), c.sample.epoch, c.source.path]
            for c in cases
        )
    write_eval_log(key_log(cases), str(out / "key" / "judge.eval"))
    index = Page("Annotation packets")
    index.note(
        f"{len(cases)} DischargeBench sessions in random order (seed {seed}). Open each packet, rate it, and "
        "enter the ratings in annotations_template.csv. Do not open the key/ folder: it holds the judge's scores."
    )
    index.parts.append(
        "<ol>"
        + "".join(
            f'<li><a href="{c.packet}.html">{c.packet}</a> — {html.escape(", ".join(c.annotators))}</li>' for c in cases
        )
        + "</ol>"
    )
    (out / "index.html").write_text(index.render(), encoding="utf-8")
    return cases


def from_logs(judged: Sequence[tuple[str, str]]) -> pd.DataFrame:
    """(annotator, log or folder) pairs → the annotation rows of every Table 5 item their logs hold
    (module docstring), each value as the judge's reader recorded it (1–5, 1/0, 1/0.5/0)."""
    parts = []
    for annotator, path in judged:
        values = judge_values(read_logs([path]))
        table5 = values["item"].isin([*LIKERT, *COMPREHENSION_ITEMS]) | values["item"].str.match(CHECKLIST_ID)
        rated = values[table5 & values["judge"].notna()]
        parts.append(
            pd.DataFrame(
                {
                    "case_id": rated["case_id"],
                    "annotator": annotator,
                    "item": rated["item"],
                    "value": rated["judge"].map(lambda v: f"{v:g}"),
                    "model": rated["label"],
                    "epoch": rated["epoch"],
                }
            )
        )
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=ANNOTATION_COLUMNS)


def run_from_logs(args: argparse.Namespace) -> int:
    names = [a.strip() for a in args.annotators.split(",") if a.strip()]
    if len(names) != len(args.logs):
        raise BadInput(
            "annotate from-logs",
            f"{len(args.logs)} log folder(s) and {len(names)} name(s) in --annotators: "
            "give one physician's name per folder, in the same order",
        )
    judged = list(zip(names, args.logs, strict=True))
    with bad_input("annotate", ValueError, FileNotFoundError):  # AnnotateError; a log unreadable, a shard missing
        rows = from_logs(judged)
    rows.to_csv(args.out, index=False, columns=list(ANNOTATION_COLUMNS))
    counts = ", ".join(f"{a}: {n}" for a, n in rows.groupby("annotator").size().items())
    print(f"wrote {len(rows)} ratings to {args.out} ({counts}); next: bedside agreement --annotations {args.out} LOGS")
    return 0


def run(args: argparse.Namespace) -> int:
    with bad_input("annotate", ValueError, FileNotFoundError):  # AnnotateError; a log unreadable, a shard missing
        cases = export(args.logs, args.cases, args.seed, args.out, args.annotators.split(","), args.shared)
    print(
        f"wrote {len(cases)} packets to {args.out} "
        "(index.html, annotations_template.csv; key/ is for you, not the annotators)"
    )
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """The ``annotate export`` sub-command (module docstring)."""
    annotate = add_command(sub, "annotate", "physician annotation packets for judge validation", __doc__)
    actions = annotate.add_subparsers(dest="action", required=True)
    parser = add_command(
        actions, "export", "sample judged sessions and write blind HTML packets + a CSV template", __doc__, run
    )
    parser.add_argument("logs", nargs="+", metavar="LOG_OR_DIR", help="DischargeBench eval logs (files or folders)")
    parser.add_argument("--cases", type=int, required=True, metavar="N", help="how many sessions to sample")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sample and of the order (default 0)")
    parser.add_argument("--out", required=True, metavar="DIR", help="output folder (created)")
    parser.add_argument("--annotators", default="phys_a,phys_b", help="comma-separated names (default phys_a,phys_b)")
    parser.add_argument(
        "--shared",
        type=int,
        metavar="K",
        help="packets rated by every annotator (default: all); the rest are dealt out in turn",
    )
    judged = add_command(
        actions,
        "from-logs",
        "ratings of physicians who judged in the browser (bedside/human), as an annotations CSV",
        __doc__,
        run_from_logs,
    )
    judged.add_argument(
        "logs", nargs="+", metavar="LOG_OR_DIR", help="the logs each physician judged (one per physician)"
    )
    judged.add_argument(
        "--annotators", required=True, metavar="NAME,...", help="the physicians' names, in the order of the logs"
    )
    judged.add_argument("--out", required=True, metavar="FILE.csv", help="the annotations CSV to write")
