"""Long-horizon tasks' I/O (issue 35): task runs brought in. Now: a benchmark's trajectories imported
(`importing`: tau-bench). To come: task suites, the runner that records run contracts as spans, the metrics
beyond completion. The pure parts are `evaluators.tasks`; the runs are kept by `factory.store.tasks`."""
