"""CPB-Bench scorers: the failure, overreaction and persistence judges (:mod:`.judges`)."""
