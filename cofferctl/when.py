"""Times as people type them on the command line, for `--since` and `--until`.

    2026-11-30            that day in the local time zone (`--until` includes the day)
    2026-11-30T18:00      a local time; with a zone (`Z`, `+01:00`) that time
    3d, 12h, 2w, 30m      that long ago

Each becomes an ISO 8601 UTC time, which is what the API compares with.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta

_AGO = re.compile(r"(\d+)\s*([mhdw])")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_when(text: str, *, end_of_day: bool = False, now: datetime | None = None) -> str:
    """The UTC time `text` names; ValueError with a hint when it names none."""
    now = now or datetime.now(UTC)
    text = text.strip()
    ago = _AGO.fullmatch(text)
    if ago:
        moment = now - timedelta(**{_UNITS[ago.group(2)]: int(ago.group(1))})
    elif len(text) == 10:
        day = date.fromisoformat(text) + timedelta(days=1 if end_of_day else 0)
        moment = datetime(day.year, day.month, day.day).astimezone()  # local midnight
    else:
        moment = datetime.fromisoformat(text)
        if moment.tzinfo is None:
            moment = moment.astimezone()  # a local time
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
