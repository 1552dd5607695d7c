"""Long-horizon tasks' pure parts (issue 35): the task runs and the per-task report as data (`model`), pass^k by
tau-bench's definition over them (`passk`), task suites (`suite`) and their success criteria decided on a final
state (`criteria`). No I/O: `factory/tasks/` brings runs in (an imported benchmark file now, the task runner later)
and reads suites and sandboxes, and `factory/store/tasks.py` keeps the runs."""
