"""DischargeBench solvers: the encounter (:mod:`.encounter`), its supervision (:mod:`.monitor`), the safety
probe's replayed transcripts (:mod:`.safety_probe`) and the MIMIC case extraction (:mod:`.build_cases`)."""
