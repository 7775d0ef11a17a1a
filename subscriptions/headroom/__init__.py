"""Headroom: what each subscription has left, how we learn it, and how it ranks alternatives.

Collectors probe the providers, the store keeps the latest reading per subscription,
the sampler keeps readings fresh, the rules judge them, and the selection ranks the
alternatives a walk or an auto-assignment may move to. See docs/flows/headroom.md.
"""
