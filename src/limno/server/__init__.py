"""``limno serve``: the lake interface over HTTP (FastAPI on uvicorn).

A layer between the CLI and :mod:`limno.api`: :func:`limno.server.app.create_app`
serves one in-process lake (:class:`~limno.api.local.LocalLake`), and
:mod:`limno.api.remote` is its client, the second implementation of the lake
interface. The server keeps no state of its own: two servers on one lake agree.
"""
