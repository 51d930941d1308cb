"""A converted text made as searchable as typed text (issue 35 §5): ligatures, soft
hyphens, words cut at a line's end, justified spaces, running headers and footers; each
in time linear in its input, hostile input included."""

from __future__ import annotations

import uuid
from pathlib import Path

from cofferd.infrastructure.conversion.text_cleanup import (
    clean_pdf_pages,
    join_cut_words,
    spelled_out,
    without_running_lines,
)
from tests.support.daemon import Daemon, wait_for
from tests.support.helpers import write

FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")  # it has the ligatures


def test_ligatures_and_soft_hyphens_are_spelled_as_queries_spell_them() -> None:
    assert spelled_out("the ﬁrst ﬂow, eﬀect, oﬃce, baﬄe, ﬆar") == (
        "the first flow, effect, office, baffle, star"
    )
    assert spelled_out("regu\u00adlation") == "regulation"
    assert spelled_out("x² ½ Ⅳ") == "x² ½ Ⅳ"  # no other compatibility change


def test_a_word_cut_by_the_typesetter_is_joined_as_the_document_spells_it() -> None:
    page = "the immuno-\nreceptor binds; the immunoreceptor"
    assert join_cut_words([page]) == ["the immunoreceptor binds; the immunoreceptor"]
    # pdfminer writes a blank line between the lines of some PDFs; another page counts
    assert join_cut_words(["the regu-\n\nlation of", "regulation"]) == [
        "the regulation of",
        "regulation",
    ]


def test_a_hyphen_the_document_never_spells_away_stays() -> None:
    for page in (
        "interferon-\ngamma levels",  # a compound cut at its own hyphen
        "low-\nand middle-income countries",  # a suspended hyphen
        "the immuno-\nreceptor binds",  # a word cut, spelled nowhere else: left as printed
        "cytokine-\ninduced; induced cytokine",  # both halves words: not a cut word
    ):
        assert join_cut_words([page]) == [page]


def test_a_capital_after_a_line_end_hyphen_is_left() -> None:
    # spelled whole elsewhere, yet a capital starts a name or a sentence: never joined
    for text in ("Smith-\nJones; smithjones", "the anti-\nTNF drug; antitnf", "see 5-\n10 mg"):
        assert join_cut_words([text]) == [text]


def test_running_headers_and_footers_go_and_the_text_stays() -> None:
    texts = ["Kinases bind.", "Cells grow.", "Mice live.", "Flies die."]
    pages = [
        f"Journal of Tests 12 (2019) {n}-14\n{text}\nPage {n} of 4"
        for n, text in enumerate(texts, 1)
    ]
    assert without_running_lines(pages) == [pages[0], *texts[1:]]  # once, where first seen


def test_pages_that_all_read_alike_keep_their_text_once() -> None:
    pages = [f"Page {n}. many pages many pages\nmany pages\nmany pages" for n in range(1, 61)]
    cleaned = without_running_lines(pages)
    assert cleaned[0] == pages[0] and not any(cleaned[1:])


def test_a_line_on_few_pages_or_in_the_middle_of_a_page_stays() -> None:
    two = ["Header\nfirst", "Header\nsecond"]
    assert without_running_lines(two) == two  # two pages: too few to tell
    middle = [f"a{n}\nb{n}\nc{n}\nShared line\nd{n}\ne{n}\nf{n}" for n in "wxyz"]
    assert without_running_lines(middle) == middle  # not at a page's edge
    once = ["Title page\nabstract", "body one", "body two", "body three"]
    assert without_running_lines(once) == once


def test_pdf_pages_cleaned_together() -> None:
    said = ["The ﬁrst  result  regu-\nlates", "A ﬂow of  cyto-\n\nkines", "The cytokines  set"]
    pages = [f"Running head\n{text}\nPage {n}" for n, text in enumerate(said, 1)]
    assert clean_pdf_pages(pages) == [
        "Running head\nThe first result regu-\nlates\nPage 1",  # `regulates` is nowhere else
        "A flow of cytokines",
        "The cytokines set",
    ]


def test_a_table_repeated_on_every_page_stays_a_table() -> None:
    pages = [f"| Name | Amount |\n| --- | --- |\n| n{c} | 1 |" for c in "abcd"]
    assert without_running_lines(pages) == pages


def test_a_typeset_pdf_is_found_by_the_words_it_prints(shared_daemon: Daemon) -> None:
    """Through the real daemon: a PDF whose pages carry a running header and footer, a
    ligature and words cut at a line's end is found by the words as typed, and its
    header and footer are not its text (before: `zqﬁnding` and `zqimmu` / `noreceptor`
    were what search could find on pages 1 and 2, and the header was on every page)."""
    from fpdf import FPDF

    d = shared_daemon
    kb = f"cleanup-{uuid.uuid4().hex[:8]}"
    d.client.post("/api/v1/knowledge_bases", {"name": kb, "config": {"index_formats": ["pdf"]}})
    bodies = [
        "The zqﬁnding of this study is\nthat kinases bind.",
        "A zqimmu-\nnoreceptor was seen in\ncells of the lung.",
        "Mice fed the drug\nlived longer: zqimmunoreceptor.",
    ]
    pdf = FPDF()
    pdf.add_font("dejavu", fname=str(FONT))
    pdf.set_font("dejavu", size=11)
    for n, body in enumerate(bodies, 1):
        pdf.add_page()
        pdf.multi_cell(0, 6, f"Zqjournal of Tests 12 (2026) {n}-3\n\n{body}\n\nPage {n} of 3")
    write(d.docs(kb) / "paper.pdf", bytes(pdf.output()))

    def found(query: str) -> list[tuple[str, str]]:
        passages = d.client.post(d.client.kb(kb, "/search"), {"query": query})["passages"]
        return [(p["relative_path"], p["location"]) for p in passages]

    wait_for(lambda: found("kinases"), 60)
    assert found("zqfinding") == [("paper.pdf", "page 1")]
    # on pages 2 and 3, one passage (pages flow): the page of its first match
    assert found("zqimmunoreceptor") == [("paper.pdf", "page 2")]
    assert found("zqjournal") == [("paper.pdf", "page 1")]  # the first page keeps it
    content = d.client.get(d.client.document(kb, "paper.pdf"))["content"]
    assert "Page 2 of 3" not in content and "Mice fed the drug" in content


def test_a_tail_that_is_cut_again_is_joined_once() -> None:
    assert join_cut_words(["ab-\nab-\nab abab"]) == ["abab-\nab abab"]  # no text twice
