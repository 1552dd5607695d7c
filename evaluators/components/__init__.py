"""The seven components, one package each: data definitions, rules and analyses.

They reach the registry through this project's entry points (`agent_factory.components` for each package's
`SPEC`, `agent_factory.rules` for each `rules` module; pyproject.toml), read on the first lookup: importing
this package registers nothing.
"""
