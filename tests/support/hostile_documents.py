"""Documents made to hurt a converter: a zip named .pdf, zips nested deep, a PDF whose
title refers to itself, a PNG that inflates to a billion pixels (the tests and
bench.studies.hostile_seams use them)."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib


def zip_named_pdf(megabytes: int = 150) -> bytes:
    out = io.BytesIO()
    line = b"the quick brown fox jumps over the lazy dog 0123456789\n"
    with (
        zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z,
        z.open("big.txt", "w") as fh,
    ):
        for _ in range(megabytes * 1024 * 1024 // len(line)):
            fh.write(line)
    return out.getvalue()


def nested_zips(depth: int = 40) -> bytes:
    data = b"innermost words\n"
    name = "inner.txt"
    for n in range(depth):
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr(name, data)
        data, name = out.getvalue(), f"level{n}.zip"
    return data


def self_titled_pdf() -> bytes:
    """A small PDF whose document information /Title is a reference to itself."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] /Contents 4 0 R "
        b"/Resources << /Font << /F1 << /Type /Font /Subtype /Type1 "
        b"/BaseFont /Helvetica >> >> >> >>",
        b"<< /Length 44 >>\nstream\nBT /F1 12 Tf 20 100 Td (loop words) Tj ET\nendstream",
        b"<< /Title 6 0 R /Author 6 0 R >>",
        b"6 0 R",
    ]
    body = b"%PDF-1.4\n"
    offsets = []
    for n, obj in enumerate(objects, 1):
        offsets.append(len(body))
        body += f"{n} 0 obj\n".encode() + obj + b"\nendobj\n"
    xref = len(body)
    body += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    body += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    body += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R /Info 5 0 R >>\n".encode()
    body += f"startxref\n{xref}\n%%EOF\n".encode()
    return body


def png_bomb(side: int = 40_000) -> bytes:
    """A real PNG of `side` x `side` white pixels (1 bit each, ~200 KB for 40,000: 1.6
    billion pixels once decoded), its compressed rows made a band at a time."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    row = b"\0" + b"\xff" * ((side + 7) // 8)  # filter byte, then the row's bits
    packer = zlib.compressobj(9)
    band = row * 256
    parts = [packer.compress(band) for _ in range(side // 256)]
    parts += [packer.compress(row * (side % 256)), packer.flush()]
    header = struct.pack(">IIBBBBB", side, side, 1, 0, 0, 0, 0)  # 1-bit greyscale
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", b"".join(parts))
        + chunk(b"IEND", b"")
    )
