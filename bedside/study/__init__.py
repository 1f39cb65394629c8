"""A blinded clinician study of any benchmark: models and physicians on the same cases, rated blind by several
raters (``bedside study``, docs/clinician-study.md). The items raters answer: :mod:`bedside.study.items` (each
benchmark's own through its tools' ``study``); the study folder: :mod:`bedside.study.build`; ratings read back:
:mod:`bedside.study.ratings`; the analysis: :mod:`bedside.study.analysis`."""
