"""CPB-Bench scorers: the failure, overreaction and persistence judges (:mod:`.judges`)."""

from bedside.scorers.cpb.judges import cpb_failure, cpb_overreaction, cpb_persistence

#: its scorers (:attr:`bedside.benchmark.Benchmark.scorers`): the headline rates failure, overreaction (with its
#: types A-D) and persistence, all lower-is-better
SCORERS = (cpb_failure, cpb_overreaction, cpb_persistence)
