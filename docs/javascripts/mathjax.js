// MathJax 3's configuration for the notebooks' markdown cells ($...$, $$...$$) and for
// pymdownx.arithmatex on the other pages. MathJax itself is loaded from a CDN when a page is
// read (mkdocs.yml, extra_javascript): the build needs no network; read offline, the
// notebooks show their TeX source.
window.MathJax = {
  tex: {
    inlineMath: [["$", "$"], ["\\(", "\\)"]],
    displayMath: [["$$", "$$"], ["\\[", "\\]"]],
    processEscapes: true,
  },
  options: {
    ignoreHtmlClass: ".*",
    processHtmlClass: "arithmatex|jp-MarkdownOutput",
  },
};
