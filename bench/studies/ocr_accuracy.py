"""OCR character accuracy and seconds per page (issue 44 §4), through Coffer's own OCR
(cofferd.infrastructure.conversion.ocr_engine: RapidOCR, PP-OCRv6 small, bundled models).

Known texts are drawn as pages (A4 at 150 dpi, 1240 x 1754, a real font: DejaVu Serif for
English, Noto Sans CJK for the others): English abstracts from SciFact, Chinese paragraphs
from CMRC 2018, Japanese from JSQuAD (/work/shared/data, read only), and a Korean text
written here. Each page is read clean (as drawn) and noisy (turned 1 degree, blurred,
saved as JPEG at quality 60). Character accuracy is 1 - edit distance / reference length,
whitespace ignored for Chinese, Japanese and Korean and made single for English; seconds
per page is the median of OCR's wall time per page, CPU-s/page the median of its CPU time
(what a loaded machine changes least; the models loaded before). `--repo DIR` measures
another checkout's OCR (e.g. the commit before a change) with this checkout's pages;
`--font-px 20` draws smaller type (~9.5 pt at 150 dpi) to check that detection still finds it.

    PYTHONPATH=. nice -n 10 .venv/bin/python -m bench.studies.ocr_accuracy [--pages 3] [--repo DIR]

Needs `pip install 'coffer[ocr]'` and the fonts (Debian: fonts-dejavu-core, fonts-noto-cjk).
Target: >= 0.95 on clean pages. Results: docs/benchmarks.md, "OCR (issue 44)".
"""

from __future__ import annotations

import argparse
import io
import json
import re
import statistics
import time
from pathlib import Path
from typing import Any

from bench.common import machine, run_in_repo

DATA = Path("/work/shared/data")
SERIF = "/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf"
CJK = "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc"
PAGE = (1240, 1754)
MARGIN = 100
FONT_PX = 30  # ~14 pt at 150 dpi
KOREAN = (
    "한국어는 한반도와 그 주변 지역에서 쓰이는 언어이다. 한글은 조선의 세종대왕이 "
    "백성을 위하여 만든 글자로, 천사백사십삼년에 창제되고 천사백사십육년에 반포되었다. "
    "자음과 모음을 모아 음절 단위로 쓰며, 배우기 쉽고 과학적인 문자로 알려져 있다. "
    "서울은 대한민국의 수도이며 정치, 경제, 문화의 중심지이다. 한강이 도시의 가운데를 "
    "흐르고, 북한산과 남산이 도시를 둘러싸고 있다. 오늘 회의에서는 다음 분기의 예산과 "
    "새로운 연구 계획을 논의하였다. 참석자들은 자료를 미리 읽고 의견을 정리해 오기로 했다."
)
_SPACE = re.compile(r"\s+")


def texts(language: str, pages: int) -> list[str]:
    """`pages` known texts of the language, each about a page's worth."""
    if language == "ko":
        return [KOREAN] * pages
    corpus = {"en": "scifact", "zh": "cmrc2018-dev", "ja": "jsquad-valid"}[language]
    limit = 1400 if language == "en" else 520
    found = []
    with (DATA / corpus / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            text = " ".join(json.loads(line)["text"].split())
            if len(text) >= limit:
                found.append(text[:limit])
            if len(found) == pages:
                break
    return found


def wrapped(text: str, font: Any, width: int, by_words: bool) -> list[str]:
    """The text cut into lines no wider than `width` (by words for English, else by
    characters)."""
    units = text.split(" ") if by_words else list(text)
    joint = " " if by_words else ""
    lines: list[str] = []
    line = ""
    for unit in units:
        candidate = f"{line}{joint}{unit}" if line else unit
        if line and font.getlength(candidate) > width:
            lines.append(line)
            line = unit
        else:
            line = candidate
    return [*lines, line] if line else lines


def page_of(lines: list[str], font: Any) -> Any:
    from PIL import Image, ImageDraw

    image = Image.new("L", PAGE, 255)
    pen = ImageDraw.Draw(image)
    for n, line in enumerate(lines):
        pen.text((MARGIN, MARGIN + n * int(font.size * 1.7)), line, font=font, fill=0)
    return image


def noisy(image: Any) -> Any:
    from PIL import Image, ImageFilter

    turned = image.rotate(1.0, resample=Image.Resampling.BICUBIC, fillcolor=255)
    blurred = turned.filter(ImageFilter.GaussianBlur(0.8))
    out = io.BytesIO()
    blurred.save(out, "JPEG", quality=60)
    return Image.open(io.BytesIO(out.getvalue())).convert("L")


def normal(text: str, language: str) -> str:
    return _SPACE.sub(" ", text).strip() if language == "en" else _SPACE.sub("", text)


def distance(a: str, b: str) -> int:
    """Levenshtein distance, two rows."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=3, help="pages per language")
    parser.add_argument("--languages", default="en,zh,ja,ko")
    parser.add_argument("--font-px", type=int, default=FONT_PX, help="type size in pixels")
    parser.add_argument("--repo", type=Path, default=None, help="measure this checkout's OCR")
    args = parser.parse_args()
    if args.repo is not None:
        run_in_repo(args.repo.resolve())
    from PIL import ImageFont

    from cofferd.infrastructure.conversion import ocr_engine

    started = time.perf_counter()
    ocr_engine._engine()  # the models, loaded once (as in the converter's process)
    ocr_engine.ocr_page(page_of(["warm"], ImageFont.truetype(SERIF, FONT_PX)))
    print(f"machine: {machine()}; models loaded and warm in {time.perf_counter() - started:.1f} s")
    print(f"OCR of {Path(ocr_engine.__file__).resolve().parents[3]}, type {args.font_px} px")
    header = f"{'lang':5} {'variant':7} {'pages':>5} {'chars':>6} {'accuracy':>9} {'s/page':>7}"
    print(f"{header} {'CPU-s/page':>10}")
    results: dict[str, Any] = {}
    for language in args.languages.split(","):
        font = ImageFont.truetype(SERIF if language == "en" else CJK, args.font_px)
        width = PAGE[0] - 2 * MARGIN
        for variant in ("clean", "noisy"):
            errors = chars = 0
            seconds, cpu = [], []
            for text in texts(language, args.pages):
                lines = wrapped(text, font, width, by_words=language == "en")
                image = page_of(lines, font)
                image = noisy(image) if variant == "noisy" else image
                began, began_cpu = time.perf_counter(), time.process_time()
                read = ocr_engine.ocr_page(image)
                seconds.append(time.perf_counter() - began)
                cpu.append(time.process_time() - began_cpu)
                reference = normal(
                    " ".join(lines) if language == "en" else "".join(lines), language
                )
                errors += distance(reference, normal(read, language))
                chars += len(reference)
            accuracy = max(0.0, 1 - errors / chars)
            median, median_cpu = statistics.median(seconds), statistics.median(cpu)
            results[f"{language}/{variant}"] = {
                "accuracy": accuracy,
                "s_per_page": median,
                "cpu_s_per_page": median_cpu,
            }
            row = f"{language:5} {variant:7} {len(seconds):>5} {chars:>6}"
            print(f"{row} {accuracy:>9.3f} {median:>7.2f} {median_cpu:>10.2f}")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
