"""The gate's I/O (the outer loop, docs/method.md section 7): each side's data from the stores (`data`), seeded
defects recollected through the kernel's rules (`defects`), the calibration (`calibrate`) and one gate run with
its incidents and fixes (`run`). The arithmetic is pure, in `evaluators.gate`."""
