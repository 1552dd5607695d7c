"""The command line (`agent-factory ...`): thin commands over `agent_factory.factory.project.Project`."""
