"""Statement Markdown to HTML: CommonMark with tables, math kept as TeX in `.math` elements (KaTeX
renders them in the browser; without JavaScript the TeX stays readable) and code highlighted by
Pygments on the server. Raw HTML in statements is not passed through."""

from __future__ import annotations

from functools import lru_cache

from markdown_it import MarkdownIt
from mdit_py_plugins.dollarmath import dollarmath_plugin
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

_FORMATTER = HtmlFormatter(nowrap=True)


def _highlight(code: str, lang: str, _attrs: str) -> str:
    try:
        lexer = get_lexer_by_name(lang or "text")
    except ClassNotFound:
        lexer = get_lexer_by_name("text")
    # starting with <pre tells markdown-it not to wrap it again
    return f'<pre class="highlight"><code>{highlight(code, lexer, _FORMATTER)}</code></pre>\n'



@lru_cache(maxsize=1)
def _renderer() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "highlight": _highlight, "linkify": False})
    md.enable("table")
    md.use(dollarmath_plugin, allow_space=True, double_inline=True)
    return md


@lru_cache(maxsize=256)
def render_markdown(text: str) -> str:
    """HTML for `text` (cached: statements change only with a new problem version)."""
    return _renderer().render(text)


def pygments_css() -> str:
    """The stylesheet of the highlighting classes."""
    return HtmlFormatter().get_style_defs(".highlight")
