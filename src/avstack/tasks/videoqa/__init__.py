"""A generic video question task (`videoqa`): your own videos and questions (multiple choice, open,
temporal grounding), and the public shapes of Charades-STA, QVHighlights and Video-MME."""
