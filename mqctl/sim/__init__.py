"""Cluster simulation over mqctl.broker agents and real controller processes (docs/sim.md).

``cluster.Simulation`` runs S broker sets x R replicas, a producer, faults and invariant checks;
``faults`` makes seeded fault plans; ``invariants`` holds the pure checks; ``demo`` is `mqctl demo`.
"""
