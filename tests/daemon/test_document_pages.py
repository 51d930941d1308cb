"""Pages from the document (issue 35 §1, §3): every passage and grep hit of a converted
PDF, slide deck or workbook says its page (the document's own label where it has one),
slide or sheet, whatever route markitdown would take; made in the converter's process
(issue 33 §3). Real files made here, converted by the real libraries, through the real
daemon."""

from __future__ import annotations

import io
import uuid
from pathlib import Path
from typing import Any

import openpyxl
import pptx
from fpdf import FPDF

from cofferd.domain.pages import escaped, page_starts
from tests.support.daemon import Daemon, wait_for
from tests.support.helpers import write
from tests.support.samples import paged_pdf
from tests.support.timing import fastest


def deck(slides: list[str]) -> bytes:
    made = pptx.Presentation()
    for n, text in enumerate(slides, 1):
        slide = made.slides.add_slide(made.slide_layouts[1])
        slide.shapes.title.text = f"Part {n}"
        slide.placeholders[1].text = text
    out = io.BytesIO()
    made.save(out)
    return out.getvalue()


def workbook(sheets: dict[str, list[str]]) -> bytes:
    book = openpyxl.Workbook()
    book.remove(book.active)
    for name, notes in sheets.items():
        sheet = book.create_sheet(name)
        sheet.append(["item", "note"])
        for i, note in enumerate(notes):
            sheet.append([f"row {i}", note])
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def new_kb(d: Daemon, formats: list[str]) -> str:
    kb = f"pages-{uuid.uuid4().hex[:8]}"
    d.client.post("/api/v1/knowledge_bases", {"name": kb, "config": {"index_formats": formats}})
    return kb


def where(d: Daemon, kb: str, query: str) -> list[tuple[str, int, str]]:
    found = d.client.post(d.client.kb(kb, "/search"), {"query": query, "top_k": 20})["passages"]
    return [(p["relative_path"], p["page"], p["location"]) for p in found]


def grep(d: Daemon, kb: str, pattern: str) -> list[dict[str, Any]]:
    hits: list[dict[str, Any]] = d.client.post(d.client.kb(kb, "/grep"), {"pattern": pattern})[
        "hits"
    ]
    return hits


def test_a_pdf_with_a_form_page_says_each_passages_page(shared_daemon: Daemon) -> None:
    from markitdown import MarkItDown

    d = shared_daemon
    kb = new_kb(d, ["pdf"])
    texts = ["zqintro " * 40, "zqmiddle " * 40, "zqclosing words " * 40, "zqlast " * 40]
    made = paged_pdf(texts, form_on=1)
    path = write(d.docs(kb) / "form.pdf", made)
    # the route this is about: markitdown joins the pages (no page break left in its text)
    joined = MarkItDown(enable_plugins=False).convert_local(str(path)).markdown
    assert "| Name0" in joined and "\x0c" not in joined
    wait_for(lambda: where(d, kb, "zqlast"), 60)
    assert where(d, kb, "zqclosing") == [("form.pdf", 3, "page 3")]
    assert where(d, kb, "zqmiddle") == [("form.pdf", 2, "page 2")]
    assert where(d, kb, "Amount3") == [("form.pdf", 2, "page 2")]  # the form's own text
    assert where(d, kb, "zqlast") == [("form.pdf", 4, "page 4")]
    (hit,) = grep(d, kb, "Signed2")
    assert (hit["relative_path"], hit["page"], hit["location"]) == ("form.pdf", 2, "page 2")
    page_two = d.client.get(d.client.document(kb, "form.pdf"))["content"].split("## Page 2\n\n")
    assert page_two[1].split("\n").index(hit["line"]) + 1 == hit["line_number"]
    (first,) = [h for h in grep(d, kb, "^zqlast") if h["line_number"] == 1]
    assert first["location"] == "page 4"  # the first line of its page, not of the text


def test_a_pdf_with_page_labels_says_its_own_labels(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d, ["pdf"])
    texts = ["zqpreface " * 30, "zqcontents " * 30, "zqchapter " * 30, "zqsecond " * 30]
    write(d.docs(kb) / "book.pdf", paged_pdf(texts, labels=True))
    wait_for(lambda: where(d, kb, "zqsecond"), 60)
    assert where(d, kb, "zqpreface") == [("book.pdf", 1, "page i")]
    assert where(d, kb, "zqcontents") == [("book.pdf", 2, "page ii")]
    assert where(d, kb, "zqchapter") == [("book.pdf", 3, "page 1")]
    assert where(d, kb, "zqsecond") == [("book.pdf", 4, "page 2")]
    assert {(h["page"], h["location"]) for h in grep(d, kb, "zqcontents")} == {(2, "page ii")}


