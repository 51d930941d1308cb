from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from coffer_kernel.locations import Locations
from cofferd.domain.models import KnowledgeBase
from cofferd.surfaces.core import Coffer
from tests.support.daemon import Daemon, cleanup, new_daemon
from tests.support.web_session import CHROMIUM, CHROMIUM_ARGS


@pytest.fixture
def locations(tmp_path: Path) -> Locations:
    return Locations(home=tmp_path / "home", socket=tmp_path / "run" / "cofferd.sock")


@pytest.fixture
async def coffer(locations: Locations) -> AsyncIterator[Coffer]:
    c = await Coffer.open(locations)
    yield c
    await c.close()


@pytest.fixture
async def kb(coffer: Coffer) -> KnowledgeBase:
    return await coffer.kbs.create("notes")


@pytest.fixture
def docs(locations: Locations, kb: KnowledgeBase) -> Path:
    return locations.docs_dir(kb.name)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium driven by Playwright, one for a test module; the test is skipped,
    saying why, where either is missing."""
    playwright = pytest.importorskip(
        "playwright.sync_api", reason="Playwright for Python is not installed (the dev extra)"
    )
    if not Path(CHROMIUM).exists():
        pytest.skip("no Chromium at /usr/bin/chromium (`make test` installs Debian's where it may)")
    with playwright.sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    d = new_daemon(tmp_path)
    try:
        yield d.start()
    finally:
        cleanup(d)


@pytest.fixture(scope="module")
def shared_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    d = new_daemon(tmp_path_factory.mktemp("shared"))
    try:  # agents may add files from agent_root only
        yield d.start(COFFER_AGENT_ROOTS=str(d.agent_root))
    finally:
        cleanup(d)
