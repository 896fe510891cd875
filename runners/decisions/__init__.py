"""Decisions over stored runs: the power-aware model-upgrade gate (`gate/`), the power arithmetic (`power`), the
threshold recommendation (`recommend`, its rules and objectives in `choices`), what lower thresholds or budgets
would have done (`whatif`), whether a real model's replayed recording still yields its committed summary
(`real_models`), the Harness against a plain loop (`loop_comparison`), and what each Harness control costs and buys,
with the new held-out cases apart (`ablation`). Each returns typed results; the rendering layer turns them into text,
tables and pages.
"""
