"""The `retail` knowledge pack: a YAML file only (`pack.yaml`, the tau-bench retail domain), registered as a built-in
of the loader. It shows that a second tool-calling domain needs a pack and no code."""
