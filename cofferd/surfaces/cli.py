"""`cofferd`: open the data home, bring every knowledge base up to date."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from cofferd import __version__
from cofferd.application.knowledge_bases import DEFAULT_KB
from cofferd.infrastructure.paths import Locations
from cofferd.surfaces.core import Coffer

log = logging.getLogger("cofferd")


async def start(locations: Locations) -> None:
    coffer = await Coffer.open(locations)
    try:
        if not coffer.kbs.list():
            await coffer.kbs.create(DEFAULT_KB, actor="system")
        for kb in coffer.kbs.list():
            if kb.enabled:
                result = await coffer.reindexer.reconcile(kb)
                log.info("%s: %s", kb.name, result.as_dict())
    finally:
        await coffer.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cofferd", description=__doc__)
    parser.add_argument("--version", action="version", version=f"cofferd {__version__}")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr, format="%(message)s")
    asyncio.run(start(Locations.from_env()))
    return 0
