"""Reading grades back out of the nbgrader gradebook: per-cell scores, failure messages, CSV exports."""
