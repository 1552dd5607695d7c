"""Makes the `fake_openai` fixture available to the tests in this folder (other folders import it)."""

from tests.fakes.openai_server import fake_openai  # noqa: F401
