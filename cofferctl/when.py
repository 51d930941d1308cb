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


FIRST = "0001-01-01T00:00:00Z"  # what a time too far back or ahead to represent becomes
LAST = "9999-12-31T23:59:59Z"


def parse_when(text: str, *, end_of_day: bool = False, now: datetime | None = None) -> str:
    """The UTC time `text` names; ValueError with a hint when it names none."""
    text = text.strip()
    try:
        moment = _moment(text, end_of_day, now or datetime.now(UTC))
        return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    except OverflowError:  # before year 1 or after 9999: before or after every note
        return FIRST if _AGO.fullmatch(text) or text.startswith("0001-") else LAST


def _moment(text: str, end_of_day: bool, now: datetime) -> datetime:
    ago = _AGO.fullmatch(text)
    if ago:
        return now - timedelta(**{_UNITS[ago.group(2)]: int(ago.group(1))})
    if len(text) == 10:
        day = date.fromisoformat(text) + timedelta(days=1 if end_of_day else 0)
        return datetime(day.year, day.month, day.day).astimezone()  # local midnight
    moment = datetime.fromisoformat(text)
    return moment if moment.tzinfo else moment.astimezone()  # a local time
