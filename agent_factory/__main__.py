"""`python -m agent_factory` is the `agent-factory` command."""

from agent_factory.factory.cli.app import main

main()
