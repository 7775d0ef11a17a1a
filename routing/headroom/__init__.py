"""The rules on headroom readings: what a reading says (freshness, tier, balance),
whether a refused plan serves again, how alternatives rank, where placement moves an
agent, when a window runs out. Pure; the readings come from ``subscriptions/headroom/``
(collectors, the store, the sampler). See docs/flows/headroom.md.
"""
