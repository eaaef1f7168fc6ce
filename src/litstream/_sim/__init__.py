"""`litstream simulate`: the real read engine for a whole cluster, on a simulated store and a virtual clock.

See :mod:`litstream.simulate` (the public entry) and ``docs/simulate.md``.
"""
