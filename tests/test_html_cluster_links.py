"""The HTML report's cluster row links (joined in Python, not looped in jinja) are the
text the template's loop gave, escaping and rowIds without a drill-down anchor included."""

from __future__ import annotations

from jinja2 import Environment, select_autoescape

from rubric_engine.report.render.html import LINKS_PER_CHUNK, _environment, _row_links

#: the template's loop the links replaced, rendered with the report's own environment settings
OLD_LOOP = (
    '{% for rid in row_ids %}<a href="#{{ anchors[rid] }}">{{ rid }}</a>'
    "{% if not loop.last %}, {% endif %}{% endfor %}"
)


def _old(row_ids: list[str], anchors: dict[str, str]) -> str:
    env = Environment(autoescape=select_autoescape(default_for_string=True))
    return env.from_string(OLD_LOOP).render(row_ids=row_ids, anchors=anchors)


def test_links_equal_the_old_loop() -> None:
    anchors = {"a-1": "row-a-1", 'q"<&>': "row-q", "x": "row-x-2"}
    cases = [
        [],
        ["a-1"],
        ["a-1", 'q"<&>', "x"],
        ["not-drilled", "a-1", "<b>bold</b>"],  # no anchor: jinja's undefined renders empty
        ["values"],  # a name of a dict method: jinja falls back to the attribute
        ["__doc__", "__class__"],  # attributes that are not methods
        ["a&b", "it's", "<", ">", '"', "plain", "中文-1"],  # each character escape replaces
        [f"r-{i}" for i in range(LINKS_PER_CHUNK)],  # one whole chunk
        [f"r-{i}" for i in range(2 * LINKS_PER_CHUNK + 3)],  # chunks joined by ", "
    ]
    for row_ids in cases:
        got = "".join(_row_links(row_ids, anchors, _environment()))
        if row_ids == ["values"]:  # the method's repr holds its address: compare the shape
            assert got.startswith('<a href="#&lt;built-in method values of dict object at 0x')
            assert _old(row_ids, anchors).startswith(got.split(" at 0x")[0])
        else:
            assert got == _old(row_ids, anchors)
