"""The offline audit's matching of installed versions against OSV records."""

from __future__ import annotations

import json
import threading
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

from tools.audit_offline import affects, load, server

RECORD = """
id: PYSEC-0000-1
published: 2023-10-25 18:17:00+00:00
modified: 2024-01-01T00:00:00Z
affected:
- package: {name: Some_Package, ecosystem: PyPI}
  ranges:
  - type: ECOSYSTEM
    events: [{introduced: "0"}, {fixed: "1.2"}, {introduced: "2.0"}, {fixed: "2.0.3"}]
  versions: ["0.9", "1.0"]
"""


def test_versions_and_ranges(tmp_path: Path) -> None:
    (tmp_path / "some-package").mkdir()
    (tmp_path / "some-package" / "PYSEC-0000-1.yaml").write_text(RECORD)
    [record] = load(tmp_path)["some-package"]
    assert affects(record, "some-package", "1.0")  # listed
    assert affects(record, "some-package", "1.1")  # in the first range only
    assert not affects(record, "some-package", "1.2")
    assert affects(record, "some-package", "2.0.2")
    assert not affects(record, "some-package", "2.0.3")
    assert not affects(record, "other", "1.0")


def test_answers_as_osv_does(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "PYSEC-0000-1.yaml").write_text(RECORD)
    osv = server(load(tmp_path))
    threading.Thread(target=osv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{osv.server_address[1]}/v1/query"

    def ask(version: str) -> dict[str, object]:
        query = {"package": {"name": "some.package", "ecosystem": "PyPI"}, "version": version}
        request = urllib.request.Request(url, json.dumps(query).encode(), method="POST")
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=5) as answer:
            return json.loads(answer.read())  # type: ignore[no-any-return]

    try:
        [vuln] = ask("1.1")["vulns"]  # type: ignore[misc]
        published = datetime.strptime(vuln["published"], "%Y-%m-%dT%H:%M:%SZ")
        assert published.replace(tzinfo=UTC) == datetime(2023, 10, 25, 18, 17, tzinfo=UTC)
        assert ask("1.2") == {}
    finally:
        osv.shutdown()
