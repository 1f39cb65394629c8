"""Build MIMIC-IV-Ext-DischargeBench from a credentialed MIMIC-IV copy (paper Appendix A.1).

- :mod:`bedside.discharge.mimic.cohort`: cohort selection and the stratified sample (pandas, chunked);
- :mod:`bedside.discharge.mimic.icd`: ICD-9 / ICD-10 chapter of a main diagnosis (the 24 labels of Table 2);
- :mod:`bedside.discharge.mimic.extract`: what the extraction task does with a reply (the case record, the
  Topic-Checklist rule, the audit rows), the data-use guard, and the writer of the output files;
- :mod:`bedside.discharge.mimic.build`: the ``bedside build-cases`` command.

The field extraction itself is the Inspect task ``tasks/discharge_build_cases.py``.
"""
