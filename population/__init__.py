"""The memory of a search: candidates, families and islands, champions, lineage, and the run store.

Pure data and persistence (stdlib + pydantic).  Start from :class:`population.run.Run`;
docs/population.md describes the rules and the store.
"""
