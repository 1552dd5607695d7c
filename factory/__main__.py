"""`python -m agent_factory.factory` is the `agent-factory` command (as is `python -m agent_factory`)."""

from agent_factory.factory.cli.app import main

main()
