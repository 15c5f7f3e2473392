"""Numbers from runs: paired differences and their intervals (stats), ablation contrasts
(compare), report tables (tables).

May import: avstack.io.
"""
