"""DischargeBench scorers: one module per score (Table 1's columns, the session outcome, the record
the judges read), plus the advice-safety extension, its probe check and the case-building check."""
