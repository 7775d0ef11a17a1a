"""Planning the week ahead: which plan each agent should be on, and until when.

Pure, no Django and no I/O: ``inputs`` (what is known now: each plan's windows, each
agent's demand forecast), ``flows`` (the LP over the next seven days), ``assign``
(the flows turned into one place per agent, with hysteresis), ``week_plan`` (the
result, its JSON form, and what a turn reads of it). The planning task
(``subscriptions/week_planning.py``) gathers the inputs and stores the plan; the turn
reads an agent's entry from the cache (``Ask.PLANNED``). No solver runs on a turn.
"""
