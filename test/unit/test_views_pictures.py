"""docs/pictures.md (made by scripts/pictures) shows pictures that are in the
repository, each well-formed, with a sentence on how to read it."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).parents[2]
PAGE = ROOT / "docs" / "pictures.md"


def test_every_picture_of_the_page_is_committed_and_parses() -> None:
    text = PAGE.read_text()
    links = re.findall(r"\]\((pictures/[^)]+)\)", text)
    pictures = [link for link in links if link.endswith(".svg")]
    assert len(pictures) == 3, links        # the graph, a plan, the roofline
    for link in links:
        path = ROOT / "docs" / link
        assert path.is_file(), link
        if link.endswith(".svg"):
            assert ET.parse(path).getroot().tag == "{http://www.w3.org/2000/svg}svg", link


def test_each_picture_says_how_to_read_it() -> None:
    sections = PAGE.read_text().split("\n## ")[1:]
    assert len(sections) == 3
    for s in sections:
        after = s.split(".svg)", 1)[1]
        assert "Read it" in after or "Each point" in after, s.splitlines()[0]