def test_slides_say_slide_and_sheets_their_name(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d, ["pptx", "xlsx"])
    write(d.docs(kb) / "talk.pptx", deck(["zqopening", "zqsecondslide", "zqthirdslide"]))
    sheets = {"Budget": [f"cost {i}" for i in range(8)], "Q2 plan": ["zqhire two", "zqship"]}
    write(d.docs(kb) / "plan.xlsx", workbook(sheets))
    wait_for(lambda: where(d, kb, "zqthirdslide") and where(d, kb, "zqship"), 60)
    assert where(d, kb, "zqsecondslide") == [("talk.pptx", 2, "slide 2")]
    assert where(d, kb, "zqthirdslide") == [("talk.pptx", 3, "slide 3")]
    assert where(d, kb, "zqship") == [("plan.xlsx", 2, "sheet Q2 plan")]
    (hit,) = grep(d, kb, "zqsecondslide")
    assert (hit["page"], hit["location"]) == (2, "slide 2")
    (hit,) = grep(d, kb, "zqhire")
    assert (hit["location"], hit["line_number"]) == ("sheet Q2 plan", 3)  # header, rule, row
    assert not grep(d, kb, "Sheet Budget")  # a mark is Coffer's, no match
    shown = d.client.get(d.client.document(kb, "plan.xlsx"))["content"]
    assert "## Sheet Budget" in shown and "## Sheet Q2 plan" in shown


def test_words_on_two_pages_are_found_in_one_passage_that_says_the_matchs_page(
    shared_daemon: Daemon,
) -> None:
    """Pages flow into passages as the same text as Markdown would (issue 35 §5): a
    question whose words fall on two pages matches one passage, and a passage says the page
    of its match, not the page it starts on. A workbook's sheets stay passages of their own."""
    d = shared_daemon
    kb = new_kb(d, ["pdf", "pptx", "xlsx"])
    texts = ["zqalpha opening words", "zqbeta middle words", "zqgamma closing words"]
    write(d.docs(kb) / "short.pdf", paged_pdf(texts))
    write(d.docs(kb) / "book.xlsx", workbook({"One": ["zqzeta"], "Two": ["zqeta"]}))
    write(d.docs(kb) / "talk.pptx", deck(["zqdelta first", "zqepsilon second"]))
    wait_for(lambda: where(d, kb, "zqgamma") and where(d, kb, "zqeta"), 60)
    wait_for(lambda: where(d, kb, "zqepsilon"), 60)
    assert where(d, kb, "zqalpha zqgamma") == [("short.pdf", 1, "page 1")]
    found = d.client.post(d.client.kb(kb, "/search"), {"query": "zqgamma"})["passages"]
    (passage,) = found  # it opens on page 1 and says the page of its match
    assert "zqalpha" in passage["text"] and (passage["page"], passage["location"]) == (
        3,
        "page 3",
    )
    # a deck's slides flow too, their titles with them
    assert where(d, kb, "zqdelta zqepsilon") == [("talk.pptx", 1, "slide 1")]
    assert where(d, kb, "zqepsilon") == [("talk.pptx", 2, "slide 2")]
    assert sorted(where(d, kb, "zqzeta zqeta")) == [
        ("book.xlsx", 1, "sheet One"),
        ("book.xlsx", 2, "sheet Two"),
    ]


