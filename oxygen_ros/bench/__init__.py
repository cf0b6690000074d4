"""oxygen-bench: the four execution modes on one model and one observation stream (see cli.py)."""
