"""What bedside's pages for a person — ``bedside/human``'s page (:mod:`bedside.providers.human_desk`) and the rating
study's page (:mod:`bedside.study.page`) — share: ``person_page.js`` (building elements; whether the person is
working, for the working time) and ``person_page.css`` (the frame, header, texts, keys and errors). Each page
includes them by a relative address, and its server answers them beside the page (:func:`shared_file`)."""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).parent

#: the shared files, by their name beside a page, and their content type
SHARED = {
    "person_page.js": "text/javascript; charset=utf-8",
    "person_page.css": "text/css; charset=utf-8",
}


def shared_file(name: str) -> tuple[bytes, str] | None:
    """(content, content type) of the shared file ``name`` (as the page asks for it), or None: not one."""
    if name not in SHARED:
        return None
    return (_HERE / name).read_bytes(), SHARED[name]
