"""The index of nights: one night's report replaces its own entry in the index already written
(years of nights are not read again each night), a missing or unreadable index is rebuilt from
every night's table, and the page lists the newest nights while the JSON keeps every one."""
import json

from scalebench.report import render


def night(root, name, alerts=0, complete=True):
    (root / name).mkdir(parents=True, exist_ok=True)
    (root / name / "table.json").write_text(json.dumps({"complete": complete, "alerts": ["x"] * alerts, "rows": [{}]}))


def test_a_nights_report_replaces_its_own_entry_and_reads_no_other_table(tmp_path, monkeypatch):
    for n in ("2026-11-01", "2026-11-02", "2026-11-03"):
        night(tmp_path, n)
    render.write_index(tmp_path)
    assert [e["night"] for e in json.loads((tmp_path / "index.json").read_text())] == ["2026-11-03", "2026-11-02",
                                                                                      "2026-11-01"]
    night(tmp_path, "2026-11-04", alerts=2)
    night(tmp_path, "2026-11-02", complete=False)  # a night written again (a rerun of its report)
    read = []
    real = render._index_entry
    monkeypatch.setattr(render, "_index_entry", lambda folder: read.append(folder.name) or real(folder))
    render.write_index(tmp_path, "2026-11-04")
    render.write_index(tmp_path, "2026-11-02")
    assert read == ["2026-11-04", "2026-11-02"]  # only the night written
    got = {e["night"]: e for e in json.loads((tmp_path / "index.json").read_text())}
    assert list(got) == ["2026-11-04", "2026-11-03", "2026-11-02", "2026-11-01"]
    assert got["2026-11-04"]["alerts"] == 2 and got["2026-11-02"]["complete"] is False
    # an unreadable index: rebuilt from every night's table, nothing lost
    (tmp_path / "index.json").write_text("{not json")
    read.clear()
    render.write_index(tmp_path, "2026-11-04")
    assert sorted(read) == ["2026-11-01", "2026-11-02", "2026-11-03", "2026-11-04"]
    assert len(json.loads((tmp_path / "index.json").read_text())) == 4


def test_the_page_lists_the_newest_nights_and_says_how_many_older_ones_the_json_keeps(tmp_path, monkeypatch):
    monkeypatch.setattr(render, "INDEX_PAGE_NIGHTS", 2)
    for n in ("2026-11-01", "2026-11-02", "2026-11-03"):
        night(tmp_path, n)
    render.write_index(tmp_path)
    page = (tmp_path / "index.html").read_text()
    assert "2026-11-03/report.html" in page and "2026-11-02/report.html" in page and "2026-11-01/report.html" not in page
    assert "1 older night(s) are kept too" in page and len(json.loads((tmp_path / "index.json").read_text())) == 3
