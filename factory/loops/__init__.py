"""The two loops around a run: the audit (inner loop, `audit/`) and, later, the gate (outer loop, `gate/`). They
sit over the jobs (pipeline, views, simulate): an audit re-collects through the cascade and reruns analyses."""
