"""Suites: what a run evaluates with (`read`: load a suite directory or the defaults; `write`: build one from a
spec; `evaluator_file`: one component's reviewed file; `review`: diffs and approval)."""
