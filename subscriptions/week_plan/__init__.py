"""The planning task's side of the week plan: gather its inputs from the database and
the cache (``gather.py``), solve and store it once at a time, and ask for a new one
when a plan or an agent changes (``service.py``), and show it (``api.py``). The plan
itself is the routing core's (``routing/plan_ahead/``); its cache store is
``agents/week_plan_store.py``. docs/flows/week-plan.md.
"""
