"""Reports and the CI regression gate for bedside eval logs, shared by every benchmark.

Sub-commands of ``bedside`` (also ``python -m bedside``):

- ``bedside report LOG_OR_DIR... --out DIR`` (:mod:`bedside.reporting.build`): ``DIR/index.html``
  with each benchmark's section (the papers' tables and figures, PNG and SVG) and every table as CSV;
- ``bedside strata LOG...`` (:mod:`bedside.reporting.strata`): every score per stratum (mean, 95 % CI,
  n);
- ``bedside compare BASELINE.eval CANDIDATE.eval [--metric KEY] [--max-drop X]``
  (:mod:`bedside.reporting.compare`): paired-bootstrap comparison with a Markdown summary and the
  minimum detectable difference; with ``--max-drop``, the regression gate;
- ``bedside estimate PILOT... --cases N | --detect D`` (:mod:`bedside.reporting.estimate`): the bill of a
  planned run, and the cases and epochs it needs to detect a difference;
- ``bedside rescore LOG... --grader MODEL --out DIR`` (:mod:`bedside.reporting.rescore`): re-judge
  logs with another grader; ``report`` then shows how the ranking moves
  (:mod:`bedside.reporting.sweep`: leaderboard with paired differences, Kendall's tau); with
  ``--simulator-checker MODEL``, check the simulated patient again (``bedside/human``: a person's realism rating);
- ``bedside agreement LOG... --people DIR... | --annotations FILE`` (:mod:`bedside.reporting.agreement`): the
  simulator checker against people's realism rating, per patient turn
  (:mod:`bedside.reporting.simulator_agreement`), or a benchmark's judge against physicians (its tools'
  ``agreement``).

A benchmark's own commands and report section are in its package (its tools' ``commands`` and
``report``, ``bedside/<benchmark>/tools.py``). Logs are read by :mod:`bedside.reporting.load` (many logs,
for ``report``) and :mod:`bedside.reporting.scores` (one log's score table); what differs per benchmark
(strata, metric directions, headline keys, ...) comes from the descriptors in :mod:`bedside.benchmarks`. The numbers
are computed in :mod:`bedside.reporting.tables` (pandas, scipy, scikit-learn), every interval by
bedside's one rule (:mod:`bedside.intervals`); :mod:`bedside.reporting.figures` only draws them. The
noise floor is in :mod:`bedside.reporting.detectable` (the minimum detectable difference at a run's n,
and the cases a wanted one needs) and :mod:`bedside.reporting.epochs` (a run's own run-to-run noise over
its epochs: within-case SD, verdict flips, pass^k).
"""
