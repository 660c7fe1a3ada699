"""Run a test module's checkout cases with both writers: pcheckout's engine and git's own
checkout (``--writer``).  Use: ``from writers import writer`` and
``pytestmark = pytest.mark.usefixtures("writer")``."""

from __future__ import annotations

import pytest

WRITERS = ("pcheckout", "git")


@pytest.fixture(params=WRITERS)
def writer(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The writer every checkout of the test uses (PCHECKOUT_WRITER, as a user sets it)."""
    name = str(request.param)
    monkeypatch.setenv("PCHECKOUT_WRITER", name)
    return name
