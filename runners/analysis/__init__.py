"""Analyses over stored runs: the power-aware gate between a baseline and a candidate, its per-case detail, the power
arithmetic, the threshold recommendation, the HTML/Markdown report, tables, and the transcript show/diff/export
views.
"""
