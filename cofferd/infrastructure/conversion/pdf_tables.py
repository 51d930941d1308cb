"""The tables a PDF page draws, as Markdown: only where ruling lines make a grid.

A page is looked at with PDFium's page objects: only a page whose paths may rule a grid
(three rules across, lines or the sides of boxes, each crossing two rules down) may hold a
table. On such a page pdfplumber's table finder (its "lines" strategy: cells bounded by
drawn edges) is given those paths' edges, and says where each table and cell is; a table
of at least two rows and two columns becomes a Markdown table whose rows are the drawn
rows, each cell's text PDFium's text inside the cell. Prose, justified or in columns,
draws no grid and is never a table. pdfplumber never parses the PDF itself here (its
pdfminer reading of a page cost more than PDFium's reading of the whole page).
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from typing import Any

from cofferd.infrastructure.conversion.pdf_lines import Box

THIN = 2.5  # points: a path this thin is a rule
RULE_MIN = 8.0  # points: a box this wide and high (a cell), not a rule
GRID_MIN = 3  # rules across (two rows) ...
CROSSED_MIN = 2  # ... each crossing this many rules down (a table open at its sides, as
# IEEE's are, has two inner ones; a frame's top and bottom cross two too, and the table
# finder then finds no table of two columns in it: cheap, given paths alone)
SAME_EDGE = 2.0  # points: edges closer than this are one (a box's side and its rule)
OBJECTS_MAX = 5_000  # a page's objects looked at for rules (a hostile page has millions)
RULES_MAX = 400  # rules compared for a grid
TABLE_SETTINGS = {"vertical_strategy": "lines", "horizontal_strategy": "lines"}
CELL_MAX_CHARS = 1_000


def drawn_tables(page: Any, text_page: Any) -> list[tuple[Box, str]]:
    """Each table ruled on the page (a pypdfium2 page): its box (PDF points, y up) and its
    Markdown, rows as drawn, each cell's text read by PDFium (`text_page`)."""
    import pypdfium2.raw as pdfium_c

    paths = list(_paths(page, pdfium_c))
    if not rules_a_grid(paths):
        return []
    from pdfplumber.table import TableFinder

    height = float(page.get_height())
    found = []
    ruled: Any = _Ruled(paths, height)  # all of a page the finder reads
    for table in TableFinder(ruled, TABLE_SETTINGS).tables:
        rows = [
            split
            for row in table.rows
            for split in _lines_as_rows([_cell_text(text_page, c, height) for c in row.cells])
        ]
        if len(rows) < 2 or max(len(row) for row in rows) < 2:
            continue  # a frame around text, a rule under a heading: no table
        x0, top, x1, bottom = table.bbox
        found.append(((x0, height - bottom, x1, height - top), _markdown(rows)))
    return found


class _Ruled:
    """What pdfplumber's table finder reads of a page: the edges of its paths (each path's
    box, as pdfplumber takes a rectangle), y measured down from `height`."""

    def __init__(self, paths: list[Box], height: float) -> None:
        from pdfplumber.utils.geometry import obj_to_edges

        self.bbox = (0.0, 0.0, max((p[2] for p in paths), default=0.0), height)
        self.edges = [
            edge
            for left, bottom, right, top in paths
            for edge in obj_to_edges(
                {
                    "object_type": "rect",
                    "x0": left,
                    "x1": right,
                    "y0": bottom,
                    "y1": top,
                    "top": height - top,
                    "bottom": height - bottom,
                    "doctop": height - top,
                    "width": right - left,
                    "height": top - bottom,
                }
            )
        ]


