"""MkDocs hooks of the docs site (mkdocs.yml, `hooks:`).

1. Files of the repository shown as pages without being copied into docs/: CHANGELOG.md (as
   changelog.md) and benchmarks/RESULTS.md with the figures it shows.
2. Sections of README.md included where a page says so, read at every build, so that the site
   says what the README says: a line

       <!-- readme: ### Compare model classes by evidence -->

   is replaced by that section's text (without its heading) up to the next heading of the same
   or a higher level; its subsections come along, one level below the page's heading for it
   (" | level 2" when the page puts the section under a level-2 heading; level 1 by default).
   With " | only", the text stops at the next heading of any level. A heading the README no
   longer has fails the build, naming it.
3. Markdown of the README and RESULTS.md made safe for Python-Markdown: the star of "w*" (the
   trained point; in "L_n(w*) ... (w*" Python-Markdown would set the text between two such
   stars in italics) is escaped outside code, and links to files of the repository are
   rewritten relative to the page, or, for a file that is not part of the site, written as the
   file's path in the source tree, so that strict mode has nothing outside the site to resolve.
"""

import re
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = {"changelog.md": ROOT / "CHANGELOG.md",
         "benchmarks/RESULTS.md": ROOT / "benchmarks" / "RESULTS.md"}
FIGURES = sorted((ROOT / "benchmarks").glob("*.png"))
# Where files of the repository are in the site (paths from the repository's root).
IN_SITE = {"CHANGELOG.md": "changelog.md", "benchmarks/RESULTS.md": "benchmarks/RESULTS.md",
           **{f"benchmarks/{figure.name}": f"benchmarks/{figure.name}" for figure in FIGURES}}
_INCLUDE = re.compile(r"^<!-- readme: (#+) (.+?)((?: \| (?:only|level \d))*) -->$", flags=re.M)
_LINK = re.compile(r"(!?)\[([^\]]+)\]\((?!https?://|#|mailto:)([^)\s]+)\)")
_CODE_SPAN = re.compile(r"`[^`]*`", flags=re.S)
_HEADING = re.compile(r"^(#+) ")


def _fences(lines):
    """For each line, whether it is inside (or is a fence of) a fenced code block."""
    inside, flags = False, []
    for line in lines:
        if line.lstrip().startswith("```"):
            flags.append(True)
            inside = not inside
        else:
            flags.append(inside)
    return flags


def readme_section(level: int, title: str, only: bool, page_level: int = 1) -> str:
    lines = README.read_text().split("\n")
    fenced = _fences(lines)
    starts = [i for i, line in enumerate(lines)
              if not fenced[i] and line == f"{'#' * level} {title}"]
    if len(starts) != 1:
        raise PluginError(f"README.md has {len(starts)} headings {'#' * level} {title!r}: "
                          "a page of docs/ includes it (<!-- readme: ... -->)")
    body = []
    for i in range(starts[0] + 1, len(lines)):
        heading = _HEADING.match(lines[i])
        if heading and not fenced[i]:
            if only or len(heading.group(1)) <= level:
                break
            shifted = len(heading.group(1)) - level + page_level
            lines[i] = "#" * shifted + lines[i][len(heading.group(1)):]
        body.append(lines[i])
    return "\n".join(body).strip("\n")


def _site_path(repository_path: str) -> str | None:
    if repository_path in IN_SITE:
        return IN_SITE[repository_path]
    if repository_path.startswith("docs/"):
        return repository_path.removeprefix("docs/")
    return None


def _escape_stars(text: str) -> str:
    return re.sub(r"(?<=w)\*(?!\*)", r"\\*", text)


def _normalise(path: str) -> str:
    parts = []
    for part in path.split("/"):
        if part == "..":
            parts = parts[:-1]
        elif part not in ("", "."):
            parts.append(part)
    return "/".join(parts)


def repository_markdown(markdown: str, source: str, page: str, site_files: set[str]) -> str:
    """Markdown written for the repository (`source`, its path there) made fit for `page`."""
    depth = page.count("/")
    source_folder = str(Path(source).parent) if "/" in source else ""

    def link(match):
        bang, text, target = match.groups()
        target, _, anchor = target.partition("#")
        in_repository = _normalise(f"{source_folder}/{target}" if source_folder else target)
        in_site = _site_path(in_repository)
        if in_site is not None and in_site in site_files:
            relative = "../" * depth + in_site
            return f"{bang}[{text}]({relative}{'#' + anchor if anchor else ''})"
        if bang:
            raise PluginError(f"{page}: the figure {in_repository} is not part of the site")
        return f"{text} (`{in_repository}` in the source tree)"

    lines = markdown.split("\n")
    fenced = _fences(lines)
    out, chunk = [], []

    def flush():
        text = _LINK.sub(link, "\n".join(chunk))  # first: a link's text may be code
        pieces, last = [], 0
        for span in _CODE_SPAN.finditer(text):
            pieces += [_escape_stars(text[last:span.start()]), span.group(0)]
            last = span.end()
        pieces.append(_escape_stars(text[last:]))
        out.append("".join(pieces))
        chunk.clear()

    for line, inside in zip(lines, fenced, strict=True):
        if inside:
            if chunk:
                flush()
            out.append(line)
        else:
            chunk.append(line)
    if chunk:
        flush()
    return "\n".join(out)


def on_files(files, config):
    for uri, source in PAGES.items():
        files.append(File.generated(config, uri, abs_src_path=str(source)))
    for figure in FIGURES:
        files.append(File.generated(config, f"benchmarks/{figure.name}", abs_src_path=str(figure)))
    return files


def on_page_markdown(markdown, page, config, files):
    site_files = {file.src_uri for file in files}
    page_uri = page.file.src_uri
    if page_uri in PAGES:
        source = PAGES[page_uri].relative_to(ROOT).as_posix()
        return repository_markdown(markdown, source, page_uri, site_files)

    def include(match):
        options = match.group(3)
        page_level = re.search(r"level (\d)", options)
        section = readme_section(len(match.group(1)), match.group(2), "only" in options,
                                 int(page_level.group(1)) if page_level else 1)
        return repository_markdown(section, "README.md", page_uri, site_files)

    return _INCLUDE.sub(include, markdown)
