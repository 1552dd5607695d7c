"""The `airline` knowledge pack as a plugin: its YAML (`pack.yaml`) and its rules (`rules.py`), registered through
the entry points a third-party pack uses (`agent_factory.rules`; the pack file through the loader's built-ins)."""
