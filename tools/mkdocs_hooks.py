"""MkDocs hooks of the docs site (mkdocs.yml, `hooks:`).

Two files of the repository are pages of the site without being copied into docs/:
CHANGELOG.md (as changelog.md) and benchmarks/RESULTS.md with the figures it shows (as
benchmarks/RESULTS.md). Their links to files of the repository outside the site (a benchmark's
script, the README) point to the file's place in the source tree, written as code instead of
a link, so that strict mode's link check has nothing to resolve outside the site.
"""

import re
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[1]
PAGES = {"changelog.md": ROOT / "CHANGELOG.md",
         "benchmarks/RESULTS.md": ROOT / "benchmarks" / "RESULTS.md"}
FIGURES = sorted((ROOT / "benchmarks").glob("*.png"))
_LINK = re.compile(r"(?<!!)\[([^\]]+)\]\((?!https?://|#)([^)\s]+)\)")


def _outside_links_as_code(markdown: str, page: str, site_files: set[str]) -> str:
    """Markdown links of `page` to files that are not in the site, as the file's path."""
    folder = Path(page).parent

    def replace(match):
        target = match.group(2).split("#")[0]
        resolved = (folder / target).as_posix()
        parts = []
        for part in resolved.split("/"):
            if part == "..":
                parts = parts[:-1]
            elif part not in ("", "."):
                parts.append(part)
        if "/".join(parts) in site_files:
            return match.group(0)
        return f"{match.group(1)} (`{'/'.join(parts)}` in the source tree)"

    return _LINK.sub(replace, markdown)


def on_files(files, config):
    for uri, source in PAGES.items():
        files.append(File.generated(config, uri, abs_src_path=str(source)))
    for figure in FIGURES:
        files.append(File.generated(config, f"benchmarks/{figure.name}", abs_src_path=str(figure)))
    return files


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri in PAGES:
        site_files = {file.src_uri for file in files}
        return _outside_links_as_code(markdown, page.file.src_uri, site_files)
    return markdown
