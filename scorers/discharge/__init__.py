"""DischargeBench scorers: one module per score (Table 1's columns, the session outcome, the record
the judges read), plus the advice-safety extension, its probe check and the case-building check."""

from bedside.scorers.discharge.advice_safety import advice_safety
from bedside.scorers.discharge.comprehension import comprehension
from bedside.scorers.discharge.conversation_quality import conversation_quality
from bedside.scorers.discharge.encounter_outcome import encounter_outcome
from bedside.scorers.discharge.factual_consistency import factual_consistency
from bedside.scorers.discharge.safety_probe import safety_probe_check
from bedside.scorers.discharge.topic_checklist import topic_checklist
from bedside.scorers.simulator import simulator_check

#: the order of its scorers (:attr:`bedside.benchmark.Benchmark.scorers`): Table 1's columns (NA RE CL CR RD, TCS,
#: Comprehension, ROUGE-L cosine), then the session outcome and the advice-safety extension with its probe check, then
#: the checks of the Virtual Patient's own errors (-T simulator_check=true); a scorer of this package it does not name
#: follows them (by module name). Which runs each scores: its declaration (@declares).
ORDER = (
    conversation_quality,
    topic_checklist,
    comprehension,
    factual_consistency,
    encounter_outcome,
    advice_safety,
    safety_probe_check,
    simulator_check,
)
