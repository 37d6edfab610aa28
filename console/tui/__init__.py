"""The Textual console (``irq tui``). Talks to the gateway only through ``console.client``.

Layout: ``app.py`` owns the state and the live feed; ``screens/`` hold one screen per view;
``widgets/`` hold reusable widgets; the pure parts (filter, rows, symbols, ``:`` commands)
have no Textual import so they are testable on their own.
"""
