"""The local OpenAI-compatible test server as a fixture for the evaluator tests (`tests/fakes/openai_server.py`)."""

from tests.fakes.openai_server import fake_openai  # noqa: F401 - a fixture: pytest finds it by name here
