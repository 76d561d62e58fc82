"""How a reproduction's children run: ``local`` (one after another in this process,
:mod:`whitebox_eval.reproduce.children`) or ``slurm`` (each a Slurm job through submitit,
:mod:`.slurm`, sized by :func:`whitebox_eval.reproduce.costs.size`, tracked in ``jobs.json`` by :mod:`.jobs`, seen with
``reproduce --status`` through :mod:`.status`). submitit is imported only by :mod:`.slurm` and
:mod:`.job`, and only when the Slurm launcher runs."""

LAUNCHERS = ("local", "slurm")
