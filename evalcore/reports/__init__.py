"""Reports: reduce judged responses to per-item and summary tables, and render Markdown."""
