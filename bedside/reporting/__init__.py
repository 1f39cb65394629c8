"""Reports, judge–human agreement and the CI regression gate for bedside eval logs (issue #10).

Sub-commands of ``bedside`` (also ``python -m bedside``):

- ``bedside report LOG_OR_DIR... --out DIR`` (:mod:`bedside.reporting.build`): ``DIR/index.html``
  with the papers' tables and figures (PNG and SVG) and every table as CSV;
- ``bedside agreement --annotations FILE.csv LOG...`` (:mod:`bedside.reporting.agreement`): judge
  vs physician and physician vs physician agreement (Cohen's κ, weighted κ, Spearman's ρ, n);
- ``bedside compare BASELINE.eval CANDIDATE.eval --metric KEY --max-drop X``
  (:mod:`bedside.reporting.compare`): paired-bootstrap regression gate with a Markdown summary.

The numbers are computed in :mod:`bedside.reporting.tables` (pandas, scipy, scikit-learn), every
interval by bedside's one rule (:mod:`bedside.intervals`); :mod:`bedside.reporting.figures` only
draws them.
"""
