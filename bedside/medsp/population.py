"""Which MedSP1000 samples a report averages (``bedside report`` / ``bedside strata`` ``--population``):
``all`` (default), or ``simulator_clean``: the samples in which the simulator checks (``-T simulator_check=true``)
found no error of the standardized patient (:func:`bedside.reporting.simulator.clean`; a bedside extension).
"""

from __future__ import annotations

from inspect_ai.log import EvalSample, EvalSampleSummary

from bedside.reporting.simulator import CLEAN, CLEAN_COUNTED, clean

#: the default first
POPULATIONS = ("all", CLEAN)
#: what a table's n counts in each population
COUNTED = {"all": "every sample", CLEAN: CLEAN_COUNTED}


def in_population(sample: EvalSample | EvalSampleSummary, population: str) -> bool:
    """Whether a sample belongs to ``population`` (module docstring)."""
    if population not in POPULATIONS:
        raise ValueError(f"population must be one of {', '.join(POPULATIONS)}, not {population!r}")
    return population == "all" or clean(sample)
