from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cofferd.domain.models import KnowledgeBase
from cofferd.infrastructure.paths import Locations
from cofferd.surfaces.core import Coffer


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
