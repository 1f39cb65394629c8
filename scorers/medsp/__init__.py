"""MedSP1000 scorers: the frozen-rubric evaluator's call and rates (:mod:`.rubric`) and its prompts
(:mod:`.evaluator`)."""

from bedside.scorers.medsp.rubric import medsp_rubric
from bedside.scorers.simulator import simulator_check

#: its scorer (:attr:`bedside.benchmark.Benchmark.scorers`); micro and macro are pooled over items (its report
#: pools them per specialty from each case's counts)
#: the rubric, then the checks of the SP's own errors (-T simulator_check=true)
SCORERS = (medsp_rubric, simulator_check)
