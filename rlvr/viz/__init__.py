"""Looking at runs: `rlvr report` writes one self-contained HTML file, `rlvr dashboard` serves the same
page live. Standard library only; the page draws its own SVG charts (rlvr/viz/static/)."""
