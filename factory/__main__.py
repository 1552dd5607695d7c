"""`python -m factory` is the `agent-factory` command."""

from agent_factory.factory.cli import main

main()
