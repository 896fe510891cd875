"""Decisions over stored runs: the power-aware model-upgrade gate (`gate/`), the power arithmetic (`power`), the
threshold recommendation (`recommend`, its rules and objectives in `choices`), what lower thresholds or budgets would
have done (`whatif`), and whether a real model's replayed recording still yields its committed summary
(`real_models`), and a model's gain tags measured by the tag probe against the graded truth, the trivial taggers and
the threshold they imply (`tag_probe`). Each returns typed results; the rendering layer turns them into text, tables
and pages.
"""
