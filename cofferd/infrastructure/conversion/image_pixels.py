"""Images opened within a pixel budget, in the converter's process: an image's size is read
from its header and checked before a single pixel is decoded, so a decompression bomb (a
small PNG that claims 100,000 x 100,000 pixels) is refused with the reason, and an image
past the working size is decoded reduced (JPEG's draft mode) or scaled down before OCR.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PIL.Image import Image

MAX_PIXELS = 64_000_000  # beyond, an image is refused (a bomb, or no page anyone scans)
WORK_PIXELS = 8_000_000  # beyond, it is scaled down to this many before OCR (~A4 at 340 dpi)


class ImageRefused(Exception):
    """The image cannot be read within the budget, or at all; why, as a sentence."""


def too_many(width: int, height: int, limit: int | None = None) -> str | None:
    limit = MAX_PIXELS if limit is None else limit
    if width * height > limit:
        return (
            f"too large: the image is {width:,} x {height:,} pixels "
            f"(limit {limit / 1e6:g} million: a decompression bomb?)"
        )
    return None


def open_bounded(path: Path, max_pixels: int | None = None) -> Image:
    """The image at `path` (its first frame), decoded only when its header's size is within
    `max_pixels` (MAX_PIXELS), at most WORK_PIXELS of it."""
    from PIL import Image as PilImage
    from PIL import UnidentifiedImageError

    limit = MAX_PIXELS if max_pixels is None else max_pixels
    PilImage.MAX_IMAGE_PIXELS = limit  # Pillow's own check agrees (it raises past twice)
    try:
        image = PilImage.open(path)  # the header only
    except PilImage.DecompressionBombError as exc:
        raise ImageRefused(f"too large: {exc}") from None
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise ImageRefused(f"damaged, or not a readable image: {exc}") from None
    with image:
        if reason := too_many(image.width, image.height, limit):
            raise ImageRefused(reason)
        try:
            if image.format == "JPEG":  # decoded at a fraction of its size, not scaled after
                image.draft("RGB", _reduced(image.width, image.height))
            image.load()
            return reduced(image)
        except PilImage.DecompressionBombError as exc:
            raise ImageRefused(f"too large: {exc}") from None
        except (OSError, ValueError, SyntaxError) as exc:  # truncated, a lying chunk
            raise ImageRefused(f"damaged, or not a readable image: {exc}") from None


def reduced(image: Image) -> Image:
    """The image scaled down to at most WORK_PIXELS (itself when it is no larger), in RGB."""
    from PIL import Image as PilImage

    size = _reduced(image.width, image.height)
    if image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info:
        rgba = image.convert("RGBA")  # a screenshot's clear background reads as white
        rgb = PilImage.new("RGB", rgba.size, "white")
        rgb.paste(rgba, mask=rgba.getchannel("A"))
    else:
        rgb = image.convert("RGB") if image.mode != "RGB" else image
    return rgb.resize(size) if size != rgb.size else rgb.copy()


def _reduced(width: int, height: int) -> tuple[int, int]:
    if width * height <= WORK_PIXELS:
        return width, height
    scale = (WORK_PIXELS / (width * height)) ** 0.5
    return max(1, int(width * scale)), max(1, int(height * scale))
