"""The audit's measures (the inner loop, docs/method.md section 6), pure: agreement per data item and admission,
rules against models, validity, score reliability and corrected estimates, over `Rating`s, flags and results.
`factory/loops/audit/` samples, re-collects, stores and retires around them."""
