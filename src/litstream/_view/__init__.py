"""The local web app of ``litstream simulate serve`` (a playground whose sliders re-run the simulation) and
``litstream view`` (what a dataset holds). A Starlette application, served by uvicorn (asyncio) or Hypercorn
(trio); see ``docs/simulate.md`` and ``docs/view.md``. Needs the ``view`` extra.
"""
