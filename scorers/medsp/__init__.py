"""MedSP1000 scorers: the frozen-rubric evaluator's call and rates (:mod:`.rubric`) and its prompts
(:mod:`.evaluator`)."""
