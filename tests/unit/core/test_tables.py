"""One table builder: the same columns give the report's Markdown, the terminal's text and a page's
cells; a page escapes every cell, Markdown a pipe."""
from scalebench.core import tables
from scalebench.core.tables import Column, Link

ITEMS = [{"name": "a|b", "n": 2, "x": 0.5}, {"name": "<script>", "n": 10, "x": None}]
COLUMNS = [Column("name", lambda r: r["name"], links=lambda r: [Link(r["name"], f"/x/{r['n']}")]),
           Column("GPUs", lambda r: r["n"], numeric=True),
           Column("share", lambda r: r["x"], lambda v: "–" if v is None else f"{v:.0%}", numeric=True)]


def test_markdown_and_text_from_the_same_columns():
    t = tables.build(COLUMNS, ITEMS)
    assert tables.markdown(t) == ["| name | GPUs | share |", "|---|---:|---:|", "| a\\|b | 2 | 50% |",
                                  "| <script> | 10 | – |"]
    assert tables.text(t).splitlines() == ["name      GPUs  share", "a|b          2    50%", "<script>    10      –"]


def test_a_page_escapes_every_cell_and_draws_links():
    from scalebench.orchestration.ui import pages

    html = pages.render("benchmarks.html", "t", "/base", table=tables.build(COLUMNS, ITEMS, lambda r: "failed"))
    assert "<script>" not in html.split("<body>")[-1] and '<a href="/x/10">&lt;script&gt;</a>' in html
    assert '<tr class="failed"><td><a href="/x/2">a|b</a></td><td class="n">2</td><td class="n">50%</td></tr>' in html
