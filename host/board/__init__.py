"""`moss ui`: the board, a local web app over what moss already writes.

One module per job: ``security.py`` (the token, Host and Origin checks every request passes),
``html.py`` (pages from templates, every value escaped unless it is markup this package
built), ``sessions.py``, ``runs.py`` and ``evals.py`` (one page group each), ``app.py`` (the
routes and the server). ``templates/`` and ``static/`` (vendored htmx, its SSE extension and
uPlot, each with its licence) ship in the wheel. docs/ui.md says what it shows, docs/security.md
what it refuses.
"""
