"""Reports, judge–human agreement and the CI regression gate for bedside eval logs (issue #10).

Sub-commands of ``bedside`` (also ``python -m bedside``):

- ``bedside report LOG_OR_DIR... --out DIR`` (:mod:`bedside.reporting.build`): ``DIR/index.html``
  with the papers' tables and figures (PNG and SVG) and every table as CSV;
- ``bedside strata LOG...`` (:mod:`bedside.reporting.strata`): every score per stratum (mean, 95 % CI,
  n); ``bedside audit LOG...`` (:mod:`bedside.discharge.audit`): DischargeBench's clean-complete audit;
- ``bedside agreement --annotations FILE.csv LOG...`` (:mod:`bedside.discharge.agreement`): judge
  vs physician and physician vs physician agreement (Cohen's κ, weighted κ, Spearman's ρ, n);
- ``bedside compare BASELINE.eval CANDIDATE.eval [--metric KEY] [--max-drop X]``
  (:mod:`bedside.reporting.compare`): paired-bootstrap comparison with a Markdown summary; with
  ``--max-drop``, the regression gate (``bedside delta``: its deprecated alias without a gate);
- ``bedside annotate export LOG... --cases N --seed S --out DIR`` (:mod:`bedside.discharge.annotate`):
  blind physician annotation packets and a CSV template that ``agreement`` reads;
- ``bedside rescore LOG... --grader MODEL --out DIR`` (:mod:`bedside.reporting.rescore`): re-judge
  logs with another grader; ``report`` then shows how the ranking moves
  (:mod:`bedside.reporting.sweep`: leaderboard with paired differences, Kendall's tau).

Logs are read by :mod:`bedside.reporting.load` (many logs, for ``report``) and
:mod:`bedside.reporting.scores` (one log's score table); what differs per benchmark (strata, metric
directions, headline keys, ...) comes from the descriptors in :mod:`bedside.benchmarks`. The numbers
are computed in :mod:`bedside.reporting.tables` (pandas, scipy, scikit-learn), every interval by
bedside's one rule (:mod:`bedside.intervals`); :mod:`bedside.reporting.figures` only draws them.
"""