def test_a_match_in_the_tail_a_passage_repeats_says_the_page_of_that_tail(
    shared_daemon: Daemon,
) -> None:
    """A passage that starts where a page starts opens with the tail of the passage before
    it (the last words of the page before): a match in that tail is on the page before,
    not on the page of the passage's first own line. Pages of different lengths, so that
    some passages start where a page does."""
    d = shared_daemon
    kb = f"pages-{uuid.uuid4().hex[:8]}"
    config = {"index_formats": ["pdf"], "chunk_size": 64, "chunk_overlap": 16}
    d.client.post("/api/v1/knowledge_bases", {"name": kb, "config": config})
    texts = ["filler words " * (10 + 4 * n) + f"zqtail{n} ends here" for n in range(12)]
    write(d.docs(kb) / "tail.pdf", paged_pdf([*texts, "zqlastpage " * 30]))
    wait_for(lambda: where(d, kb, "zqlastpage"), 60)
    in_a_tail = 0
    for n in range(12):
        found = d.client.post(d.client.kb(kb, "/search"), {"query": f"zqtail{n}"})["passages"]
        mark = f"## Page {n + 2}"
        in_a_tail += any(
            p["text"].index(mark) > p["text"].index(f"zqtail{n}")
            for p in found
            if mark in p["text"] and not p["text"].split(mark)[0].count("## Page")
        )
        assert {(p["page"], p["location"]) for p in found} == {(n + 1, f"page {n + 1}")}, n
    assert in_a_tail  # the case this is about was met


def test_text_that_looks_like_a_mark_is_no_page(shared_daemon: Daemon) -> None:
    """A PDF whose own text holds `## Page 9` is not cut there: the mark is escaped."""
    d = shared_daemon
    kb = new_kb(d, ["pdf"])
    texts = ["zqfirst page text\n## Page 9\nzqstillfirst " * 3, "zqtwo " * 20]
    write(d.docs(kb) / "fake.pdf", paged_pdf(texts))
    wait_for(lambda: where(d, kb, "zqtwo"), 60)
    assert where(d, kb, "zqstillfirst") == [("fake.pdf", 1, "page 1")]
    assert where(d, kb, "zqtwo") == [("fake.pdf", 2, "page 2")]


def test_an_added_pdf_is_a_note_with_its_pages_and_a_real_title(
    shared_daemon: Daemon, tmp_path: Path
) -> None:
    d = shared_daemon
    kb = new_kb(d, [])
    source = write(tmp_path / "report.pdf", paged_pdf(["zqaddone " * 20, "zqaddtwo " * 20]))
    added = d.client.post(d.client.kb(kb, "/documents"), {"source_path": str(source)})
    content = d.client.get(d.client.document(kb, added["document"]["id"]))["content"]
    assert content.index("## Page 1") < content.index("zqaddone") < content.index("## Page 2")
    assert "source_format" not in content and "\x0c" not in content
    assert added["document"]["title"] == "report"  # no heading but the page marks


def test_marks_escaped_and_read_in_linear_time() -> None:
    assert escaped("## Page 3\ntext\n## Sheet x\n<!-- Slide number: 2 -->") == (
        "\\## Page 3\ntext\n\\## Sheet x\n\\<!-- Slide number: 2 -->"
    )
    assert page_starts(escaped("## Page 3\n")) == []
    took = []
    for n in (100_000, 400_000):
        text = "## Page " + "x" * n + "\n" + ("## Sheet " + "y" * 70 + "\n") * (n // 80)
        assert page_starts(text) == []
        took.append(fastest(lambda text=text: (escaped(text), page_starts(text))))
    assert took[1] < 8 * took[0] + 0.05


def test_hostile_page_labels_are_numbers_or_one_line() -> None:
    from cofferd.domain.pages import LABEL_MAX_CHARS, label

    assert label("A-\n3\u2028", 5) == "A- 3"
    assert label("\x00\x1b[31m", 7) == "[31m"
    assert label("", 4) == label(None, 4) == "4"
    assert len(label("x" * 10_000, 1)) == LABEL_MAX_CHARS


def test_a_broken_page_label_tree_leaves_the_pages_numbered(tmp_path: Path) -> None:
    """A roman numeral past 3999 (pdfminer failed its labels there, which left the pages
    numbered; PDFium, which reads PDFs since issue 44, writes it on): the pages are read
    all the same."""
    from cofferd.infrastructure.conversion.pdf_pages import read_pages

    pdf = FPDF()
    pdf.set_font("helvetica", size=11)
    for n in range(3):
        pdf.add_page()
        if n == 1:
            pdf.set_page_label(label_style="R", label_start=3999)
        pdf.multi_cell(0, 6, f"zqpage{n} text")
    path = write(tmp_path / "labels.pdf", bytes(pdf.output()))
    pages = read_pages(path)
    assert [p.text.split()[0] for p in pages] == ["zqpage0", "zqpage1", "zqpage2"]
    assert [p.label for p in pages] == ["", "MMMCMXCIX", "MMMM"]
