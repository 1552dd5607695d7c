"""The gate's pure parts (the outer loop, docs/method.md section 7): its result models (`model`), the columnar
per-user statistics (`columns`), the user-clustered tests vectorized over splits (`stats`), the A/A calibration
(`calibrate`), seeded-defect power (`power`), the always-valid sequential mode (`sequential`) and the findings
turned into fixes (`fixes`). No I/O: `factory/loops/gate/` reads the stores and writes what the gate decides."""
