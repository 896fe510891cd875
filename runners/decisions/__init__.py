"""Decisions over stored runs — they read what the store holds and never run the bench (`runners/pipelines/` composes
the two): the power-aware model-upgrade gate (`gate/`, its thresholds in `gate_thresholds`), the power arithmetic
(`power`), the threshold recommendation (`recommend`, its rules and objectives in `choices`); the counterfactual core
(`counterfactual`: a stored run replayed under a stop rule up to its cut), with what lower thresholds or budgets would
have done (`whatif`) and which stop rule pays (`compare_stops`, the contract on another agent's run inferred by
`_inferred_contract`) on it, and the one interval over cases (`intervals`); the diagnosis funnel and gain-tag confusion
(`funnel`), the Harness against the plain loop (`loop_comparison`), what each Harness control costs and buys with the
new held-out cases apart (`ablation`), what a case's mistake-free model would publish (`case_alternatives`), whether a
real model's replayed recording still yields its committed summary (`real_models`), how often a judge is wrong on
labelled answers (`judge_rates`) and a SemanticGuard on labelled conclusions (`guard_rates`), the calibration study's
typed results (`calibration_results`), and a model's gain tags measured by the tag probe against the graded truth, the
trivial taggers and the threshold they imply (`tag_probe`). Each returns typed results (frozen models on `_model`'s
base); the rendering layer turns them into text, tables and pages. A decision declares the values it decides (defaults,
bounds, refusals); how a command shows them as flags is the command's.
"""
