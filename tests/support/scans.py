"""Images of text, and PDFs whose pages are only such images (no text layer): what OCR
reads, drawn with a real font."""

from __future__ import annotations

import io
from pathlib import Path

from fpdf import FPDF
from PIL import Image, ImageDraw, ImageFont

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


def drawn(lines: list[str], size: tuple[int, int] = (1200, 420), fmt: str = "PNG") -> bytes:
    """An image with `lines` drawn in black on white, as a screenshot shows text."""
    image = Image.new("RGB", size, "white")
    pen = ImageDraw.Draw(image)
    font = ImageFont.truetype(FONT, 34) if Path(FONT).is_file() else ImageFont.load_default(34)
    for n, line in enumerate(lines):
        pen.text((50, 60 + 90 * n), line, font=font, fill="black")
    out = io.BytesIO()
    image.save(out, fmt)
    return out.getvalue()


def scan_and_text_pdf(scanned: list[str], typed: str) -> bytes:
    """A PDF whose page 1 is only an image of `scanned` (no text layer), page 2 text."""
    pdf = FPDF()
    pdf.add_page()
    pdf.image(Image.open(io.BytesIO(drawn(scanned))), x=10, y=10, w=190)
    pdf.add_page()
    pdf.set_font("helvetica", size=12)
    pdf.cell(text=typed)
    return bytes(pdf.output())


def scanned_pdf(pages: list[str]) -> bytes:
    """A PDF of pages that are only images of text (no text layer), one line a page."""
    pdf = FPDF()
    for line in pages:
        pdf.add_page()
        pdf.image(Image.open(io.BytesIO(drawn([line]))), x=10, y=10, w=190)
    return bytes(pdf.output())
