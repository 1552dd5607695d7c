"""Long-horizon tasks' I/O (issue 35). Now: a benchmark's trajectories imported as task runs (`importing`:
tau-bench), task suites read (`suite_io`), and each trial's sandbox with its tools (`sandbox`). To come: the runner
that records run contracts as spans, the metrics beyond completion. The pure parts are `evaluators.tasks`; the runs
are kept by `factory.store.tasks`."""
