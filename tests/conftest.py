"""Test-wide settings: no model provider is ever reached; litellm never fetches its cost map."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import pydantic_ai.models  # noqa: E402
import pytest  # noqa: E402

pydantic_ai.models.ALLOW_MODEL_REQUESTS = False

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("AGENT_FACTORY_SHARED_DATA", REPO.parent / "shared" / "data"))
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def shared_data(*parts: str) -> Path:
    """Path under ../shared/data, or skip the test when that data is absent."""
    p = SHARED_DATA.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"real data not present: {p}")
    return p


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES
