"""Reports: summaries (Markdown for terminals and PRs), A/B tables, plots."""
