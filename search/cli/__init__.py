"""The ``qrsearch`` command line: ``app`` holds the Typer app, one module per group of commands
(``run``: launch, resume, status; ``eval``: verify, bench; ``inspect``: champions, lineage, show,
report, export; ``human``: the engineer's events; ``doc`` renders the README's CLI table)."""
