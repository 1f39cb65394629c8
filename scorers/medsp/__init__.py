"""MedSP1000 scorers: the frozen-rubric evaluator's call and rates (:mod:`.rubric`) and its prompts
(:mod:`.evaluator`)."""

from bedside.scorers.medsp.rubric import medsp_rubric
from bedside.scorers.simulator import simulator_check

#: the order of its scorers (:attr:`bedside.benchmark.Benchmark.scorers`): the rubric (micro and macro are pooled
#: over items: its report pools them per specialty from each case's counts), then the checks of the SP's own errors
#: (-T simulator_check=true); a scorer of this package it does not name follows them (by module name)
ORDER = (medsp_rubric, simulator_check)