def rules_a_grid(paths: list[Box]) -> bool:
    """Whether these paths (boxes of a page's own paths, not a figure's) may rule a grid:
    at least GRID_MIN rules across each crossing at least CROSSED_MIN rules down."""
    across: list[Rule] = []  # (y, x from, x to)
    down: list[Rule] = []  # (x, y from, y to)
    for left, bottom, right, top in paths:
        width, height = right - left, top - bottom
        if height <= THIN and width > height:  # short too: a rule drawn in pieces joins
            across.append(((bottom + top) / 2, left, right))
        elif width <= THIN and height > width:
            down.append(((left + right) / 2, bottom, top))
        elif width >= RULE_MIN and height >= RULE_MIN:  # a box: its four sides
            across += [(bottom, left, right), (top, left, right)]
            down += [(left, bottom, top), (right, bottom, top)]
        if len(across) + len(down) > RULES_MAX:
            break
    if len(across) < GRID_MIN or len(down) < GRID_MIN:
        return False
    columns = _joined(down)
    crossing = [
        where
        for where, start, end in _joined(across)
        if _crossed(where, start, end, columns) >= CROSSED_MIN
    ]
    return _distinct(crossing) >= GRID_MIN


Rule = tuple[float, float, float]  # where it lies, from, to


def _joined(rules: list[Rule]) -> list[Rule]:
    """Rules on one line that touch made one (a row of cells' sides, one row rule)."""
    joined: list[Rule] = []
    for where, start, end in sorted(rules):
        if joined and where - joined[-1][0] <= SAME_EDGE and start <= joined[-1][2] + SAME_EDGE:
            joined[-1] = (joined[-1][0], joined[-1][1], max(end, joined[-1][2]))
        else:
            joined.append((where, start, end))
    return joined


def _crossed(where: float, start: float, end: float, columns: list[Rule]) -> int:
    """How many distinct rules down cross (or touch) the rule across at `where`."""
    return _distinct(
        [x for x, low, high in columns if _on(x, start, end) and _on(where, low, high)]
    )


def _on(point: float, start: float, end: float) -> bool:
    return start - SAME_EDGE <= point <= end + SAME_EDGE


def _distinct(edges: list[float]) -> int:
    """How many edges there are, those closer than SAME_EDGE taken as one."""
    count, last = 0, None
    for edge in sorted(edges):
        if last is None or edge - last > SAME_EDGE:
            count += 1
        last = edge
    return count


def _paths(page: Any, pdfium_c: Any) -> Iterator[tuple[float, float, float, float]]:
    raw = page.raw
    left, bottom, right, top = (ctypes.c_float() for _ in range(4))
    for n in range(min(OBJECTS_MAX, pdfium_c.FPDFPage_CountObjects(raw))):
        item = pdfium_c.FPDFPage_GetObject(raw, n)
        if pdfium_c.FPDFPageObj_GetType(item) != pdfium_c.FPDF_PAGEOBJ_PATH:
            continue
        if not pdfium_c.FPDFPageObj_GetBounds(
            item, ctypes.byref(left), ctypes.byref(bottom), ctypes.byref(right), ctypes.byref(top)
        ):
            continue
        yield left.value, bottom.value, right.value, top.value


def _cell_text(
    text_page: Any, cell: tuple[float, float, float, float] | None, height: float
) -> list[str]:
    """The cell's lines (none for a cell merged into its neighbour)."""
    if cell is None:
        return []
    x0, top, x1, bottom = cell
    text = str(text_page.get_text_bounded(x0, height - bottom, x1, height - top))
    lines = text.replace("\ufffe", "-")[:CELL_MAX_CHARS].splitlines()
    return [" ".join(line.split()) for line in lines if line.strip()]


def _lines_as_rows(cells: list[list[str]]) -> list[list[str]]:
    """A drawn row whose filled cells all hold the same number of lines is that many rows
    (a table ruled only under its header); else one row, each cell's lines joined."""
    counts = {len(lines) for lines in cells if lines}
    if len(counts) == 1 and (count := counts.pop()) > 1:
        return [[lines[n] if lines else "" for lines in cells] for n in range(count)]
    return [[" ".join(lines) for lines in cells]]


def _markdown(rows: list[list[str]]) -> str:
    columns = max(len(row) for row in rows)
    lines = []
    for n, row in enumerate(rows):
        cells = [cell.replace("|", "\\|") for cell in row] + [""] * (columns - len(row))
        lines.append("| " + " | ".join(cells) + " |")
        if n == 0:
            lines.append("|" + " --- |" * columns)
    return "\n".join(lines)
