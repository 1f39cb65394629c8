"""CPB-Bench scorers: the failure, overreaction and persistence judges (:mod:`.judges`)."""

from bedside.scorers.cpb.judges import cpb_failure, cpb_overreaction, cpb_persistence
from bedside.scorers.simulator import simulator_check

#: the order of its scorers (:attr:`bedside.benchmark.Benchmark.scorers`): the headline rates failure, overreaction
#: (with its types A-D) and persistence, all lower-is-better, then the checks of the continuation patient's own errors
#: (-T turns=N -T simulator_check=true); a scorer of this package it does not name follows them (by module name)
ORDER = (cpb_failure, cpb_overreaction, cpb_persistence, simulator_check)
