"""How a KB's notes say their titles, so that what agents write says it the same way: a
frontmatter `title:` only where the KB's notes use one, else the note's first `# Heading`;
never both a frontmatter title and the same `# Heading`, never two headings for one title."""

from __future__ import annotations

from collections.abc import Sequence

from coffer_kernel.markdown_grammar import first_h1, first_heading
from cofferd.application.reading import markdown
from cofferd.domain.formats import MARKDOWN, format_of
from cofferd.domain.ports import DocsTree, DocumentCatalog

SAMPLED = 20  # the KB's most recently changed notes read to learn its convention


async def uses_frontmatter_titles(store: DocumentCatalog, tree: DocsTree, kb: str) -> bool:
    """Whether most of the KB's recently changed notes hold a frontmatter title (none: no)."""
    import asyncio

    docs, _ = await store.list_documents(kb, q=None, limit=SAMPLED, offset=0)
    paths = [d.path for d in docs if format_of(d.path) == MARKDOWN]
    return await asyncio.to_thread(_most_hold_a_title, tree, kb, paths)


def _most_hold_a_title(tree: DocsTree, kb: str, paths: Sequence[str]) -> bool:
    holding = read = 0
    for path in paths:
        found = tree.read(kb, path)
        if found is None:
            continue
        try:
            text, _ = markdown.decode(found.data)
        except markdown.NotText:
            continue
        read += 1
        holding += bool(markdown.split_frontmatter(text)[0].get("title"))
    return holding * 2 > read


def titled(content: str, title: str | None, frontmatter_titles: bool) -> tuple[str, str]:
    """An agent's Markdown with `title` (when given) said as the KB's notes say theirs, and
    the title to name its file after. Frontmatter the agent wrote is kept as written; a
    `# Heading` it wrote is never doubled."""
    frontmatter, body, _ = markdown.split_frontmatter(content)
    heading = first_h1(body)
    if title and (frontmatter_titles or frontmatter):
        frontmatter = {"title": title, **{k: v for k, v in frontmatter.items() if k != "title"}}
    elif title and heading is None:
        body = f"# {' '.join(title.split())}\n\n{body.lstrip(chr(10))}"
    text = markdown.compose(frontmatter, body) if frontmatter else body
    return text, str(frontmatter.get("title") or title or first_heading(body) or "")


def without_doubled_title(text: str, frontmatter_titles: bool) -> str:
    """An edited note's text without frontmatter that is only a title repeating its
    `# Heading` (as an agent's note was written before), in a KB whose notes hold no
    frontmatter titles. Frontmatter that says more is the author's, left as it is."""
    frontmatter, body, _ = markdown.split_frontmatter(text)
    if frontmatter_titles or set(frontmatter) != {"title"}:
        return text
    if str(frontmatter["title"]).strip() != (first_h1(body) or "").strip():
        return text
    return body
