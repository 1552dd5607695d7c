"""The composition root: `Project` assembles a store, a suite, the model config, the cache and the redactor once
and offers the jobs (ingest, run, watch, summary, show, export, report, build, diff, approve) as methods;
`open_project(...)` makes one. `agent_factory.open_project` is the same function.

- `root`: `Project`, `open_project`, `DEFAULT_STORE`;
- `outcomes`: what a job returns beside the layers' own models (`ReportWritten`, `Approved`).
"""

from agent_factory.factory.project.root import DEFAULT_STORE, Project, open_project

__all__ = ["DEFAULT_STORE", "Project", "open_project"]
