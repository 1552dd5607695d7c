"""Long-horizon tasks' pure parts (issue 35): the task runs and the per-task report as data (`model`), and pass^k
by tau-bench's definition over them (`passk`). No I/O: `factory/tasks/` brings runs in (an imported benchmark file
now, the task runner later) and `factory/store/tasks.py` keeps them."""
