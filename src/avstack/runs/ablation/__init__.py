"""The input-stack ablation of any task: its arms (each its parent less one cue), planned and
held to their parents (integrity), their inputs as the server counted them against the plan
(reconcile), and the A/A arm's noise floor (noise)."""
