"""The audit (docs/method.md section 6): a stratified sample re-collected by a second rater, agreement per data
item, admission and retirement, rules against models, validity, corrected estimates, rewrites and the corrections
log. The measures are pure (`evaluators/audit/`); this package does the sampling, collection and storage."""
